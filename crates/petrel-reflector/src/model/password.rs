//! Device passwords: format check (6–10 ASCII alphanumerics, draarl-v1 §2.1),
//! Argon2id hashing for the store, and verification.
//!
//! The reference keeps reversible AES-GCM ciphertext and compares plaintext
//! non-constant-time; here the store holds only an Argon2id PHC string.

use argon2::password_hash::{PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use thiserror::Error;

use super::argon2_memory::{Argon2Memory, Verdict};
use super::verifier_config::VerifierConfig;

/// Why a password could not be hashed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PasswordError {
    /// Not 6–10 characters of `[A-Za-z0-9]`.
    #[error("device password must be 6-10 characters [A-Za-z0-9]")]
    BadFormat,
    /// The Argon2 parameters or hashing failed.
    #[error("argon2: {0}")]
    Argon2(String),
}

/// Argon2id cost parameters. The default is the OWASP minimum
/// (19 MiB, 2 passes, 1 lane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashCost {
    /// Memory in KiB.
    pub m_cost_kib: u32,
    /// Passes.
    pub t_cost: u32,
    /// Lanes.
    pub p_cost: u32,
}

impl Default for HashCost {
    fn default() -> Self {
        Self {
            m_cost_kib: 19 * 1024,
            t_cost: 2,
            p_cost: 1,
        }
    }
}

/// Whether `pw` is 6–10 characters of `[A-Za-z0-9]`.
pub fn is_valid_device_password(pw: &[u8]) -> bool {
    (6..=10).contains(&pw.len()) && pw.iter().all(u8::is_ascii_alphanumeric)
}

/// Hashes a device password into an Argon2id PHC string.
pub fn hash_device_password(pw: &str, cost: HashCost) -> Result<String, PasswordError> {
    if !is_valid_device_password(pw.as_bytes()) {
        return Err(PasswordError::BadFormat);
    }
    let params = Params::new(cost.m_cost_kib, cost.t_cost, cost.p_cost, None)
        .map_err(|e| PasswordError::Argon2(e.to_string()))?;
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(pw.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Argon2(e.to_string()))
}

/// Verifies `pw` against an Argon2id PHC string with freshly allocated
/// memory (the threads of [`crate::runtime::verifier::PasswordVerifier`] reuse theirs
/// instead). A malformed hash, another Argon2 variant or a cost above the
/// caps of [`VerifierConfig::default`] never matches; the comparison is
/// constant-time. See [`Argon2Memory::verify`].
pub fn verify_device_password(phc: &str, pw: &[u8]) -> bool {
    Argon2Memory::new(&VerifierConfig::default()).verify(phc, pw) == Verdict::Match
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHEAP: HashCost = HashCost {
        m_cost_kib: 64,
        t_cost: 1,
        p_cost: 1,
    };

    #[test]
    fn hash_and_verify() {
        let h = hash_device_password("Bench123", CHEAP).unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_device_password(&h, b"Bench123"));
        assert!(!verify_device_password(&h, b"Bench124"));
        assert!(!verify_device_password("not a hash", b"Bench123"));
        assert_eq!(
            hash_device_password("short", CHEAP),
            Err(PasswordError::BadFormat)
        );
        assert_eq!(
            hash_device_password("has space1", CHEAP),
            Err(PasswordError::BadFormat)
        );
    }
}
