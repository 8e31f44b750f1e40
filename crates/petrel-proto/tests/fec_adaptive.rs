//! The adaptive parity policy over a simulated lossy link (seeded Bernoulli loss,
//! simulated clock): it settles near the parity the binomial rule predicts.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{EncoderStats, FecConfig, FecDecoder, FecEncoder, FecScheme, Framing};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

/// Runs 4 s of traffic (8 datagrams of 500 bytes per ms, a loss report every
/// 20 ms); returns the parity chosen at each report of the last 2 s and the
/// encoder's counters.
fn simulate(loss: f64, seed: u64) -> (Vec<u8>, EncoderStats, u64) {
    let cfg = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let mut dec = FecDecoder::new(&cfg, Framing::Native).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut settled = Vec::new();
    let mut delivered = 0u64;
    for ms in 0..4000u64 {
        let now = t0 + Duration::from_millis(ms);
        for i in 0..8u8 {
            enc.push(now, &[i; 500]).unwrap();
        }
        enc.handle_timeout(now + cfg.group_wait);
        while enc.poll_transmit(now + cfg.group_wait, &mut out) {
            if rng.gen::<f64>() >= loss {
                dec.input(now, &out).unwrap();
            }
        }
        while dec.poll_datagram(&mut out) {
            delivered += 1;
        }
        if ms % 20 == 19 {
            if let Some(r) = dec.take_loss_report() {
                enc.handle_loss_report(now, &r);
            }
            if ms >= 2000 {
                settled.push(enc.current_parity());
            }
        }
    }
    (settled, enc.stats(), delivered)
}

fn most_common(v: &[u8]) -> u8 {
    (0..=16u8)
        .max_by_key(|p| v.iter().filter(|&&x| x == *p).count())
        .unwrap()
}

#[test]
fn no_loss_sends_no_parity() {
    let (settled, s, delivered) = simulate(0.0, 1);
    assert!(settled.iter().all(|&p| p == 0));
    assert_eq!(
        (
            s.parity_shards_sent,
            s.policy_changes,
            s.max_parity_observed
        ),
        (0, 0, 0)
    );
    assert_eq!(delivered, 32_000);
}

#[test]
fn two_percent_loss_settles_at_two_or_three() {
    let (settled, s, _) = simulate(0.02, 2);
    assert!(settled.iter().all(|p| (2..=3).contains(p)), "{settled:?}");
    assert!(s.policy_changes < 12, "{s:?}");
}

#[test]
fn five_percent_loss_settles_at_four() {
    let (settled, s, _) = simulate(0.05, 5);
    assert_eq!(most_common(&settled), 4, "{settled:?}");
    assert!(settled.iter().all(|p| (3..=4).contains(p)), "{settled:?}");
    assert_eq!(s.max_parity_observed, 4);
    assert!(s.policy_changes <= 5, "{s:?}");
}

#[test]
fn ten_percent_loss_uses_max_parity_and_recovers_most_groups() {
    let (settled, s, delivered) = simulate(0.10, 10);
    assert!(settled.iter().all(|&p| p == 4), "{settled:?}");
    assert_eq!((s.max_parity_observed, s.policy_changes), (4, 1));
    // Without FEC 10 % of 32 000 datagrams would be missing; with 8+4 nearly
    // every group is repaired (P(>4 of 12 lost) ≈ 0.4 %).
    assert!(delivered > 31_500, "{delivered}");
}

