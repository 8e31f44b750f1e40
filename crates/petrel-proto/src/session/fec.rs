//! The session's FEC link: encoder and decoder of one connection, the conv prefix
//! that lets the runtime route shards, and the periodic loss reports.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::fec::{
    DecodeError, Decoded, DecoderStats, EncoderStats, FecBudget, FecConfig, FecDecoder, FecEncoder,
    FecScheme, Framing, LossReport, ShapeMismatch,
};

/// Bytes of the `conv u32 LE` prefix in front of every FEC datagram (shards and
/// loss reports): a shard's own header does not carry the conv, and the runtime
/// routes datagrams by `(peer, conv)` before any decoding.
pub const CONV_PREFIX: usize = 4;

/// FEC counters of one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FecStats {
    /// The encoder's counters (our shards towards the peer).
    pub encoder: EncoderStats,
    /// The decoder's counters (the peer's shards towards us).
    pub decoder: DecoderStats,
    /// Parity the next group will carry, in packets.
    pub current_parity: u8,
    /// Loss reports sent to the peer.
    pub loss_reports_sent: u64,
    /// Datagrams from the peer whose conv prefix was missing or not ours, dropped.
    pub wrong_conv: u64,
    /// ARQ datagrams the encoder refused (larger than a shard can be), dropped;
    /// the ARQ retransmits them. Stays 0 unless `mtu` exceeds 65 533 bytes.
    pub encode_errors: u64,
}

/// Why a datagram was not accepted by the FEC link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FecInputError {
    /// The conv prefix is missing or names another connection.
    #[error("datagram does not start with this connection's conv")]
    WrongConv,
    /// The decoder rejected the shard.
    #[error("fec: {0}")]
    Decode(#[from] DecodeError),
}

#[derive(Debug)]
pub(super) struct FecLink {
    /// The conv prefix of Petrel framing; kcp-go framing has none (its peers
    /// route by address).
    prefix: Option<[u8; CONV_PREFIX]>,
    framing: Framing,
    encoder: FecEncoder,
    decoder: FecDecoder,
    /// Loss reports are sent only when the peer's encoder adapts (same scheme).
    reports: bool,
    report_interval: Duration,
    /// Armed by the first shard after a report: idle connections have no timer.
    report_due: Option<Instant>,
    report: Option<LossReport>,
    shard: Vec<u8>,
    stats: FecStats,
}

impl FecLink {
    /// `None` for [`FecScheme::None`]: no FEC layer, bare KCP on the wire.
    /// Encoder and decoder reserve what they retain in `budget`. Native
    /// `framing` gets the conv prefix, kcp-go framing none.
    pub(super) fn new(
        conv: u32,
        config: &FecConfig,
        framing: Framing,
        report_interval: Duration,
        budget: FecBudget,
    ) -> Result<Option<Self>, crate::fec::ConfigError> {
        if config.scheme == FecScheme::None {
            return Ok(None);
        }
        let mut encoder = FecEncoder::with_budget(config, framing, budget.clone())?;
        // Crypt-header nonces (kcp-go framing) differ from one connection to the next.
        encoder.set_nonce_seed(u64::from(conv).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Ok(Some(Self {
            prefix: (framing == Framing::Native).then(|| conv.to_le_bytes()),
            framing,
            encoder,
            decoder: FecDecoder::with_budget(config, framing, budget)?,
            reports: matches!(config.scheme, FecScheme::Adaptive { .. }),
            report_interval,
            report_due: None,
            report: None,
            shard: Vec::with_capacity(2048),
            stats: FecStats::default(),
        }))
    }

    /// Bytes an ARQ datagram must leave free below the MTU: 14 in native
    /// framing (conv prefix + shard header), 8 or 28 in kcp-go framing.
    pub(super) fn overhead(&self) -> usize {
        self.prefix.map_or(0, |p| p.len()) + self.framing.overhead()
    }

    fn write_prefix(&self, out: &mut Vec<u8>) {
        out.clear();
        if let Some(prefix) = &self.prefix {
            out.extend_from_slice(prefix);
        }
    }

    /// Frames one ARQ datagram. At parity 0 with nothing queued it is written
    /// straight into `out`, conv-prefixed, and `true` is returned (pass-through:
    /// no queue, no group, no timer); otherwise it is queued for the next
    /// [`FecLink::poll_transmit`] and `out` is left empty.
    pub(super) fn push(&mut self, now: Instant, datagram: &[u8], out: &mut Vec<u8>) -> bool {
        self.write_prefix(out);
        let direct = match self.encoder.push_or_append(now, datagram, out) {
            Ok(direct) => direct,
            Err(_) => {
                self.stats.encode_errors += 1;
                false
            }
        };
        if !direct {
            out.clear();
        }
        direct
    }

    /// The ARQ has nothing more to send now: closes a sparse group at once (see
    /// [`FecEncoder::flush`]), or any open adaptive group when the ARQ's send
    /// queue is empty too (`idle`, see [`FecEncoder::flush_idle`]); returns
    /// whether a group was closed.
    pub(super) fn flush(&mut self, now: Instant, idle: bool) -> bool {
        self.encoder.flush(now) || (idle && self.encoder.flush_idle(now))
    }

    /// Writes the next loss report or shard, conv-prefixed, into `out`.
    pub(super) fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        if let Some(report) = self.report.take() {
            self.write_prefix(out);
            out.extend_from_slice(&report.encode());
            self.stats.loss_reports_sent += 1;
            return true;
        }
        if !self.encoder.poll_transmit(now, &mut self.shard) {
            return false;
        }
        self.write_prefix(out);
        out.extend_from_slice(&self.shard);
        true
    }

