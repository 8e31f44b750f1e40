//! Endpoint configuration.

use std::time::Duration;

use petrel_proto::fec::{FecConfig, FecScheme, Framing, MAX_DATA_SHARDS, MAX_PARITY_SHARDS};
use petrel_proto::handshake::ControlConfig;
use petrel_proto::kcp::{KcpConfig, MIN_MTU};
use petrel_proto::session::{SessionConfig, SessionFraming, CONV_PREFIX};
use petrel_sys::range::{check_range, RangeError};

/// How connections are set up (see `specs/kcp.md` §3–§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Petrel's native handshake: stateless cookie, random `conv`, keepalive, graceful close.
    Native,
    /// The legacy SYN/SYN-ACK/FIN handshake spoken by arknet/ARK servers.
    ///
    /// Not safe on the open Internet, by the protocol's design: a SYN creates a connection
    /// without proof of the sender's address and is answered with 9 bytes for 5, so
    /// spoofed SYNs reflect traffic; `sync_id` is the client's wall-clock ms, so a forged
    /// SYN-ACK is guessable. The per-address and per-IP limits bound what one peer can
    /// take, not what a spoofer can reflect. Prefer [`Mode::Native`].
    Legacy,
    /// Raw KCP: no handshake, both sides use this fixed `conv`. A server accepts any peer
    /// whose datagrams carry it, so use this only to talk to plain KCP peers.
    Raw {
        /// The conversation id both peers agreed on out of band.
        conv: u32,
    },
    /// kcp-go / kcptun peers (`specs/kcp.md` §2; kcp-go `sess.go`): no handshake;
    /// a client picks a random `conv` and its first datagram opens the session;
    /// a server serves one session per peer address (as kcp-go's listener does),
    /// so a client endpoint holds at most one connection per server.
    ///
    /// Datagrams are framed as kcp-go frames them: kcp-go's FEC header and
    /// fixed-shape groups, behind kcptun's crypt-none header when `crypt_none`.
    /// Nothing is negotiated: `EndpointConfig::fec` must be
    /// [`FecScheme::Fixed`] with the peer's data and parity counts (kcptun
    /// `--datashard` / `--parityshard`, parity ≥ 1; or [`FecScheme::None`] with
    /// `crypt_none` false), `kcp.mtu` the peer's `--mtu`, and `kcp` tuned like the
    /// peer (see [`KcpConfig::with_preset`](petrel_proto::kcp::KcpConfig::with_preset)
    /// for kcptun's `--mode`). kcptun multiplexes streams with smux over the
    /// connection: see [`crate::smux`].
    ///
    /// Like raw mode, not for the open Internet: any datagram with a valid header
    /// from a new address opens a connection on a server. A peer that restarts
    /// from the same address with a new `conv` (kcp-go replaces its session when
    /// such a datagram has `sn` 0) is served once its old connection ended, e.g.
    /// by `control.idle_timeout`; until then its datagrams are counted KCP input
    /// errors of the old one. A peer whose connection ended with
    /// `ConnectionError::FecShapeMismatch` opens nothing for 60 s (its datagrams
    /// are counted in `EndpointStats::dropped_shape_cooldown`), so it sees silence
    /// and its own connection ends rather than being kept alive by new ones.
    KcpGo {
        /// kcp-go's `none` block crypt, which kcptun's `--crypt none` selects:
        /// every datagram starts with 16 nonce bytes and the CRC-32 (IEEE) of the
        /// rest, checked on every datagram received (a mismatch is dropped and
        /// counted in the decoder's `malformed`). False only for kcp-go programs
        /// that pass no `BlockCrypt`.
        crypt_none: bool,
    },
}

