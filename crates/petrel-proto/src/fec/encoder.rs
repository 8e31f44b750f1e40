//! Sender side: frames ARQ datagrams as data shards at once and adds parity
//! shards when a group closes (full, `group_wait` after its first datagram, or —
//! native framing, sparse traffic — as soon as the caller has nothing more to
//! send, see [`FecEncoder::flush`]).

use super::budget::FecBudget;
use super::config::{ConfigError, FecConfig, FecScheme};
use super::policy::{LossReport, ParityPolicy};
use super::queue::DatagramQueue;
use super::rs::Codecs;
use super::stats::EncoderStats;
use super::wire::{self, Framing, MAX_PAYLOAD};
use std::time::{Duration, Instant};

/// Transmit queue bound, in datagrams (it is also bounded by `budget` bytes);
/// beyond it the oldest is dropped and counted.
pub const TX_QUEUE_LIMIT: usize = 256;

/// Why a datagram could not be pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// Payload larger than [`wire::MAX_PAYLOAD`] bytes.
    #[error("datagram of {0} bytes exceeds the FEC maximum of 65533")]
    TooLarge(usize),
}

#[derive(Debug)]
struct OpenGroup {
    base: u32,
    count: u8,
    parity: u8,
    deadline: Instant,
    /// Longest shard content (2-byte size + payload), in bytes.
    max_len: usize,
    data_bytes: usize,
}

/// Why a group closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Full, its `group_wait` passed, or the budget: the scheme's parity.
    Due,
    /// Early for sparse traffic ([`FecEncoder::flush`]): parity for its size,
    /// outside the parity credit.
    Sparse,
    /// Early because the sender is idle ([`FecEncoder::flush_idle`]): parity
    /// for its size, within the parity credit.
    Idle,
}

/// Most parity credit an adaptive encoder saves up, bytes (see
/// [`FecEncoder`]'s `parity_credit`): about four full groups of 1400-byte
/// shards, so an ack-heavy group can borrow what the groups before it did not
/// spend, while a long quiet spell buys no parity burst.
const PARITY_CREDIT_MAX: usize = 48 * 1024;

/// Weight of the newest inter-datagram gap in the smoothed gap (1/8, as RFC
/// 6298's `alpha`).
const GAP_WEIGHT: f64 = 1.0 / 8.0;

/// Sans-IO FEC encoder. Feed it datagrams with [`FecEncoder::push`], drain
/// [`FecEncoder::poll_transmit`], and call [`FecEncoder::handle_timeout`] at
/// [`FecEncoder::poll_timeout`].
#[derive(Debug)]
pub struct FecEncoder {
    framing: Framing,
    data_shards: u8,
    fixed_parity: u8,
    policy: Option<ParityPolicy>,
    group_wait: Duration,
    /// Per-group cap on parity: the whole group within `budget` bytes.
    budget: usize,
    /// Accounts the open group's shards (`OpenGroup::data_bytes`).
    shared_budget: FecBudget,
    /// kcp-go wraps `seqid` at the largest multiple of the group size (`paws`).
    seq_modulus: Option<u32>,
    next_seq: u32,
    open: Option<OpenGroup>,
    shards: Vec<Vec<u8>>,
    parity: Vec<Vec<u8>>,
    queue: DatagramQueue,
    codecs: Codecs,
    nonce: u64,
    /// When the previous datagram was pushed.
    last_push: Option<Instant>,
    /// Smoothed gap between pushed datagrams, seconds; each sample is capped at
    /// `4·group_wait` so one idle period does not hide a burst that follows.
    gap_s: f64,
    /// Adaptive only: data bytes of closed groups not yet matched by parity
    /// bytes (at most [`PARITY_CREDIT_MAX`]); a group's parity may spend it, so
    /// parity bytes stay within the data bytes over the stream, not per group.
    parity_credit: usize,
    stats: EncoderStats,
}

