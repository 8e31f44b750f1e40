//! A fixed pool of Argon2id verifier threads that reuse their memory, so a
//! flood of wrong passwords costs at most `threads` × one hash's memory.
//!
//! Why not tokio's blocking pool: every check there allocates the hash's
//! memory and frees it; glibc keeps freed memory in the arena of the thread
//! that freed it, and blocking-pool threads come and go, so resident memory
//! grows with the number of threads that have ever run a check. Here each
//! of `threads` threads allocates its [`Argon2Memory`] on its first check
//! and keeps it, so the Argon2 memory is at most `threads` × the largest
//! hash it has checked; a hash above the caps is refused (see
//! [`Argon2Memory`]) and [`VerifierStats::over_cost`] counts it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use thiserror::Error;

use petrel_sys::range::RangeError;

use crate::model::{Argon2Memory, PasswordCheck, Verdict, VerifierConfig};

#[cfg(test)]
mod tests;

/// Why the pool could not start.
#[derive(Debug, Error)]
pub enum VerifierError {
    /// A configuration value is out of range.
    #[error(transparent)]
    Config(#[from] RangeError),
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

/// A finished check as the pool answers it: `(check id, password matched)`.
pub type Answer = (u64, bool);

/// A check and the queue its answer goes to.
type Job = (PasswordCheck, SyncSender<Answer>);

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
/// Each check carries the queue its answer goes to: the caller's own with
/// [`PasswordVerifier::try_submit_to`] (what each ingress shard does), or
/// the pool's with [`PasswordVerifier::try_submit`], read by
/// [`PasswordVerifier::try_recv`]. Every queue is bounded: `threads` job
/// slots (a full queue hands the check back) and `2 × threads` answers in
/// the pool's queue (queued plus running checks); a thread whose answer
/// finds its queue full waits for the reader.
/// Dropping the pool, or [`PasswordVerifier::shutdown`], discards queued
/// checks unrun, lets running ones finish and joins the threads.
#[derive(Debug)]
pub struct PasswordVerifier {
    jobs: Option<SyncSender<Job>>,
    /// The pool's own answer queue, for [`PasswordVerifier::try_submit`].
    answer_to: Option<SyncSender<Answer>>,
    /// Behind a mutex so the pool can be shared (`Receiver` is not `Sync`).
    results: Option<Mutex<Receiver<Answer>>>,
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
            answer_to: Some(results_tx),
            results: Some(Mutex::new(results_rx)),
            threads: Vec::with_capacity(cfg.threads),
            shared: Arc::new(Shared::default()),
        };
        for _ in 0..cfg.threads {
            let jobs = Arc::clone(&jobs_rx);
            let shared = Arc::clone(&pool.shared);
            let memory = Argon2Memory::new(cfg);
            // On error, dropping `pool` stops and joins the threads spawned so far.
            let handle = std::thread::Builder::new()
                .name("refl-argon2".into())
                .spawn(move || worker(&jobs, &shared, memory))?;
            pool.threads.push(handle);
        }
        Ok(pool)
    }

    /// Queues `check`, answered on the pool's own queue
    /// ([`PasswordVerifier::try_recv`]); on a full queue hands it back (and
    /// counts it) so the caller can answer it, e.g. as "server busy".
    pub fn try_submit(&self, check: PasswordCheck) -> Result<(), PasswordCheck> {
        match &self.answer_to {
            Some(answer_to) => self.try_submit_to(check, answer_to),
            None => Err(check),
        }
    }

    /// Queues `check`, answered on `answer_to`; on a full job queue hands
    /// it back (and counts it). An answer whose queue is gone is dropped.
    pub fn try_submit_to(
        &self,
        check: PasswordCheck,
        answer_to: &SyncSender<Answer>,
    ) -> Result<(), PasswordCheck> {
        let Some(jobs) = &self.jobs else {
            return Err(check);
        };
        jobs.try_send((check, answer_to.clone()))
            .map_err(|e| match e {
                TrySendError::Full((c, _)) => {
                    self.shared.queue_full.fetch_add(1, Relaxed);
                    c
                }
                TrySendError::Disconnected((c, _)) => c,
            })
    }

    /// A finished check submitted with [`PasswordVerifier::try_submit`]:
    /// `(check id, password matched)`.
    pub fn try_recv(&self) -> Option<Answer> {
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
        self.answer_to = None;
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

fn worker(jobs: &Mutex<Receiver<Job>>, shared: &Shared, mut memory: Argon2Memory) {
    loop {
        // The lock is held while waiting, so idle threads queue on the mutex
        // and exactly one waits on the channel.
        let next = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok((job, answer_to)) = next else {
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
        // The asker may be gone (a stopping shard); its answer is dropped.
        let _ = answer_to.send((job.id(), verdict == Verdict::Match));
    }
}
