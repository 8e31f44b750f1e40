//! Forward error correction between the ARQ and the socket.
//!
//! The layer works on opaque datagrams (whatever the ARQ emits) and is sans-IO
//! like the rest of the crate: [`FecEncoder`] and [`FecDecoder`] are fed `(now,
//! datagram)` and polled for datagrams and deadlines.
//!
//! - **Groups.** The encoder sends every datagram at once as a *data shard* and
//!   collects up to `data_shards` of them in a group; the group closes when full or
//!   `group_wait` (default 2 ms) after its first datagram, and its Reed–Solomon
//!   *parity shards* follow. Data is never delayed by FEC; only parity waits.
//!   Sparse traffic (fewer than one datagram per `group_wait`, native framing)
//!   does not wait: when the caller has nothing more to send
//!   ([`FecEncoder::flush`]) the group closes at once, one data shard and a copy
//!   as parity, or two or three shards and Reed–Solomon parity; the parity
//!   header's `data_count` tells the decoder the group's real size. kcp-go
//!   framing keeps its fixed shapes (kcp-go decodes nothing else). With
//!   parity 0 there is no group and no wait (pass-through), and
//!   [`FecEncoder::push_or_append`] / [`FecDecoder::input_direct`] skip the
//!   queues and their copies too.
//! - **Recovery.** The decoder hands data shards up on arrival and rebuilds lost
//!   ones as soon as any `data_count` shards of a group are in, drops duplicates
//!   (1024-shard `seq` window), expires groups after `group_expiry` and releases
//!   its oldest incomplete groups when the memory budget is full (all counted in
//!   [`DecoderStats`]).
//! - **Budget** ([`FecBudget`]): the shards kept for parity (encoder's open group),
//!   for recovery (decoder's incomplete groups) and the Reed–Solomon decode
//!   matrices a decoder caches (at most [`MAX_CODECS`] shapes ×
//!   [`MAX_DECODE_MATRICES`] loss patterns, see `rs.rs`) are reserved in one byte budget
//!   per endpoint (`FecConfig::budget`, default 1 MiB), shared by all its
//!   connections. Nothing blocks on it: a full budget closes the encoder's group
//!   early or sends without parity, and releases the decoder's oldest groups.
//! - **Framing** ([`Framing`]). Native: a 6-byte data header `kind | index | seq
//!   u32`, an 8-byte parity header adding `data_count | parity_count`; parity
//!   covers `size u16 + payload`, so a parity shard is 10 bytes longer than the
//!   longest datagram of its group: per-datagram overhead to plan the MTU with is
//!   [`wire::NATIVE_OVERHEAD`] = 10 bytes (≤ the reference's 26). kcp-go: `seqid
//!   u32 | flag u16 (0xF1/0xF2) | size u16`, group = `seqid / (ds+ps)`, optionally
//!   behind kcptun's 20-byte crypt-none header (16 nonce bytes + CRC-32 IEEE LE,
//!   checked on every datagram; a rebuilt datagram has no CRC of its own, the
//!   lost datagram carried it): 8 or 28 bytes of overhead (spec `kcp.md` §2,
//!   kcp-go `fec.go`). The shape is not on the wire, so the decoder rebuilds
//!   nothing until it has proven the peer's shape to be ours, and stops for good
//!   at the first shard that contradicts it ([`shape`]).
//! - **Adaptive parity** ([`ParityPolicy`], [`LossReport`]): parity 0..=`max_parity`
//!   from the receiver's loss reports and the traffic shape (group size), keeping
//!   the binomial probability of an unrecoverable group below `target`, with
//!   hysteresis and a dwell time; see [`policy`] for the exact rule.
//! - **Config** ([`FecConfig`]): scheme, `group_wait`, `budget`, validated, with an
//!   8-byte descriptor for the handshake.
//!
//! # Reed–Solomon library choice
//!
//! Two pure-Rust libraries were compared on Petrel's group shapes (4+2, 8+2, 8+4 with
//! 64–1200-byte shards; `cargo bench -p petrel-proto --bench fec_rs` reproduces the
//! comparison, see the README's benchmark section). `reed-solomon-simd` 3 encodes
//! several times faster, but every decode pays a fixed cost of the order of a
//! millisecond whatever the shard size or count, and it needs equal, even-sized
//! shards. `reed-solomon-erasure` 6 (no `simd-accel`) decodes one to two orders of
//! magnitude faster on these shapes, still encodes a group in microseconds, and
//! uses the same systematic Vandermonde GF(2^8) matrix as
//! klauspost/reedsolomon, so its parity is byte-identical to kcp-go's (checked
//! against captured kcptun traffic in `tests/fec_kcptun.rs`). **Chosen:
//! `reed-solomon-erasure`** for both framings: recovery is the path FEC exists for,
//! and kcp-go compatibility needs its matrix.
//!
//! The whole layer's cost per group (encoder → decoder, lossless, with one shard
//! rebuilt, adaptive pass-through) is `cargo bench -p petrel-proto --bench
//! fec_layer`. After warm-up neither side allocates per packet (`tests/fec_alloc.rs`).
//!
//! What lives elsewhere: the ARQ (`kcp`), congestion control (`cc`), the handshake
//! that carries the descriptor, and the sockets and timers (`petrel`).

mod budget;
mod config;
mod decoder;
mod encoder;
pub mod policy;
mod queue;
mod rs;
mod seqwin;
pub mod shape;
mod stats;
pub mod wire;

pub use budget::FecBudget;
pub use config::{ConfigError, FecConfig, FecScheme, MAX_DATA_SHARDS, MAX_PARITY_SHARDS};
pub use decoder::{DecodeError, Decoded, FecDecoder, MAX_GROUPS, RX_QUEUE_LIMIT};
pub use encoder::{EncodeError, FecEncoder, TX_QUEUE_LIMIT};
pub use policy::{LossReport, ParityPolicy};
pub use rs::{matrix_cost, MAX_CODECS, MAX_DECODE_MATRICES};
pub use seqwin::SEQ_WINDOW;
pub use shape::{ShapeCheck, ShapeMismatch, SHAPE_REPORT_DELAY};
pub use stats::{DecoderStats, EncoderStats};
pub use wire::{Framing, WireError};
