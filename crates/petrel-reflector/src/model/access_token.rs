//! App access tokens (`specs/draarl-apps.md` §1.4): HS256 JWTs with issuer
//! `draarl`, claims `username`, `roles` (one string), `token_use`
//! `"access"`, `iat` and `exp = iat + 10800`, and no `sub`, `aud` or
//! `nbf`.
//!
//! Validation follows §1.4: the algorithm must be exactly HS256, `iss` must
//! be `draarl`, `exp` is required and checked against the caller's `now`
//! with zero leeway (the token is valid up to and including second `exp`),
//! `iat` is not checked, and `token_use` must be absent, empty or
//! `access`, so an edge-discovery token (`token_use:"edge-discovery"`) is
//! refused. Signing and parsing are `jsonwebtoken`'s; the expiry check is
//! ours because the time is passed in rather than read from the clock.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Lifetime of an access token, s (§1.4: 3 h).
pub const ACCESS_TOKEN_SECS: i64 = 10_800;
/// The `iss` of every token.
pub const TOKEN_ISSUER: &str = "draarl";
/// The `token_use` of access tokens.
const ACCESS_USE: &str = "access";

/// The claims of an access token, as issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct IssuedClaims<'a> {
    username: &'a str,
    roles: [&'a str; 1],
    token_use: &'static str,
    iss: &'static str,
    iat: i64,
    exp: i64,
}

/// The claims read from a token; unknown claims are ignored.
#[derive(Debug, Deserialize)]
struct ReadClaims {
    username: String,
    #[serde(default)]
    token_use: Option<String>,
    exp: i64,
}

/// A verified access token: who it names and until when it is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessClaims {
    /// `users.name` of the account.
    pub username: String,
    /// Unix time (s) after which the token is expired.
    pub exp: i64,
}

/// Why a token was refused. Every variant is one answer to the client
/// ("invalid or expired"); the distinction is for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Not a well-formed HS256 JWT signed with our key and issued by
    /// `draarl`, or without `username` or `exp`.
    Invalid,
    /// `token_use` is neither absent, empty nor `access` (e.g. an
    /// edge-discovery token).
    WrongUse,
    /// Past its `exp`.
    Expired,
}

/// The HS256 key pair derived from the JWT secret. `Debug` hides it.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKeys(***)")
    }
}

