//! Ingress policies, each a small sans-IO table driven by `now`: token-bucket
//! rate limits, the failed-auth ban ladder, the half-duplex floor and the
//! HTTP endpoint's per-IP request budget.

mod ban;
mod floor;
mod ip_rate_table;
mod rate_limit;

pub use ban::{BanCheck, BanLadder};
pub use floor::{FloorDecision, FloorTable};
pub use ip_rate_table::{source_key, IpRateTable};
pub use rate_limit::{RateDecision, RateLimiter, TokenBucket};
