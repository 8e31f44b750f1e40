//! The `[interconnect]` section: the centre's control plane for edges
//! (draarl-interconnect §2 `Interconnect`, §7 `Interconnect.Resources`,
//! the keys that apply to the control plane).

use std::net::SocketAddr;

use serde::Deserialize;

use petrel_sys::range::{check_range, RangeError};

/// The centre's control-plane settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InterconnectConfig {
    /// Whether the control listener runs (the reflector is then a centre).
    /// Default `false`.
    pub enabled: bool,
    /// TLS/TCP address of the control plane. Default `0.0.0.0:60100`.
    pub control_listen: SocketAddr,
    /// PEM certificate chain (end-entity first) the centre presents. With
    /// `tls_key_file`; unset, a self-signed certificate is generated on the
    /// first start and kept in the store.
    pub tls_cert_file: Option<String>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `tls_cert_file`.
    pub tls_key_file: Option<String>,
    /// `MaxNodes`: node sessions at once, and nodes the store keeps
    /// (1–1000000). Default 256.
    pub max_nodes: usize,
    /// `MaxPendingHandshakes`: connections not yet authenticated
    /// (1–4096), at most `max(1, n / 4)` per source /24 (IPv4) or /64
    /// (IPv6). A newcomer is always admitted: it closes its own network's
    /// oldest pending connection when that network holds its share, or
    /// else, with `n` pending, the oldest of the network holding most.
    /// Default 64.
    pub max_pending_handshakes: usize,
    /// `AuthAttemptsPerMinutePerIP`: well-formed hellos per remote IP per
    /// wall-clock minute (1–100000); beyond it `node_auth_error`. At most
    /// 4096 addresses are tracked, the least recent evicted. Default 30.
    pub auth_attempts_per_minute_per_ip: u32,
    /// `ControlSoftPPSPerNode`: control frames per second above which one
    /// event per second is counted (1–1000000). Default 1000.
    pub control_soft_pps_per_node: u32,
    /// `ControlHardPPSPerNode`: control frames per second above which they
    /// are dropped and counted (1–1000000, ≥ soft). Default 2000.
    pub control_hard_pps_per_node: u32,
    /// `ControlHardMbpsPerNode`: control bytes per second, Mb/s (1–100000).
    /// Default 256.
    pub control_hard_mbps_per_node: u32,
    /// `SessionRecoveryWindowSeconds` (§3.9, §6.2): how long the device
    /// sessions of a node whose control session ended (or of every node,
    /// after a centre start) may still be reconfirmed by their edge; later
    /// their devices log in again (10–3600). Default 120, one grant
    /// lifetime.
    pub session_recovery_window_seconds: u64,
}

impl Default for InterconnectConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            control_listen: SocketAddr::from(([0, 0, 0, 0], 60100)),
            tls_cert_file: None,
            tls_key_file: None,
            max_nodes: 256,
            max_pending_handshakes: 64,
            auth_attempts_per_minute_per_ip: 30,
            control_soft_pps_per_node: 1000,
            control_hard_pps_per_node: 2000,
            control_hard_mbps_per_node: 256,
            session_recovery_window_seconds: 120,
        }
    }
}

impl InterconnectConfig {
    /// Checks every range (§7), that the soft rate is not above the hard
    /// one, and that the certificate and key files come together.
    pub fn validate(&self) -> Result<(), RangeError> {
        check_range("interconnect.max_nodes", self.max_nodes, &(1..=1_000_000))?;
        check_range(
            "interconnect.max_pending_handshakes",
            self.max_pending_handshakes,
            &(1..=4096),
        )?;
        check_range(
            "interconnect.auth_attempts_per_minute_per_ip",
            self.auth_attempts_per_minute_per_ip,
            &(1..=100_000),
        )?;
        check_range(
            "interconnect.control_hard_pps_per_node",
            self.control_hard_pps_per_node,
            &(1..=1_000_000),
        )?;
        check_range(
            "interconnect.control_soft_pps_per_node",
            self.control_soft_pps_per_node,
            &(1..=self.control_hard_pps_per_node),
        )?;
        check_range(
            "interconnect.control_hard_mbps_per_node",
            self.control_hard_mbps_per_node,
            &(1..=100_000),
        )?;
        check_range(
            "interconnect.session_recovery_window_seconds",
            self.session_recovery_window_seconds,
            &(10..=3600),
        )?;
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(RangeError {
                field: "interconnect.tls_key_file",
                value: "one of tls_cert_file / tls_key_file".to_owned(),
                range: "both or neither".to_owned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_key() {
        assert!(InterconnectConfig::default().validate().is_ok());
        let soft_over_hard = InterconnectConfig {
            control_soft_pps_per_node: 3000,
            ..InterconnectConfig::default()
        };
        assert_eq!(
            soft_over_hard.validate().unwrap_err().field,
            "interconnect.control_soft_pps_per_node"
        );
        let cert_only = InterconnectConfig {
            tls_cert_file: Some("c.pem".into()),
            ..InterconnectConfig::default()
        };
        assert_eq!(
            cert_only.validate().unwrap_err().field,
            "interconnect.tls_key_file"
        );
        let none = InterconnectConfig {
            max_pending_handshakes: 0,
            ..InterconnectConfig::default()
        };
        assert_eq!(
            none.validate().unwrap_err().field,
            "interconnect.max_pending_handshakes"
        );
    }
}
