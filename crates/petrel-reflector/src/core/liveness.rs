//! When an online endpoint may receive fan-out, and when it stops: the
//! "heard twice" rule and ICMP unreachable reports (draarl-v1 §3.6; the
//! reasoning is on [`EndpointPolicy`](crate::model::EndpointPolicy)). The
//! silence timeout itself is the sweep in `reflector.rs`.

use std::net::SocketAddr;
use std::time::Instant;

use super::reflector::Reflector;
use crate::model::DeviceKey;

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
    pub fn handle_unreachable(&mut self, now: Instant, addr: SocketAddr) {
        let at_addr: Vec<DeviceKey> = self
            .by_addr
            .range((addr, (i64::MIN, u8::MIN))..=(addr, (i64::MAX, u8::MAX)))
            .map(|(_, k)| *k)
            .collect();
        for key in at_addr {
            if self
                .sessions
                .get(&key)
                .is_some_and(|s| s.heard_since <= now)
            {
                self.stats.unreachable_sessions_ended += 1;
                self.drop_session(key);
            }
        }
    }
}
