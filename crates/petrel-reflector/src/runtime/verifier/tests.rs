use std::collections::HashMap;
use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHasher, SaltString};
use proptest::prelude::*;

use super::*;
use argon2::password_hash::PasswordHash;
use argon2::{Algorithm, Argon2, Params, Version};

use crate::model::{hash_device_password, HashCost};

/// Cheap enough for debug builds: 64 KiB, one pass.
const CHEAP: HashCost = HashCost {
    m_cost_kib: 64,
    t_cost: 1,
    p_cost: 1,
};

fn phc(alg: Algorithm, pw: &str, m: u32, t: u32, p: u32) -> String {
    let salt = SaltString::encode_b64(b"petrel-test-salt").unwrap();
    Argon2::new(alg, Version::V0x13, Params::new(m, t, p, None).unwrap())
        .hash_password(pw.as_bytes(), &salt)
        .unwrap()
        .to_string()
}

fn cfg(threads: usize) -> VerifierConfig {
    VerifierConfig {
        threads,
        ..VerifierConfig::default()
    }
}

fn check(id: u64, phc: &str, pw: &str) -> PasswordCheck {
    PasswordCheck::new(id, phc.to_owned(), pw.as_bytes().to_vec())
}

/// Polls `f` until it holds; panics after 10 s so a bug fails instead of hanging.
fn wait_until(mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "condition not reached in 10 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn recv_all(pool: &PasswordVerifier, n: usize) -> HashMap<u64, bool> {
    let mut got = HashMap::new();
    wait_until(|| {
        while let Some((id, ok)) = pool.try_recv() {
            assert!(got.insert(id, ok).is_none(), "result {id} twice");
        }
        got.len() >= n
    });
    got
}

#[test]
fn memory_verdicts() {
    let good = hash_device_password("Secret12", CHEAP).unwrap();
    let mut mem = Argon2Memory::new(&VerifierConfig::default());
    assert_eq!(mem.verify(&good, b"Secret12"), Verdict::Match);
    assert_eq!(mem.verify(&good, b"Secret13"), Verdict::Mismatch);
    assert_eq!(mem.verify(&good, b""), Verdict::Mismatch);
    let no_hash = good.rsplit_once('$').unwrap().0;
    let wrong_version = good.replace("$v=19$", "$v=18$");
    let unknown_param = good.replace("p=1$", "p=1,x=2$");
    let argon2i = phc(Algorithm::Argon2i, "Secret12", 64, 1, 1);
    let argon2d = phc(Algorithm::Argon2d, "Secret12", 64, 1, 1);
    for bad in [
        "",
        "not a hash",
        "$argon2id$",
        no_hash,
        &wrong_version,
        &unknown_param,
        &argon2i,
        &argon2d,
        "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",
    ] {
        assert_eq!(mem.verify(bad, b"Secret12"), Verdict::Malformed, "{bad}");
    }
    // The crate's own verifier agrees that argon2i is a correct hash of it:
    // it is refused for its variant, not for its content.
    assert!(argon2::password_hash::PasswordVerifier::verify_password(
        &Argon2::default(),
        b"Secret12",
        &PasswordHash::new(&argon2i).unwrap()
    )
    .is_ok());
    assert!(!crate::model::verify_device_password(&argon2i, b"Secret12"));
}