/// Parity shards the adaptive encoder adds to each of `groups` (full groups,
/// one after another) once a 10 % loss report has raised its parity to the
/// maximum.
fn parities(groups: &[[usize; 8]]) -> Vec<u64> {
    use petrel_proto::fec::LossReport;
    let cfg = FecConfig {
        scheme: FecScheme::ADAPTIVE_DEFAULT,
        ..FecConfig::default()
    };
    let mut enc = FecEncoder::new(&cfg, Framing::Native).unwrap();
    let now = Instant::now();
    enc.handle_loss_report(
        now,
        &LossReport {
            expected: 1000,
            received: 900,
        },
    );
    assert_eq!(enc.current_parity(), 4);
    let mut out = Vec::new();
    let mut sent = 0;
    groups
        .iter()
        .map(|sizes| {
            for (i, len) in sizes.iter().enumerate() {
                enc.push(now, &vec![i as u8; *len]).unwrap();
            }
            while enc.poll_transmit(now, &mut out) {}
            let total = enc.stats().parity_shards_sent;
            let this = total - sent;
            sent = total;
            this
        })
        .collect()
}

const FULL: [usize; 8] = [1000; 8];
const MIXED: [usize; 8] = [1000, 20, 1000, 20, 1000, 20, 1000, 20];
const ACKS: [usize; 8] = [1000, 20, 20, 20, 20, 20, 20, 20];

/// Parity bytes stay within the data bytes over the stream: a full group of
/// requests and acks (half the shards tiny) keeps its 4 parity shards — a
/// cap at half of each group's data bytes cut it to 2, which at 5 % loss
/// left groups unrepaired — and a group of one request among seven acks
/// borrows what the groups before it left, while a stream of such groups
/// alone gets one parity shard each.
#[test]
fn parity_bytes_stay_within_the_data_bytes_of_the_stream() {
    assert_eq!(parities(&[FULL]), [4]);
    assert_eq!(parities(&[MIXED]), [4]);
    assert_eq!(parities(&[ACKS]), [1]);
    assert_eq!(parities(&[FULL, ACKS, ACKS]), [4, 4, 2]);
    let long = parities(&[ACKS; 40]);
    assert!(long.iter().all(|&p| (1..=2).contains(&p)), "{long:?}");
    // 40 groups of 1156 data bytes (2-byte length prefixes included) buy
    // 46 parity shards of 1002 bytes at most.
    assert!(long.iter().sum::<u64>() <= 46, "{long:?}");
}

// ---- atk29: the peer drives the policy's parity with loss reports; the
// parity credit must keep parity bytes within the data bytes whatever it
// reports and whatever the traffic.

mod atk29 {
    use super::*;
    use petrel_proto::fec::wire::MAX_PAYLOAD;
    use petrel_proto::fec::LossReport;
    use proptest::prelude::*;

    /// `PARITY_CREDIT_MAX` in the encoder.
    const CREDIT_MAX: u64 = 48 * 1024;

    #[derive(Debug, Clone)]
    enum Op {
        Push { len: usize, dt_us: u64 },
        Loss { expected: u32, received: u32 },
        Timeout { dt_us: u64 },
        Flush { dt_us: u64 },
    }

    fn len() -> impl Strategy<Value = usize> {
        prop_oneof![
            4 => Just(0usize),
            4 => Just(1usize),
            4 => 0usize..=40,
            4 => 900usize..=1400,
            1 => Just(MAX_PAYLOAD),
            1 => 0usize..=MAX_PAYLOAD,
        ]
    }

