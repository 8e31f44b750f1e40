//! Receiver side: hands data shards up at once, rebuilds lost ones from parity
//! as soon as a group has enough shards, and keeps its memory bounded.
//!
//! Each shard `seq` is handed up at most once, received or rebuilt: both go
//! through the duplicate window ([`SeqWindow`]), a rebuilt shard whose `seq` was
//! already handed up (its group expired and was tracked afresh) is dropped, and
//! so is every shard older than the window (the ARQ retransmits what that loses).
//! In kcp-go framing nothing is rebuilt until the peer's shape is proven ours
//! ([`super::shape`]).

use super::budget::FecBudget;
use super::config::{ConfigError, FecConfig, FecScheme};
use super::policy::LossReport;
use super::queue::DatagramQueue;
use super::rs::{Codecs, Refused};
use super::seqwin::{Seen, SeqWindow};
use super::shape::{Observed, ShapeCheck, ShapeGuard, ShapeMismatch};
use super::stats::DecoderStats;
use super::wire::{self, Framing, Shard, ShardKind, WireError, NATIVE_REPORT};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Most groups tracked at once; beyond it the oldest is released and counted.
pub const MAX_GROUPS: usize = 1024;
/// Delivery queue bound, in datagrams (it is also bounded by `budget` bytes);
/// beyond it the oldest is dropped and counted.
pub const RX_QUEUE_LIMIT: usize = 4096;
/// Emptied per-group shard tables kept for reuse.
const SLOT_POOL_LIMIT: usize = 128;

/// Why a datagram was rejected. Every rejection is also counted as `malformed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The header, CRC or size field is invalid.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The shard contradicts its group (shape, index or parity length).
    #[error("shard contradicts its group's shape or parity length")]
    Inconsistent,
    /// Native framing: a shard of a group shape larger than the negotiated
    /// scheme allows (more data shards than `data_shards` / `max_data`, or more
    /// parity than `parity_shards` / `max_parity`).
    #[error("shard index {index} or shape {data}+{parity} was not negotiated")]
    NotNegotiated {
        /// Shard index within its group.
        index: u8,
        /// Announced data shard count (0 on a data shard).
        data: u8,
        /// Announced parity shard count (0 on a data shard).
        parity: u8,
    },
}

/// What [`FecDecoder::input_direct`] made of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A data shard outside any group (sent while parity was 0) arriving while
    /// no group is tracked, or any data shard once a kcp-go shape mismatch
    /// stopped recovery: its ARQ datagram, borrowed from the input, to hand up
    /// at once. Nothing was copied or queued.
    PassThrough(&'a [u8]),
    /// A native-framing loss report, for the caller's encoder.
    Report(LossReport),
    /// Everything else; the datagrams it yielded, if any, wait in
    /// [`FecDecoder::poll_datagram`].
    Queued,
}

#[derive(Debug)]
struct Group {
    shape: Option<(u8, u8)>,
    parity_len: usize,
    shards: Vec<Option<Vec<u8>>>,
    done: bool,
    bytes: usize,
}

impl Group {
    fn has_missing_data(&self) -> bool {
        self.shape.is_some_and(|(k, _)| {
            (0..usize::from(k)).any(|i| self.shards.get(i).is_none_or(Option::is_none))
        })
    }
}

/// Sans-IO FEC decoder. Feed it datagrams with [`FecDecoder::input`], drain
/// [`FecDecoder::poll_datagram`], call [`FecDecoder::handle_timeout`] at
/// [`FecDecoder::poll_timeout`], and send [`FecDecoder::take_loss_report`] to the
/// peer's encoder periodically when it runs adaptive parity.
#[derive(Debug)]
pub struct FecDecoder {
    framing: Framing,
    kcp_shape: (u8, u8),
    /// Native framing: the largest `(data, parity)` shape the negotiated scheme
    /// allows; shards of larger shapes are refused.
    limits: (u8, u8),
    /// Accounts the shards of incomplete groups (`group_bytes`).
    budget: FecBudget,
    expiry: Duration,
    groups: HashMap<u32, Group>,
    order: VecDeque<(u32, Instant)>,
    group_bytes: usize,
    /// Datagrams for the ARQ; its buffer pool also holds retained shards.
    out: DatagramQueue,
    /// Emptied per-group shard tables, reused so a new group allocates nothing.
    slot_pool: Vec<Vec<Option<Vec<u8>>>>,
    /// Scratch table for reconstruction.
    recon: Vec<(Vec<u8>, bool)>,
    codecs: Codecs,
    window: SeqWindow,
    /// kcp-go framing: whether the peer's shape is proven ours.
    shape: Option<ShapeGuard>,
    expected: u32,
    received: u32,
    stats: DecoderStats,
}

