//! The registry of built-in congestion controllers: one row per controller in the
//! [`builtin_controllers!`] table below, which defines [`CongestionKind`], its names
//! (`FromStr`, `Display`, [`CongestionKind::ALL`]), one-line summaries and how each
//! controller is built.
//!
//! Everything that lists or picks a built-in controller reads this table: KCP
//! ([`KcpConfig::congestion`](crate::kcp::KcpConfig::congestion)), the quinn adapter
//! (`petrel-quic`, through [`CongestionKind::visit`]), and `petrel bench goodput --cc`
//! with its validation. Adding a row is the whole registration (see "How to add a
//! congestion controller" in the [module docs](super)).

use std::fmt::{self, Display};
use std::str::FromStr;
use std::time::Instant;

use super::factory::Boxed;
use super::{
    Bbr, BbrVersion, CongestionController, ControllerFactory, ControllerParams, ControllerVisitor,
    Cubic, NewReno, NoCongestionControl,
};

/// Defines [`CongestionKind`] from rows of
/// `Variant = "name", "summary" => |params| constructor expression;` (attributes and
/// doc comments above a row go to its variant). `params` is a
/// `&`[`ControllerParams`]; the expression is the controller by value.
macro_rules! builtin_controllers {
    ($(
        $(#[$attr:meta])*
        $variant:ident = $name:literal, $summary:literal => |$params:ident| $build:expr;
    )*) => {
        /// Which built-in controller a connection runs; one variant per row of the
        /// registry table (`cc/registry.rs`). Each kind is also a
        /// [`ControllerFactory`].
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub enum CongestionKind {
            $($(#[$attr])* $variant,)*
        }

        /// Number of rows in the table.
        const COUNT: usize = [$($name),*].len();

        impl CongestionKind {
            /// Every kind, in table order (the order `FromStr` documents and
            /// `petrel bench goodput --cc` lists).
            pub const ALL: [Self; COUNT] = [$(Self::$variant),*];

            /// The name `FromStr` accepts and `Display` prints.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// A one-line description (shown by `petrel bench goodput --help`).
            pub fn summary(self) -> &'static str {
                match self {
                    $(Self::$variant => $summary,)*
                }
            }

            /// Builds the controller with `params` and hands it to `visitor` as its
            /// concrete type.
            pub fn visit<V: ControllerVisitor>(
                self,
                params: &ControllerParams,
                visitor: V,
            ) -> V::Output {
                match self {
                    $(Self::$variant => {
                        let $params: &ControllerParams = params;
                        visitor.visit($build)
                    })*
                }
            }
        }
    };
}

builtin_controllers! {
    /// [`NewReno`] (RFC 9002 §7, RFC 6582).
    NewReno = "reno", "NewReno (RFC 9002 §7)" => |p| NewReno::new(p.max_datagram_size);
    /// [`Cubic`] (RFC 9438) with HyStart++ (RFC 9406).
    Cubic = "cubic", "CUBIC (RFC 9438) with HyStart++" => |p| Cubic::new(p.max_datagram_size);
    /// [`Bbr`] version 1 (draft-cardwell-iccrg-bbr-congestion-control-00).
    BbrV1 = "bbrv1", "BBRv1" => |p| Bbr::new(BbrVersion::V1, p.max_datagram_size, p.seed);
    /// [`Bbr`] version 2 (the v2alpha constants on the BBRv3 model).
    BbrV2 = "bbrv2", "BBRv2" => |p| Bbr::new(BbrVersion::V2, p.max_datagram_size, p.seed);
    /// [`Bbr`] version 3 (draft-ietf-ccwg-bbr-06).
    BbrV3 = "bbrv3", "BBRv3 (draft-ietf-ccwg-bbr)" => |p| Bbr::new(BbrVersion::V3, p.max_datagram_size, p.seed);
    /// No congestion window (the reference KCP's `nc = 1`, what deployments use).
    #[default]
    None = "none", "No congestion window (KCP's nc = 1)" => |_p| NoCongestionControl;
}

impl CongestionKind {
    /// Builds the controller for datagrams of at most `max_datagram_size` bytes, with
    /// seed 0 for the randomised parts (BBR's probe timing).
    pub fn build(self, max_datagram_size: u64) -> Box<dyn CongestionController> {
        self.build_seeded(max_datagram_size, 0)
    }

    /// As [`CongestionKind::build`], seeding BBR's probe-timing randomness with `seed`
    /// so that flows of one host desynchronise while a simulation stays reproducible.
    pub fn build_seeded(self, max_datagram_size: u64, seed: u64) -> Box<dyn CongestionController> {
        self.visit(&ControllerParams::new(max_datagram_size, seed), Boxed)
    }
}

impl ControllerFactory for CongestionKind {
    fn build(&self, _now: Instant, params: &ControllerParams) -> Box<dyn CongestionController> {
        self.visit(params, Boxed)
    }

    fn name(&self) -> &str {
        self.as_str()
    }
}

impl Display for CongestionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A congestion-controller name that is not in the registry; the message lists the
/// names that are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCongestionKind(pub String);

impl Display for UnknownCongestionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown congestion controller {:?} (expected ", self.0)?;
        for (i, kind) in CongestionKind::ALL.iter().enumerate() {
            let sep = match i {
                0 => "",
                i if i + 1 == COUNT => " or ",
                _ => ", ",
            };
            write!(f, "{sep}{kind}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownCongestionKind {}

impl FromStr for CongestionKind {
    type Err = UnknownCongestionKind;

    /// Parses a name of [`CongestionKind::ALL`] (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownCongestionKind(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_each_builds_its_controller() {
        for (i, kind) in CongestionKind::ALL.into_iter().enumerate() {
            assert!(CongestionKind::ALL[..i]
                .iter()
                .all(|other| other.as_str() != kind.as_str()));
            assert!(!kind.summary().is_empty());
            let params = ControllerParams::new(1200, 7);
            let built = ControllerFactory::build(&kind, Instant::now(), &params);
            assert_eq!(built.name(), kind.as_str());
            assert_eq!(ControllerFactory::name(&kind), kind.as_str());
        }
    }

    #[test]
    fn unknown_name_error_lists_every_name() {
        let err = "vegas".parse::<CongestionKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown congestion controller \"vegas\" \
             (expected reno, cubic, bbrv1, bbrv2, bbrv3 or none)"
        );
    }
}
