//! One Argon2id verification request, as the core emits it and the
//! verifier pool runs it (draarl-v1 §3.1 step 2).

use super::argon2_memory::{Argon2Memory, Verdict};
use super::password::verify_device_password;

/// One Argon2id verification for the runtime to run off the ingress thread.
pub struct PasswordCheck {
    id: u64,
    phc: String,
    password: Vec<u8>,
}

impl PasswordCheck {
    /// A check of `password` against the Argon2id PHC string `phc`, reported
    /// back as `id` (the core numbers its own checks; this is for runtimes
    /// and tests that feed a [`crate::runtime::verifier::PasswordVerifier`] directly).
    pub fn new(id: u64, phc: String, password: Vec<u8>) -> Self {
        Self { id, phc, password }
    }

    /// Identifies the check in [`crate::core::Reflector::handle_password_check`].
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Runs the verification with freshly allocated Argon2 memory (CPU-bound,
    /// tens of ms at the default cost); see [`verify_device_password`].
    pub fn run(&self) -> bool {
        verify_device_password(&self.phc, &self.password)
    }

    /// Runs the verification in reusable `memory` (what the verifier pool's
    /// threads do, so a flood of checks does not allocate per check).
    pub fn run_in(&self, memory: &mut Argon2Memory) -> Verdict {
        memory.verify(&self.phc, &self.password)
    }
}

impl std::fmt::Debug for PasswordCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordCheck")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
