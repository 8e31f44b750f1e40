//! Ingress policies, each a small sans-IO table driven by `now`: token-bucket
//! rate limits, the failed-auth ban ladder and the half-duplex floor.

mod ban;
mod floor;
mod rate_limit;

pub use ban::{BanCheck, BanLadder};
pub use floor::{FloorDecision, FloorTable};
pub use rate_limit::{RateDecision, RateLimiter, TokenBucket};
