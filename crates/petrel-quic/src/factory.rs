//! [`PetrelControllerFactory`]: one Petrel controller per quinn connection.

use std::sync::Arc;
use std::time::Instant;

use petrel_proto::cc::{CongestionController, CongestionKind, ControllerParams, ControllerVisitor};
use quinn::congestion::{Controller, ControllerFactory};

use crate::PetrelController;

/// Builds a [`PetrelController`] of `kind` for each connection, sized for quinn's
/// current MTU (1200 bytes at the start of a connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PetrelControllerFactory {
    kind: CongestionKind,
    seed: u64,
}

impl PetrelControllerFactory {
    /// A factory of `kind` controllers, with seed 0 for BBR's probe timing.
    pub fn new(kind: CongestionKind) -> Self {
        Self { kind, seed: 0 }
    }

    /// The same, seeding BBR's probe timing with `seed`.
    pub fn with_seed(kind: CongestionKind, seed: u64) -> Self {
        Self { kind, seed }
    }

    /// Which controller it builds.
    pub fn kind(&self) -> CongestionKind {
        self.kind
    }
}

impl ControllerFactory for PetrelControllerFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let params = ControllerParams::new(u64::from(current_mtu), self.seed);
        self.kind.visit(&params, Wrap)
    }
}

/// Wraps a built-in controller of the registry, as its own type, in a
/// [`PetrelController`].
struct Wrap;

impl ControllerVisitor for Wrap {
    type Output = Box<dyn Controller>;

    fn visit<C>(self, controller: C) -> Self::Output
    where
        C: CongestionController + Clone + Sync + 'static,
    {
        Box::new(PetrelController::new(controller))
    }
}
