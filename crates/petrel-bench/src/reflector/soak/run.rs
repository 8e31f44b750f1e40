//! One soak against a running reflector child: every device logs in; the
//! receive, heartbeat and churn threads start; the speakers talk through a
//! warm-up, then through the measurement, each round tallied once its
//! datagrams have had time to arrive; the child's RSS and descriptors are
//! read after the warm-up and at the end, with the churn paused (no admin
//! request open) so the counts compare.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use petrel_reflector::codec::{encode_into, PacketType};
use petrel_sys::proc::{open_fds, rss_bytes, udp_rcvbuf_errors};

use super::super::child::ServerChild;
use super::super::device::{login_all, make_device, unix_ns, Device, MARKER};
use super::super::schedule::Schedule;
use super::super::LoadError;
use super::actions::{Actor, Slot};
use super::book::FrameBook;
use super::ledger::{DropCounters, Ledger, Tally, View};
use super::plan::{Action, Churn};
use super::receivers::{receive_loop, RecvTally, Swap, RECV_THREAD};
use super::{SoakConfig, FINALIZE_MS, RSS_GROWTH_LIMIT_PCT, SETTLE_AFTER_MS};
use crate::record::reflector_soak::{SoakChurn, SoakResult};

/// Receive threads.
const RECEIVER_THREADS: usize = 2;
/// Pending socket swaps per receive thread.
const SWAP_QUEUE: usize = 1024;
/// How long the churn is paused before the child's descriptors are
/// counted, so the last admin connection is closed on its side too.
const QUIET: Duration = Duration::from_millis(500);
/// Heartbeat period of every device (the reflector drops a device after 20 s).
const HEARTBEAT_PERIOD: Duration = Duration::from_secs(2);

/// The child's counters the soak compares from start to end.
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    frames_expired: u64,
    frames_dropped: u64,
    floor_limit_drops: u64,
    write_errors: u64,
    send_ban_drops: u64,
    reloads_skipped: u64,
    rcvbuf_errors: u64,
}

impl Counters {
    fn read(child: &ServerChild) -> Result<Self, LoadError> {
        let v = child.stats()?;
        let n = |a: &str, k: &str| v[a][k].as_u64().unwrap_or(0);
        Ok(Self {
            frames_expired: n("fanout", "frames_expired"),
            frames_dropped: n("fanout", "frames_dropped"),
            floor_limit_drops: n("session", "floor_talk_limit_cuts")
                + n("session", "floor_holdoff_drops"),
            write_errors: n("fanout", "write_errors"),
            send_ban_drops: n("session", "send_ban_drops"),
            reloads_skipped: v["reloads_skipped"].as_u64().unwrap_or(0),
            rcvbuf_errors: udp_rcvbuf_errors().unwrap_or(0),
        })
    }

    fn since(&self, start: &Self) -> Self {
        Self {
            frames_expired: self.frames_expired.saturating_sub(start.frames_expired),
            frames_dropped: self.frames_dropped.saturating_sub(start.frames_dropped),
            floor_limit_drops: self
                .floor_limit_drops
                .saturating_sub(start.floor_limit_drops),
            write_errors: self.write_errors.saturating_sub(start.write_errors),
            send_ban_drops: self.send_ban_drops.saturating_sub(start.send_ban_drops),
            reloads_skipped: self.reloads_skipped.saturating_sub(start.reloads_skipped),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(start.rcvbuf_errors),
        }
    }
}

/// The child's RSS (bytes) and open descriptors.
fn resources(pid: u32) -> (u64, usize) {
    (rss_bytes(pid).unwrap_or(0), open_fds(pid).unwrap_or(0))
}

/// A round sent during the measurement, waiting to be tallied.
struct Pending {
    round: u64,
    at_ms: u64,
    sent: Vec<bool>,
}

