//! When an online endpoint may receive fan-out, and when it stops: the
//! "heard twice" rule and ICMP unreachable reports (draarl-v1 §3.6; the
//! reasoning is on [`EndpointPolicy`](crate::model::EndpointPolicy)). The
//! silence timeout itself is the sweep in `reflector.rs`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::reflector::Reflector;
use crate::model::DeviceKey;

/// An endpoint that has contradicted an earlier ICMP report is taken
/// offline by a new one only after this much silence: longer than the 5 s
/// heartbeat of a link box (the app's is 2 s), so a device that keeps
/// talking cannot be cut off by forged reports, while one whose port really
/// closed stops receiving this long after its last datagram.
pub const UNREACHABLE_TRUSTED_AFTER_SILENCE: Duration = Duration::from_secs(6);

impl Reflector {
    /// Records that `key`'s endpoint was heard at `now`; returns true when
    /// this made it start receiving (heard again at least
    /// `receive_after_ms` after it was first heard). The caller republishes
    /// the member.
    pub(super) fn heard(&mut self, now: Instant, key: DeviceKey) -> bool {
        let wait = self.cfg.endpoints.receive_after();
        let Some(s) = self.sessions.get_mut(&key) else {
            return false;
        };
        if s.receiving || now.saturating_duration_since(s.heard_since) < wait {
            return false;
        }
        s.receiving = true;
        self.stats.endpoints_heard_twice += 1;
        true
    }

    /// Ends the session of every device of this shard online at `addr`:
    /// the runtime read an ICMP destination-unreachable (port, host or
    /// network) for a datagram sent there, at `now`. A session that came
    /// up at `addr` after `now` is kept (the report is older than it).
    /// Counted in `unreachable_sessions_ended`; addresses with no session
    /// here are ignored (every shard is told).
    ///
    /// ICMP can be forged like any datagram. An ended endpoint is
    /// remembered, and one that logs in again from the same address while
    /// remembered has proven the report wrong: it receives again at once if
    /// it was receiving (it passed the heard-twice wait before), and later
    /// reports for that session end it
    /// only once it has been silent for
    /// [`UNREACHABLE_TRUSTED_AFTER_SILENCE`]; before that they are ignored
    /// (`unreachable_reports_ignored`). So a forger costs a live device the
    /// audio until its next heartbeat once per session, never for good; one
    /// who also forges heartbeats from a closed port gets what forged
    /// heartbeats kept up get anyway (the endpoint caps bound it); and a port
    /// that really closed still stops receiving within a second, or within
    /// that silence if it had contradicted a report before.
    pub fn handle_unreachable(&mut self, now: Instant, addr: SocketAddr) {
        let at_addr: Vec<DeviceKey> = self
            .by_addr
            .range((addr, (i64::MIN, u8::MIN))..=(addr, (i64::MAX, u8::MAX)))
            .map(|(_, k)| *k)
            .collect();
        for key in at_addr {
            let Some(s) = self.sessions.get(&key) else {
                continue;
            };
            if s.heard_since > now {
                continue;
            }
            if s.contradicted_unreachable
                && now.saturating_duration_since(s.last_seen) < UNREACHABLE_TRUSTED_AFTER_SILENCE
            {
                self.stats.unreachable_reports_ignored += 1;
                continue;
            }
            let receiving = s.receiving;
            self.stats.unreachable_sessions_ended += 1;
            self.drop_session(key);
            self.unreachable.remember(addr, now, receiving);
        }
    }
}
