//! Which endpoints may receive fan-out, so that logins from forged source
//! addresses cannot turn the reflector into an amplifier (draarl-v1 §3.1,
//! §3.6, §9).
//!
//! A Type 2 heartbeat needs only the account's password, and UDP source
//! addresses can be forged; nothing a physical device sends proves that it
//! receives at its address (app sessions have the session tag, link boxes
//! have nothing). So an account holder could log one device in per SSID
//! from a victim's addresses and have every voice frame of the group sent
//! to each. Three rules bound that, none needing a client change:
//!
//! - **Caps.** At most `max_per_account` endpoints of one account and
//!   `max_per_prefix` endpoints of one /24 (IPv4) or /64 (IPv6), over all
//!   accounts, are online at once. A login beyond the account cap is
//!   refused with the usual heartbeat reject (code 3). A full prefix evicts
//!   rather than refuse a newcomer: the login takes the place of the least
//!   recently heard endpoint of the account holding the most endpoints in
//!   that prefix (ties: the least recently heard among them), unless its
//!   own account already holds that many, which is refused (code 3); so
//!   accounts filling a network with forged endpoints cannot keep its real
//!   users out, and an account within its fair share is never evicted by
//!   one that holds more (see `core/endpoint_caps.rs`). A device logging in
//!   again from a new port keeps its key (user, SSID), replaces its own
//!   entry and is never counted twice; a device that left frees its entry
//!   at the liveness timeout.
//! - **Heard twice.** A new endpoint (a login, or a device's new address)
//!   receives fan-out only once it has been heard again at least
//!   `receive_after_ms` after it was first heard. Its heartbeat reply goes
//!   out at once, so a forged address whose host answers "port
//!   unreachable" is dropped (see `Reflector::handle_unreachable`) before it
//!   ever receives a frame, and a one-shot forged heartbeat never does.
//! - **ICMP.** An endpoint reported unreachable is taken offline at once.
//!
//! Loopback sources are exempt by default: they can only be processes on
//! this host (the kernel drops 127/8 and `::1` sources arriving on other
//! interfaces), and datagrams to them never leave it, so neither rule
//! protects anyone there; the `petrel bench reflector` load generator runs
//! 248 devices per account and 254 per /24 on loopback.

use std::net::SocketAddr;
use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use serde::Deserialize;

use super::source_prefix::is_loopback_source;

/// The fan-out admission rules (TOML `[session.endpoints]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointPolicy {
    /// Endpoints of one account online at once, 1–248 (the usable SSIDs).
    /// Default 8: an account is one operator's link boxes and phones (the
    /// reference allows 8 app sessions per owner), and it bounds what one
    /// account can direct at addresses it does not control to 8 copies of
    /// its voice.
    pub max_per_account: usize,
    /// Endpoints of one source /24 (IPv4) or /64 (IPv6) online at once,
    /// over all accounts, 1–1 000 000. Default 32: room for a club's boxes
    /// or a carrier NAT pool, while any number of accounts together can
    /// direct at most 32 copies of a stream at one network. When full, a
    /// newcomer evicts from the largest holder (see the module docs).
    pub max_per_prefix: usize,
    /// A new endpoint receives fan-out once heard again at least this long
    /// after it was first heard, ms, 0–15 000 (0: at once). Default 2 000:
    /// four times a long (500 ms) round trip, so the ICMP answer to its
    /// first reply ends a forged endpoint first, and shorter than the 5 s
    /// heartbeat of a link box, which therefore receives from its second
    /// heartbeat on.
    pub receive_after_ms: u64,
    /// Loopback sources are exempt from both caps and the wait. Default true.
    pub exempt_loopback: bool,
}

impl Default for EndpointPolicy {
    fn default() -> Self {
        Self {
            max_per_account: 8,
            max_per_prefix: 32,
            receive_after_ms: 2_000,
            exempt_loopback: true,
        }
    }
}

impl EndpointPolicy {
    /// No limits: every login receives at once (the behaviour without this
    /// policy; for measurements and tests).
    pub fn unlimited() -> Self {
        Self {
            max_per_account: 248,
            max_per_prefix: 1_000_000,
            receive_after_ms: 0,
            exempt_loopback: true,
        }
    }

    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range("max_per_account", self.max_per_account, &(1..=248))?;
        check_range("max_per_prefix", self.max_per_prefix, &(1..=1_000_000))?;
        check_range("receive_after_ms", self.receive_after_ms, &(0..=15_000))
    }

    /// Whether `src` is exempt from the caps and the wait.
    pub fn exempt(&self, src: SocketAddr) -> bool {
        self.exempt_loopback && is_loopback_source(src.ip())
    }

    pub(crate) fn receive_after(&self) -> Duration {
        Duration::from_millis(self.receive_after_ms)
    }
}
