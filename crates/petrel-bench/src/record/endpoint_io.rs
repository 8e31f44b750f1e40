//! What a Petrel endpoint's I/O drivers counted: system calls, batch sizes, waits
//! for a full socket buffer and bytes copied (issue 16 item 5). Written for Petrel
//! RUDP endpoints only; other transports leave it null.

use serde::{Deserialize, Serialize};

/// One Petrel endpoint's I/O counters over a run (warm-up included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointIo {
    /// Datagrams written to the socket.
    pub datagrams_sent: u64,
    /// `sendmmsg` / GSO `sendmsg` calls that sent datagrams.
    pub send_syscalls: u64,
    /// `datagrams_sent / send_syscalls`: the send batch size, datagrams per call
    /// (null when nothing was sent).
    pub datagrams_per_send_syscall: Option<f64>,
    /// Datagrams sent inside a GSO train.
    pub datagrams_sent_gso: u64,
    /// Datagrams read from the socket (each datagram of a GRO train counts).
    pub datagrams_received: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub recv_syscalls: u64,
    /// `datagrams_received / recv_syscalls`: the receive batch size, datagrams per
    /// call (null when nothing was read).
    pub datagrams_per_recv_syscall: Option<f64>,
    /// Times a driver found the send buffer (`EAGAIN`) or device queue (`ENOBUFS`)
    /// full and waited; nothing is dropped for it.
    pub send_waits: u64,
    /// Datagrams the socket refused with another error.
    pub send_errors: u64,
    /// Bytes the runtime copied after encoding or receiving (handshakes only).
    pub bytes_copied: u64,
    /// Application messages the endpoint sent and received over the run (count).
    pub messages: u64,
    /// `(send_syscalls + recv_syscalls) / messages`: system calls per message
    /// (null without messages).
    pub syscalls_per_message: Option<f64>,
    /// `bytes_copied / messages`: bytes per message (null without messages).
    pub bytes_copied_per_message: Option<f64>,
    /// Times the drivers woke up.
    pub driver_wakeups: u64,
    /// Times a driver busy-polled instead of sleeping at once
    /// (`EndpointConfig::busy_poll`); 0 in records written before it existed.
    #[serde(default)]
    pub busy_polls: u64,
    /// Busy polls that found work: sleeps and wake-ups saved.
    #[serde(default)]
    pub busy_poll_hits: u64,
}
