//! One load-generator process of a split stage (`petrel bench
//! reflector-generator`, started by the generator pool (`generator_pool.rs`)): it holds a
//! contiguous range of the stage's devices, each on its own socket and
//! 127.x.y.z address (draarl-v1 §7), logs them in with heartbeats through
//! the entry the driver gave each, keeps them heartbeating, receives on
//! them (`receive`, two epoll threads) and sends the rounds of the speakers
//! in its range on the schedule the driver starts (`schedule`). It speaks
//! the line protocol of `generator_wire.rs` on stdin/stdout and dies
//! with the driver (`PR_SET_PDEATHSIG`), or when its stdin closes.

use std::io::{BufRead, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::apps::in_group;
use super::device::{encode_voice, make_device, unix_ns, Device, MARKER};
use super::drive::RECEIVER_THREADS;
use super::fd_budget::raise_nofile;
use super::generator_wire::{
    line_of, read_message, Command, GeneratorSpec, GeneratorTally, Report,
};
use super::receipts::FrameReceipts;
use super::receive::{self, Tally, RECV_THREAD};
use super::schedule::{heartbeat_loop, login_keeping_alive, Schedule};
use super::LoadError;

/// Most devices one generator takes (the stage's own maximum).
const MAX_DEVICES: usize = 20_000;

/// Runs one generator on this process's stdin and stdout until the driver
/// says stop (or closes stdin); a failure is also reported to the driver as
/// a `failed` report.
///
/// # Errors
/// [`LoadError`] when the spec is invalid, a socket fails, or the driver
/// goes away.
pub fn run_stdio() -> Result<(), LoadError> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets this process's signal on
    // its parent's exit.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let result = raise_nofile().and_then(|_| run(&mut input, &mut out));
    if let Err(e) = &result {
        let _ = say(
            &mut out,
            &Report::Failed {
                error: e.to_string(),
            },
        );
    }
    result
}

