//! Sparse traffic: a window-1 exchange of 64-byte messages between two
//! [`Session`]s over the seeded simulated link (`support`), 10 ms each way. Each
//! datagram's group closes as soon as KCP has nothing more to send
//! (`FecEncoder::flush`), so a lost datagram is rebuilt from the parity that
//! left with it instead of being retransmitted after an RTO.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use petrel_proto::fec::{FecScheme, LossReport, ParityPolicy};
use petrel_proto::session::{Session, SessionStats};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{Link, LinkConfig, Sim};

const FIXED: FecScheme = FecScheme::Fixed {
    data_shards: 8,
    parity_shards: 2,
};
const PAYLOAD: usize = 64;

fn session(scheme: FecScheme, now: Instant) -> Session {
    support::fec_session(scheme, 0x5ba2_5e00, now)
}

/// Retransmissions of data segments by both ARQs.
fn retransmissions(s: &SessionStats) -> u64 {
    s.kcp.retransmissions_timeout + s.kcp.retransmissions_fast
}

/// Data shards both decoders rebuilt.
fn recoveries(s: &SessionStats) -> u64 {
    s.fec.unwrap().decoder.shards_recovered
}

struct Echo {
    sim: Sim<Session>,
    round_trips: u64,
}

impl Echo {
    /// `loss` each way; with `single_losses`, no two drops of one direction are
    /// closer than 25 ms, so no group (sent within one instant) loses two shards.
    fn new(scheme: FecScheme, loss: f64, single_losses: bool, seed: u64) -> Self {
        let start = Instant::now();
        let link = LinkConfig {
            loss,
            ..LinkConfig::clean(Duration::from_millis(10))
        };
        let mut ab = Link::new(link, seed);
        let mut ba = Link::new(link, seed ^ 0x5a5a);
        if single_losses {
            ab.min_loss_gap = Duration::from_millis(25);
            ba.min_loss_gap = Duration::from_millis(25);
        }
        let mut sim = Sim::new(
            start,
            session(scheme, start),
            session(scheme, start),
            ab,
            ba,
        );
        sim.a.send(&[0; PAYLOAD]).unwrap();
        Echo {
            sim,
            round_trips: 0,
        }
    }

    /// Runs until `round_trips` more echoes came back; each message is sent when
    /// the previous echo arrived (window 1) and checked.
    fn run(&mut self, round_trips: u64) {
        let target = self.round_trips + round_trips;
        let limit = self.sim.now + Duration::from_secs(600);
        while self.round_trips < target {
            assert!(self.sim.step(limit), "stalled at {}", self.round_trips);
            while let Some(m) = self.sim.b.recv() {
                self.sim.b.send(&m).unwrap();
            }
            while let Some(m) = self.sim.a.recv() {
                let n = self.round_trips.to_le_bytes();
                assert_eq!(&m[..8], &n[..], "echo out of order");
                self.round_trips += 1;
                let mut next = [0; PAYLOAD];
                next[..8].copy_from_slice(&self.round_trips.to_le_bytes());
                self.sim.a.send(&next).unwrap();
            }
        }
    }

    fn totals(&self) -> (u64, u64, u64) {
        let (a, b) = (self.sim.a.stats(), self.sim.b.stats());
        let parity =
            a.fec.unwrap().encoder.parity_shards_sent + b.fec.unwrap().encoder.parity_shards_sent;
        (
            retransmissions(&a) + retransmissions(&b),
            recoveries(&a) + recoveries(&b),
            parity,
        )
    }
}

#[test]
fn fixed_fec_repairs_every_single_loss_of_a_window_one_stream() {
    for seed in [1, 2, 3] {
        let mut echo = Echo::new(FIXED, 0.05, true, seed);
        echo.run(1000);
        let (retx, recovered, parity) = echo.totals();
        let dropped = echo.sim.ab.dropped + echo.sim.ba.dropped;
        let a = echo.sim.a.stats().fec.unwrap().encoder;
        assert!(dropped >= 50, "seed {seed}: {dropped} drops");
        assert!(recovered > 0 && parity > 0, "seed {seed}");
        assert!(a.groups_closed_sparse > 0, "seed {seed}: {a:?}");
        assert_eq!(
            retx, 0,
            "seed {seed}: every single loss must be repaired by FEC \
             ({recovered} recoveries, {dropped} drops)"
        );
    }
}

#[test]
fn adaptive_fec_repairs_every_single_loss_once_it_protects() {
    for seed in [4, 5] {
        let mut echo = Echo::new(FecScheme::ADAPTIVE_DEFAULT, 0.05, true, seed);
        // Until the first loss reports arrive, parity is 0 and the ARQ repairs.
        let mut warm_up = 0;
        while echo.sim.a.stats().fec.unwrap().current_parity == 0
            || echo.sim.b.stats().fec.unwrap().current_parity == 0
        {
            echo.run(10);
            warm_up += 10;
            assert!(warm_up < 2000, "seed {seed}: parity never rose");
        }
        let (retx0, recovered0, _) = echo.totals();
        echo.run(1000);
        let (retx, recovered, _) = echo.totals();
        assert!(recovered - recovered0 >= 20, "seed {seed}: {recovered}");
        assert_eq!(
            retx - retx0,
            0,
            "seed {seed}: single losses retransmitted after warm-up"
        );
    }
}

#[test]
fn adaptive_fec_sends_no_parity_without_loss() {
    let mut echo = Echo::new(FecScheme::ADAPTIVE_DEFAULT, 0.0, false, 7);
    echo.run(500);
    let (retx, recovered, parity) = echo.totals();
    assert_eq!((retx, recovered, parity), (0, 0, 0));
    let reports = echo.sim.b.stats().fec.unwrap().loss_reports_sent;
    assert!(reports > 0, "the receiver must report");
}