/// Runs the soak of `cfg` against `child`; `group_ids` are the store ids of
/// the groups by index.
pub(super) fn soak(
    cfg: &SoakConfig,
    child: &ServerChild,
    group_ids: &[i64],
) -> Result<SoakResult, LoadError> {
    let n = cfg.load.devices;
    let groups = cfg.load.groups;
    let devices: Vec<Device> = (0..n)
        .map(|i| make_device(i, child.udp))
        .collect::<Result<_, _>>()?;
    let failed = login_all(&devices);
    if failed > 0 {
        return Err(LoadError::Login(failed));
    }
    let slots: Vec<Slot> = devices
        .into_iter()
        .map(|d| {
            d.sock.set_nonblocking(true)?;
            Ok(Mutex::new(Some(Arc::new(d))))
        })
        .collect::<Result<_, LoadError>>()?;

    let interval = Duration::from_millis(cfg.load.interval_ms);
    let rounds_kept = usize::try_from(FINALIZE_MS / cfg.load.interval_ms).unwrap_or(1) + 8;
    let book = FrameBook::new(rounds_kept, groups, n);
    let settle_before = cfg.settle_before_ms();
    let ledger = Mutex::new(Ledger::new(n, groups, settle_before, SETTLE_AFTER_MS));
    let gate = Mutex::new(());
    let stage = unix_ns();
    let stop = AtomicBool::new(false);
    let stop_churn = AtomicBool::new(false);
    let t0 = Instant::now();
    let pid = child.pid();

    let (txs, rxs): (Vec<SyncSender<Swap>>, Vec<Receiver<Swap>>) = (0..RECEIVER_THREADS)
        .map(|_| mpsc::sync_channel(SWAP_QUEUE))
        .unzip();

    std::thread::scope(|s| -> Result<SoakResult, LoadError> {
        let (book, ledger, gate, stop, stop_churn, slots) =
            (&book, &ledger, &gate, &stop, &stop_churn, &slots);
        // Stops every thread on each way out of this scope, `?` included.
        struct StopOnDrop<'a>(&'a AtomicBool, &'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
                self.1.store(true, Relaxed);
            }
        }
        let stopper = StopOnDrop(stop, stop_churn);
        let mut receivers = Vec::new();
        for rx in rxs {
            receivers.push(
                std::thread::Builder::new()
                    .name(RECV_THREAD.into())
                    .spawn_scoped(s, move || receive_loop(&rx, book, stage, stop))?,
            );
        }
        for (d, slot) in slots.iter().enumerate() {
            let socket = slot.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let _ = txs[d % txs.len()].send(Swap { device: d, socket });
        }
        std::thread::Builder::new()
            .name("lg-soak-heartbeat".into())
            .spawn_scoped(s, move || heartbeats(slots, stop))?;
        let txs = &txs;
        let churn = std::thread::Builder::new()
            .name("lg-soak-churn".into())
            .spawn_scoped(s, move || {
                let mut actor = Actor {
                    child,
                    server: child.udp,
                    group_ids,
                    slots,
                    swaps: txs,
                    ledger,
                    t0,
                    churn: SoakChurn::default(),
                };
                let mut plan = Churn::new(cfg.seed, n, groups, cfg.churn_per_s);
                churn_loop(&mut plan, &mut actor, gate, stop_churn);
                actor.churn
            })?;

        let mut voice = Voice::new(cfg, slots);
        let now_ms = || u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut schedule = Schedule::new(Instant::now(), interval);
        let mut k = 0u64;
        while t0.elapsed() < Duration::from_secs(cfg.warmup_s) {
            wait_for(&schedule, k);
            voice.round(0, k, groups);
            k += 1;
        }
        let (start, (rss0, fds0)) = {
            let _paused = gate.lock().unwrap_or_else(PoisonError::into_inner);
            std::thread::sleep(QUIET);
            let r = resources(pid);
            (Counters::read(child)?, r)
        };
        schedule.restart(Instant::now(), k);
        let measure_start = Instant::now();
        let mut pending: std::collections::VecDeque<Pending> = Default::default();
        let mut tally = Tally::new(n);
        let mut views: Vec<View> = Vec::with_capacity(n);
        let mut bits = Vec::new();
        let mut frames_sent = 0u64;
        let mut round = 0u64;
        let mut finalize = |p: &Pending, tally: &mut Tally| {
            let have = book.take(p.round, &mut bits);
            {
                let l = ledger.lock().unwrap_or_else(PoisonError::into_inner);
                views.clear();
                views.extend((0..n).map(|d| l.view(d, p.at_ms)));
            }
            let none = vec![0u64; n.div_ceil(64)];
            for (g, &sent) in p.sent.iter().enumerate() {
                if sent {
                    let got = if have { &bits[g] } else { &none };
                    tally.frame(&views, g, g, got);
                }
            }
        };
        while measure_start.elapsed() < Duration::from_secs(cfg.soak_s) {
            wait_for(&schedule, k);
            // The slot reused for this round must have been tallied first.
            while pending
                .front()
                .is_some_and(|p| p.round + rounds_kept as u64 <= round)
            {
                if let Some(p) = pending.pop_front() {
                    finalize(&p, &mut tally);
                }
            }
            book.open(round);
            let at_ms = now_ms();
            let sent = voice.round(stage, round, groups);
            frames_sent += sent.iter().filter(|&&s| s).count() as u64;
            pending.push_back(Pending { round, at_ms, sent });
            while pending
                .front()
                .is_some_and(|p| p.at_ms + FINALIZE_MS <= now_ms())
            {
                if let Some(p) = pending.pop_front() {
                    finalize(&p, &mut tally);
                }
            }
            k += 1;
            round += 1;
        }
        stop_churn.store(true, Relaxed);
        let churn = churn
            .join()
            .map_err(|_| LoadError::Invalid("churn thread panicked".into()))?;
        if let Some(last) = pending.back() {
            let wait = (last.at_ms + FINALIZE_MS).saturating_sub(now_ms());
            std::thread::sleep(Duration::from_millis(wait));
        }
        for p in pending.drain(..) {
            finalize(&p, &mut tally);
        }
        std::thread::sleep(QUIET);
        let (rss1, fds1) = resources(pid);
        let delta = Counters::read(child)?.since(&start);
        drop(stopper);
        let mut recv = RecvTally::new()?;
        for r in receivers {
            let t = r
                .join()
                .map_err(|_| LoadError::Invalid("receive thread panicked".into()))??;
            recv.merge(&t);
        }
        Ok(result(
            &tally,
            &recv,
            churn,
            frames_sent,
            &delta,
            (rss0, fds0),
            (rss1, fds1),
        ))
    })
}

