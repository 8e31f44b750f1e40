//! Counters of connections and endpoints.

use std::sync::atomic::{AtomicU64, Ordering};

use petrel_proto::fec::FecBudget;
use petrel_proto::kcp::KcpStats;
use petrel_proto::session::FecStats;
use serde::Serialize;

/// A snapshot of one connection's counters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ConnectionStats {
    /// The ARQ's counters: segments, retransmissions, srtt/rto, windows.
    pub kcp: KcpStats,
    /// FEC counters (shards sent and received, recoveries, parity, loss reports,
    /// retained bytes); `None` when the connection runs without FEC.
    pub fec: Option<FecStats>,
    /// Datagrams from the peer the ARQ or control plane rejected as malformed.
    pub input_errors: u64,
    /// Datagrams the socket refused with an error other than a full buffer.
    pub send_errors: u64,
}

macro_rules! endpoint_counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// A snapshot of an endpoint's counters.
        #[derive(Debug, Clone, Copy, Default, Serialize)]
        pub struct EndpointStats {
            $($(#[$doc])* pub $name: u64,)*
            /// Connections currently registered.
            pub connections_open: u64,
            /// Bytes of FEC shards all connections retain now (encoders' open
            /// groups, decoders' incomplete groups), within `EndpointConfig::fec.budget`.
            pub fec_retained_bytes: u64,
            /// Peak of `fec_retained_bytes`, in bytes.
            pub fec_peak_retained_bytes: u64,
            /// Incomplete FEC groups decoders released because the endpoint's
            /// budget was full (per connection: `DecoderStats::groups_released_for_budget`).
            pub fec_groups_released_for_budget: u64,
        }

        #[derive(Debug, Default)]
        pub(crate) struct EndpointCounters {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl EndpointCounters {
            pub(crate) fn snapshot(&self, connections_open: u64, fec: &FecBudget) -> EndpointStats {
                EndpointStats {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                    connections_open,
                    fec_retained_bytes: fec.current() as u64,
                    fec_peak_retained_bytes: fec.peak() as u64,
                    fec_groups_released_for_budget: fec.groups_released(),
                }
            }
        }
    };
}

endpoint_counters! {
    /// Datagrams read from the socket (a GRO train counts each datagram in it).
    datagrams_received,
    /// Bytes read from the socket (UDP payload).
    bytes_received,
    /// `recvmmsg` calls that returned datagrams (`datagrams_received / recv_syscalls`
    /// is the receive batch size).
    recv_syscalls,
    /// Data datagrams (not control) one socket shard read for a connection that lives on another
    /// (its driver sends from its home shard). Steered shards (native and legacy
    /// endpoints with `io_threads` > 1) keep this at 0; under the kernel's hash it
    /// counts a `connect`ed connection's datagrams read off shard 0.
    datagrams_off_home_shard,
    /// Datagrams written to the socket.
    datagrams_sent,
    /// Bytes written to the socket (UDP payload).
    bytes_sent,
    /// `sendmmsg` / GSO `sendmsg` calls that sent datagrams (`datagrams_sent /
    /// send_syscalls` is the send batch size).
    send_syscalls,
    /// Datagrams sent as part of a GSO train (one `sendmsg` for many datagrams).
    datagrams_sent_gso,
    /// Times an I/O driver found the socket send buffer full (`EAGAIN`) or the
    /// device queue full (`ENOBUFS`) and waited before sending the rest; nothing
    /// is dropped for it.
    send_waits,
    /// Bytes of datagrams the runtime copied after they were encoded or received:
    /// connection datagrams are encoded into the driver's batch buffers and read
    /// in place from its receive buffers (0 copies); only datagrams that belong to
    /// no connection (handshakes) are copied once into the driver's queue.
    bytes_copied,
    /// Datagrams the socket refused with an error other than a full buffer
    /// (each also counted in its connection's `send_errors` when it had one).
    send_errors,
    /// Data datagrams for no known connection (unknown peer or `conv`), dropped.
    dropped_unknown,
    /// Datagrams too short or malformed to route, dropped.
    dropped_malformed,
    /// Control datagrams a handshake rejected (bad cookie, wrong state, …), dropped.
    dropped_handshake,
    /// Stateless handshake replies sent (retry, version negotiation).
    handshake_replies,
    /// Connections accepted.
    connections_accepted,
    /// Connections established by `connect`.
    connections_connected,
    /// Incoming connections refused because `accept_queue` was full.
    refused_accept_queue_full,
    /// Handshakes refused because `max_connections` was reached.
    refused_max_connections,
    /// Handshakes refused by `max_connections_per_address` / `max_connections_per_ip`.
    refused_per_peer,
    /// Handshakes refused by `max_connections_per_prefix` (same /24 or /64).
    refused_per_prefix,
    /// Connections refused because `recv_buffer_budget` had no room for their
    /// receive buffers.
    refused_recv_budget,
    /// Repeated INITIAL / SYN answers not sent: the source IP had its
    /// allowance of repeated replies for the current second.
    dropped_reply_rate,
    /// Socket read errors (other than would-block).
    recv_errors,
    /// Handshake datagrams not sent because the socket send buffer was full.
    unattached_send_dropped,
    /// Handshake datagrams the socket refused with another error.
    unattached_send_errors,
    /// kcp-go mode: datagrams of a peer whose connection ended on a FEC shape
    /// mismatch within the last 60 s, dropped rather than opening a new connection.
    dropped_shape_cooldown,
    /// kcp-go mode: peers not put in that cooldown because its table (4096 peers)
    /// was full of unexpired entries.
    cooldown_full,
    /// Times a connection's timer task woke for a deadline (retransmission, keepalive, …).
    /// Idle connections add nothing here.
    timer_wakeups,
    /// Times an I/O driver woke up (datagrams to read, or connections or handshakes
    /// with something to send). Idle connections add nothing here either.
    driver_wakeups,
    /// Times an I/O driver busy-polled before sleeping (`EndpointConfig::busy_poll`).
    busy_polls,
    /// Busy polls that found datagrams to read or work to send, each a sleep and
    /// wake-up (`driver_wakeups`) that did not happen.
    busy_poll_hits,
}

impl EndpointCounters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