fn say(out: &mut impl Write, report: &Report) -> Result<(), LoadError> {
    out.write_all(line_of(report)?.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn check(spec: &GeneratorSpec) -> Result<(), LoadError> {
    let n = spec.entries.len();
    let bad = |m: String| Err(LoadError::Invalid(m));
    if n == 0 || n > MAX_DEVICES || spec.rows.len() != n {
        return bad(format!(
            "a generator takes 1..={MAX_DEVICES} devices with one receipt row each, got {n} and {}",
            spec.rows.len()
        ));
    }
    if spec
        .first
        .checked_add(n)
        .is_none_or(|end| end > spec.devices)
        || spec.groups == 0
    {
        return bad(format!(
            "devices {}..+{n} are not within the stage's {} in {} groups",
            spec.first, spec.devices, spec.groups
        ));
    }
    if spec.payload < 32 || spec.interval_ms == 0 {
        return bad("payload under 32 bytes or a zero interval".into());
    }
    Ok(())
}

fn run(input: &mut impl BufRead, out: &mut impl Write) -> Result<(), LoadError> {
    let spec: GeneratorSpec =
        read_message(input)?.ok_or_else(|| LoadError::Invalid("the driver sent no spec".into()))?;
    check(&spec)?;
    let receipts = spec.receipts.map(FrameReceipts::from_shape).transpose()?;
    let devices: Vec<Device> = spec
        .entries
        .iter()
        .zip(&spec.rows)
        .enumerate()
        .map(|(k, (&entry, &row))| {
            let mut d = make_device(spec.first + k, entry)?;
            d.receipt_row = row;
            Ok(d)
        })
        .collect::<Result<_, LoadError>>()?;
    let failed = login_keeping_alive(&devices, spec.login_per_s);
    for d in &devices {
        d.sock.set_nonblocking(true)?;
    }
    let per = devices.len().div_ceil(RECEIVER_THREADS).max(1);
    let polls: Vec<_> = devices
        .chunks(per)
        .map(|c| receive::register(c).map(|p| (p, c)))
        .collect::<Result<_, _>>()?;
    let stop = AtomicBool::new(false);
    let receipts = receipts.as_ref();
    std::thread::scope(|s| -> Result<(), LoadError> {
        let stop = &stop;
        // Stops the receive and heartbeat threads on every exit path.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        let stopper = StopOnDrop(stop);
        let mut receivers = Vec::with_capacity(polls.len());
        for (poll, chunk) in polls {
            let stage = spec.stage;
            receivers.push(
                std::thread::Builder::new()
                    .name(RECV_THREAD.into())
                    .spawn_scoped(s, move || {
                        receive::receive_loop(poll, chunk, stage, stop, receipts)
                    })?,
            );
        }
        let devs = &devices;
        std::thread::Builder::new()
            .name("lg-heartbeat".into())
            .spawn_scoped(s, move || heartbeat_loop(devs, stop, None))?;
        say(out, &Report::LoggedIn { failed })?;
        let sender = Sender {
            spec: &spec,
            devices: &devices,
            receipts,
        };
        loop {
            match read_message::<Command>(input)? {
                None => {
                    return Err(LoadError::Invalid(
                        "the driver closed its pipe before saying stop".into(),
                    ))
                }
                Some(Command::Warmup { at_unix_ns }) => {
                    sender.rounds(0..spec.warmup_rounds, at_unix_ns, false)?;
                    say(out, &Report::Warmed)?;
                }
                Some(Command::Measure { at_unix_ns }) => {
                    let first = spec.warmup_rounds;
                    let (sent, expected) =
                        sender.rounds(first..first + spec.measured_rounds, at_unix_ns, true)?;
                    say(out, &Report::Sent { sent, expected })?;
                }
                Some(Command::Stop) => break,
            }
        }
        drop(stopper);
        let mut total = Tally::new()?;
        for r in receivers {
            let t = r
                .join()
                .map_err(|_| LoadError::Invalid("receive thread panicked".into()))??;
            total.merge(&t);
        }
        let tally = GeneratorTally {
            received: total.received,
            recv_errors: total.recv_errors,
            wrong_reserved: total.wrong_reserved,
            latency_us: total
                .hist
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
            receipts: receipts.map(FrameReceipts::snapshot),
        };
        say(out, &Report::Tally(tally))
    })
}

/// The speakers of one generator's range and what they send.
struct Sender<'a> {
    spec: &'a GeneratorSpec,
    devices: &'a [Device],
    receipts: Option<&'a FrameReceipts>,
}

impl Sender<'_> {
    /// Sends `rounds` of voice from the speakers in this generator's range,
    /// the first round at Unix time `at_unix_ns`, the others one interval
    /// apart; measured rounds carry the stage id and are counted (sent
    /// frames, the datagrams they owe, the receipts' send flags). Returns
    /// (sent, expected).
    fn rounds(
        &self,
        rounds: Range<u64>,
        at_unix_ns: u64,
        measured: bool,
    ) -> Result<(u64, u64), LoadError> {
        let spec = self.spec;
        let speakers: Vec<usize> = (spec.first..spec.first + self.devices.len())
            .filter(|&i| i < spec.groups)
            .collect();
        if speakers.is_empty() || rounds.is_empty() {
            return Ok((0, 0));
        }
        // The driver's instant on this process's monotonic clock.
        let start = Instant::now() + Duration::from_nanos(at_unix_ns.saturating_sub(unix_ns()));
        let mut schedule = Schedule::new(start, Duration::from_millis(spec.interval_ms));
        schedule.restart(start, rounds.start);
        let stage_id = if measured { spec.stage } else { 0 };
        let mut payload = vec![0u8; spec.payload];
        payload[..8].copy_from_slice(MARKER);
        let mut packet = Vec::with_capacity(90 + spec.payload);
        let (mut sent, mut expected) = (0u64, 0u64);
        for k in rounds {
            if let Some(wait) = schedule.due(k).checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            for &g in &speakers {
                let d = &self.devices[g - spec.first];
                encode_voice(d, &mut payload, stage_id, k, &mut packet)?;
                if d.sock.send(&packet).is_ok() && measured {
                    if let Some(r) = self.receipts {
                        r.mark_sent(g, k);
                    }
                    sent += 1;
                    expected += in_group(spec.devices, g, spec.groups) - 1;
                }
            }
        }
        Ok((sent, expected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn spec(first: usize, n: usize) -> GeneratorSpec {
        GeneratorSpec {
            first,
            entries: vec![SocketAddr::from(([127, 0, 0, 1], 9)); n],
            rows: vec![0; n],
            devices: 60,
            groups: 2,
            interval_ms: 120,
            payload: 320,
            stage: 1,
            warmup_rounds: 8,
            measured_rounds: 10,
            receipts: None,
            login_per_s: None,
        }
    }

    #[test]
    fn specs_outside_the_stage_are_refused() {
        check(&spec(40, 20)).unwrap();
        assert!(check(&spec(41, 20)).is_err());
        assert!(check(&spec(0, 0)).is_err());
        let mut rows = spec(0, 20);
        rows.rows.pop();
        assert!(check(&rows).is_err());
        let mut groups = spec(0, 20);
        groups.groups = 0;
        assert!(check(&groups).is_err());
    }

    #[test]
    fn a_missing_spec_is_an_error_not_a_hang() {
        let mut out = Vec::new();
        let e = run(&mut "".as_bytes(), &mut out).unwrap_err();
        assert!(e.to_string().contains("no spec"), "{e}");
    }
}