impl FecDecoder {
    /// Builds a decoder. In native framing group shapes come from the wire; the
    /// config supplies the budget and expiry. kcp-go framing takes the fixed shape
    /// from [`FecScheme::Fixed`] (parity ≥ 1).
    ///
    /// # Errors
    /// The [`FecConfig::validate`] error, or `scheme` out of range for kcp-go.
    pub fn new(config: &FecConfig, framing: Framing) -> Result<Self, ConfigError> {
        Self::with_budget(config, framing, FecBudget::new(config.budget))
    }

    /// Like [`FecDecoder::new`], but the shards of incomplete groups are reserved
    /// in `budget`, shared with other encoders and decoders (one per endpoint).
    /// When a reservation fails the decoder releases its own oldest incomplete
    /// groups (counted in `groups_released_for_budget`) and retries; a shard that
    /// still does not fit is not kept (`shards_refused_for_budget`), a data shard
    /// is handed up all the same.
    ///
    /// # Errors
    /// As [`FecDecoder::new`].
    pub fn with_budget(
        config: &FecConfig,
        framing: Framing,
        budget: FecBudget,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let kcp_shape = match (framing, config.scheme) {
            (
                Framing::KcpGo { .. },
                FecScheme::Fixed {
                    data_shards,
                    parity_shards,
                },
            ) if parity_shards > 0 => (data_shards, parity_shards),
            (Framing::KcpGo { .. }, s) => {
                return Err(ConfigError::OutOfRange {
                    field: "scheme",
                    value: format!("{s:?}"),
                    range: "Fixed with parity_shards >= 1 in kcp-go framing".into(),
                })
            }
            (Framing::Native, _) => (0, 0),
        };
        let shape = match framing {
            Framing::Native => None,
            Framing::KcpGo { .. } => Some(ShapeGuard::new(kcp_shape.0, kcp_shape.1)),
        };
        Ok(FecDecoder {
            framing,
            kcp_shape,
            limits: (config.scheme.data_shards(), config.scheme.max_parity()),
            codecs: Codecs::new(budget.clone()),
            budget,
            expiry: config.group_expiry,
            // Sized for the bound up front: the table never grows on the hot path.
            groups: HashMap::with_capacity(MAX_GROUPS),
            order: VecDeque::with_capacity(MAX_GROUPS),
            group_bytes: 0,
            out: DatagramQueue::new(RX_QUEUE_LIMIT, config.budget),
            slot_pool: Vec::new(),
            recon: Vec::new(),
            window: SeqWindow::default(),
            shape,
            expected: 0,
            received: 0,
            stats: DecoderStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Whether lost data shards may be rebuilt: always in native framing (the
    /// shape is on the wire); in kcp-go framing only once the peer's shape is
    /// proven ours, never after a shard contradicted it (see [`super::shape`]).
    pub fn shape_check(&self) -> ShapeCheck {
        self.shape
            .as_ref()
            .map_or(ShapeCheck::Confirmed, ShapeGuard::state)
    }

    /// kcp-go framing: the peer sends another shape than ours. `Some` once final:
    /// as soon as the peer's shape is inferred, at the latest
    /// [`super::SHAPE_REPORT_DELAY`] after the first contradicting shard (at the
    /// [`FecDecoder::poll_timeout`] deadline). The connection should end with it.
    pub fn shape_mismatch(&self) -> Option<ShapeMismatch> {
        self.shape.as_ref().and_then(ShapeGuard::mismatch)
    }

    /// Shards expected and received since the last call; `None` if nothing
    /// arrived. Send it to the peer (native framing: [`LossReport::encode`]).
    pub fn take_loss_report(&mut self) -> Option<LossReport> {
        if self.expected == 0 && self.received == 0 {
            return None;
        }
        let r = LossReport {
            expected: self.expected,
            received: self.received,
        };
        (self.expected, self.received) = (0, 0);
        Some(r)
    }

    /// Feeds one datagram. Data shards are queued for [`FecDecoder::poll_datagram`]
    /// at once; any data shards this shard makes recoverable follow them.
    /// A native-framing [`LossReport`] is returned for the caller's encoder.
    ///
    /// # Errors
    /// [`DecodeError`] for a malformed or inconsistent datagram (also counted).
    pub fn input(
        &mut self,
        now: Instant,
        datagram: &[u8],
    ) -> Result<Option<LossReport>, DecodeError> {
        match self.input_direct(now, datagram)? {
            Decoded::PassThrough(d) => {
                self.deliver(d);
                self.update_retained();
                Ok(None)
            }
            Decoded::Report(r) => Ok(Some(r)),
            Decoded::Queued => Ok(None),
        }
    }

    /// Like [`FecDecoder::input`], but a group-less data shard arriving while no
    /// group is tracked (the steady state at parity 0) is returned as
    /// [`Decoded::PassThrough`] instead of being copied into the delivery queue.
    /// Hand it up before draining [`FecDecoder::poll_datagram`].
    ///
    /// # Errors
    /// [`DecodeError`] for a malformed or inconsistent datagram (also counted).
    pub fn input_direct<'a>(
        &mut self,
        now: Instant,
        datagram: &'a [u8],
    ) -> Result<Decoded<'a>, DecodeError> {
        self.handle_timeout(now);
        let result = self.input_inner(now, datagram);
        if result.is_err() {
            self.stats.malformed += 1;
        }
        self.update_retained();
        result
    }

    /// Moves the next datagram for the ARQ into `out`; `false` when none is queued.
    pub fn poll_datagram(&mut self, out: &mut Vec<u8>) -> bool {
        let got = self.out.pop_into(out);
        self.update_retained();
        got
    }

    /// When the oldest group expires, or a shape mismatch is due to be reported;
    /// `None` when neither is pending.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let expiry = self.order.front().map(|&(_, t)| t + self.expiry);
        let shape = self.shape.as_ref().and_then(ShapeGuard::poll_timeout);
        expiry.into_iter().chain(shape).min()
    }

    /// Releases groups older than `group_expiry`; makes a pending shape
    /// mismatch final at its deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(shape) = &mut self.shape {
            shape.handle_timeout(now);
        }
        while let Some(&(id, t)) = self.order.front() {
            if t + self.expiry > now {
                break;
            }
            self.order.pop_front();
            self.retire(id, false);
        }
        self.update_retained();
    }

    fn input_inner<'a>(
        &mut self,
        now: Instant,
        datagram: &'a [u8],
    ) -> Result<Decoded<'a>, DecodeError> {
        if self.framing == Framing::Native && datagram.first() == Some(&NATIVE_REPORT) {
            let r = LossReport::decode(datagram)?;
            self.stats.reports_received += 1;
            return Ok(Decoded::Report(r));
        }
        let shard = wire::parse(self.framing, self.kcp_shape, datagram)?;
        if self.framing == Framing::Native {
            let (data, parity) = match shard.kind {
                ShardKind::Data { .. } => (0, 0),
                ShardKind::Parity { data, parity } => (data, parity),
            };
            if shard.index >= self.limits.0 + parity
                || data > self.limits.0
                || parity > self.limits.1
            {
                self.stats.shapes_refused += 1;
                return Err(DecodeError::NotNegotiated {
                    index: shard.index,
                    data,
                    parity,
                });
            }
        }
        match self.window.insert(shard.seq) {
            Seen::Duplicate => {
                self.stats.duplicates += 1;
                return Ok(Decoded::Queued);
            }
            Seen::Stale => {
                // Possibly handed up already: its seq is out of the window.
                self.stats.stale += 1;
                return Ok(Decoded::Queued);
            }
            Seen::New { advance } => {
                self.expected = self.expected.saturating_add(advance);
                self.received = self.received.saturating_add(1);
            }
        }
        let is_data = matches!(shard.kind, ShardKind::Data { .. });
        let mut confirmed = false;
        if let Some(guard) = &mut self.shape {
            let before = guard.state();
            match guard.observe(now, shard.seq, is_data) {
                Observed::Agrees => {}
                Observed::Confirmed => confirmed = true,
                Observed::Contradicts => self.stats.shape_mismatches += 1,
            }
            if guard.state() == ShapeCheck::Mismatch {
                if before != ShapeCheck::Mismatch {
                    self.drop_incomplete_groups();
                }
                // The peer's own datagram, whatever its group: hand it up.
                if is_data {
                    self.stats.data_shards_received += 1;
                    return Ok(Decoded::PassThrough(shard.body));
                }
                self.stats.parity_dropped_for_shape += 1;
                return Ok(Decoded::Queued);
            }
        }
        if shard.kind == (ShardKind::Data { retained: false }) && self.groups.is_empty() {
            // No group it could belong to, nothing to recover: pass it through.
            self.stats.data_shards_received += 1;
            return Ok(Decoded::PassThrough(shard.body));
        }
        let id = shard.group();
        if self.groups.get(&id).is_some_and(|g| g.done) {
            match shard.kind {
                ShardKind::Data { .. } => {
                    self.stats.data_shards_received += 1;
                    self.deliver(shard.body);
                }
                ShardKind::Parity { .. } => self.stats.parity_shards_received += 1,
            }
            return Ok(Decoded::Queued);
        }
        match shard.kind {
            ShardKind::Data { retained } => {
                self.stats.data_shards_received += 1;
                self.deliver(shard.body);
                if retained {
                    self.store(now, id, &shard)?;
                }
            }
            ShardKind::Parity { .. } => {
                self.stats.parity_shards_received += 1;
                self.store(now, id, &shard)?;
            }
        }
        self.try_recover(id);
        if confirmed {
            // Groups kept while the shape was unproven may be complete by now.
            for i in 0..self.order.len() {
                let (g, _) = self.order[i];
                self.try_recover(g);
            }
        }
        Ok(Decoded::Queued)
    }

    fn store(&mut self, now: Instant, id: u32, shard: &Shard<'_>) -> Result<(), DecodeError> {
        let len = match shard.kind {
            ShardKind::Data { .. } => shard.body.len() + 2,
            ShardKind::Parity { .. } => shard.body.len(),
        };
        if !self.reserve(id, len) {
            self.stats.shards_refused_for_budget += 1;
            return Ok(());
        }
        if !self.groups.contains_key(&id) {
            if self.groups.len() >= MAX_GROUPS {
                if let Some((old, _)) = self.order.pop_front() {
                    self.retire(old, true);
                }
            }
            let shape = match self.framing {
                Framing::Native => None,
                Framing::KcpGo { .. } => Some(self.kcp_shape),
            };
            self.groups.insert(
                id,
                Group {
                    shape,
                    parity_len: 0,
                    shards: self.slot_pool.pop().unwrap_or_default(),
                    done: false,
                    bytes: 0,
                },
            );
            self.order.push_back((id, now));
        }
        let Some(g) = self.groups.get_mut(&id) else {
            return Ok(());
        };
        let index = usize::from(shard.index);
        let mut buf = self.out.buffer();
        match shard.kind {
            ShardKind::Data { .. } => {
                if g.shape.is_some_and(|(k, _)| shard.index >= k) {
                    self.out.recycle(buf);
                    self.budget.release(len);
                    return Err(DecodeError::Inconsistent);
                }
                // wire::parse bounds the payload to a u16 size field.
                buf.extend_from_slice(&((shard.body.len() + 2) as u16).to_le_bytes());
                buf.extend_from_slice(shard.body);
            }
            ShardKind::Parity { data, parity } => {
                let conflict = g.shape.is_some_and(|s| s != (data, parity))
                    || (g.parity_len != 0 && g.parity_len != shard.body.len())
                    || (g.shape.is_none()
                        && g.shards.iter().skip(usize::from(data)).any(Option::is_some));
                if conflict {
                    self.out.recycle(buf);
                    self.budget.release(len);
                    return Err(DecodeError::Inconsistent);
                }
                g.shape = Some((data, parity));
                g.parity_len = shard.body.len();
                buf.extend_from_slice(shard.body);
            }
        }
        if g.shards.len() <= index {
            g.shards.resize_with(index + 1, || None);
        }
        g.bytes += buf.len();
        self.group_bytes += buf.len();
        if let Some(old) = g.shards[index].replace(buf) {
            // A shard older than the seq window can repeat one already held.
            g.bytes -= old.len();
            self.group_bytes -= old.len();
            self.budget.release(old.len());
            self.out.recycle(old);
        }
        Ok(())
    }

    /// Rebuilds missing data shards once the group has `k` of its shards.
    fn try_recover(&mut self, id: u32) {
        let Some(mut g) = self.groups.remove(&id) else {
            return;
        };
        if let (false, Some((k, p))) = (g.done, g.shape) {
            let (k, n) = (usize::from(k), usize::from(k) + usize::from(p));
            g.shards.resize_with(n.max(g.shards.len()), || None);
            let have_data = g.shards[..k].iter().filter(|s| s.is_some()).count();
            let have_parity = g.shards[k..n].iter().filter(|s| s.is_some()).count();
            let rebuild = self.shape_check() == ShapeCheck::Confirmed;
            if have_data == k {
                self.finish(&mut g);
            } else if rebuild && have_parity > 0 && have_data + have_parity >= k {
                self.reconstruct(id, &mut g, k, p);
                self.finish(&mut g);
            }
        }
        self.groups.insert(id, g);
    }

    fn reconstruct(&mut self, id: u32, g: &mut Group, k: usize, p: u8) {
        let len = g.parity_len;
        let n = k + usize::from(p);
        let mut set = std::mem::take(&mut self.recon);
        set.clear();
        let mut present = 0u128;
        let mut fits = true;
        for (i, slot) in g.shards[..n].iter_mut().enumerate() {
            let b = match slot.take() {
                Some(b) => {
                    present |= 1 << i;
                    b
                }
                None => self.out.buffer(),
            };
            fits &= b.len() <= len;
            set.push((b, present & (1 << i) != 0));
        }
        for (b, _) in &mut set {
            b.resize(len, 0);
        }
        // A data shard longer than the parity means the peer's group is not what
        // the parity describes: nothing trustworthy can be rebuilt.
        // k ≤ MAX_DATA_SHARDS: the shape was parsed from u8 fields.
        let ok = fits
            && match self.codecs.reconstruct_data(k as u8, p, &mut set) {
                Ok(()) => true,
                Err(Refused::Budget) => {
                    self.stats.rebuilds_refused_for_budget += 1;
                    false
                }
                Err(Refused::Codec) => false,
            };
        if ok {
            for (i, (b, _)) in set.iter().enumerate().take(k) {
                if present & (1 << i) != 0 {
                    continue;
                }
                let size = usize::from(u16::from_le_bytes([b[0], b[1]]));
                if !(2..=len).contains(&size) {
                    continue;
                }
                // `i < k ≤ 64`: fits in a u32.
                match self.window.insert(id.wrapping_add(i as u32)) {
                    Seen::New { advance } => {
                        self.expected = self.expected.saturating_add(advance);
                        self.stats.shards_recovered += 1;
                        self.deliver(&b[2..size]);
                    }
                    // Handed up before this group was tracked afresh after expiry.
                    Seen::Duplicate => self.stats.duplicates += 1,
                    Seen::Stale => self.stats.stale += 1,
                }
            }
        } else {
            self.stats.groups_unrecoverable += 1;
        }
        for (b, _) in set.drain(..) {
            self.out.recycle(b);
        }
        self.recon = set;
    }

    /// Marks a group complete and frees its shards (kept as a tombstone so late
    /// shards of it are recognised until it expires).
    fn finish(&mut self, g: &mut Group) {
        g.done = true;
        self.group_bytes -= g.bytes;
        self.budget.release(g.bytes);
        g.bytes = 0;
        let mut slots = std::mem::take(&mut g.shards);
        for b in slots.drain(..).flatten() {
            self.out.recycle(b);
        }
        if self.slot_pool.len() < SLOT_POOL_LIMIT {
            self.slot_pool.push(slots);
        }
    }

    /// After a shape mismatch: frees every incomplete group without rebuilding
    /// (they stay as completed entries until they expire).
    fn drop_incomplete_groups(&mut self) {
        for i in 0..self.order.len() {
            let (id, _) = self.order[i];
            let Some(mut g) = self.groups.remove(&id) else {
                continue;
            };
            if !g.done {
                self.finish(&mut g);
            }
            self.groups.insert(id, g);
        }
    }

    fn retire(&mut self, id: u32, evicted: bool) {
        let Some(mut g) = self.groups.remove(&id) else {
            return;
        };
        if !g.done {
            if evicted {
                self.stats.groups_evicted += 1;
            } else {
                self.stats.groups_expired += 1;
            }
            if g.has_missing_data() {
                self.stats.groups_unrecoverable += 1;
            }
            self.finish(&mut g);
        }
    }

    /// Reserves `len` bytes for a shard of group `id`, releasing this decoder's
    /// oldest incomplete groups other than `id` until it fits; `false` if none
    /// is left to release.
    fn reserve(&mut self, id: u32, len: usize) -> bool {
        while !self.budget.try_reserve(len) {
            let victim = self.order.iter().position(|&(g, _)| {
                g != id && self.groups.get(&g).is_some_and(|g| !g.done && g.bytes > 0)
            });
            let Some((old, _)) = victim.and_then(|i| self.order.remove(i)) else {
                return false;
            };
            self.retire(old, true);
            self.stats.groups_released_for_budget += 1;
            self.budget.count_released(1);
        }
        true
    }

    fn deliver(&mut self, payload: &[u8]) {
        let mut b = self.out.buffer();
        b.extend_from_slice(payload);
        self.out.push(b);
        self.stats.rx_queue_dropped = self.out.dropped();
    }

    fn update_retained(&mut self) {
        let r = self.group_bytes + self.out.bytes();
        self.stats.retained_bytes = r;
        self.stats.codec_bytes = self.codecs.charged();
        self.stats.peak_retained_bytes = self.stats.peak_retained_bytes.max(r);
    }
}

impl Drop for FecDecoder {
    /// Returns the bytes of the incomplete groups to the shared budget.
    fn drop(&mut self) {
        self.budget.release(self.group_bytes);
    }
}