impl FecEncoder {
    /// Builds an encoder. kcp-go framing needs [`FecScheme::Fixed`] with at least
    /// one parity shard, as kcp-go has no partial or parity-less groups.
    ///
    /// # Errors
    /// The [`FecConfig::validate`] error, or `scheme` out of range for kcp-go.
    pub fn new(config: &FecConfig, framing: Framing) -> Result<Self, ConfigError> {
        Self::with_budget(config, framing, FecBudget::new(config.budget))
    }

    /// Like [`FecEncoder::new`], but the open group's shards are reserved in
    /// `budget`, shared with other encoders and decoders (one per endpoint).
    /// When the next shard does not fit, the open group is closed early (its
    /// parity sent, counted in `groups_closed_for_budget`); if it still does not
    /// fit, the datagram is sent outside any group, without parity
    /// (`ungrouped_for_budget`). In kcp-go framing a partial group cannot be
    /// closed, so it is abandoned without parity instead. Data is never delayed
    /// or dropped for the budget.
    ///
    /// # Errors
    /// As [`FecEncoder::new`].
    pub fn with_budget(
        config: &FecConfig,
        framing: Framing,
        budget: FecBudget,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let (fixed_parity, policy) = match config.scheme {
            FecScheme::None => (0, None),
            FecScheme::Fixed { parity_shards, .. } => (parity_shards, None),
            FecScheme::Adaptive {
                max_data,
                max_parity,
                target,
            } => (0, Some(ParityPolicy::new(max_data, max_parity, target))),
        };
        let seq_modulus = match (framing, config.scheme) {
            (Framing::Native, _) => None,
            (
                Framing::KcpGo { .. },
                FecScheme::Fixed {
                    data_shards,
                    parity_shards,
                },
            ) if parity_shards > 0 => {
                let n = u32::from(data_shards) + u32::from(parity_shards);
                Some(u32::MAX / n * n)
            }
            (Framing::KcpGo { .. }, _) => {
                return Err(ConfigError::OutOfRange {
                    field: "scheme",
                    value: format!("{:?}", config.scheme),
                    range: "Fixed with parity_shards >= 1 in kcp-go framing".into(),
                })
            }
        };
        Ok(FecEncoder {
            framing,
            data_shards: config.scheme.data_shards(),
            fixed_parity,
            policy,
            group_wait: config.group_wait,
            budget: config.budget,
            shared_budget: budget.clone(),
            seq_modulus,
            next_seq: 0,
            open: None,
            shards: Vec::new(),
            parity: Vec::new(),
            queue: DatagramQueue::new(TX_QUEUE_LIMIT, config.budget),
            codecs: Codecs::new(budget.clone()),
            nonce: 0x9E37_79B9_7F4A_7C15,
            last_push: None,
            gap_s: 0.0,
            parity_credit: 0,
            stats: EncoderStats::default(),
        })
    }

    /// Seeds the generator of kcptun crypt-header nonces. kcptun ignores them
    /// with `crypt none`, so they need to vary, not to be secret.
    pub fn set_nonce_seed(&mut self, seed: u64) {
        self.nonce = seed;
    }

    /// Counters.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    /// Parity the next group will carry (before the per-group caps), in packets.
    pub fn current_parity(&self) -> u8 {
        self.policy
            .as_ref()
            .map_or(self.fixed_parity, ParityPolicy::parity)
    }

    /// Feeds the peer's loss report, received at `now`, to the adaptive policy
    /// (ignored otherwise).
    pub fn handle_loss_report(&mut self, now: Instant, report: &LossReport) {
        if let Some(p) = &mut self.policy {
            if p.on_report(now, report) {
                self.stats.policy_changes = p.changes();
            }
        }
    }

