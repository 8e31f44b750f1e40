//! A fixed pool of Argon2id verifier threads that reuse their memory, so a
//! flood of wrong passwords costs at most `threads` × one hash's memory.
//!
//! Why not tokio's blocking pool: every check there allocated the hash's
//! memory (19 MiB at the default cost) and freed it; glibc keeps freed memory
//! in the arena of the thread that freed it, and blocking-pool threads come
//! and go, so resident memory grew with the number of threads that had ever
//! run a check (12 MB → ~750 MB under a wrong-password flood from ~7k
//! addresses, with never more than 4 checks at once). Here each of `threads`
//! threads allocates its memory on its first check and keeps it, so the
//! Argon2 memory is at most `threads` × the largest hash it has checked.
//!
//! The cost comes from the stored PHC string. One above the pool's caps
//! ([`VerifierConfig::max_m_cost_kib`], [`VerifierConfig::max_t_cost`]) is
//! refused — the password does not match and [`VerifierStats::over_cost`]
//! counts it — instead of being allocated for that one check: Argon2 allows
//! up to 4 TiB and 2³² passes, so honouring any stored cost would let one bad
//! row abort the process on allocation failure or hold a thread for hours,
//! and the bound above would depend on data rather than configuration. The
//! store writes hashes at [`crate::session::HashCost::default`] (19 MiB,
//! 2 passes), well under the default caps (64 MiB, 10 passes).
//!
//! Parsing and comparison follow the PHC string format and RFC 9106 via the
//! `argon2` 0.5 crate; only `argon2id` is accepted (the only variant the
//! store writes), a missing version means 0x13 as in that crate, and the
//! computed tag is compared in constant time (`subtle`).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use argon2::password_hash::{Output, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use subtle::ConstantTimeEq;
use thiserror::Error;

use crate::session::{check, ConfigRangeError, PasswordCheck};

#[cfg(test)]
mod tests;

/// Pool size and the largest Argon2 cost it will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifierConfig {
    /// Verifier threads (and job-queue slots), 1–256. Default 4, the
    /// session's default `password_checks_in_flight`.
    pub threads: usize,
    /// Largest Argon2 memory cost run, KiB, 8–1 048 576. Default 65 536
    /// (64 MiB); a thread's memory grows to the largest cost it has checked.
    pub max_m_cost_kib: u32,
    /// Largest Argon2 pass count run, 1–64. Default 10.
    pub max_t_cost: u32,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        Self {
            threads: 4,
            max_m_cost_kib: 64 * 1024,
            max_t_cost: 10,
        }
    }
}

impl VerifierConfig {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<(), ConfigRangeError> {
        check("threads", self.threads, 1, 256, "1..=256")?;
        check(
            "max_m_cost_kib",
            self.max_m_cost_kib,
            Params::MIN_M_COST,
            1 << 20,
            "8..=1048576",
        )?;
        check("max_t_cost", self.max_t_cost, 1, 64, "1..=64")
    }
}

/// Outcome of one verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The password matches.
    Match,
    /// A well-formed hash that the password does not match.
    Mismatch,
    /// Not an `argon2id` PHC string with salt, hash and valid parameters.
    Malformed,
    /// Memory or passes above the caps; not run.
    OverCost,
}

/// Argon2 working memory reused across verifications, with cost caps.
#[derive(Debug)]
pub struct Argon2Memory {
    blocks: Vec<Block>,
    max_blocks: usize,
    max_t_cost: u32,
}

impl Argon2Memory {
    /// Empty memory with `cfg`'s caps; it grows on first use.
    pub fn new(cfg: &VerifierConfig) -> Self {
        Self {
            blocks: Vec::new(),
            max_blocks: cfg.max_m_cost_kib as usize,
            max_t_cost: cfg.max_t_cost,
        }
    }

    /// Bytes currently held (a multiple of the 1 KiB Argon2 block).
    pub fn bytes(&self) -> usize {
        self.blocks.len() * Block::SIZE
    }