/// Sleeps until round `k` of `schedule` is due.
fn wait_for(schedule: &Schedule, k: u64) {
    if let Some(wait) = schedule.due(k).checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
}

/// The speakers' side: one voice frame per group per round.
struct Voice<'a> {
    slots: &'a [Slot],
    payload: Vec<u8>,
    packet: Vec<u8>,
}

impl<'a> Voice<'a> {
    fn new(cfg: &SoakConfig, slots: &'a [Slot]) -> Self {
        let mut payload = vec![0u8; cfg.load.payload];
        payload[..8].copy_from_slice(MARKER);
        Self {
            slots,
            payload,
            packet: Vec::with_capacity(90 + cfg.load.payload),
        }
    }

    /// Sends round `k` of `stage` from every speaker (device `g` for group
    /// `g`); returns which frames left.
    fn round(&mut self, stage: u64, k: u64, groups: usize) -> Vec<bool> {
        (0..groups)
            .map(|g| {
                let slot = self.slots[g].lock().unwrap_or_else(PoisonError::into_inner);
                let Some(d) = slot.as_ref() else {
                    return false;
                };
                self.payload[8..16].copy_from_slice(&stage.to_be_bytes());
                self.payload[16..24].copy_from_slice(&k.to_be_bytes());
                self.payload[24..32].copy_from_slice(&unix_ns().to_be_bytes());
                self.payload[32..40].copy_from_slice(&(g as u64).to_be_bytes());
                let mut h = d.header.clone();
                h.packet_type = PacketType::Voice;
                encode_into(&h, &self.payload, &mut self.packet).is_ok()
                    && d.sock.send(&self.packet).is_ok()
            })
            .collect()
    }
}

