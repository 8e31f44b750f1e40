//! The network a source address belongs to, as far as per-network limits
//! go: its /24 for IPv4, its /64 for IPv6 (draarl-v1 §3.4 keys limits by
//! the real address; one site or one carrier NAT pool usually spans one
//! such prefix).

use std::net::IpAddr;

/// A source's /24 (IPv4, including v4-mapped IPv6) or /64 (IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourcePrefix {
    /// The first three octets of an IPv4 address.
    V4([u8; 3]),
    /// The first eight octets of an IPv6 address.
    V6([u8; 8]),
}

impl SourcePrefix {
    /// The prefix of `ip`; a v4-mapped IPv6 address (a dual-stack socket's
    /// IPv4 peer) counts as the IPv4 address it carries.
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => {
                let o = v4.octets();
                Self::V4([o[0], o[1], o[2]])
            }
            IpAddr::V6(v6) => {
                let o = v6.octets();
                Self::V6([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
            }
        }
    }
}

/// Whether `ip` is a loopback address (127.0.0.0/8, `::1`, or v4-mapped
/// 127/8): a datagram from it was sent by a process on this host, and one
/// sent to it never leaves the host.
pub fn is_loopback_source(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_slash_24_and_slash_64_and_mapped_is_ipv4() {
        let p = |s: &str| SourcePrefix::of(s.parse().unwrap());
        assert_eq!(p("192.0.2.1"), p("192.0.2.254"));
        assert_ne!(p("192.0.2.1"), p("192.0.3.1"));
        assert_eq!(p("::ffff:192.0.2.9"), p("192.0.2.1"));
        assert_eq!(p("2001:db8:1:2::1"), p("2001:db8:1:2:ffff::9"));
        assert_ne!(p("2001:db8:1:2::1"), p("2001:db8:1:3::1"));
        assert!(is_loopback_source("127.64.1.2".parse().unwrap()));
        assert!(is_loopback_source("::ffff:127.0.0.1".parse().unwrap()));
        assert!(is_loopback_source("::1".parse().unwrap()));
        assert!(!is_loopback_source("192.0.2.1".parse().unwrap()));
    }
}