    /// Verifies `pw` against the PHC string `phc`, growing the memory to the
    /// hash's block count if needed (never beyond the cap).
    pub fn verify(&mut self, phc: &str, pw: &[u8]) -> Verdict {
        let Ok(hash) = PasswordHash::new(phc) else {
            return Verdict::Malformed;
        };
        if Algorithm::try_from(hash.algorithm) != Ok(Algorithm::Argon2id) {
            return Verdict::Malformed;
        }
        let (Some(salt), Some(expected)) = (hash.salt, hash.hash) else {
            return Verdict::Malformed;
        };
        let Ok(params) = Params::try_from(&hash) else {
            return Verdict::Malformed;
        };
        let version = match hash.version.map(Version::try_from) {
            None => Version::default(),
            Some(Ok(v)) => v,
            Some(Err(_)) => return Verdict::Malformed,
        };
        if params.block_count() > self.max_blocks || params.t_cost() > self.max_t_cost {
            return Verdict::OverCost;
        }
        let mut salt_buf = [0u8; Salt::MAX_LENGTH];
        let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
            return Verdict::Malformed;
        };
        if self.blocks.len() < params.block_count() {
            self.blocks.resize(params.block_count(), Block::new());
        }
        let mut out_buf = [0u8; Output::MAX_LENGTH];
        let out = &mut out_buf[..expected.len()];
        // Argon2 writes every block it reads within a pass, so memory left
        // over from an earlier hash never influences this one.
        let hashed = Argon2::new(Algorithm::Argon2id, version, params)
            .hash_password_into_with_memory(pw, salt, out, &mut self.blocks[..]);
        match hashed {
            Ok(()) if bool::from(out.ct_eq(expected.as_bytes())) => Verdict::Match,
            Ok(()) => Verdict::Mismatch,
            Err(_) => Verdict::Malformed,
        }
    }
}

/// Why the pool could not start.
#[derive(Debug, Error)]
pub enum VerifierError {
    /// A configuration value is out of range.
    #[error(transparent)]
    Config(#[from] ConfigRangeError),
    /// A thread could not be spawned.
    #[error("spawning a verifier thread: {0}")]
    Spawn(#[from] io::Error),
}

/// Counters of a [`PasswordVerifier`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifierStats {
    /// Checks taken by a thread (every verdict, including refusals).
    pub checks_run: u64,
    /// Checks whose password matched.
    pub matches: u64,
    /// Checks handed back by [`PasswordVerifier::try_submit`] on a full queue.
    pub queue_full: u64,
    /// Checks refused as malformed PHC strings (see [`Verdict::Malformed`]).
    pub malformed: u64,
    /// Checks refused for a cost above the caps (see [`Verdict::OverCost`]).
    pub over_cost: u64,
}

impl VerifierStats {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("checks_run", self.checks_run),
            ("matches", self.matches),
            ("queue_full", self.queue_full),
            ("malformed", self.malformed),
            ("over_cost", self.over_cost),
        ]
    }

    /// Adds `other`'s counters to these (summing pools).
    pub fn add(&mut self, other: &Self) {
        let Self {
            checks_run,
            matches,
            queue_full,
            malformed,
            over_cost,
        } = other;
        self.checks_run += checks_run;
        self.matches += matches;
        self.queue_full += queue_full;
        self.malformed += malformed;
        self.over_cost += over_cost;
    }
}

#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    checks_run: AtomicU64,
    matches: AtomicU64,
    queue_full: AtomicU64,
    malformed: AtomicU64,
    over_cost: AtomicU64,
}

