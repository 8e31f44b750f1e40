//! Argon2id verification in reused memory, with cost caps.
//!
//! The cost comes from the stored PHC string. One above the caps
//! ([`VerifierConfig::max_m_cost_kib`], [`VerifierConfig::max_t_cost`]) is
//! refused ([`Verdict::OverCost`]) instead of being allocated for that one
//! check: Argon2 allows up to 4 TiB and 2³² passes, so honouring any stored
//! cost would let one bad row abort the process on allocation failure or
//! hold a thread for hours, and the memory bound of a pool of these would
//! depend on data rather than configuration. The store writes hashes at
//! [`HashCost::default`](super::HashCost::default) (19 MiB, 2 passes), well
//! under the default caps (64 MiB, 10 passes).
//!
//! Parsing and comparison follow the PHC string format and RFC 9106 via the
//! `argon2` 0.5 crate; only `argon2id` is accepted (the only variant the
//! store writes), a missing version means 0x13 as in that crate, and the
//! computed tag is compared in constant time (`subtle`).

use argon2::password_hash::{Output, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use subtle::ConstantTimeEq;

use super::verifier_config::VerifierConfig;

/// Outcome of one verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The password matches.
    Match,
    /// A well-formed hash that the password does not match.
    Mismatch,
    /// Not an `argon2id` PHC string with salt, hash and valid parameters.
    Malformed,
    /// Memory or passes above the caps; not run.
    OverCost,
}

/// Argon2 working memory reused across verifications, with cost caps.
#[derive(Debug)]
pub struct Argon2Memory {
    blocks: Vec<Block>,
    max_blocks: usize,
    max_t_cost: u32,
}

impl Argon2Memory {
    /// Empty memory with `cfg`'s caps; it grows on first use.
    pub fn new(cfg: &VerifierConfig) -> Self {
        Self {
            blocks: Vec::new(),
            max_blocks: cfg.max_m_cost_kib as usize,
            max_t_cost: cfg.max_t_cost,
        }
    }

    /// Bytes currently held (a multiple of the 1 KiB Argon2 block).
    pub fn bytes(&self) -> usize {
        self.blocks.len() * Block::SIZE
    }

    /// Verifies `pw` against the PHC string `phc`, growing the memory to the
    /// hash's block count if needed (never beyond the cap).
    pub fn verify(&mut self, phc: &str, pw: &[u8]) -> Verdict {
        let Ok(hash) = PasswordHash::new(phc) else {
            return Verdict::Malformed;
        };
        if Algorithm::try_from(hash.algorithm) != Ok(Algorithm::Argon2id) {
            return Verdict::Malformed;
        }
        let (Some(salt), Some(expected)) = (hash.salt, hash.hash) else {
            return Verdict::Malformed;
        };
        let Ok(params) = Params::try_from(&hash) else {
            return Verdict::Malformed;
        };
        let version = match hash.version.map(Version::try_from) {
            None => Version::default(),
            Some(Ok(v)) => v,
            Some(Err(_)) => return Verdict::Malformed,
        };
        if params.block_count() > self.max_blocks || params.t_cost() > self.max_t_cost {
            return Verdict::OverCost;
        }
        let mut salt_buf = [0u8; Salt::MAX_LENGTH];
        let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
            return Verdict::Malformed;
        };
        if self.blocks.len() < params.block_count() {
            self.blocks.resize(params.block_count(), Block::new());
        }
        let mut out_buf = [0u8; Output::MAX_LENGTH];
        let out = &mut out_buf[..expected.len()];
        // Argon2 writes every block it reads within a pass, so memory left
        // over from an earlier hash never influences this one.
        let hashed = Argon2::new(Algorithm::Argon2id, version, params)
            .hash_password_into_with_memory(pw, salt, out, &mut self.blocks[..]);
        match hashed {
            Ok(()) if bool::from(out.ct_eq(expected.as_bytes())) => Verdict::Match,
            Ok(()) => Verdict::Mismatch,
            Err(_) => Verdict::Malformed,
        }
    }
}
