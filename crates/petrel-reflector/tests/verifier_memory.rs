//! Resident memory of the verifier pool under a wrong-password flood at the
//! default Argon2 cost (19 MiB per hash). Alone in its own test binary so no
//! other test allocates while `VmRSS` is sampled.
//!
//! Measured on a 2-core Linux machine (debug build): the pool grows by
//! 76 MiB (4 × 19 MiB). The same 64 checks through tokio's blocking pool,
//! which ran them before, grew RSS by 684 MiB with at most 4 in flight (the
//! server's bound: a thread that just finished is not idle yet when the next
//! check is spawned, so the pool keeps adding threads, and each keeps its
//! 19 MiB in its glibc arena) and by 1217 MiB with all 64 spawned at once.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use petrel_reflector::model::{hash_device_password, HashCost, PasswordCheck, VerifierConfig};
use petrel_reflector::runtime::verifier::PasswordVerifier;

const THREADS: usize = 4;
const CHECKS: u64 = 64;
const MIB: u64 = 1024 * 1024;

/// Resident set size of this process, bytes.
fn vm_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

#[test]
fn wrong_password_flood_keeps_rss_within_threads_times_hash_memory() {
    let phc = hash_device_password("Secret12", HashCost::default()).unwrap();
    let before = vm_rss();
    let pool = PasswordVerifier::start(&VerifierConfig {
        threads: THREADS,
        ..VerifierConfig::default()
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut next, mut peak) = (0u64, before);
    let mut answered = HashSet::new();
    while answered.len() < CHECKS as usize {
        assert!(Instant::now() < deadline, "64 checks not answered in 120 s");
        while next < CHECKS
            && pool
                .try_submit(PasswordCheck::new(next, phc.clone(), b"Wrong123".to_vec()))
                .is_ok()
        {
            next += 1;
        }
        while let Some((id, ok)) = pool.try_recv() {
            assert!(!ok, "wrong password matched");
            assert!(id < CHECKS && answered.insert(id), "unexpected id {id}");
        }
        peak = peak.max(vm_rss());
        std::thread::sleep(Duration::from_millis(2));
    }
    let stats = pool.stats();
    pool.shutdown();
    let growth = peak - before;
    eprintln!(
        "VmRSS before {} MiB, peak {} MiB, growth {} MiB; {} checks, {} queue-full refusals",
        before / MIB,
        peak / MIB,
        growth / MIB,
        stats.checks_run,
        stats.queue_full
    );
    assert_eq!(stats.checks_run, CHECKS);
    let bound = THREADS as u64 * 19 * MIB + 32 * MIB;
    assert!(
        growth < bound,
        "RSS grew {} MiB, bound {} MiB",
        growth / MIB,
        bound / MIB
    );
}