    /// Traffic shape: datagrams pushed per `group_wait` at the smoothed rate
    /// (`group_wait / smoothed gap`); infinite before the second datagram or with
    /// a zero gap. Below 1 the traffic is *sparse*: a group would wait for
    /// datagrams that are unlikely to come.
    pub fn datagrams_per_group_wait(&self) -> f64 {
        if self.last_push.is_none() || self.gap_s <= 0.0 {
            return f64::INFINITY;
        }
        self.group_wait.as_secs_f64() / self.gap_s
    }

    /// Whether the traffic is sparse (fewer than one datagram per `group_wait`):
    /// then [`FecEncoder::flush`] closes the open group at once.
    pub fn is_sparse(&self) -> bool {
        self.datagrams_per_group_wait() < 1.0
    }

    /// Tells the encoder the caller has nothing more to push now (e.g. the ARQ's
    /// `poll_transmit` returned false). In native framing, when the traffic is
    /// sparse ([`FecEncoder::is_sparse`]), the open group closes at once with its
    /// parity (a copy for a one-shard group, Reed–Solomon for more; adaptive
    /// schemes give it [`ParityPolicy::parity_for`] its size; counted in
    /// `groups_closed_sparse`), so one loss is repaired within one inter-packet
    /// gap instead of waiting for the ARQ's timeout. Returns whether a group was
    /// closed (its parity waits in [`FecEncoder::poll_transmit`]).
    ///
    /// kcp-go framing never closes early: kcp-go derives a group from
    /// `seqid / (data_shards + parity_shards)` and decodes only full fixed-shape
    /// groups, so a partial group's parity would be useless to it (spec `kcp.md`
    /// §2); its groups keep closing only when full.
    pub fn flush(&mut self, now: Instant) -> bool {
        self.handle_timeout(now);
        if self.framing != Framing::Native || self.open.is_none() || !self.is_sparse() {
            return false;
        }
        self.stats.groups_closed_sparse += 1;
        self.close_group_with(Close::Sparse);
        self.update_retained();
        true
    }

    /// Tells an adaptive encoder that the caller has nothing more to push now
    /// *and nothing waiting to be sent* (the ARQ's send queue is empty: every
    /// message written so far is on the wire, so the next datagram waits for the
    /// application or the peer). In native framing the open group then closes
    /// at once, as [`FecEncoder::flush`] does for sparse traffic, with
    /// [`ParityPolicy::parity_for`] its size, *if* the parity credit pays all of
    /// that parity (it is not sparse traffic: its bytes count); a group the
    /// credit could protect only in part keeps waiting for `group_wait`, as
    /// more shards per parity byte protect it better. Returns whether a group
    /// was closed.
    ///
    /// Why: a burst's last group otherwise keeps its parity for up to
    /// `group_wait`, while the burst's later segments are acknowledged at once.
    /// A datagram of that group lost (or late) and rebuilt from parity is then
    /// acknowledged `group_wait` after the segments sent behind it, so their
    /// acks reach the sender first and, from two of them on, fast retransmit
    /// (spec `kcp.md` §1, retransmission; RFC 5681 §3.2 counts duplicate acks the
    /// same way) resends what FEC already repaired; and the repair itself, and
    /// every message waiting behind it for in-order delivery, is `group_wait`
    /// (plus timer granularity) late. Waiting buys nothing here: no datagram
    /// can join the group before the peer or the application acts. A sender
    /// whose queue is not empty (window- or cwnd-limited bulk data) keeps
    /// waiting, as its next datagrams follow as soon as acks open the window.
    ///
    /// Fixed schemes keep their shape's overhead (a partial group still waits
    /// `group_wait` for company); kcp-go framing never closes early (see
    /// [`FecEncoder::flush`]).
    pub fn flush_idle(&mut self, now: Instant) -> bool {
        self.handle_timeout(now);
        if self.framing != Framing::Native {
            return false;
        }
        let (Some(g), Some(policy)) = (&self.open, &self.policy) else {
            return false;
        };
        // Only when the credit pays this group's whole parity: a group closed
        // with less is weaker than one that waits `group_wait` for company.
        let wanted = usize::from(policy.parity_for(g.count).min(g.parity));
        let credit = (self.parity_credit + g.data_bytes).min(PARITY_CREDIT_MAX.max(g.data_bytes));
        if credit / g.max_len < wanted {
            return false;
        }
        self.close_group_with(Close::Idle);
        self.update_retained();
        true
    }

