//! [`KcpStats`]: counters and gauges of one connection.

use serde::Serialize;

/// A snapshot of one connection's counters (since creation) and gauges (now).
///
/// Times are in µs. "Segments" count KCP segments of any command; "bytes" count
/// whole datagrams as they are on the wire (headers included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KcpStats {
    /// Datagrams written by `poll_transmit`.
    pub datagrams_sent: u64,
    /// Datagram bytes written.
    pub bytes_sent: u64,
    /// Segments written (data, acks, probes).
    pub segments_sent: u64,
    /// Datagrams accepted by `input`.
    pub datagrams_received: u64,
    /// Bytes of accepted datagrams.
    pub bytes_received: u64,
    /// Segments in accepted datagrams.
    pub segments_received: u64,
    /// Messages accepted by `send`.
    pub messages_sent: u64,
    /// Messages returned by `recv`.
    pub messages_received: u64,
    /// Data segments written for the first time.
    pub data_segments_sent: u64,
    /// Retransmissions decided by a retransmission timeout.
    pub retransmissions_timeout: u64,
    /// Retransmission timeouts found spurious and undone: the timed-out segment's
    /// ACK echoed the `ts` of a transmission older than its retransmission (Eifel
    /// detection, RFC 3522 §2), so the controller restored its window
    /// ([`crate::cc::CongestionController::on_spurious_timeout`]).
    pub spurious_rto_undone: u64,
    /// Fast retransmissions (skipped by `fast_resend` later acks).
    pub retransmissions_fast: u64,
    /// ACK segments written.
    pub acks_sent: u64,
    /// ACK segments received.
    pub acks_received: u64,
    /// Acks not queued because the ack list was full (2 × `rcv_wnd`); the peer retransmits.
    pub acks_dropped: u64,
    /// Data segments received that were already received.
    pub duplicate_segments: u64,
    /// Data segments dropped: beyond the receive window, or part of a message with more
    /// fragments than `rcv_wnd` (which could never be delivered).
    pub segments_dropped_window: u64,
    /// Data segments dropped, unacknowledged, because their payload exceeded
    /// [`Kcp::max_segment_payload`](super::Kcp::max_segment_payload) bytes.
    pub segments_dropped_oversize: u64,
    /// Datagrams rejected by `input` (malformed, wrong conv).
    pub input_errors: u64,
    /// `send` calls refused with `QueueFull`.
    pub send_queue_full: u64,
    /// Times data waited for the pacer (the controller's pacing rate) before going out.
    pub pacing_waits: u64,
    /// WASK (window probe) segments written.
    pub window_probes_sent: u64,
    /// WINS (window tell) segments written.
    pub window_tells_sent: u64,
    /// Smoothed RTT, µs (0 before the first sample).
    pub srtt_us: u64,
    /// RTT variation, µs.
    pub rttvar_us: u64,
    /// Current retransmission timeout, µs.
    pub rto_us: u64,
    /// Congestion window, bytes (`u64::MAX` when no controller limits it).
    pub cwnd: u64,
    /// Pacing rate suggested by the controller, bytes/s (0 = none).
    pub pacing_rate: u64,
    /// Bytes (headers included) of data segments acknowledged so far.
    pub delivered_bytes: u64,
    /// Bytes (headers included) of data segments declared lost so far.
    pub lost_bytes: u64,
    /// Our send window, segments.
    pub snd_wnd: u16,
    /// Our free receive window as advertised, segments.
    pub rcv_wnd: u16,
    /// The peer's last advertised free receive window, segments.
    pub rmt_wnd: u16,
    /// Segments sent and not yet acknowledged.
    pub in_flight: u64,
    /// Bytes (headers included) of segments sent and neither acknowledged nor
    /// declared lost: what the congestion window limits.
    pub in_flight_bytes: u64,
    /// Segments waiting in the send queue.
    pub send_queue: u64,
}
