//! Helpers shared by the integration tests (each test crate uses a part).
#![allow(dead_code)]

#[path = "../../src/runtime/store/scratch_store.rs"]
mod scratch_store;

pub use scratch_store::ScratchStore;

use petrel_reflector::model::Backend;
