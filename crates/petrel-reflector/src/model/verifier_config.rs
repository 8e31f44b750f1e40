//! Size and cost caps of the Argon2 verifier pool.

use argon2::Params;

use petrel_sys::range::{check_range, RangeError};

/// Pool size and the largest Argon2 cost it will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierConfig {
    /// Verifier threads (and job-queue slots), 1–256. Default 4, the
    /// session's default `password_checks_in_flight`.
    pub threads: usize,
    /// Largest Argon2 memory cost run, KiB, 8–1 048 576. Default 65 536
    /// (64 MiB); a thread's memory grows to the largest cost it has checked.
    pub max_m_cost_kib: u32,
    /// Largest Argon2 pass count run, 1–64. Default 10.
    pub max_t_cost: u32,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        Self {
            threads: 4,
            max_m_cost_kib: 64 * 1024,
            max_t_cost: 10,
        }
    }
}

impl VerifierConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range("threads", self.threads, &(1..=256))?;
        check_range(
            "max_m_cost_kib",
            self.max_m_cost_kib,
            &(Params::MIN_M_COST..=1 << 20),
        )?;
        check_range("max_t_cost", self.max_t_cost, &(1..=64))
    }
}
