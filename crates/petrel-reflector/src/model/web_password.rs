//! Account (web/app) passwords: bcrypt, as the reference creates them with
//! cost 10 (`specs/draarl-apps.md` §1.4 "Passwords"). They are separate
//! from device passwords (Argon2id, [`super::hash_device_password`]).

use thiserror::Error;

/// The bcrypt cost of new web passwords in production (§1.4).
pub const WEB_PASSWORD_COST: u32 = 10;

/// Longest web password accepted, bytes: bcrypt reads only 72.
pub const MAX_WEB_PASSWORD_BYTES: usize = 72;

/// Why a web password was not hashed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WebPasswordError {
    /// Empty, longer than [`MAX_WEB_PASSWORD_BYTES`], or containing NUL.
    #[error("web password: 1-72 bytes, no NUL")]
    Invalid,
    /// The cost is outside bcrypt's 4–31.
    #[error("bcrypt cost {0} is outside 4..=31")]
    Cost(u32),
}

/// Hashes `password` with bcrypt at `cost` (4–31; [`WEB_PASSWORD_COST`]
/// in production) into the `$2b$…` form.
pub fn hash_web_password(password: &str, cost: u32) -> Result<String, WebPasswordError> {
    if password.is_empty() || password.len() > MAX_WEB_PASSWORD_BYTES || password.contains('\0') {
        return Err(WebPasswordError::Invalid);
    }
    bcrypt::hash(password, cost).map_err(|_| WebPasswordError::Cost(cost))
}

/// Whether `password` matches the bcrypt `hash` (`$2a$`, `$2b$` or `$2y$`);
/// `false` for a malformed hash. Takes as long as the hash's cost says.
pub fn verify_web_password(password: &str, hash: &str) -> bool {
    bcrypt::verify(password, hash).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_refuse_wrong_passwords() {
        let h = hash_web_password("correct horse", 4).unwrap();
        assert!(h.starts_with("$2b$04$"));
        assert!(verify_web_password("correct horse", &h));
        assert!(!verify_web_password("correct hors", &h));
        assert!(!verify_web_password("correct horse", "not-a-hash"));
        assert_eq!(hash_web_password("", 4), Err(WebPasswordError::Invalid));
        assert_eq!(hash_web_password("x", 3), Err(WebPasswordError::Cost(3)));
        assert_eq!(
            hash_web_password(&"a".repeat(73), 4),
            Err(WebPasswordError::Invalid)
        );
    }

    #[test]
    fn reference_2a_hashes_verify() {
        // `$2a$` is what the reference's Go bcrypt writes.
        let h = hash_web_password("secret", 4)
            .unwrap()
            .replacen("$2b$", "$2a$", 1);
        assert!(verify_web_password("secret", &h));
    }
}