#[test]
fn memory_is_reused_and_never_exceeds_the_cap() {
    let mut mem = Argon2Memory::new(&VerifierConfig {
        max_m_cost_kib: 256,
        max_t_cost: 3,
        ..VerifierConfig::default()
    });
    let big = phc(Algorithm::Argon2id, "Secret12", 256, 1, 2);
    let small = phc(Algorithm::Argon2id, "Secret12", 64, 3, 1);
    assert_eq!(mem.verify(&big, b"Secret12"), Verdict::Match);
    assert_eq!(mem.bytes(), 256 * 1024);
    // Leftovers of the bigger hash do not change the smaller one's result.
    assert_eq!(mem.verify(&small, b"Secret12"), Verdict::Match);
    assert_eq!(mem.verify(&small, b"Secret21"), Verdict::Mismatch);
    assert_eq!(mem.verify(&big, b"Secret12"), Verdict::Match);
    assert_eq!(mem.bytes(), 256 * 1024);

    let over_m = phc(Algorithm::Argon2id, "Secret12", 512, 1, 1);
    let over_t = phc(Algorithm::Argon2id, "Secret12", 64, 4, 1);
    // 4 TiB and 2^32-1 passes: refused before any allocation or work.
    let huge = small.replace("m=64,t=3", "m=4294967295,t=3");
    let endless = small.replace("m=64,t=3", "m=64,t=4294967295");
    for h in [&over_m, &over_t] {
        assert_eq!(mem.verify(h, b"Secret12"), Verdict::OverCost, "{h}");
    }
    let mut fresh = Argon2Memory::new(&VerifierConfig::default());
    for h in [&huge, &endless] {
        assert_eq!(fresh.verify(h, b"Secret12"), Verdict::OverCost, "{h}");
    }
    assert_eq!(mem.bytes(), 256 * 1024);
    assert_eq!(fresh.bytes(), 0);
}