/// Configuration of an [`Endpoint`](crate::Endpoint). `Default` is the documented default.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// Handshake mode. Default: [`Mode::Native`].
    pub mode: Mode,
    /// ARQ parameters of every connection (MTU, windows, RTO floor, interval, …).
    pub kcp: KcpConfig,
    /// Keepalive, idle timeout and close timing of every connection.
    pub control: ControlConfig,
    /// Forward error correction below the ARQ. Default: scheme
    /// [`FecScheme::None`], i.e. ARQ only with bare KCP datagrams.
    ///
    /// Native mode: a client announces this scheme's shape in its handshake, the
    /// server clamps it to `fec_max_data` / `fec_max_parity`, and both sides run
    /// what was negotiated; `group_wait`, `budget`, `group_expiry` and the adaptive
    /// `target` are each side's own. Legacy, raw and kcp-go modes negotiate
    /// nothing: both sides must configure the same scheme, or neither decodes the
    /// other (kcp-go mode: a fixed scheme, see [`Mode::KcpGo`]).
    /// `budget` bounds the FEC shards all of this endpoint's connections retain
    /// together (one `petrel_proto::fec::FecBudget`; see `EndpointStats::fec_*`).
    /// With FEC each datagram carries 14 bytes of framing (kcp-go mode: 28 with
    /// the crypt header, 8 without; see `petrel_proto::session`), taken from `kcp.mtu`.
    pub fec: FecConfig,
    /// Server, native mode: most data shards per FEC group granted to a client, in
    /// packets (0 refuses FEC). Default 8; allowed 0..=64.
    pub fec_max_data: u8,
    /// Server, native mode: most parity shards per FEC group granted to a client,
    /// in packets (0 refuses FEC). Default 4; allowed 0..=16.
    pub fec_max_parity: u8,
    /// Give up `connect` after this long without a handshake reply. Default 5 s.
    pub connect_timeout: Duration,
    /// Whether this endpoint accepts incoming connections. Default false (client only).
    pub accept_incoming: bool,
    /// Most connections the endpoint holds at once; handshakes beyond it are refused and
    /// counted. Default 65 536.
    pub max_connections: usize,
    /// Most incoming connections from one peer address (IP and port); more are refused
    /// and counted, so one socket cannot take every slot. Default 16.
    pub max_connections_per_address: usize,
    /// Most incoming connections from one IP address (clients behind one NAT share it).
    /// Default 256.
    pub max_connections_per_ip: usize,
    /// Most incoming connections from one network: the /24 of an IPv4 address, the
    /// /64 of an IPv6 address (one host usually owns a whole /64, so the per-IP
    /// limit alone does not bound it). Default 1024.
    pub max_connections_per_prefix: usize,
    /// Endpoint-wide budget of receive buffers, in bytes: every connection (incoming
    /// or outgoing) reserves the most its KCP receive side can hold, `2 × rcv_wnd ×
    /// mtu` (out-of-order buffer and undelivered queue, each bounded by the window
    /// in bytes; 1.2 MB with the defaults), and a connection that does not fit is
    /// refused and counted. Default 1 GiB (about 870 connections with the default
    /// windows); raise it, or lower `kcp.rcv_wnd`, for more.
    pub recv_buffer_budget: usize,
    /// Accepted connections waiting for `accept()`; beyond it new ones are refused and
    /// counted. Default 1024.
    pub accept_queue: usize,
    /// Requested `SO_SNDBUF` in bytes; `None` keeps the system default.
    pub send_buffer: Option<usize>,
    /// Requested `SO_RCVBUF` in bytes; `None` keeps the system default.
    pub recv_buffer: Option<usize>,
    /// Seed for `conv` and cookie-secret generation. `None` draws from the OS; set it only
    /// for reproducible tests.
    pub seed: Option<u64>,
    /// Socket shards, each with its own I/O driver task: more than 1 binds that many
    /// `SO_REUSEPORT` sockets to the address (Unix), so a multi-thread tokio runtime
    /// can receive and send on several cores. A connection lives on one shard, whose
    /// driver sends all its datagrams, so the sharding never reorders them. Native
    /// and legacy endpoints steer the group (Linux): a server gives each accepted
    /// connection a conv whose low byte names the shard with the fewest
    /// connections, and the kernel delivers each datagram to the shard its first
    /// byte names, so the shards split the connections evenly and every data
    /// datagram of a connection is read on its home shard
    /// (`EndpointStats::datagrams_off_home_shard` stays 0). Control datagrams are
    /// not: native handshakes, KEEPALIVE and CLOSE start with conv 0 and are read
    /// by shard 0, legacy SYN / FIN by the shard their flag byte names; any shard
    /// routes them. An outgoing connection's home is the shard its server-chosen
    /// conv names. Raw and kcp-go endpoints, and an endpoint whose kernel refuses
    /// the program (logged), keep the kernel's 4-tuple hash: an incoming
    /// connection lives on the shard its opening datagram arrived on, an outgoing
    /// one on shard 0. Default 1; allowed 1..=64.
    pub io_threads: usize,
    /// Send trains of equal-size datagrams to one peer with UDP GSO (`UDP_SEGMENT`,
    /// Linux ≥ 4.18; a kernel that refuses it falls back to `sendmmsg` by itself).
    /// Default true; false sends every batch with `sendmmsg`.
    pub gso: bool,
    /// Ask the kernel to coalesce received datagrams with UDP GRO (Linux ≥ 5.0); the
    /// trains are split again before they reach a connection. Default true.
    pub gro: bool,
    /// How long an I/O driver with dense traffic keeps polling before it sleeps:
    /// this runtime's counterpart of Linux's `SO_BUSY_POLL` (socket(7)). When a
    /// driver has read and sent everything, it yields to the runtime and checks its
    /// socket and its connections again, for up to this long, instead of parking at
    /// once. A sleep and the wake-up that ends it cost a context switch on both the
    /// waking and the woken core (in a VM also an inter-processor interrupt);
    /// under bulk traffic the next datagrams arrive within microseconds, so
    /// polling for them costs less CPU than sleeping. A driver polls only after
    /// two idle waits in a row that each ended within half of this time and were
    /// followed by datagrams of a connection, and after a poll that found nothing
    /// it needs twice as many (up to 16) before the next: datagrams that reach no
    /// connection never start it, an idle endpoint never polls, a single sparse
    /// stream (a voice call, keepalives, a 200 Mbit/s paced transfer) rarely (a
    /// reply and its ack can make two short waits: one futile poll). A shard
    /// whose many streams together keep its waits that short is busy, and polls.
    /// The cost a peer can cause: a connection that sends a datagram every half
    /// of this time, with every poll finding it, keeps one core per shard busy,
    /// as a bulk transfer does. A native connection proves its address by the
    /// cookie handshake; in raw and kcp-go server modes any source (spoofed too)
    /// gets a connection by its first datagram, which is one more reason those
    /// modes are for trusted networks.
    /// `EndpointStats::busy_polls` and `busy_poll_hits` count the polls and those
    /// that found work. Default [`DEFAULT_BUSY_POLL`] (50 µs); zero turns it off;
    /// at most [`MAX_BUSY_POLL`] (1 ms).
    pub busy_poll: Duration,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Native,
            kcp: KcpConfig::default(),
            control: ControlConfig::default(),
            fec: SessionConfig::default().fec,
            fec_max_data: 8,
            fec_max_parity: 4,
            connect_timeout: Duration::from_secs(5),
            accept_incoming: false,
            max_connections: 65_536,
            max_connections_per_address: 16,
            max_connections_per_ip: 256,
            max_connections_per_prefix: 1024,
            recv_buffer_budget: 1 << 30,
            accept_queue: 1024,
            send_buffer: None,
            recv_buffer: None,
            seed: None,
            io_threads: 1,
            gso: true,
            gro: true,
            busy_poll: DEFAULT_BUSY_POLL,
        }
    }
}

