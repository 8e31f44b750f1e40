//! Batched UDP I/O: many datagrams per system call where the kernel offers it.
//!
//! Shapes, with the Linux system call each uses and the portable fallback:
//!
//! | Shape | Linux | Elsewhere |
//! |---|---|---|
//! | many payloads → many destinations ([`SendBatch::send`]) | `sendmmsg(2)` | one `send_to` each |
//! | many payloads → one destination ([`SendBatch::send_to`]) | `sendmmsg(2)` | one `send_to` each |
//! | one payload → many destinations, every one tried ([`SendBatch::send_to_each`]) | `sendmmsg(2)` | one `send_to` each |
//! | one large payload split in segments → one destination ([`SendBatch::send_segments`]) | `sendmsg(2)` with `UDP_SEGMENT` (GSO, Linux ≥ 4.18), else `sendmmsg` | one `send_to` each |
//! | equal-size payloads in separate buffers → one destination ([`SendBatch::send_train`]) | `sendmsg(2)` with one iovec each and `UDP_SEGMENT`, else `sendmmsg` | one `send_to` each |
//! | many payloads in separate buffers → many destinations ([`SendBatch::send_slices`]) | `sendmmsg(2)` | one `send_to` each |
//! | any of these with a single datagram (no GSO) | `sendto(2)`, a shorter kernel path than a one-message `sendmmsg` | `send_to` |
//! | many datagrams in ([`RecvBatch::recv`]) | `recvmmsg(2)`, with `UDP_GRO` coalescing if [`enable_gro`] succeeded | one `recv_from` |
//!
//! # Partial sends and `WouldBlock`
//!
//! Every send reports honestly how far it got: `Ok(n)` means the first `n`
//! datagrams (or segments) were handed to the kernel, in order; `n` may be smaller
//! than asked when the kernel stopped part-way (full buffer on a non-blocking
//! socket, or an error on datagram `n`), and the caller resends from `n` — the next
//! call then reports the error. `Err` means nothing was sent; a full buffer on a
//! non-blocking socket is `Err(WouldBlock)`, which is what tokio's `try_io` and
//! mio need to clear readiness. Calls block or not as the socket does.
//!
//! # GSO fallback
//!
//! Some kernels and drivers refuse `UDP_SEGMENT` at send time (`EIO` when the
//! device cannot checksum-offload, `EINVAL` on kernels without it or a segment
//! above the path MTU). The first refusal switches that [`SendBatch`] to
//! `sendmmsg` for good ([`SendBatch::gso_enabled`] turns false) and the same
//! segments go out that way, so a caller never sees the refusal.

mod recv;
mod send;

pub use recv::{enable_gro, Received, RecvBatch};
pub use send::{SendBatch, SendReport, Transmit};

/// Whether a send failed because the device queue below the socket is full
/// (`ENOBUFS`): transient like a full socket buffer, but no socket readiness
/// reports its end, so the caller retries after a pause.
pub fn is_device_queue_full(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Largest UDP payload over IPv4 (65 535 − 20 − 8 bytes): the most one GSO send
/// carries.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Most segments the kernel accepts in one GSO send (`UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: usize = 64;

#[cfg(test)]
mod tests;
