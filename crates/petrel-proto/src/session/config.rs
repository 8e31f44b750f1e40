//! [`SessionConfig`], its validation, and how a connection's FEC is chosen from
//! the handshake and the local configuration.

use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use thiserror::Error;

use crate::fec::{FecConfig, FecScheme, Framing, MAX_DATA_SHARDS, MAX_PARITY_SHARDS};
use crate::handshake::{Binding, ControlConfig, Established, FecDescriptor};
use crate::kcp::KcpConfig;

/// Adaptive `target` when the local scheme is not adaptive: that of
/// [`FecScheme::ADAPTIVE_DEFAULT`].
const DEFAULT_TARGET: f64 = 1e-3;

/// Allowed [`SessionConfig::loss_report_interval`].
const REPORT_INTERVAL_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(10);

/// How a session frames its datagrams on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionFraming {
    /// Petrel's: bare KCP without FEC; with FEC a `conv` prefix and the native
    /// shard header (see the module docs of [`super`]).
    #[default]
    Petrel,
    /// kcp-go's (`specs/kcp.md` §2, kcp-go `sess.go` / `fec.go`): the kcp-go FEC
    /// header with no conv prefix, behind kcptun's 20-byte crypt-none header when
    /// `crypt_header`. Nothing is negotiated, so both sides must run the same
    /// fixed shape: the scheme must be [`FecScheme::Fixed`] with parity ≥ 1, or,
    /// without the crypt header only, no FEC at all (bare KCP, kcp-go with
    /// `dataShards` or `parityShards` 0 and no `BlockCrypt`).
    KcpGo {
        /// Whether every datagram carries kcptun's crypt-none header.
        crypt_header: bool,
    },
}

/// Configuration of one [`super::Session`]. `Default` is the documented default:
/// the KCP and control defaults, **no FEC** (ARQ only), loss reports every 100 ms.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// ARQ parameters. `mtu` is the largest UDP payload of the connection, in
    /// bytes; the session gives KCP `mtu − overhead` (see [`super::Session::overhead`]).
    pub kcp: KcpConfig,
    /// Keepalive, idle timeout and close timing.
    pub control: ControlConfig,
    /// FEC of this endpoint. [`FecScheme::None`] (the default here) means no FEC
    /// layer at all: datagrams are bare KCP, wire-compatible with plain KCP peers.
    /// In native mode only the shape is negotiated (see [`fec_for_connection`]);
    /// `group_wait`, `budget`, `group_expiry` and the adaptive `target` stay local.
    pub fec: FecConfig,
    /// How often the receiver reports loss to an adaptive sender, in ms; a report
    /// is sent only if shards arrived since the previous one. Default 100 ms;
    /// allowed 10 ms..=10 s.
    pub loss_report_interval: Duration,
    /// Wire framing. Default [`SessionFraming::Petrel`].
    pub framing: SessionFraming,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            kcp: KcpConfig::default(),
            control: ControlConfig::default(),
            fec: FecConfig {
                scheme: FecScheme::None,
                ..FecConfig::default()
            },
            loss_report_interval: Duration::from_millis(100),
            framing: SessionFraming::Petrel,
        }
    }
}

