//! The case kinds of a matrix (`echo`, `rudp`, `goodput`, `reflector`), the
//! options each accepts (an allow-list per kind, named like the subcommand's
//! flags with `_` for `-`), the check of one value against its option, and
//! the rendering of an option as command-line arguments.
//!
//! An option's value is checked for its type and range here, so a typo or a
//! value out of range is found before anything runs; combinations (e.g.
//! `--send-buffer` with `tcp`) are left to the subcommand, whose usage error
//! stops the matrix at that case.

use std::fmt;

use petrel_proto::fec::{MAX_DATA_SHARDS, MAX_PARITY_SHARDS};

use crate::echo::{MAX_CLIENTS, MAX_PAYLOAD, MAX_WINDOW};

/// The `petrel bench` subcommand a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaseKind {
    /// `bench echo` (§A): loopback echo of one protocol.
    Echo,
    /// `bench rudp` (§B): RUDP (or kcptun) echo through the impairment relay.
    Rudp,
    /// `bench goodput` (§C): bulk goodput of one transport and controller.
    Goodput,
    /// `bench reflector` (§D): one fan-out stage (one device count, one interval).
    Reflector,
}

impl CaseKind {
    /// Every kind, in the order the error messages list them.
    pub const ALL: [Self; 4] = [Self::Echo, Self::Rudp, Self::Goodput, Self::Reflector];

    /// The subcommand name, also the value of a case's `kind` key.
    pub fn name(self) -> &'static str {
        match self {
            Self::Echo => "echo",
            Self::Rudp => "rudp",
            Self::Goodput => "goodput",
            Self::Reflector => "reflector",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The options a case of this kind may set, in the order they are passed.
    pub fn options(self) -> &'static [OptionSpec] {
        match self {
            Self::Echo => ECHO_OPTIONS,
            Self::Rudp => RUDP_OPTIONS,
            Self::Goodput => GOODPUT_OPTIONS,
            Self::Reflector => REFLECTOR_OPTIONS,
        }
    }

    /// The option named `name` of this kind, if it has one.
    pub fn option(self, name: &str) -> Option<&'static OptionSpec> {
        self.options().iter().find(|o| o.name == name)
    }

    /// Flags the runner sets itself on every round, so a case may not:
    /// `--json`, and the round count and seed flags of the subcommand.
    pub fn runner_flags(self) -> &'static [&'static str] {
        match self {
            Self::Echo => &["json", "rounds"],
            Self::Rudp => &["json", "rounds", "seed"],
            Self::Goodput => &["json", "repetitions", "seed", "out_dir"],
            Self::Reflector => &["json", "soak", "seed"],
        }
    }
}

impl fmt::Display for CaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What values an option takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueKind {
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// A whole number in `min..=max`.
    Whole {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
    },
    /// A finite number in `min..=max` (a whole number is accepted too).
    Real {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
    },
    /// An FEC shape `D+P`: data shards 1..=64, parity shards 1..=16 (what
    /// `bench rudp --fec-shape` accepts).
    Shape,
    /// `true` passes the bare flag, `false` leaves it out.
    Flag,
}

/// One option of a kind: its name (the flag without `--`, `-` written `_`)
/// and its values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionSpec {
    /// Name in the matrix file, e.g. `fec_shape` for `--fec-shape`.
    pub name: &'static str,
    /// Accepted values.
    pub value: ValueKind,
}

impl OptionSpec {
    /// The command-line flag, e.g. `--fec-shape`.
    pub fn flag(&self) -> String {
        format!("--{}", self.name.replace('_', "-"))
    }
}

/// One checked option value.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// A [`ValueKind::Choice`] or [`ValueKind::Shape`] value.
    Text(String),
    /// A [`ValueKind::Whole`] value.
    Whole(i64),
    /// A [`ValueKind::Real`] value.
    Real(f64),
    /// A [`ValueKind::Flag`] value.
    Flag(bool),
}