#[test]
fn pool_answers_each_check_by_id() {
    let good = hash_device_password("Secret12", CHEAP).unwrap();
    let over = phc(Algorithm::Argon2id, "Secret12", 128 * 1024, 1, 1);
    let pool = PasswordVerifier::start(&cfg(2)).unwrap();
    let mut want = HashMap::new();
    let mut submitted = 0;
    for id in 0..20u64 {
        let (c, ok) = match id % 4 {
            0 => (check(id, &good, "Secret12"), true),
            1 => (check(id, &good, "Wrong123"), false),
            2 => (check(id, "$argon2id$garbage", "Secret12"), false),
            _ => (check(id, &over, "Secret12"), false),
        };
        let mut c = c;
        // A full queue hands the same check back; retry after a result.
        loop {
            match pool.try_submit(c) {
                Ok(()) => break,
                Err(back) => {
                    assert_eq!(back.id(), id);
                    c = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        submitted += 1;
        want.insert(id, ok);
        while let Some((id, ok)) = pool.try_recv() {
            assert_eq!(want.remove(&id), Some(ok), "result for {id}");
        }
    }
    let rest = recv_all(&pool, want.len());
    assert_eq!(rest, want);
    let s = pool.stats();
    assert_eq!(s.checks_run, submitted);
    assert_eq!(
        (s.matches, s.malformed, s.over_cost),
        (submitted / 4, submitted / 4, submitted / 4)
    );
    assert!(pool.try_recv().is_none());
    pool.shutdown();
}

#[test]
fn full_queue_returns_the_check_and_shutdown_skips_queued_work() {
    let good = hash_device_password("Secret12", CHEAP).unwrap();
    let pool = PasswordVerifier::start(&cfg(1)).unwrap();
    // With nobody receiving, one thread fills the 2 result slots, then runs a
    // third check and waits to send it; a fourth waits in the 1 job slot.
    for id in 0..3 {
        pool.try_submit(check(id, &good, "Wrong123")).unwrap();
        wait_until(|| pool.stats().checks_run == id + 1);
    }
    pool.try_submit(check(3, &good, "Secret12")).unwrap();
    let back = pool.try_submit(check(4, &good, "Secret12")).unwrap_err();
    assert_eq!(back.id(), 4);
    assert_eq!(pool.stats().queue_full, 1);

    let (done_tx, done_rx) = mpsc::channel();
    let stats = Arc::clone(&pool.shared);
    std::thread::spawn(move || {
        pool.shutdown();
        let _ = done_tx.send(());
    });
    done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("shutdown hung");
    assert_eq!(stats.checks_run.load(Relaxed), 3, "queued check 3 was run");
}

#[test]
fn drop_joins_the_threads() {
    let pool = PasswordVerifier::start(&cfg(3)).unwrap();
    let shared = Arc::clone(&pool.shared);
    assert_eq!(Arc::strong_count(&shared), 5);
    drop(pool);
    assert_eq!(Arc::strong_count(&shared), 1);
}

#[test]
fn default_cost_hash_in_the_pool() {
    let good = hash_device_password("Secret12", HashCost::default()).unwrap();
    // Two slots, so both checks fit however fast the threads take them.
    let pool = PasswordVerifier::start(&cfg(2)).unwrap();
    pool.try_submit(check(7, &good, "Secret12")).unwrap();
    pool.try_submit(check(8, &good, "Secret21")).unwrap();
    let got = recv_all(&pool, 2);
    assert_eq!(got, HashMap::from([(7, true), (8, false)]));
    let mut mem = Argon2Memory::new(&VerifierConfig::default());
    assert_eq!(mem.verify(&good, b"Secret12"), Verdict::Match);
    assert_eq!(mem.bytes(), 19 * 1024 * 1024);
}

#[test]
fn config_ranges_name_the_field() {
    assert!(VerifierConfig::default().validate().is_ok());
    let bad = [
        (
            VerifierConfig {
                threads: 0,
                ..cfg(1)
            },
            "threads",
        ),
        (cfg(257), "threads"),
        (
            VerifierConfig {
                max_m_cost_kib: 7,
                ..cfg(1)
            },
            "max_m_cost_kib",
        ),
        (
            VerifierConfig {
                max_t_cost: 65,
                ..cfg(1)
            },
            "max_t_cost",
        ),
    ];
    for (c, field) in bad {
        assert_eq!(c.validate().unwrap_err().field, field);
        match PasswordVerifier::start(&c) {
            Err(VerifierError::Config(e)) => assert_eq!(e.field, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary or corrupted PHC strings never panic and never match.
    #[test]
    fn garbage_never_matches(s in ".{0,120}", cut in 0usize..120, byte in any::<u8>()) {
        let mut mem = Argon2Memory::new(&VerifierConfig {
            max_m_cost_kib: 64,
            max_t_cost: 1,
            ..VerifierConfig::default()
        });
        prop_assert_ne!(mem.verify(&s, b"Secret12"), Verdict::Match);
        let good = phc(Algorithm::Argon2id, "Secret12", 64, 1, 1);
        let mut bytes = good.clone().into_bytes();
        let i = cut % bytes.len();
        bytes[i] = byte;
        if let Ok(mutated) = String::from_utf8(bytes) {
            let v = mem.verify(&mutated, b"Secret12");
            prop_assert!(v != Verdict::Match || same_hash(&good, &mutated), "{mutated}");
        }
    }
}

/// Whether `mutated` encodes the same Argon2 hash as `good`: a PHC string has
/// other spellings of one hash (a repeated parameter, a defaulted one, unused
/// low bits in the last base64 character), and matching those is right.
fn same_hash(good: &str, mutated: &str) -> bool {
    let (Ok(a), Ok(b)) = (PasswordHash::new(good), PasswordHash::new(mutated)) else {
        return false;
    };
    let params = |h: &PasswordHash<'_>| {
        argon2::Params::try_from(h)
            .ok()
            .map(|p| (p.m_cost(), p.t_cost(), p.p_cost(), p.output_len()))
    };
    let salt = |h: &PasswordHash<'_>| {
        let mut buf = [0u8; 64];
        h.salt
            .and_then(|s| s.decode_b64(&mut buf).ok().map(<[u8]>::to_vec))
    };
    a.algorithm == b.algorithm
        && a.version == b.version
        && params(&a).is_some()
        && params(&a) == params(&b)
        && salt(&a) == salt(&b)
        && a.hash == b.hash
}