/// A [`SessionConfig`] (or the configuration derived from a handshake) that
/// cannot run; the message names the field and its allowed range.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SessionConfigError {
    /// The ARQ configuration (after the FEC overhead was taken from `mtu`).
    #[error("kcp: {0}")]
    Kcp(#[from] crate::kcp::ConfigError),
    /// The control-plane configuration.
    #[error("control: {0}")]
    Control(#[from] crate::handshake::ConfigError),
    /// The FEC configuration.
    #[error(transparent)]
    Fec(#[from] crate::fec::ConfigError),
    /// `loss_report_interval` outside its allowed range (10 ms..=10 s; the message
    /// renders the range that was checked).
    #[error("session: {0}")]
    LossReportInterval(RangeError),
    /// kcp-go framing with a scheme it cannot run: anything but
    /// [`FecScheme::Fixed`] with parity ≥ 1, except no FEC without the crypt header.
    #[error("session: kcp-go framing runs fixed FEC with parity ≥ 1{}, not {scheme:?}", if *.crypt_header { "" } else { " or no FEC" })]
    KcpGoScheme {
        /// The configured scheme.
        scheme: FecScheme,
        /// Whether the crypt-none header was asked for.
        crypt_header: bool,
    },
    /// `mtu` leaves no room for a KCP header after the FEC overhead.
    #[error("session: `mtu` = {mtu} bytes is too small for {overhead} bytes of FEC overhead")]
    MtuTooSmall {
        /// The connection's UDP payload limit, bytes.
        mtu: usize,
        /// Bytes the FEC framing needs per datagram.
        overhead: usize,
    },
}

impl SessionConfig {
    /// Checks every field against its documented range.
    ///
    /// # Errors
    /// The first [`SessionConfigError`] found.
    pub fn validate(&self) -> Result<(), SessionConfigError> {
        self.kcp.validate()?;
        self.control.validate()?;
        self.fec.validate()?;
        if let SessionFraming::KcpGo { crypt_header } = self.framing {
            let fixed = matches!(
                self.fec.scheme,
                FecScheme::Fixed { parity_shards, .. } if parity_shards > 0
            );
            if !fixed && (crypt_header || self.fec.scheme != FecScheme::None) {
                return Err(SessionConfigError::KcpGoScheme {
                    scheme: self.fec.scheme,
                    crypt_header,
                });
            }
        }
        check_range(
            "loss_report_interval",
            self.loss_report_interval,
            &REPORT_INTERVAL_RANGE,
        )
        .map_err(SessionConfigError::LossReportInterval)
    }
}

/// What a native client announces for `fec` in its handshake: the shape of the
/// local scheme. A fixed scheme without parity is no FEC.
pub fn fec_descriptor(fec: &FecConfig) -> FecDescriptor {
    match fec.scheme {
        FecScheme::None
        | FecScheme::Fixed {
            parity_shards: 0, ..
        } => FecDescriptor::None,
        FecScheme::Fixed {
            data_shards,
            parity_shards,
        } => FecDescriptor::Fixed {
            data: data_shards,
            parity: parity_shards,
        },
        FecScheme::Adaptive {
            max_data,
            max_parity,
            ..
        } => FecDescriptor::Adaptive {
            max_data,
            max_parity,
        },
    }
}

impl SessionFraming {
    /// The shard framing of this session framing.
    pub(super) fn fec_framing(&self) -> Framing {
        match *self {
            SessionFraming::Petrel => Framing::Native,
            SessionFraming::KcpGo { crypt_header } => Framing::KcpGo { crypt_header },
        }
    }
}

/// The FEC a connection runs.
///
/// - Native handshake ([`Binding::Native`]): the negotiated descriptor (the
///   client's request clamped by the server) gives the scheme's shape, bounded
///   to [`MAX_DATA_SHARDS`] / [`MAX_PARITY_SHARDS`] and to no more parity than
///   data shards (what the server's clamp grants); the adaptive `target` is the
///   local one if the local scheme is adaptive, else
///   [`FecScheme::ADAPTIVE_DEFAULT`]'s (1e-3). Timing and budget are local.
/// - Legacy and raw: nothing is negotiated, so the local configuration is used
///   as is; **both sides must be configured with the same scheme**.
pub fn fec_for_connection(established: &Established, local: &FecConfig) -> FecConfig {
    let Binding::Native { .. } = established.binding else {
        return *local;
    };
    let target = match local.scheme {
        FecScheme::Adaptive { target, .. } => target,
        _ => DEFAULT_TARGET,
    };
    let scheme = match established.params.fec {
        FecDescriptor::None => FecScheme::None,
        FecDescriptor::Fixed { data, parity } => {
            let data_shards = data.clamp(1, MAX_DATA_SHARDS);
            FecScheme::Fixed {
                data_shards,
                parity_shards: parity.min(MAX_PARITY_SHARDS).min(data_shards),
            }
        }
        FecDescriptor::Adaptive {
            max_data,
            max_parity,
        } => {
            let max_data = max_data.clamp(1, MAX_DATA_SHARDS);
            FecScheme::Adaptive {
                max_data,
                max_parity: max_parity.clamp(1, MAX_PARITY_SHARDS).min(max_data),
                target,
            }
        }
    };
    FecConfig { scheme, ..*local }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::{NegotiatedParams, RAW_PARAMS};

    fn native(fec: FecDescriptor) -> Established {
        Established {
            conv: 7,
            params: NegotiatedParams { fec, ..RAW_PARAMS },
            binding: Binding::Native { nonce: 1, token: 2 },
        }
    }

    #[test]
    fn default_is_arq_only_and_valid() {
        let c = SessionConfig::default();
        c.validate().unwrap();
        assert_eq!(c.fec.scheme, FecScheme::None);
        assert_eq!(fec_descriptor(&c.fec), FecDescriptor::None);
    }

    #[test]
    fn validate_names_the_field() {
        let c = SessionConfig {
            loss_report_interval: Duration::from_millis(1),
            ..SessionConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("loss_report_interval"));
    }

    #[test]
    fn native_uses_the_negotiated_shape_and_local_timing() {
        let local = FecConfig {
            scheme: FecScheme::None,
            group_wait: Duration::from_millis(5),
            ..FecConfig::default()
        };
        let got = fec_for_connection(&native(FecDescriptor::Fixed { data: 4, parity: 1 }), &local);
        assert_eq!(
            got.scheme,
            FecScheme::Fixed {
                data_shards: 4,
                parity_shards: 1
            }
        );
        assert_eq!(got.group_wait, Duration::from_millis(5));
        let got = fec_for_connection(
            &native(FecDescriptor::Adaptive {
                max_data: 100,
                max_parity: 3,
            }),
            &local,
        );
        assert_eq!(got.scheme.data_shards(), MAX_DATA_SHARDS);
        got.validate().unwrap();
        let got = fec_for_connection(&native(FecDescriptor::None), &FecConfig::default());
        assert_eq!(got.scheme, FecScheme::None);
    }

    #[test]
    fn legacy_and_raw_use_the_local_config() {
        let est = Established {
            conv: 7,
            params: RAW_PARAMS,
            binding: Binding::Raw,
        };
        let local = FecConfig::default();
        assert_eq!(fec_for_connection(&est, &local), local);
    }
}