    fn record_push(&mut self, now: Instant) {
        if let Some(last) = self.last_push {
            let cap = 4.0 * self.group_wait.as_secs_f64();
            let gap = now.saturating_duration_since(last).as_secs_f64().min(cap);
            self.gap_s += GAP_WEIGHT * (gap - self.gap_s);
        } else {
            // First datagram: assume sparse until a second one says otherwise.
            self.gap_s = 4.0 * self.group_wait.as_secs_f64();
        }
        self.last_push = Some(now);
    }

    /// Frames `datagram` as a data shard (sent at once by the next
    /// [`FecEncoder::poll_transmit`]) and, when its group fills, its parity.
    ///
    /// # Errors
    /// [`EncodeError::TooLarge`] above [`wire::MAX_PAYLOAD`] bytes.
    pub fn push(&mut self, now: Instant, datagram: &[u8]) -> Result<(), EncodeError> {
        if datagram.len() > MAX_PAYLOAD {
            return Err(EncodeError::TooLarge(datagram.len()));
        }
        self.handle_timeout(now);
        self.record_push(now);
        let parity = self.current_parity();
        let len = datagram.len() + 2;
        if self.open.is_some() && !self.shared_budget.try_reserve(len) {
            self.close_for_budget();
        }
        // From here an open group means `len` bytes are reserved for this shard.
        let mut group = match self.open.take() {
            Some(g) => g,
            None if parity == 0 => {
                // Pass-through: no group, no retention, no wait.
                self.emit_ungrouped(datagram);
                return Ok(());
            }
            None if !self.shared_budget.try_reserve(len) => {
                self.stats.ungrouped_for_budget += 1;
                self.emit_ungrouped(datagram);
                return Ok(());
            }
            None => OpenGroup {
                base: self.next_seq,
                count: 0,
                parity,
                deadline: now + self.group_wait,
                max_len: 0,
                data_bytes: 0,
            },
        };
        let index = group.count;
        self.emit_data(
            group.base.wrapping_add(u32::from(index)),
            index,
            true,
            datagram,
        );
        let slot = usize::from(index);
        if self.shards.len() <= slot {
            self.shards.resize_with(slot + 1, Vec::new);
        }
        let shard = &mut self.shards[slot];
        shard.clear();
        // Fits: datagram.len() ≤ MAX_PAYLOAD.
        shard.extend_from_slice(&((datagram.len() + 2) as u16).to_le_bytes());
        shard.extend_from_slice(datagram);
        group.count += 1;
        group.max_len = group.max_len.max(shard.len());
        group.data_bytes += shard.len();
        let full = group.count >= self.data_shards;
        self.open = Some(group);
        if full {
            self.close_group();
        }
        self.update_retained();
        Ok(())
    }

    /// Frames `datagram` like [`FecEncoder::push`], except when it needs no group
    /// — native framing, parity 0, no open group and nothing queued ahead of it:
    /// then its data shard is appended to `out` (after whatever `out` holds, e.g.
    /// a conv prefix) and `Ok(true)` is returned. That zero-loss pass-through
    /// costs no queue, no second copy, no retention and no timer. `Ok(false)`:
    /// the datagram was queued as by `push`; drain [`FecEncoder::poll_transmit`].
    ///
    /// # Errors
    /// [`EncodeError::TooLarge`] above [`wire::MAX_PAYLOAD`] bytes.
    pub fn push_or_append(
        &mut self,
        now: Instant,
        datagram: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool, EncodeError> {
        if datagram.len() > MAX_PAYLOAD {
            return Err(EncodeError::TooLarge(datagram.len()));
        }
        self.handle_timeout(now);
        let direct = self.framing == Framing::Native
            && self.open.is_none()
            && self.queue.is_empty()
            && self.current_parity() == 0;
        if !direct {
            return self.push(now, datagram).map(|()| false);
        }
        self.record_push(now);
        let seq = self.take_seq(1);
        wire::append_native_ungrouped(seq, datagram, out);
        self.stats.data_shards_sent += 1;
        Ok(true)
    }

    /// Moves the next datagram to send into `out`; `false` when none is queued.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        self.handle_timeout(now);
        let sent = self.queue.pop_into(out);
        self.update_retained();
        sent
    }