/// Steady 5 % loss (not spaced) over about 30 s of a window-1 exchange: each
/// side's policy changes parity at most once per 5 s on average instead of
/// flapping several times a second.
#[test]
fn adaptive_policy_does_not_flap_under_steady_loss() {
    for seed in [8, 9] {
        let mut echo = Echo::new(FecScheme::ADAPTIVE_DEFAULT, 0.05, false, seed);
        echo.run(1500);
        assert!(echo.sim.elapsed() >= Duration::from_secs(25));
        for s in [echo.sim.a.stats(), echo.sim.b.stats()] {
            let e = s.fec.unwrap().encoder;
            assert!(e.policy_changes <= 6, "seed {seed}: {e:?}");
            assert!(e.parity_shards_sent > 0, "seed {seed}: {e:?}");
        }
        // Most losses are repaired by FEC, not by the ARQ.
        let (retx, recovered, _) = echo.totals();
        assert!(recovered > 4 * retx, "seed {seed}: {recovered} vs {retx}");
    }
}

/// The policy alone, fed what a sparse sender sees: a report of ~20 shards every
/// 100 ms at 5 % Bernoulli loss. 60 s of it move the full-group parity a few
/// times at most (the old per-report smoothing and no dwell time flapped tens of
/// times); a one-shard group closed early gets two parity shards (a single copy
/// is not enough for the 1e-3 target at 5 %).
#[test]
fn policy_with_small_reports_settles() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut policy = ParityPolicy::new(8, 4, 1e-3);
    let t0 = Instant::now();
    let mut settled = Vec::new();
    for i in 0..600u32 {
        let now = t0 + Duration::from_millis(100) * i;
        let expected = rng.gen_range(15..=25u32);
        let received = (0..expected).filter(|_| rng.gen::<f64>() >= 0.05).count() as u32;
        policy.on_report(now, &LossReport { expected, received });
        if i >= 300 {
            settled.push((policy.parity(), policy.parity_for(1)));
        }
    }
    assert!(policy.changes() <= 3, "{} changes", policy.changes());
    assert!(
        settled
            .iter()
            .all(|&(full, one)| (3..=4).contains(&full) && one == 2),
        "{settled:?}"
    );
}

mod encoder {
    use std::time::{Duration, Instant};

    use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing};

    use super::FIXED;

    fn drain(enc: &mut FecEncoder, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut all = Vec::new();
        while enc.poll_transmit(now, &mut out) {
            all.push(out.clone());
        }
        all
    }

    /// One datagram every 20 ms: each flush closes its one-shard group with two
    /// parity shards (fixed 8+2); losing the data shard, the decoder rebuilds it
    /// from either parity shard at once.
    #[test]
    fn sparse_flush_closes_a_one_shard_group_at_once() {
        let cfg = FecConfig {
            scheme: FIXED,
            ..FecConfig::default()
        };
        let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
        let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
        let t0 = Instant::now();
        for i in 0..20u8 {
            let now = t0 + Duration::from_millis(20) * u32::from(i);
            enc.push(now, &[i; 64]).unwrap();
            assert!(enc.is_sparse());
            assert!(enc.flush(now), "datagram {i}");
            assert_eq!(enc.poll_timeout(), None, "no group left open");
            let shards = drain(&mut enc, now);
            assert_eq!(shards.len(), 3, "data + 2 parity");
            // The data shard is lost; the first parity shard alone rebuilds it.
            dec.input(now, &shards[1]).unwrap();
            let mut got = Vec::new();
            assert!(dec.poll_datagram(&mut got));
            assert_eq!(got, vec![i; 64]);
        }
        let s = enc.stats();
        assert_eq!((s.groups_closed_sparse, s.groups_encoded), (20, 20));
        assert_eq!(dec.stats().shards_recovered, 20);
    }

    /// Dense traffic (8 datagrams per ms) is not sparse: flush leaves the group
    /// open to fill, and groups close full.
    #[test]
    fn dense_traffic_keeps_groups_open_until_full() {
        let cfg = FecConfig {
            scheme: FIXED,
            ..FecConfig::default()
        };
        let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
        let t0 = Instant::now();
        for ms in 0..50u32 {
            let now = t0 + Duration::from_millis(1) * ms;
            for _ in 0..8 {
                enc.push(now, &[1; 500]).unwrap();
                // The first datagrams are taken as sparse until the rate is known.
                assert!(ms < 10 || !enc.flush(now), "ms {ms}");
            }
            drain(&mut enc, now);
        }
        assert!(!enc.is_sparse());
        assert_eq!(enc.stats().groups_closed_sparse, 0);
    }

    /// kcp-go framing never closes a group early: kcp-go decodes only its fixed
    /// shape, so the bytes on the wire stay what kcp-go sends.
    #[test]
    fn kcp_go_framing_never_closes_early() {
        let cfg = FecConfig {
            scheme: FecScheme::Fixed {
                data_shards: 10,
                parity_shards: 3,
            },
            ..FecConfig::default()
        };
        let mut enc = FecEncoder::new(&cfg, Framing::KcpGo { crypt_header: true }).unwrap();
        let t0 = Instant::now();
        for i in 0..9u32 {
            let now = t0 + Duration::from_millis(50) * i;
            enc.push(now, &[7; 100]).unwrap();
            assert!(!enc.flush(now));
            assert_eq!(drain(&mut enc, now).len(), 1, "data shard only");
        }
        let now = t0 + Duration::from_secs(1);
        enc.push(now, &[7; 100]).unwrap();
        assert_eq!(drain(&mut enc, now).len(), 4, "the full group's parity");
        assert_eq!(enc.stats().groups_closed_sparse, 0);
    }
}