/// Runs the churn until `stop`; each action holds `gate`, so holding it
/// pauses the churn between actions.
fn churn_loop(plan: &mut Churn, actor: &mut Actor<'_>, gate: &Mutex<()>, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        for a in plan.due(actor.now_ms()) {
            let _g = gate.lock().unwrap_or_else(PoisonError::into_inner);
            let ok = actor.act(a);
            if let Action::Login(d) | Action::Unban(d) = a {
                plan.returned(d, ok, actor.now_ms());
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Keeps every logged-in device online: each heartbeats every
/// [`HEARTBEAT_PERIOD`], the devices spread evenly over it. The slot stays
/// locked while its heartbeat is sent, so once a socket has been taken out of
/// its slot (logout, reconnect) it never heartbeats again.
fn heartbeats(slots: &[Slot], stop: &AtomicBool) {
    const TICK: Duration = Duration::from_millis(10);
    let start = Instant::now();
    let n = slots.len().max(1);
    let mut next = 0usize;
    let mut round = 1u32;
    while !stop.load(Relaxed) {
        let elapsed = start.elapsed();
        loop {
            let due = HEARTBEAT_PERIOD * round + HEARTBEAT_PERIOD.mul_f64(next as f64 / n as f64);
            if due > elapsed || slots.is_empty() {
                break;
            }
            let slot = slots[next].lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(d) = slot.as_ref() {
                let _ = d.sock.send(&d.heartbeat);
            }
            drop(slot);
            next += 1;
            if next == slots.len() {
                next = 0;
                round += 1;
            }
        }
        std::thread::sleep(TICK);
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The figures and the verdict.
fn result(
    tally: &Tally,
    recv: &RecvTally,
    churn: SoakChurn,
    frames_sent: u64,
    delta: &Counters,
    (rss0, fds0): (u64, usize),
    (rss1, fds1): (u64, usize),
) -> SoakResult {
    let loss = tally.settle(DropCounters {
        frames_expired: delta.frames_expired,
        frames_dropped: delta.frames_dropped,
        floor_limit_drops: delta.floor_limit_drops,
        write_errors: delta.write_errors,
        rcvbuf_errors: delta.rcvbuf_errors,
    });
    let missing = tally.expected - tally.received;
    let (short, worst) = tally.receivers();
    let growth = if rss0 == 0 {
        0.0
    } else {
        100.0 * (rss1 as f64 - rss0 as f64) / rss0 as f64
    };
    let mut failures = Vec::new();
    if loss.unattributed > 0 {
        failures.push(format!(
            "unattributed loss: {} datagrams",
            loss.unattributed
        ));
    }
    if rss0 == 0 || fds0 == 0 {
        failures.push("the reflector child's RSS or descriptors could not be read".into());
    }
    if growth > RSS_GROWTH_LIMIT_PCT {
        failures.push(format!(
            "reflector RSS grew {growth:.1} % ({:.1} → {:.1} MiB), over {RSS_GROWTH_LIMIT_PCT} %",
            mib(rss0),
            mib(rss1)
        ));
    }
    if fds1 > fds0 {
        failures.push(format!("reflector descriptors grew {fds0} → {fds1}"));
    }
    SoakResult {
        frames_sent,
        expected: tally.expected,
        received: tally.received,
        missing,
        loss_pct: if tally.expected == 0 {
            0.0
        } else {
            100.0 * missing as f64 / tally.expected as f64
        },
        loss,
        received_in_churn: tally.received_in_churn,
        misdelivered: tally.misdelivered,
        duplicates: recv.duplicates,
        late: recv.late,
        receivers_with_settled_loss: short,
        worst_receiver_pct: worst,
        latency_p99_ms: recv.hist.value_at_quantile(0.99) as f64 / 1000.0,
        latency_max_ms: recv.hist.max() as f64 / 1000.0,
        churn,
        reflector_frames_expired: delta.frames_expired,
        reflector_frames_dropped: delta.frames_dropped,
        reflector_write_errors: delta.write_errors,
        reflector_send_ban_drops: delta.send_ban_drops,
        reflector_reloads_skipped: delta.reloads_skipped,
        host_rcvbuf_errors: delta.rcvbuf_errors,
        server_rss_start_mb: mib(rss0),
        server_rss_end_mb: mib(rss1),
        server_rss_growth_pct: growth,
        server_fds_start: fds0,
        server_fds_end: fds1,
        recv_errors: recv.recv_errors,
        failures,
    }
}
