//! Per-source limits of an endpoint: the network a peer address belongs to (for
//! the per-/24 and per-/64 connection limits) and the rate of repeated handshake
//! replies per source IP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Repeated INITIAL / SYN answers (the reply to an opening we already accepted)
/// sent to one source IP per [`REPLY_WINDOW`]; more are dropped and counted.
pub(crate) const REPEAT_REPLIES_PER_WINDOW: u32 = 4;
/// The window of [`REPEAT_REPLIES_PER_WINDOW`].
pub(crate) const REPLY_WINDOW: Duration = Duration::from_secs(1);
/// Source IPs the reply limiter tracks at once; when full and none has an
/// expired window, new sources get no repeated reply (counted).
pub(crate) const REPLY_SOURCES: usize = 4096;

/// The network `ip` belongs to for the per-prefix limit: the /24 of an IPv4
/// address (IPv4-mapped IPv6 included), the /64 of an IPv6 address.
pub(crate) fn prefix_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::from([a, b, c, 0])
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => prefix_of(IpAddr::V4(v4)),
            None => {
                let mut o = v6.octets();
                o[8..].fill(0);
                IpAddr::from(o)
            }
        },
    }
}

/// Fixed-window limit of repeated handshake replies per source IP (bounded
/// table, see [`REPLY_SOURCES`]).
#[derive(Debug, Default)]
pub(crate) struct ReplyLimiter {
    /// Source → (window start, replies sent in it).
    sources: HashMap<IpAddr, (Instant, u32)>,
}

impl ReplyLimiter {
    /// Whether one more repeated reply to `ip` may be sent at `now` (and counts it).
    pub(crate) fn allow(&mut self, now: Instant, ip: IpAddr) -> bool {
        if self.sources.len() >= REPLY_SOURCES && !self.sources.contains_key(&ip) {
            self.sources
                .retain(|_, (start, _)| now.duration_since(*start) < REPLY_WINDOW);
            if self.sources.len() >= REPLY_SOURCES {
                return false;
            }
        }
        let (start, sent) = self.sources.entry(ip).or_insert((now, 0));
        if now.duration_since(*start) >= REPLY_WINDOW {
            (*start, *sent) = (now, 0);
        }
        if *sent >= REPEAT_REPLIES_PER_WINDOW {
            return false;
        }
        *sent += 1;
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_slash_24_and_slash_64() {
        let p = |s: &str| prefix_of(s.parse().unwrap()).to_string();
        assert_eq!(p("192.0.2.77"), "192.0.2.0");
        assert_eq!(p("::ffff:192.0.2.77"), "192.0.2.0");
        assert_eq!(p("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
    }

    #[test]
    fn replies_are_limited_per_source_and_window() {
        let mut l = ReplyLimiter::default();
        let t0 = Instant::now();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let sent = (0..20).filter(|_| l.allow(t0, a)).count();
        assert_eq!(sent, REPEAT_REPLIES_PER_WINDOW as usize);
        assert!(l.allow(t0, b));
        assert!(l.allow(t0 + REPLY_WINDOW, a));
        // A full table of live windows refuses new sources, then frees expired ones.
        for i in 0..REPLY_SOURCES as u32 {
            l.allow(t0, IpAddr::from((i + 1000).to_be_bytes()));
        }
        assert!(!l.allow(t0, "198.51.100.1".parse().unwrap()));
        assert!(l.allow(t0 + REPLY_WINDOW, "198.51.100.1".parse().unwrap()));
        assert!(l.sources.len() <= REPLY_SOURCES);
    }
}
