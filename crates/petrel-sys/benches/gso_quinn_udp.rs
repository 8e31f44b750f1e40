//! One-destination batched UDP on loopback: petrel-sys against `quinn-udp` 0.5.
//!
//! Send: `batch` segments of `segment` bytes per call to one destination, as fast
//! as the call returns, for `PETREL_BENCH_SECONDS` (default 2) per run, 3 runs per
//! case; reported in segments per second (min / median of the runs):
//!
//! - `petrel gso`: [`SendBatch::send_segments`] (one `sendmsg` with `UDP_SEGMENT`),
//! - `petrel mmsg`: the same with GSO off (`sendmmsg`, one header per segment),
//! - `quinn-udp`: `UdpSocketState::try_send` of one `Transmit` with `segment_size`.
//!
//! The receiver is not drained: once its buffer is full the kernel drops, the same
//! for every implementation, so the figures compare the send path (system call,
//! segmentation, loopback delivery) and not a receiver thread competing for the CPU.
//!
//! Receive: a sender thread streams 32-segment GSO trains; the measured thread polls
//! a non-blocking socket with GRO for the same time, 32 buffers per call — `petrel gro` ([`RecvBatch`])
//! against `quinn-udp gro` (`UdpSocketState::recv`) — in datagrams per second.
//!
//! Run: `cargo bench -p petrel-sys --bench gso_quinn_udp` (Linux).
#![allow(clippy::unwrap_used)]

use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use petrel_sys::batch::{enable_gro, RecvBatch, SendBatch};
use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};

const RUNS: usize = 3;

fn seconds() -> Duration {
    let s = std::env::var("PETREL_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(s)
}

fn pair() -> (UdpSocket, UdpSocket, SocketAddr) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.set_nonblocking(true).unwrap();
    let dest = rx.local_addr().unwrap();
    (tx, rx, dest)
}

/// Runs `step` (which returns segments sent) for `time`; segments per second.
fn rate(time: Duration, mut step: impl FnMut() -> usize) -> f64 {
    let start = Instant::now();
    let mut total = 0u64;
    while start.elapsed() < time {
        for _ in 0..64 {
            total += step() as u64;
        }
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn summary(mut runs: Vec<f64>) -> String {
    runs.sort_by(f64::total_cmp);
    format!(
        "min {:>10.0}  median {:>10.0}",
        runs[0],
        runs[runs.len() / 2]
    )
}

fn send_case(segment: usize, batch: usize, time: Duration) {
    let payload = vec![0x5au8; segment * batch];
    let payloads = vec![vec![0x5au8; segment]; batch];
    let mut gso = Vec::new();
    let mut mmsg = Vec::new();
    let mut quinn = Vec::new();
    for _ in 0..RUNS {
        let (tx, _rx, dest) = pair();
        let mut b = SendBatch::new(batch);
        gso.push(rate(time, || {
            b.send_segments(&tx, Some(dest), &payload, segment)
                .unwrap_or(0)
        }));
        let (tx, _rx, dest) = pair();
        let mut b = SendBatch::new(batch);
        b.set_gso(false);
        mmsg.push(rate(time, || {
            b.send_to(&tx, &payloads, Some(dest)).unwrap_or(0)
        }));
        let (tx, _rx, dest) = pair();
        let state = UdpSocketState::new(UdpSockRef::from(&tx)).unwrap();
        assert!(state.max_gso_segments() >= batch, "quinn-udp without GSO");
        let t = Transmit {
            destination: dest,
            ecn: None,
            contents: &payload,
            segment_size: (batch > 1).then_some(segment),
            src_ip: None,
        };
        quinn.push(rate(time, || {
            match state.try_send(UdpSockRef::from(&tx), &t) {
                Ok(()) => batch,
                Err(_) => 0,
            }
        }));
    }
    println!(
        "send {segment:>4} B x {batch:>2}  petrel gso  {}",
        summary(gso)
    );
    println!(
        "send {segment:>4} B x {batch:>2}  petrel mmsg {}",
        summary(mmsg)
    );
    println!(
        "send {segment:>4} B x {batch:>2}  quinn-udp   {}",
        summary(quinn)
    );
}

/// Streams 32-segment GSO trains to `dest` until `stop`.
fn blaster(dest: SocketAddr, segment: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let payload = vec![0x5au8; segment * 32];
        let mut b = SendBatch::new(32);
        while !stop.load(Ordering::Relaxed) {
            let _ = b.send_segments(&tx, Some(dest), &payload, segment);
        }
    })
}

fn recv_case(segment: usize, time: Duration) {
    let mut ours = Vec::new();
    let mut quinn = Vec::new();
    for _ in 0..RUNS {
        for which in ["petrel", "quinn"] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            rx.set_nonblocking(true).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let sender = blaster(rx.local_addr().unwrap(), segment, stop.clone());
            let r = if which == "petrel" {
                assert!(enable_gro(&rx).unwrap());
                let mut rb = RecvBatch::new(32);
                rate(time, || match rb.recv(&rx) {
                    Ok(_) => rb.iter().map(|d| d.datagrams().len()).sum(),
                    Err(_) => 0,
                })
            } else {
                let state = UdpSocketState::new(UdpSockRef::from(&rx)).unwrap();
                let mut storage = vec![vec![0u8; 65_535]; 32];
                let mut meta = vec![RecvMeta::default(); 32];
                rate(time, || {
                    let mut bufs: Vec<IoSliceMut<'_>> =
                        storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                    match state.recv(UdpSockRef::from(&rx), &mut bufs, &mut meta) {
                        Ok(n) => meta[..n]
                            .iter()
                            .map(|m| m.len.div_ceil(m.stride.max(1)))
                            .sum(),
                        Err(_) => 0,
                    }
                })
            };
            stop.store(true, Ordering::Relaxed);
            sender.join().unwrap();
            if which == "petrel" {
                ours.push(r);
            } else {
                quinn.push(r);
            }
        }
    }
    println!("recv {segment:>4} B x 32  petrel gro  {}", summary(ours));
    println!("recv {segment:>4} B x 32  quinn-udp   {}", summary(quinn));
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do not use.
    let time = seconds();
    println!("segments (send) or datagrams (recv) per second, {RUNS} runs of {time:?}");
    for segment in [1200, 1024] {
        for batch in [1, 8, 32] {
            send_case(segment, batch, time);
        }
    }
    for segment in [1200, 1024] {
        recv_case(segment, time);
    }
}