impl EndpointConfig {
    /// A server configuration: [`Default`] with `accept_incoming` on.
    pub fn server() -> Self {
        Self {
            accept_incoming: true,
            ..Self::default()
        }
    }

    /// Checks every field; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.kcp
            .validate()
            .map_err(|e| ConfigError(format!("kcp: {e}")))?;
        self.fec
            .validate()
            .map_err(|e| ConfigError(e.to_string()))?;
        let overhead = match self.mode {
            Mode::KcpGo { crypt_none } => Framing::KcpGo {
                crypt_header: crypt_none,
            }
            .overhead(),
            _ => FEC_OVERHEAD,
        };
        if self.fec.scheme != FecScheme::None && self.kcp.mtu < MIN_MTU + overhead {
            return Err(ConfigError(format!(
                "kcp.mtu must be ≥ {} bytes with FEC (got {})",
                MIN_MTU + overhead,
                self.kcp.mtu
            )));
        }
        self.session_config()
            .validate()
            .map_err(|e| ConfigError(e.to_string()))?;
        let range = |e: RangeError| ConfigError(e.to_string());
        check_range("fec_max_data", self.fec_max_data, &(0..=MAX_DATA_SHARDS)).map_err(range)?;
        check_range(
            "fec_max_parity",
            self.fec_max_parity,
            &(0..=MAX_PARITY_SHARDS),
        )
        .map_err(range)?;
        if self.max_connections == 0 {
            return Err(ConfigError("max_connections must be ≥ 1".into()));
        }
        if self.max_connections_per_address == 0
            || self.max_connections_per_ip == 0
            || self.max_connections_per_prefix == 0
        {
            return Err(ConfigError(
                "max_connections_per_address, max_connections_per_ip and \
                 max_connections_per_prefix must be ≥ 1"
                    .into(),
            ));
        }
        if self.recv_buffer_budget < self.recv_reservation() {
            return Err(ConfigError(format!(
                "recv_buffer_budget must hold one connection's receive buffers \
                 (2 × rcv_wnd × mtu = {} bytes)",
                self.recv_reservation()
            )));
        }
        check_range("io_threads", self.io_threads, &(1..=MAX_IO_THREADS)).map_err(range)?;
        check_range(
            "busy_poll",
            self.busy_poll,
            &(Duration::ZERO..=MAX_BUSY_POLL),
        )
        .map_err(range)?;
        if self.accept_queue == 0 {
            return Err(ConfigError("accept_queue must be ≥ 1".into()));
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError("connect_timeout must be > 0".into()));
        }
        Ok(())
    }

    /// Bytes of `recv_buffer_budget` one connection reserves: `2 × rcv_wnd × mtu`.
    pub(crate) fn recv_reservation(&self) -> usize {
        2 * usize::from(self.kcp.rcv_wnd) * self.kcp.mtu
    }

    /// The per-connection protocol configuration.
    pub(crate) fn session_config(&self) -> SessionConfig {
        SessionConfig {
            kcp: self.kcp,
            control: self.control.clone(),
            fec: self.fec,
            framing: match self.mode {
                Mode::KcpGo { crypt_none } => SessionFraming::KcpGo {
                    crypt_header: crypt_none,
                },
                _ => SessionFraming::Petrel,
            },
            ..SessionConfig::default()
        }
    }
}