    /// Decodes one datagram from the peer. A group-less data shard comes back as
    /// its ARQ datagram, borrowed from `datagram`, for KCP at once; what else it
    /// yields (received or rebuilt) is drained with [`FecLink::poll_datagram`]
    /// afterwards. A loss report goes straight to our encoder.
    pub(super) fn input<'a>(
        &mut self,
        now: Instant,
        datagram: &'a [u8],
    ) -> Result<Option<&'a [u8]>, FecInputError> {
        let body = match (&self.prefix, datagram.split_at_checked(CONV_PREFIX)) {
            (None, _) => datagram,
            (Some(ours), Some((prefix, body))) if prefix == ours => body,
            _ => {
                self.stats.wrong_conv += 1;
                return Err(FecInputError::WrongConv);
            }
        };
        let passed = match self.decoder.input_direct(now, body)? {
            Decoded::Report(report) => {
                self.encoder.handle_loss_report(now, &report);
                return Ok(None);
            }
            Decoded::PassThrough(d) => Some(d),
            Decoded::Queued => None,
        };
        if self.reports && self.report_due.is_none() {
            self.report_due = Some(now + self.report_interval);
        }
        Ok(passed)
    }

    /// Moves the next ARQ datagram for KCP into `out`.
    pub(super) fn poll_datagram(&mut self, out: &mut Vec<u8>) -> bool {
        self.decoder.poll_datagram(out)
    }

    /// The earliest FEC deadline: the open group's `group_wait`, the oldest
    /// decoder group's expiry, the next loss report. `None` when idle.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        [
            self.encoder.poll_timeout(),
            self.decoder.poll_timeout(),
            self.report_due,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        self.encoder.handle_timeout(now);
        self.decoder.handle_timeout(now);
        if self.report_due.is_some_and(|t| now >= t) {
            self.report_due = None;
            self.report = self.decoder.take_loss_report();
        }
    }

    /// The peer's kcp-go shape is not ours (final; see
    /// [`FecDecoder::shape_mismatch`]): the session must end.
    pub(super) fn shape_mismatch(&self) -> Option<ShapeMismatch> {
        self.decoder.shape_mismatch()
    }

    pub(super) fn stats(&self) -> FecStats {
        FecStats {
            encoder: self.encoder.stats(),
            decoder: self.decoder.stats(),
            current_parity: self.encoder.current_parity(),
            ..self.stats
        }
    }
}