    fn dt() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0u64), 0u64..3000, 50_000u64..300_000]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (len(), dt()).prop_map(|(len, dt_us)| Op::Push { len, dt_us }),
            2 => (0u32..2000, 0u32..2000)
                .prop_map(|(expected, received)| Op::Loss { expected, received }),
            1 => dt().prop_map(|dt_us| Op::Timeout { dt_us }),
            2 => dt().prop_map(|dt_us| Op::Flush { dt_us }),
        ]
    }

    #[derive(Debug, Default)]
    struct Tally {
        /// Shard contents (2-byte size + payload) of grouped data shards.
        grouped_data: u64,
        /// Likewise for data shards sent outside any group.
        ungrouped_data: u64,
        /// 2 + the length of every pushed datagram.
        pushed_data: u64,
        /// Parity bodies of groups closed by fill, timeout or budget.
        parity: u64,
        /// Parity bodies of groups closed early by a sparse flush.
        sparse_parity: u64,
        /// The longest parity body.
        max_parity_body: u64,
    }

    fn drain(enc: &mut FecEncoder, now: Instant, sparse: bool, t: &mut Tally) {
        let mut out = Vec::new();
        while enc.poll_transmit(now, &mut out) {
            let n = out.len() as u64;
            match out[0] {
                0x10 => t.grouped_data += n - 6 + 2,
                0x12 => t.ungrouped_data += n - 6 + 2,
                0x11 => {
                    let body = n - 8;
                    t.max_parity_body = t.max_parity_body.max(body);
                    if sparse {
                        t.sparse_parity += body;
                    } else {
                        t.parity += body;
                    }
                }
                k => panic!("kind {k:#x}"),
            }
            out.clear();
        }
    }

    fn run(cfg: &FecConfig, ops: &[Op]) -> (Tally, EncoderStats) {
        let mut enc = FecEncoder::new(cfg, Framing::Native).unwrap();
        let mut now = Instant::now();
        let mut t = Tally::default();
        // Start at maximum parity, as a hostile peer would.
        enc.handle_loss_report(
            now,
            &LossReport {
                expected: 1000,
                received: 0,
            },
        );
        for op in ops {
            match *op {
                Op::Push { len, dt_us } => {
                    now += Duration::from_micros(dt_us);
                    t.pushed_data += len as u64 + 2;
                    enc.push(now, &vec![0xA5; len]).unwrap();
                    drain(&mut enc, now, false, &mut t);
                }
                Op::Loss { expected, received } => {
                    enc.handle_loss_report(now, &LossReport { expected, received });
                }
                Op::Timeout { dt_us } => {
                    now += Duration::from_micros(dt_us);
                    enc.handle_timeout(now);
                    drain(&mut enc, now, false, &mut t);
                }
                Op::Flush { dt_us } => {
                    now += Duration::from_micros(dt_us);
                    // A timed-out group closes here, not as sparse.
                    enc.handle_timeout(now);
                    drain(&mut enc, now, false, &mut t);
                    let sparse = enc.flush(now);
                    drain(&mut enc, now, sparse, &mut t);
                }
            }
        }
        // Close whatever is open.
        now += Duration::from_secs(1);
        enc.handle_timeout(now);
        drain(&mut enc, now, false, &mut t);
        (t, enc.stats())
    }

    fn cfg() -> impl Strategy<Value = FecConfig> {
        (
            prop_oneof![Just(1u8), Just(2), Just(8), Just(64)],
            prop_oneof![Just(1u8), Just(4), Just(16)],
            prop_oneof![Just(0u64), Just(2000), Just(65_000)],
            prop_oneof![Just(16usize << 10), Just(1 << 20)],
        )
            .prop_map(|(max_data, max_parity, wait_us, budget)| FecConfig {
                scheme: FecScheme::Adaptive {
                    max_data,
                    max_parity,
                    target: 1e-3,
                },
                group_wait: Duration::from_micros(wait_us),
                budget,
                ..FecConfig::default()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// Parity of groups closed by fill, timeout or budget never exceeds
        /// the pushed data bytes (the credit starts at 0 and only data
        /// fills it), hence also data + 48 KiB; no panic on any sequence.
        /// (Counted as pushed, not as emitted: the encoder's own TX queue
        /// may drop a data shard, see `atk29_parity_can_push_its_own_data_out`.)
        #[test]
        fn atk29_parity_bytes_within_data_bytes(
            cfg in cfg(),
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            prop_assume!(cfg.validate().is_ok());
            let (t, stats) = run(&cfg, &ops);
            prop_assert!(t.parity <= t.pushed_data, "{t:?}");
            prop_assert!(t.parity + t.sparse_parity <= t.pushed_data + CREDIT_MAX
                || t.sparse_parity > 0, "{t:?}");
            prop_assert!(t.grouped_data + t.ungrouped_data <= t.pushed_data, "{t:?}");
            prop_assert_eq!(
                stats.data_shards_sent,
                ops.iter().filter(|o| matches!(o, Op::Push { .. })).count() as u64
            );
        }
    }

    /// Sparse groups are exempt from the credit (documented): with the
    /// peer reporting heavy loss, a sparse stream of one tiny and one
    /// large datagram per flush gets more parity bytes than data bytes.
    #[test]
    fn atk29_sparse_groups_are_exempt_from_the_credit() {
        let cfg = FecConfig {
            scheme: FecScheme::ADAPTIVE_DEFAULT,
            ..FecConfig::default()
        };
        let mut ops = Vec::new();
        for _ in 0..50 {
            ops.push(Op::Push {
                len: 1400,
                dt_us: 100_000,
            });
            ops.push(Op::Flush { dt_us: 0 });
        }
        let (t, _) = run(&cfg, &ops);
        assert_eq!(t.parity, 0, "{t:?}");
        assert!(t.sparse_parity > t.grouped_data, "{t:?}");
        eprintln!("sparse: {t:?}");
    }

    /// The proptest is not vacuous: full groups, tiny shards and budget-
    /// capped MAX_PAYLOAD shards at maximum parity stay within the bound.
    #[test]
    fn atk29_bound_holds_for_full_tiny_and_huge_groups() {
        let cfg = FecConfig {
            scheme: FecScheme::ADAPTIVE_DEFAULT,
            ..FecConfig::default()
        };
        for len in [0, 1, 1000, MAX_PAYLOAD] {
            let ops: Vec<Op> = (0..64).map(|_| Op::Push { len, dt_us: 0 }).collect();
            let (t, _) = run(&cfg, &ops);
            assert!(t.parity <= t.grouped_data, "{len}: {t:?}");
            if len <= 1000 {
                assert!(t.parity > 0, "{len}: {t:?}");
            }
        }
    }

    /// Found by this review: with the credit capped at 48 KiB, groups of
    /// shards above 12 KiB lost parity (16 KB: 3 of 4, 30 KB: 1, 50 KB and
    /// up: none). A group's own data bytes now always count in full, so a
    /// full group of any shard size keeps the policy's 4.
    #[test]
    fn atk29_large_shards_keep_full_parity() {
        for len in [12_000, 16_000, 30_000, 50_000, MAX_PAYLOAD] {
            assert_eq!(parities(&[[len; 8]; 3]), [4, 4, 4], "{len}");
        }
    }

    /// Found by this review: with the smallest budget (16 KiB, also the TX
    /// queue's byte bound), a one-shard group borrowed a dozen parity shards
    /// sized against the budget in shard bodies, while the queue also held
    /// an earlier data shard and counts headers: it dropped that data shard.
    /// Parity now only takes the room the queue has.
    #[test]
    fn atk29_parity_never_pushes_data_out_of_the_queue() {
        let cfg = FecConfig {
            scheme: FecScheme::Adaptive {
                max_data: 1,
                max_parity: 16,
                target: 1e-3,
            },
            group_wait: Duration::ZERO,
            budget: 16 << 10,
            ..FecConfig::default()
        };
        let ops = [
            Op::Push {
                len: 13_847,
                dt_us: 0,
            },
            Op::Push {
                len: 1251,
                dt_us: 0,
            },
        ];
        let (t, stats) = run(&cfg, &ops);
        assert_eq!(stats.tx_queue_dropped, 0, "{t:?}");
        // Both data shards were sent, and as much parity as the queue had
        // room for: 11 shards of 1253 bytes.
        assert_eq!(t.grouped_data, 13_849 + 1253, "{t:?}");
        assert_eq!(t.parity, 11 * 1253, "{t:?}");
    }
}