impl TokenKeys {
    /// Keys from the raw bytes of `secret` (§1.4: the configured secret's
    /// bytes, at least 32 characters, checked by the configuration).
    pub fn new(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.algorithms = vec![Algorithm::HS256];
        validation.set_issuer(&[TOKEN_ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.leeway = 0;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
        }
    }

    /// An access token for `username` with role string `roles` (`"user"`
    /// when empty), issued at Unix time `now` (s).
    pub fn issue(&self, username: &str, roles: &str, now: i64) -> String {
        let claims = IssuedClaims {
            username,
            roles: [if roles.is_empty() { "user" } else { roles }],
            token_use: ACCESS_USE,
            iss: TOKEN_ISSUER,
            iat: now,
            exp: now + ACCESS_TOKEN_SECS,
        };
        // Serialising a struct of strings and integers and signing with
        // HMAC cannot fail.
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .unwrap_or_default()
    }

    /// Verifies `token` at Unix time `now` (s), §1.4's rules.
    pub fn verify(&self, token: &str, now: i64) -> Result<AccessClaims, TokenError> {
        let data = jsonwebtoken::decode::<ReadClaims>(token, &self.decoding, &self.validation)
            .map_err(|_| TokenError::Invalid)?;
        let c = data.claims;
        if !matches!(c.token_use.as_deref(), None | Some("") | Some(ACCESS_USE)) {
            return Err(TokenError::WrongUse);
        }
        if c.username.is_empty() {
            return Err(TokenError::Invalid);
        }
        if now > c.exp {
            return Err(TokenError::Expired);
        }
        Ok(AccessClaims {
            username: c.username,
            exp: c.exp,
        })
    }
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use proptest::prelude::*;

    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NOW: i64 = 1_780_000_000;

    /// A token signed with `secret` over `header` and `claims` JSON.
    fn forge(secret: &[u8], alg: Algorithm, claims: serde_json::Value) -> String {
        jsonwebtoken::encode(
            &Header::new(alg),
            &claims,
            &EncodingKey::from_secret(secret),
        )
        .unwrap()
    }

    #[test]
    fn issued_tokens_verify_and_carry_the_reference_claims() {
        let k = TokenKeys::new(SECRET);
        let t = k.issue("alice", "", NOW);
        assert!(t.len() <= 572, "{}", t.len());
        let claims = k.verify(&t, NOW).unwrap();
        assert_eq!(claims.username, "alice");
        assert_eq!(claims.exp, NOW + 10_800);
        let payload = t.split('.').nth(1).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"username":"alice","roles":["user"],"token_use":"access",
                "iss":"draarl","iat":NOW,"exp":NOW + 10_800})
        );
        let header = t.split('.').next().unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"alg":"HS256","typ":"JWT"}));
    }

    #[test]
    fn expiry_has_zero_leeway() {
        let k = TokenKeys::new(SECRET);
        let t = k.issue("alice", "admin", NOW);
        assert!(k.verify(&t, NOW + 10_800).is_ok());
        assert_eq!(k.verify(&t, NOW + 10_801), Err(TokenError::Expired));
    }

    #[test]
    fn foreign_and_malformed_tokens_are_refused() {
        let k = TokenKeys::new(SECRET);
        let other = TokenKeys::new(b"another-secret-another-secret-xx");
        assert_eq!(
            k.verify(&other.issue("alice", "", NOW), NOW),
            Err(TokenError::Invalid)
        );
        let base = |extra: serde_json::Value| {
            let mut c = serde_json::json!({"username":"alice","iss":"draarl","exp":NOW + 60});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            c
        };
        // Legacy tokens without token_use (or empty) are accepted.
        let legacy = forge(SECRET, Algorithm::HS256, base(serde_json::json!({})));
        assert!(k.verify(&legacy, NOW).is_ok());
        let empty = forge(
            SECRET,
            Algorithm::HS256,
            base(serde_json::json!({"token_use":""})),
        );
        assert!(k.verify(&empty, NOW).is_ok());
        // The edge-discovery token is refused.
        let edge = forge(
            SECRET,
            Algorithm::HS256,
            serde_json::json!({"sub":"alice","username":"alice","token_use":"edge-discovery",
                "aud":"draarl-edge-discovery","iss":"draarl","exp":NOW + 300}),
        );
        assert_eq!(k.verify(&edge, NOW), Err(TokenError::WrongUse));
        for claims in [
            serde_json::json!({"username":"alice","iss":"draarl"}),
            serde_json::json!({"username":"alice","iss":"other","exp":NOW + 60}),
            serde_json::json!({"username":"alice","exp":NOW + 60}),
            serde_json::json!({"iss":"draarl","exp":NOW + 60}),
            serde_json::json!({"username":"","iss":"draarl","exp":NOW + 60}),
        ] {
            let t = forge(SECRET, Algorithm::HS256, claims.clone());
            assert_eq!(k.verify(&t, NOW), Err(TokenError::Invalid), "{claims}");
        }
        let hs512 = forge(SECRET, Algorithm::HS512, base(serde_json::json!({})));
        assert_eq!(k.verify(&hs512, NOW), Err(TokenError::Invalid));
        // alg "none" with the signature stripped.
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let payload = legacy.split('.').nth(1).unwrap();
        assert_eq!(
            k.verify(&format!("{none_header}.{payload}."), NOW),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn debug_hides_the_keys() {
        assert_eq!(format!("{:?}", TokenKeys::new(SECRET)), "TokenKeys(***)");
    }

    proptest! {
        /// Arbitrary strings, and valid tokens with one byte changed, never
        /// verify (and never panic).
        #[test]
        fn garbage_and_tampered_tokens_never_verify(s in ".{0,600}", pos in 0usize..400, b in 0u8..=255) {
            let k = TokenKeys::new(SECRET);
            prop_assert!(k.verify(&s, NOW).is_err());
            let t = k.issue("alice", "", NOW);
            let mut bytes = t.clone().into_bytes();
            let i = pos % bytes.len();
            prop_assume!(bytes[i] != b);
            bytes[i] = b;
            let tampered = String::from_utf8_lossy(&bytes).into_owned();
            prop_assume!(tampered != t);
            prop_assert!(k.verify(&tampered, NOW).is_err());
        }
    }
}
