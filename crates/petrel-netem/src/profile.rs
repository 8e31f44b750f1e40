//! Named impairment profiles, with the parameters of `specs/benchmarks.md` §B and §C.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use crate::config::{BurstLoss, LinkConfig, RouteConfig};

/// A named starting point; every field of the resulting [`LinkConfig`] can then be
/// overridden.
///
/// | profile | per direction |
/// |---|---|
/// | `none` | nothing |
/// | `random` | 5 % random loss, 10 ms delay, 1 % duplication, 5 % reordered by +15 ms |
/// | `burst` | 3 of every 100 dropped, 10 ms delay, 1 % duplication, 5 % reordered by +15 ms |
/// | `soak` | `burst` + 2 % random loss on the rest |
/// | `p2p` | 200 Mbit/s, 1 ms delay, drop-tail queue of 25 packets |
///
/// `p2p` follows the QUIC interop runner's ns-3 "simple-p2p" link (its default
/// `--queue=25`; the published goodput runs used 10/100/200 Mbit/s and 1 ms one-way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// No impairment.
    None,
    /// The seed report's "random" profile.
    Random,
    /// The seed report's "burst" profile.
    Burst,
    /// The seed report's "soak" profile.
    Soak,
    /// ns-3 simple-p2p: bandwidth + delay + queue.
    P2p,
}

/// A profile name that is not one of [`Profile::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile {0:?}: expected one of none, random, burst, soak, p2p")]
pub struct UnknownProfile(pub String);

impl Profile {
    /// Every profile, in documentation order.
    pub const ALL: [Profile; 5] = [
        Profile::None,
        Profile::Random,
        Profile::Burst,
        Profile::Soak,
        Profile::P2p,
    ];

    /// The profile's lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::None => "none",
            Profile::Random => "random",
            Profile::Burst => "burst",
            Profile::Soak => "soak",
            Profile::P2p => "p2p",
        }
    }

    /// The conditions of one direction (all profiles are symmetric).
    pub fn link(self) -> LinkConfig {
        let lossy = LinkConfig {
            delay: Duration::from_millis(10),
            duplicate: 0.01,
            reorder: 0.05,
            reorder_delay: Duration::from_millis(15),
            ..LinkConfig::default()
        };
        let burst = Some(BurstLoss { k: 3, n: 100 });
        match self {
            Profile::None => LinkConfig::default(),
            Profile::Random => LinkConfig {
                random_loss: 0.05,
                ..lossy
            },
            Profile::Burst => LinkConfig { burst, ..lossy },
            Profile::Soak => LinkConfig {
                burst,
                random_loss: 0.02,
                ..lossy
            },
            Profile::P2p => LinkConfig {
                delay: Duration::from_millis(1),
                rate_bps: Some(200_000_000),
                queue_packets: Some(25),
                ..LinkConfig::default()
            },
        }
    }

    /// Both directions with [`Profile::link`] and the default route capacity.
    pub fn route(self) -> RouteConfig {
        RouteConfig::symmetric(self.link())
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownProfile(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>(), Ok(p));
            p.route().validate().unwrap();
        }
        assert!("lossy".parse::<Profile>().is_err());
    }

    #[test]
    fn soak_combines_burst_and_random() {
        let l = Profile::Soak.link();
        let expected = 1.0 - (1.0 - 0.03) * (1.0 - 0.02);
        assert!((l.configured_loss() - expected).abs() < 1e-12);
    }
}
