//! Petrel's system I/O layer: every system call the other crates make lives here.
//!
//! # Layers
//!
//! Petrel follows quinn's split. `petrel-proto` is the protocol with no I/O: it is
//! fed datagrams and the time, and polled for datagrams to send and the next
//! deadline. The runtimes (`petrel`, `petrel-quic`, `petrel-netem`'s relay, the
//! reflector's server, the benchmarks) own threads, sockets and clocks. This crate
//! sits under all of them, as `quinn-udp` sits under `quinn`: it turns "send these
//! datagrams", "read what is waiting", "how much CPU did that take" into the
//! system calls that do it fastest on Linux, with a portable fallback elsewhere,
//! and reports what the kernel actually did (granted buffer sizes, partial sends,
//! `WouldBlock`) instead of what was asked.
//!
//! Dependencies point down only: this crate depends on `libc`, `socket2`, `serde`
//! and `thiserror`, never on another Petrel crate. Two small pure helpers live here
//! too, because every crate needs them and a leaf is the only place all can share
//! without a cycle: the FNV-1a hash and the range-checked configuration error.
//!
//! # What lives here
//!
//! - [`socket`]: UDP socket creation with requested buffer sizes (and, on request,
//!   `SO_REUSEPORT` groups of sockets sharing one address) and the sizes the
//!   kernel granted ([`SocketBuffers`], one type for every crate; the benchmarks'
//!   server + client pair is [`ServerClientBuffers`]).
//! - [`reuseport`]: delivery inside an `SO_REUSEPORT` group by a datagram's first
//!   byte (a classic BPF program), so a server can choose which socket reads a
//!   connection it accepted.
//! - [`batch`]: batched send — many payloads to many destinations (`sendmmsg`), one
//!   payload split in segments for one destination (UDP GSO, falling back to
//!   `sendmmsg` when the kernel refuses), or a train of separate equal-size
//!   buffers for one destination gathered into one GSO send — and batched receive (`recvmmsg`, UDP
//!   GRO with the segment size reported); one `send_to`/`recv_from` per datagram
//!   where these do not exist.
//! - [`error_queue`]: ICMP errors for sent datagrams (`IP_RECVERR` /
//!   `IPV6_RECVERR`, read with `MSG_ERRQUEUE`; Linux), each with the
//!   destination that caused it.
//! - [`poll`] (Linux): an epoll set waited on with nanosecond timeouts.
//! - [`thread`]: per-thread timer slack.
//! - [`child`]: child processes killed when the thread that started them ends.
//! - [`proc`]: process and thread CPU time, RSS and peak RSS, open file
//!   descriptors, host CPU from `/proc/stat`, host UDP receive-buffer drops
//!   from `/proc/net/snmp`, load average, CPU model, logical cores and kernel
//!   release.
//! - [`hash`]: FNV-1a-64, the stable hash of shard and partition keys.
//! - [`range`]: [`RangeError`] and [`check_range`], the one range-checked
//!   configuration error, its message rendered from the range that was checked.
//!
//! Everything but [`hash`] and [`range`] sits behind the default `io` feature;
//! `petrel-proto` uses the crate without it, so the sans-IO protocol crate has no
//! platform dependency.
//!
//! # What does not
//!
//! - Protocol logic, framing, timers and policy (`petrel-proto`): nothing here
//!   decides what to send or when.
//! - Async runtimes: sockets are plain `std`/`socket2` ones and every batch call
//!   takes anything `socket2::SockRef` can borrow (std, tokio, mio sockets), so a
//!   runtime wraps a call in its own readiness (`tokio::net::UdpSocket::try_io`).
//! - Threads, channels, clocks and counters of the callers: readers return the
//!   kernel's numbers; turning two readings into a rate is the caller's job.
//! - Configuration types: each crate keeps its own and validates with [`range`].
//!
//! # `quinn-udp`
//!
//! `quinn-udp` 0.5 (quinn 0.11's) covers the one-destination GSO/GRO/ECN path of
//! QUIC. It was measured against [`batch`] on Petrel's shapes (1200- and 1024-byte
//! segments, 1/8/32 per call, loopback): both make the same system call
//! (`sendmsg` with `UDP_SEGMENT`, `recvmmsg` with `UDP_GRO`) and ran equal within
//! the machine's noise. **Choice: Petrel keeps its own**, because it also needs
//! what `quinn-udp` does not offer — many-destination `sendmmsg` (reflector
//! fan-out, netem relay), per-datagram partial-send counts, blocking sockets
//! (`quinn-udp` forces non-blocking mode and its `send` logs and swallows errors)
//! — and one crate then serves every shape with one error model. ECN is the part
//! `quinn-udp` has and this crate lacks; Petrel's protocol does not use ECN today,
//! and `quinn-udp` is the candidate if it does. Comparison:
//! `cargo bench -p petrel-sys --bench gso_quinn_udp` (`quinn-udp` is only a
//! dev-dependency of that bench).
#![cfg_attr(test, allow(clippy::unwrap_used))]

#[cfg(feature = "io")]
pub mod batch;
#[cfg(feature = "io")]
pub mod child;
#[cfg(feature = "io")]
pub mod error_queue;
pub mod hash;
#[cfg(all(feature = "io", target_os = "linux"))]
pub mod poll;
#[cfg(feature = "io")]
pub mod proc;
pub mod range;
#[cfg(feature = "io")]
pub mod reuseport;
#[cfg(feature = "io")]
pub mod socket;
#[cfg(feature = "io")]
pub mod thread;

#[cfg(feature = "io")]
pub use batch::{Received, RecvBatch, SendBatch, SendReport, Transmit};
pub use range::{check_range, check_range_in, RangeError};
#[cfg(feature = "io")]
pub use socket::{
    bind_udp, BufferRequest, OnRefusal, ServerClientBuffers, SocketBuffers, UdpOptions,
};