/// [`EndpointConfig::busy_poll`] unless set: 50 µs. Dense means waits under
/// 25 µs, which a loopback or LAN bulk transfer's drivers mostly see between
/// rounds, while a transfer paced at 200 Mbit/s (one 1400-byte datagram every
/// 56 µs) does not qualify and sleeps between its datagrams. A futile poll costs
/// at most 50 µs, short next to a scheduler tick.
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(50);

/// Longest [`EndpointConfig::busy_poll`]: 1 ms. At this limit a connection that
/// sends 2,000 datagrams per second already keeps one core per shard polling;
/// longer limits would let ever fewer do so, and a driver would poll through the
/// gaps of ordinary paced streams.
pub const MAX_BUSY_POLL: Duration = Duration::from_millis(1);

/// Most socket shards an endpoint may ask for ([`EndpointConfig::io_threads`]).
pub const MAX_IO_THREADS: usize = 64;

/// FEC framing per datagram: conv prefix + native shard overhead, bytes.
const FEC_OVERHEAD: usize = CONV_PREFIX + petrel_proto::fec::wire::NATIVE_OVERHEAD;

/// An invalid [`EndpointConfig`] field.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("invalid endpoint configuration: {0}")]
pub struct ConfigError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_shard_limits_name_the_field_and_range() {
        let config = EndpointConfig {
            fec_max_data: MAX_DATA_SHARDS + 1,
            ..EndpointConfig::default()
        };
        assert_eq!(
            config.validate(),
            Err(ConfigError("fec_max_data = 65 is outside 0..=64".into()))
        );
        let config = EndpointConfig {
            fec_max_parity: MAX_PARITY_SHARDS + 1,
            ..EndpointConfig::default()
        };
        assert_eq!(
            config.validate().map_err(|e| e.to_string()),
            Err("invalid endpoint configuration: fec_max_parity = 17 is outside 0..=16".into())
        );
        assert_eq!(EndpointConfig::default().validate(), Ok(()));
    }

    #[test]
    fn busy_poll_is_checked_against_its_limit() {
        let config = |busy_poll| EndpointConfig {
            busy_poll,
            ..EndpointConfig::default()
        };
        assert_eq!(config(Duration::ZERO).validate(), Ok(()));
        assert_eq!(config(MAX_BUSY_POLL).validate(), Ok(()));
        let err = config(MAX_BUSY_POLL + Duration::from_nanos(1))
            .validate()
            .map_err(|e| e.to_string());
        assert!(
            matches!(&err, Err(e) if e.contains("busy_poll") && e.contains("1ms")),
            "{err:?}"
        );
    }
}
