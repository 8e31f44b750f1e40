//! Ingress policies, each a small sans-IO table driven by `now`: token-bucket
//! rate limits, the per-prefix Argon2 budget, the HTTP endpoint's per-prefix
//! request budget, the failed-auth ban ladder, the half-duplex floor and the
//! memory of endpoints an ICMP report took offline; for the interconnect,
//! the centre's node authentication attempts per IP and the edge's
//! reconnect backoff.
//! Every table keyed by source is bounded and evicts its least-recently-used
//! entry rather than refuse a new source.

mod auth_attempts;
mod ban;
mod bucket_table;
mod floor;
mod ip_rate_table;
mod password_budget;
mod password_queue;
mod rate_limit;
mod reconnect_backoff;
mod unreachable_memory;

pub use auth_attempts::{AuthAttempts, AUTH_ATTEMPT_ADDRESSES};
pub use ban::{BanCheck, BanLadder};
pub(crate) use bucket_table::BucketTable;
pub use bucket_table::TokenBucket;
pub use floor::{FloorConfig, FloorDecision, FloorTable};
pub use ip_rate_table::{source_key, IpRateTable};
pub use password_budget::{BudgetDecision, PasswordBudget, PasswordBudgetConfig, SourcePrefix};
pub use password_queue::{FairQueue, TicketState};
pub use rate_limit::{RateDecision, RateLimiter};
pub use reconnect_backoff::{
    ReconnectBackoff, BACKOFF_CAP, BACKOFF_INITIAL, BACKOFF_JITTER, STABLE_SESSION,
};
pub use unreachable_memory::UnreachableMemory;
