//! Data-address binding (draarl-interconnect §4.5): the centre issues a
//! 32-byte challenge over TLS (valid 10 s, one outstanding per session, a
//! new request replaces it); the first authenticated UDP proof consumes it,
//! matching or not, and on a match its source address becomes the
//! session's data address. Other authenticated frames never move the
//! binding.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use crate::codec::interconnect::Challenge;

/// How long a challenge stays valid.
pub const CHALLENGE_TTL: Duration = Duration::from_secs(10);

/// Why a proof did not bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindReject {
    /// No challenge outstanding (none issued, or already consumed).
    NoChallenge,
    /// The challenge is older than 10 s.
    ChallengeExpired,
    /// The proof's challenge differs (or is missing / not 32 bytes).
    Mismatch,
    /// The 0x06 payload was not a parsable proof.
    NotAProof,
}

/// One node session's binding state.
#[derive(Debug, Clone, Default)]
pub struct AddressBinding {
    outstanding: Option<(Challenge, Instant)>,
    bound: Option<SocketAddr>,
}

/// Address equality as §4.3 step 9 states it: IP, port and (IPv6) zone;
/// the IPv6 flow label is not part of the address.
pub fn same_address(a: &SocketAddr, b: &SocketAddr) -> bool {
    match (a, b) {
        (SocketAddr::V4(a), SocketAddr::V4(b)) => a == b,
        (SocketAddr::V6(a), SocketAddr::V6(b)) => {
            a.ip() == b.ip() && a.port() == b.port() && a.scope_id() == b.scope_id()
        }
        _ => false,
    }
}

impl AddressBinding {
    /// Records `challenge` as the one outstanding, issued at `now`.
    pub fn issue(&mut self, now: Instant, challenge: Challenge) {
        self.outstanding = Some((challenge, now));
    }

    /// Consumes the outstanding challenge with a proof from `src`; binds
    /// `src` when it matches (constant-time compare) within 10 s.
    ///
    /// # Errors
    /// [`BindReject`]; the previous binding is then kept.
    pub fn prove(
        &mut self,
        now: Instant,
        proof: Option<Challenge>,
        src: SocketAddr,
    ) -> Result<SocketAddr, BindReject> {
        let (expected, issued) = self.outstanding.take().ok_or(BindReject::NoChallenge)?;
        if now.saturating_duration_since(issued) > CHALLENGE_TTL {
            return Err(BindReject::ChallengeExpired);
        }
        let matches = proof.is_some_and(|p| bool::from(p.0.ct_eq(&expected.0)));
        if !matches {
            return Err(BindReject::Mismatch);
        }
        self.bound = Some(src);
        Ok(src)
    }

    /// Fixes the data address without a proof (the edge's configured
    /// `CenterUDP`, whose source is not checked, §4.3).
    pub fn set(&mut self, addr: Option<SocketAddr>) {
        self.bound = addr;
    }

    /// The bound data address, if any.
    pub fn bound(&self) -> Option<SocketAddr> {
        self.bound
    }

    /// Whether `src` is the bound data address.
    pub fn is_bound_to(&self, src: &SocketAddr) -> bool {
        self.bound.as_ref().is_some_and(|b| same_address(b, src))
    }

    /// Whether a challenge is outstanding and younger than 10 s.
    pub fn has_live_challenge(&self, now: Instant) -> bool {
        self.outstanding
            .is_some_and(|(_, t)| now.saturating_duration_since(t) <= CHALLENGE_TTL)
    }

    /// Forgets a challenge older than 10 s.
    pub fn expire(&mut self, now: Instant) {
        if !self.has_live_challenge(now) {
            self.outstanding = None;
        }
    }
}
