//! Deterministic CPU work an echo server does per message before echoing it
//! (`--work N`, `specs/benchmarks.md` §A "business computation per echo").
//!
//! Unit: one work round is one SHA-256 digest over the whole message, chained
//! (round k hashes round k − 1's 32-byte digest followed by the message), so N
//! rounds cost N × the message length of hashing and cannot be skipped or
//! reordered by the compiler. The message itself is echoed unchanged, so the
//! client still verifies every byte. The digest is discarded through
//! [`std::hint::black_box`]. Work runs on the server task that echoes the
//! message: on one current-thread runtime it serialises with the I/O, as a
//! handler doing business logic inline would.

use std::sync::atomic::{AtomicU32, Ordering};

use sha2::{Digest, Sha256};

/// Most work rounds per echo: 10^6 rounds of a 64 KiB message is minutes of CPU
/// per echo, beyond any useful setting.
pub const MAX_WORK: u32 = 1_000_000;

/// Work rounds per echo, shared between the harness (which sets it before the
/// clients start) and the server tasks (which read it per message).
#[derive(Debug, Default)]
pub struct ServerWork(AtomicU32);

impl ServerWork {
    /// Sets the rounds per echo; values above [`MAX_WORK`] are clamped to it.
    pub fn set(&self, rounds: u32) {
        self.0.store(rounds.min(MAX_WORK), Ordering::Relaxed);
    }

    /// The rounds per echo.
    pub fn rounds(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    /// Does the configured work over `msg`; returns at once for 0 rounds.
    pub fn apply(&self, msg: &[u8]) {
        let rounds = self.rounds();
        if rounds > 0 {
            std::hint::black_box(digest_rounds(msg, rounds));
        }
    }
}

/// `rounds` chained SHA-256 digests over `msg` (see the module docs); the
/// digest of an empty chain (0 rounds) is all zeros.
pub fn digest_rounds(msg: &[u8], rounds: u32) -> [u8; 32] {
    let mut digest = [0u8; 32];
    for k in 0..rounds {
        let mut h = Sha256::new();
        if k > 0 {
            h.update(digest);
        }
        h.update(msg);
        digest = h.finalize().into();
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_chain_and_differ() {
        let msg = b"petrel";
        let one = digest_rounds(msg, 1);
        let expected: [u8; 32] = Sha256::digest(msg).into();
        assert_eq!(one, expected);
        let mut second = Sha256::new();
        second.update(one);
        second.update(msg);
        let two: [u8; 32] = second.finalize().into();
        assert_eq!(digest_rounds(msg, 2), two);
        assert_ne!(digest_rounds(msg, 3), two);
        assert_eq!(digest_rounds(msg, 0), [0u8; 32]);
    }

    #[test]
    fn setting_is_clamped_and_read_back() {
        let w = ServerWork::default();
        assert_eq!(w.rounds(), 0);
        w.set(7);
        assert_eq!(w.rounds(), 7);
        w.set(u32::MAX);
        assert_eq!(w.rounds(), MAX_WORK);
    }
}