    /// When the open group must be closed (its `group_wait` deadline); `None` when
    /// no group is open, e.g. always when parity is 0.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.framing {
            Framing::Native => self.open.as_ref().map(|g| g.deadline),
            // kcp-go groups are fixed-shape: they close only when full.
            Framing::KcpGo { .. } => None,
        }
    }

    /// Closes the open group if its deadline has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_some_and(|d| now >= d) {
            self.close_group();
            self.update_retained();
        }
    }

    /// Reserves `n` consecutive `seq` values and returns the first.
    fn take_seq(&mut self, n: u32) -> u32 {
        let seq = self.next_seq;
        self.next_seq = match self.seq_modulus {
            Some(m) => (seq + n) % m,
            None => seq.wrapping_add(n),
        };
        seq
    }

    fn next_nonce(&mut self) -> [u8; 16] {
        // splitmix64: cheap, well-spread, deterministic for tests.
        let mut out = [0; 16];
        for half in out.chunks_exact_mut(8) {
            self.nonce = self.nonce.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.nonce;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            half.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        out
    }

    /// Frees the open group's reservation: native framing closes it early with
    /// parity over what it holds; kcp-go groups have a fixed shape, so a partial
    /// one is abandoned without parity and its whole `seq` range skipped.
    fn close_for_budget(&mut self) {
        self.stats.groups_closed_for_budget += 1;
        match self.framing {
            Framing::Native => self.close_group(),
            Framing::KcpGo { .. } => {
                if let Some(g) = self.open.take() {
                    self.shared_budget.release(g.data_bytes);
                    self.take_seq(u32::from(self.data_shards) + u32::from(self.fixed_parity));
                }
            }
        }
    }

    /// Sends `datagram` outside any group. In kcp-go framing it takes a whole
    /// group's `seq` range, as the peer derives groups from `seqid / (ds+ps)`.
    fn emit_ungrouped(&mut self, datagram: &[u8]) {
        let n = match self.framing {
            Framing::Native => 1,
            Framing::KcpGo { .. } => u32::from(self.data_shards) + u32::from(self.fixed_parity),
        };
        let seq = self.take_seq(n);
        self.emit_data(seq, 0, false, datagram);
        self.update_retained();
    }

    fn emit_data(&mut self, seq: u32, index: u8, retained: bool, payload: &[u8]) {
        let nonce = self.next_nonce();
        let mut buf = self.queue.buffer();
        wire::write_data(self.framing, nonce, seq, index, retained, payload, &mut buf);
        self.stats.data_shards_sent += 1;
        self.enqueue(buf);
    }

    fn enqueue(&mut self, buf: Vec<u8>) {
        self.queue.push(buf);
        self.stats.tx_queue_dropped = self.queue.dropped();
    }

    /// Parity for this group after the caps: parity bytes ≤ the data bytes of
    /// the stream so far (adaptive only: fixed means fixed; not for a group
    /// closed early for sparse traffic, whose few bytes the idle link carries
    /// anyway) and the whole group within the budget. An adaptive group adds
    /// its data bytes to the parity credit and its parity spends from it: a
    /// group of one request among seven acks may borrow what the full groups
    /// before it left, and a stream of such groups alone gets one parity shard
    /// each.
    fn capped_parity(&mut self, g: &OpenGroup, wanted: u8, sparse: bool) -> u8 {
        let mut p = usize::from(wanted);
        let budget_shards = (self.budget / g.max_len).saturating_sub(usize::from(g.count));
        // Parity only takes room the transmit queue has (headers included), so
        // it never pushes a queued data shard out of it.
        let wire_len = g.max_len + self.framing.overhead();
        let queue_shards = (self.budget.saturating_sub(self.queue.bytes()) / wire_len)
            .min(TX_QUEUE_LIMIT.saturating_sub(self.queue.len()));
        p = p.min(budget_shards).min(queue_shards);
        if self.policy.is_some() && !sparse {
            // The group's own data bytes always count in full, so shards too
            // long for the saved-up credit still get parity up to their size.
            let cap = PARITY_CREDIT_MAX.max(g.data_bytes);
            self.parity_credit = (self.parity_credit + g.data_bytes).min(cap);
            p = p.min(self.parity_credit / g.max_len);
            self.parity_credit -= p * g.max_len;
        }
        // p ≤ g.parity, a u8.
        p as u8
    }

    fn close_group(&mut self) {
        self.close_group_with(Close::Due);
    }

    /// Closes the open group with its parity (see [`Close`]).
    fn close_group_with(&mut self, why: Close) {
        let Some(g) = self.open.take() else { return };
        self.shared_budget.release(g.data_bytes);
        let k = g.count;
        let wanted = match &self.policy {
            Some(policy) if why != Close::Due => policy.parity_for(k).min(g.parity),
            _ => g.parity,
        };
        let p = self.capped_parity(&g, wanted, why == Close::Sparse);
        if p < wanted {
            self.stats.parity_capped += 1;
        }
        // The group owns seq base..base+k+p; a kcp-go group always owns its full
        // fixed shape so that `seqid / (ds+ps)` stays the group on the peer.
        let owned = match self.framing {
            Framing::Native => k + p,
            Framing::KcpGo { .. } => k + g.parity,
        };
        self.take_seq(u32::from(owned));
        if p > 0 && self.encode_parity(k, p, g.max_len) {
            for j in 0..p {
                let seq = g.base.wrapping_add(u32::from(k + j));
                let nonce = self.next_nonce();
                let mut buf = self.queue.buffer();
                let body = &self.parity[usize::from(j)];
                wire::write_parity(self.framing, nonce, seq, k + j, k, p, body, &mut buf);
                self.enqueue(buf);
            }
            self.stats.parity_shards_sent += u64::from(p);
            self.stats.groups_encoded += 1;
            self.stats.max_parity_observed = self.stats.max_parity_observed.max(p);
        }
    }

    /// Pads the open group's `k` shards to `len` bytes and computes `p` parity
    /// shards into `self.parity`; `false` if the codec refused.
    fn encode_parity(&mut self, k: u8, p: u8, len: usize) -> bool {
        let (k, p) = (usize::from(k), usize::from(p));
        for s in &mut self.shards[..k] {
            s.resize(len, 0);
        }
        if self.parity.len() < p {
            self.parity.resize_with(p, Vec::new);
        }
        for b in &mut self.parity[..p] {
            b.clear();
            b.resize(len, 0);
        }
        // Shapes are validated at construction, so the codec exists and accepts
        // equal-length shards; a refusal only costs this group its parity.
        self.codecs.encode(&self.shards[..k], &mut self.parity[..p])
    }

    fn update_retained(&mut self) {
        let open = self.open.as_ref().map_or(0, |g| g.data_bytes);
        let r = open + self.queue.bytes();
        self.stats.retained_bytes = r;
        self.stats.peak_retained_bytes = self.stats.peak_retained_bytes.max(r);
    }
}

impl Drop for FecEncoder {
    /// Returns the open group's bytes to the shared budget.
    fn drop(&mut self) {
        if let Some(g) = &self.open {
            self.shared_budget.release(g.data_bytes);
        }
    }
}