/// A fixed pool of `threads` OS threads named `refl-argon2` running
/// [`PasswordCheck`]s, each in its own reused [`Argon2Memory`].
///
/// Both queues are bounded: `threads` job slots (a full queue hands the check
/// back) and `2 × threads` results (queued plus running checks; a thread
/// whose result finds it full waits for [`PasswordVerifier::try_recv`]).
/// Dropping the pool, or [`PasswordVerifier::shutdown`], discards queued
/// checks unrun, lets running ones finish and joins the threads.
#[derive(Debug)]
pub struct PasswordVerifier {
    jobs: Option<SyncSender<PasswordCheck>>,
    /// Behind a mutex so shards can share the pool (`Receiver` is not `Sync`).
    results: Option<Mutex<Receiver<(u64, bool)>>>,
    threads: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl PasswordVerifier {
    /// Validates `cfg` and spawns its threads (their memory is allocated on
    /// each thread's first check).
    pub fn start(cfg: &VerifierConfig) -> Result<Self, VerifierError> {
        cfg.validate()?;
        let (jobs_tx, jobs_rx) = mpsc::sync_channel(cfg.threads);
        let (results_tx, results_rx) = mpsc::sync_channel(2 * cfg.threads);
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        let mut pool = Self {
            jobs: Some(jobs_tx),
            results: Some(Mutex::new(results_rx)),
            threads: Vec::with_capacity(cfg.threads),
            shared: Arc::new(Shared::default()),
        };
        for _ in 0..cfg.threads {
            let jobs = Arc::clone(&jobs_rx);
            let results = results_tx.clone();
            let shared = Arc::clone(&pool.shared);
            let memory = Argon2Memory::new(cfg);
            // On error, dropping `pool` stops and joins the threads spawned so far.
            let handle = std::thread::Builder::new()
                .name("refl-argon2".into())
                .spawn(move || worker(&jobs, &results, &shared, memory))?;
            pool.threads.push(handle);
        }
        Ok(pool)
    }

    /// Queues `check`; on a full queue hands it back (and counts it) so the
    /// caller can answer it, e.g. as "server busy".
    pub fn try_submit(&self, check: PasswordCheck) -> Result<(), PasswordCheck> {
        let Some(jobs) = &self.jobs else {
            return Err(check);
        };
        jobs.try_send(check).map_err(|e| match e {
            TrySendError::Full(c) => {
                self.shared.queue_full.fetch_add(1, Relaxed);
                c
            }
            TrySendError::Disconnected(c) => c,
        })
    }

    /// A finished check: `(check id, password matched)`.
    pub fn try_recv(&self) -> Option<(u64, bool)> {
        self.results
            .as_ref()?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_recv()
            .ok()
    }

    /// Current counters.
    pub fn stats(&self) -> VerifierStats {
        let s = &self.shared;
        VerifierStats {
            checks_run: s.checks_run.load(Relaxed),
            matches: s.matches.load(Relaxed),
            queue_full: s.queue_full.load(Relaxed),
            malformed: s.malformed.load(Relaxed),
            over_cost: s.over_cost.load(Relaxed),
        }
    }

    /// Discards queued checks, waits for running ones (at most one hash per
    /// thread) and joins the threads.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.shared.stop.store(true, Relaxed);
        // Closing both channels wakes threads waiting for a job (after the
        // queued ones, which they skip) and threads waiting to send a result.
        self.jobs = None;
        self.results = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for PasswordVerifier {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn worker(
    jobs: &Mutex<Receiver<PasswordCheck>>,
    results: &SyncSender<(u64, bool)>,
    shared: &Shared,
    mut memory: Argon2Memory,
) {
    loop {
        // The lock is held while waiting, so idle threads queue on the mutex
        // and exactly one waits on the channel.
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = next else {
            return;
        };
        if shared.stop.load(Relaxed) {
            continue;
        }
        let verdict = job.run_in(&mut memory);
        shared.checks_run.fetch_add(1, Relaxed);
        let counter = match verdict {
            Verdict::Match => Some(&shared.matches),
            Verdict::Mismatch => None,
            Verdict::Malformed => Some(&shared.malformed),
            Verdict::OverCost => Some(&shared.over_cost),
        };
        if let Some(c) = counter {
            c.fetch_add(1, Relaxed);
        }
        if results.send((job.id(), verdict == Verdict::Match)).is_err() {
            return;
        }
    }
}