impl OptionValue {
    /// The value as a whole number, if it is one.
    pub fn as_whole(&self) -> Option<i64> {
        match self {
            Self::Whole(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a number (whole numbers converted), if it is one.
    pub fn as_real(&self) -> Option<f64> {
        match self {
            Self::Real(v) => Some(*v),
            Self::Whole(v) => Some(*v as f64),
            _ => None,
        }
    }

    /// The value as text, if it is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The arguments `spec` contributes with this value: `[--flag, value]`,
    /// `[--flag]` for a true flag, nothing for a false one.
    pub fn args(&self, spec: &OptionSpec) -> Vec<String> {
        let value = match self {
            Self::Flag(false) => return Vec::new(),
            Self::Flag(true) => return vec![spec.flag()],
            Self::Text(s) => s.clone(),
            Self::Whole(v) => v.to_string(),
            // `Display` of f64 is the shortest form that parses back exactly.
            Self::Real(v) => v.to_string(),
        };
        vec![spec.flag(), value]
    }
}

/// Why a value does not fit its option: what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    /// The value as given (TOML).
    pub value: String,
    /// What the option accepts.
    pub allowed: String,
}

/// `2^53`: the largest whole number every f64 above it cannot tell apart.
const EXACT_F64: i64 = 1 << 53;

impl ValueKind {
    /// Checks `v` against this kind.
    ///
    /// # Errors
    /// [`ValueError`] with the value and what is allowed.
    pub fn check(&self, v: &toml::Value) -> Result<OptionValue, ValueError> {
        let fail = |allowed: String| ValueError {
            value: v.to_string(),
            allowed,
        };
        match *self {
            Self::Choice(names) => match v.as_str() {
                Some(s) if names.contains(&s) => Ok(OptionValue::Text(s.to_owned())),
                _ => Err(fail(format!("one of {}", names.join(", ")))),
            },
            Self::Whole { min, max } => match v.as_integer() {
                Some(n) if (min..=max).contains(&n) => Ok(OptionValue::Whole(n)),
                _ => Err(fail(format!("a whole number in {min}..={max}"))),
            },
            Self::Real { min, max } => {
                let n = match v {
                    toml::Value::Float(f) => Some(*f),
                    toml::Value::Integer(i) if i.abs() <= EXACT_F64 => Some(*i as f64),
                    _ => None,
                };
                match n {
                    Some(n) if n.is_finite() && (min..=max).contains(&n) => {
                        Ok(OptionValue::Real(n))
                    }
                    _ => Err(fail(format!("a number in {min}..={max}"))),
                }
            }
            Self::Shape => match v.as_str().and_then(parse_shape) {
                Some((d, p)) => Ok(OptionValue::Text(format!("{d}+{p}"))),
                None => Err(fail(format!(
                    "an FEC shape D+P (data shards 1..={MAX_DATA_SHARDS}, parity shards 1..={MAX_PARITY_SHARDS}), e.g. \"8+2\""
                ))),
            },
            Self::Flag => match v.as_bool() {
                Some(b) => Ok(OptionValue::Flag(b)),
                None => Err(fail("true or false".into())),
            },
        }
    }
}

/// `"8+2"` → `(8, 2)`, within the shard limits of `petrel_proto::fec`.
fn parse_shape(s: &str) -> Option<(u8, u8)> {
    let (d, p) = s.split_once('+')?;
    let d: u8 = d.trim().parse().ok()?;
    let p: u8 = p.trim().parse().ok()?;
    ((1..=MAX_DATA_SHARDS).contains(&d) && (1..=MAX_PARITY_SHARDS).contains(&p)).then_some((d, p))
}

const fn whole(min: i64, max: i64) -> ValueKind {
    ValueKind::Whole { min, max }
}

const fn real(min: f64, max: f64) -> ValueKind {
    ValueKind::Real { min, max }
}

const fn opt(name: &'static str, value: ValueKind) -> OptionSpec {
    OptionSpec { name, value }
}

/// Protocols of `bench echo --protocol`.
pub const ECHO_PROTOCOLS: [&str; 8] = [
    "udp",
    "tcp",
    "websocket",
    "rudp",
    "kcp",
    "quic",
    "tls",
    "wss",
];

/// Most `--work` rounds per echo (`crate::echo::work`).
pub const MAX_WORK: i64 = crate::echo::work::MAX_WORK as i64;

const SECONDS: ValueKind = real(0.0, 3600.0);
const PAYLOAD: ValueKind = whole(16, MAX_PAYLOAD as i64);
const CLIENTS: ValueKind = whole(1, MAX_CLIENTS as i64);
const WINDOW: ValueKind = whole(1, MAX_WINDOW as i64);
const IO_MODEL: ValueKind = ValueKind::Choice(&["shared", "sharded"]);
const IO_THREADS: ValueKind = whole(1, 64);
const PERCENT: ValueKind = real(0.0, 100.0);

const ECHO_OPTIONS: &[OptionSpec] = &[
    opt("protocol", ValueKind::Choice(&ECHO_PROTOCOLS)),
    opt("payload", PAYLOAD),
    opt("clients", CLIENTS),
    opt("window", WINDOW),
    opt("seconds", SECONDS),
    opt("warmup", SECONDS),
    opt("io_model", IO_MODEL),
    opt("io_threads", IO_THREADS),
    opt("work", whole(0, MAX_WORK)),
    opt("send_buffer", whole(1, i32::MAX as i64)),
    opt("recv_buffer", whole(1, i32::MAX as i64)),
];

const RUDP_OPTIONS: &[OptionSpec] = &[
    opt("peer", ValueKind::Choice(&["petrel", "kcptun"])),
    opt(
        "profile",
        ValueKind::Choice(&["none", "random", "burst", "soak"]),
    ),
    opt("fec", ValueKind::Choice(&["none", "fixed", "adaptive"])),
    opt("fec_shape", ValueKind::Shape),
    opt("payload", PAYLOAD),
    opt("clients", CLIENTS),
    opt("window", WINDOW),
    opt("seconds", SECONDS),
    opt("warmup", SECONDS),
    opt("io_model", IO_MODEL),
    opt("io_threads", IO_THREADS),
    opt("loss", PERCENT),
    opt("delay_ms", real(0.0, 60_000.0)),
    opt("duplicate", PERCENT),
    opt("reorder", PERCENT),
];

const GOODPUT_OPTIONS: &[OptionSpec] = &[
    opt(
        "transport",
        ValueKind::Choice(&[
            "rudp",
            "quic",
            "quinn",
            "tcp",
            "aioquic",
            "aioquic-quic",
            "quic-aioquic",
            "ngtcp2",
        ]),
    ),
    opt(
        "cc",
        ValueKind::Choice(&["reno", "cubic", "bbrv1", "bbrv2", "bbrv3"]),
    ),
    opt(
        "scenario",
        ValueKind::Choice(&["bbr-bufferbloat", "bbr-loss"]),
    ),
    opt("profile", ValueKind::Choice(&["none", "p2p"])),
    opt("bandwidth_mbps", real(1.0, 10_000.0)),
    opt("delay_ms", real(0.0, 1000.0)),
    opt("queue", whole(1, 4096)),
    opt("loss", PERCENT),
    opt("size_mb", real(0.000_001, 100_000.0)),
    opt("rudp_window", whole(16, 4096)),
    opt("rudp_mtu", whole(256, 9000)),
];

const REFLECTOR_OPTIONS: &[OptionSpec] = &[
    opt("levels", whole(2, 20_000)),
    opt("groups", whole(1, 1024)),
    opt("interval_ms", whole(10, 60_000)),
    opt("payload", whole(32, 710)),
    opt("duration_s", whole(1, 600)),
    opt("writers", whole(1, 64)),
    opt("max_frame_age_ms", whole(1, 60_000)),
    opt("in_process", ValueKind::Flag),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn check(kind: ValueKind, toml_value: &str) -> Result<OptionValue, ValueError> {
        let table: toml::Table = toml::from_str(&format!("v = {toml_value}")).unwrap();
        kind.check(&table["v"])
    }

    #[test]
    fn values_are_checked_and_rendered_as_flags() {
        let spec = RUDP_OPTIONS[3];
        assert_eq!(spec.flag(), "--fec-shape");
        let v = check(spec.value, "\"10+3\"").unwrap();
        assert_eq!(v.args(&spec), ["--fec-shape", "10+3"]);
        for bad in [
            "\"10+0\"",
            "\"8\"",
            "\"256+1\"",
            "\"100+10\"",
            "\"8+17\"",
            "8",
        ] {
            assert!(check(ValueKind::Shape, bad).is_err(), "{bad}");
        }
        assert_eq!(check(SECONDS, "2").unwrap(), OptionValue::Real(2.0));
        assert_eq!(
            OptionValue::Real(0.5).args(&opt("warmup", SECONDS)),
            ["--warmup", "0.5"]
        );
        assert!(check(SECONDS, "-1.0").is_err());
        assert!(check(SECONDS, "nan").is_err());
        assert!(check(whole(1, 4), "5")
            .unwrap_err()
            .allowed
            .contains("1..=4"));
        assert!(check(whole(1, 4), "2.0").is_err());
        let choice = check(IO_MODEL, "\"pooled\"").unwrap_err();
        assert_eq!(choice.allowed, "one of shared, sharded");
        let flag = opt("in_process", ValueKind::Flag);
        assert_eq!(
            check(flag.value, "true").unwrap().args(&flag),
            ["--in-process"]
        );
        assert!(check(flag.value, "false").unwrap().args(&flag).is_empty());
    }

    #[test]
    fn every_kind_has_a_distinct_name_and_refuses_runner_flags() {
        for kind in CaseKind::ALL {
            assert_eq!(CaseKind::from_name(kind.name()), Some(kind));
            for flag in kind.runner_flags() {
                assert!(kind.option(flag).is_none(), "{kind} {flag}");
            }
        }
        assert_eq!(CaseKind::from_name("ping"), None);
    }
}
