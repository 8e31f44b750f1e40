//! Interoperability with real kcptun traffic (Debian `kcptun`, kcp-go inside).
//!
//! Topology, all on loopback:
//! `TCP client → kcptun-client → capture relay (UDP) → kcptun-server → TCP echo`.
//! The relay records every datagram; the test then checks that Petrel's kcp-go
//! framing parses all of them (CRC-32 included), recovers dropped data shards
//! byte-exact from kcptun's parity, and computes the same parity bytes itself.
//! Skipped, with a message on stderr, when the kcptun binaries are not in PATH;
//! with `PETREL_REQUIRE_KCPTUN` set (CI) their absence fails the test instead.
#![allow(clippy::unwrap_used)]

use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing, ShapeCheck};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const DS: u8 = 10;
const PS: u8 = 3;
const HDR: usize = 20; // kcptun crypt-none header
const TRANSFER: usize = 200_000;

/// Kills its process (by PID, via `Child::kill`) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn find_binary(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn echo_server(stop: Arc<AtomicBool>) -> (SocketAddr, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(200)))
                        .unwrap();
                    let stop = stop.clone();
                    thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        while !stop.load(Ordering::Relaxed) {
                            match s.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if s.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                                Err(_) => break,
                            }
                        }
                    });
                }
                Err(_) => thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    (addr, h)
}

/// Captured datagrams with their direction (0 client→server, 1 server→client).
type Capture = Arc<Mutex<Vec<(u8, Vec<u8>)>>>;

/// UDP relay between kcptun-client and kcptun-server recording every datagram.
fn relay(
    server: SocketAddr,
    stop: Arc<AtomicBool>,
    cap: Capture,
) -> (SocketAddr, Vec<JoinHandle<()>>) {
    let front = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    for s in [&front, &back] {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    }
    let addr = front.local_addr().unwrap();
    let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
    let mut hs = Vec::new();
    {
        let (front, back, stop, cap, client) = (
            front.clone(),
            back.clone(),
            stop.clone(),
            cap.clone(),
            client.clone(),
        );
        hs.push(thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = front.recv_from(&mut buf) {
                    *client.lock().unwrap() = Some(from);
                    cap.lock().unwrap().push((0, buf[..n].to_vec()));
                    let _ = back.send_to(&buf[..n], server);
                }
            }
        }));
    }
    hs.push(thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, _)) = back.recv_from(&mut buf) {
                cap.lock().unwrap().push((1, buf[..n].to_vec()));
                if let Some(c) = *client.lock().unwrap() {
                    let _ = front.send_to(&buf[..n], c);
                }
            }
        }
    }));
    (addr, hs)
}

fn spawn(bin: &std::path::Path, args: &[&str]) -> Proc {
    Proc(
        Command::new(bin)
            .args(args)
            .args([
                "--crypt", "none", "--nocomp", "--ds", "10", "--ps", "3", "--mode", "fast",
                "--quiet",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Pushes `TRANSFER` bytes through the tunnel and returns the captured datagrams.
fn capture_kcptun_traffic(
    client_bin: &std::path::Path,
    server_bin: &std::path::Path,
) -> Vec<(u8, Vec<u8>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let cap: Capture = Arc::default();
    let (echo, echo_h) = echo_server(stop.clone());
    let server_addr: SocketAddr = format!("127.0.0.1:{}", free_udp_port()).parse().unwrap();
    let (relay_addr, relay_hs) = relay(server_addr, stop.clone(), cap.clone());
    let local_port = free_tcp_port();
    let server = spawn(
        server_bin,
        &["-l", &server_addr.to_string(), "-t", &echo.to_string()],
    );
    let client = spawn(
        client_bin,
        &[
            "-l",
            &format!("127.0.0.1:{local_port}"),
            "-r",
            &relay_addr.to_string(),
        ],
    );

    let deadline = Instant::now() + Duration::from_secs(5);
    let mut tcp = loop {
        match TcpStream::connect(("127.0.0.1", local_port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("kcptun-client did not listen within 5 s: {e}"),
        }
    };
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let sent: Vec<u8> = (0..TRANSFER).map(|_| rng.gen()).collect();
    let writer = {
        let mut w = tcp.try_clone().unwrap();
        let sent = sent.clone();
        thread::spawn(move || w.write_all(&sent).unwrap())
    };
    let mut got = vec![0u8; TRANSFER];
    tcp.read_exact(&mut got)
        .expect("echo through kcptun within 10 s");
    writer.join().unwrap();
    assert!(got == sent, "echo through kcptun corrupted");

    drop(client);
    drop(server);
    stop.store(true, Ordering::Relaxed);
    for h in relay_hs {
        h.join().unwrap();
    }
    echo_h.join().unwrap();
    let v = cap.lock().unwrap().clone();
    v
}

fn seqid(d: &[u8]) -> u32 {
    u32::from_le_bytes([d[HDR], d[HDR + 1], d[HDR + 2], d[HDR + 3]])
}

fn flag(d: &[u8]) -> u16 {
    u16::from_le_bytes([d[HDR + 4], d[HDR + 5]])
}

fn kcp_payload(d: &[u8]) -> &[u8] {
    let size = usize::from(u16::from_le_bytes([d[HDR + 6], d[HDR + 7]]));
    &d[HDR + 8..HDR + 6 + size]
}

#[test]
fn decodes_and_recovers_real_kcptun_traffic() {
    let (Some(client_bin), Some(server_bin)) =
        (find_binary("kcptun-client"), find_binary("kcptun-server"))
    else {
        // Written to stderr directly so the test harness's capture cannot hide it.
        let msg = "SKIPPED fec_kcptun: kcptun-client/kcptun-server not in PATH (install: apt-get install -y kcptun)";
        assert!(std::env::var_os("PETREL_REQUIRE_KCPTUN").is_none(), "{msg}");
        let _ = writeln!(std::io::stderr(), "{msg}");
        return;
    };
    let captured = capture_kcptun_traffic(&client_bin, &server_bin);
    let cfg = FecConfig {
        scheme: FecScheme::Fixed {
            data_shards: DS,
            parity_shards: PS,
        },
        ..FecConfig::default()
    };
    let framing = Framing::KcpGo { crypt_header: true };

    // 1. Every datagram parses with kcp-go framing and a valid CRC-32; data shards
    //    carry KCP segments.
    let mut per_dir = [
        FecDecoder::new(&cfg, framing).unwrap(),
        FecDecoder::new(&cfg, framing).unwrap(),
    ];
    for (dir, d) in &captured {
        per_dir[usize::from(*dir)].input(Instant::now(), d).unwrap();
        let crc = u32::from_le_bytes([d[16], d[17], d[18], d[19]]);
        assert_eq!(crc, crc32fast::hash(&d[HDR..]));
        if flag(d) == 0xF1 {
            assert!((81..=84).contains(&kcp_payload(d)[4]), "KCP cmd");
        }
    }
    let parity: u64 = per_dir
        .iter()
        .map(|d| d.stats().parity_shards_received)
        .sum();
    for d in &per_dir {
        assert_eq!(d.stats().malformed, 0);
        // kcptun's traffic proves its shape is ours: recovery is on.
        assert_eq!(
            (d.shape_check(), d.stats().shape_mismatches),
            (ShapeCheck::Confirmed, 0)
        );
    }
    assert!(parity > 0, "kcptun sent no parity");

    // 2. Find complete groups (all 13 shards captured, one direction per group id
    //    since the two directions number independently).
    let mut groups: BTreeMap<(usize, u32), Vec<Option<&Vec<u8>>>> = BTreeMap::new();
    for (dir, d) in &captured {
        let n = u32::from(DS + PS);
        let g = groups
            .entry((usize::from(*dir), seqid(d) / n))
            .or_insert_with(|| vec![None; usize::from(DS + PS)]);
        g[(seqid(d) % n) as usize] = Some(d);
    }
    let complete: Vec<(usize, u32, Vec<&Vec<u8>>)> = groups
        .iter()
        .filter(|(_, g)| g.iter().all(Option::is_some))
        .map(|(&(dir, id), g)| (dir, id, g.iter().flatten().copied().collect()))
        .collect();
    assert!(!complete.is_empty(), "no complete FEC group captured");

    let mut checked = 0;
    for (dir, id, group) in &complete {
        // A decoder that has seen the direction's traffic before this group, so
        // that it has proven kcptun's shape (nothing is rebuilt before that).
        let mut dec = FecDecoder::new(&cfg, framing).unwrap();
        let base = id * u32::from(DS + PS);
        for (_, d) in captured
            .iter()
            .filter(|(d_dir, d)| usize::from(*d_dir) == *dir && seqid(d) < base)
        {
            dec.input(Instant::now(), d).unwrap();
        }
        if dec.shape_check() != ShapeCheck::Confirmed {
            continue;
        }
        let mut out = Vec::new();
        while dec.poll_datagram(&mut out) {}
        let recovered_before = dec.stats().shards_recovered;
        let originals: Vec<Vec<u8>> = group[..usize::from(DS)]
            .iter()
            .map(|d| kcp_payload(d).to_vec())
            .collect();

        // 3. Drop three data shards; Petrel rebuilds them byte-exact from parity.
        let dropped = [0usize, 4, 9];
        for (i, d) in group.iter().enumerate() {
            if !dropped.contains(&i) {
                dec.input(Instant::now(), d).unwrap();
            }
        }
        let mut delivered = Vec::new();
        while dec.poll_datagram(&mut out) {
            delivered.push(out.clone());
        }
        assert_eq!(dec.stats().shards_recovered - recovered_before, 3);
        let recovered = &delivered[delivered.len() - 3..];
        for (r, &i) in recovered.iter().zip(&dropped) {
            assert_eq!(r, &originals[i], "recovered shard {i} differs");
        }

        // 4. Petrel's encoder computes kcp-go's parity bytes exactly.
        let mut enc = FecEncoder::new(&cfg, framing).unwrap();
        for o in &originals {
            enc.push(Instant::now(), o).unwrap();
        }
        let mut ours = Vec::new();
        while enc.poll_transmit(Instant::now(), &mut out) {
            ours.push(out.clone());
        }
        for j in 0..usize::from(PS) {
            let theirs = group[usize::from(DS) + j];
            assert_eq!(
                ours[usize::from(DS) + j][HDR + 6..],
                theirs[HDR + 6..],
                "parity {j} differs from kcp-go"
            );
        }
        checked += 1;
        if checked == 5 {
            break;
        }
    }
    assert!(
        checked > 0,
        "no complete group after kcptun's shape was proven"
    );
    eprintln!(
        "fec_kcptun: {} datagrams captured, {} parity, {} complete groups ({checked} checked)",
        captured.len(),
        parity,
        complete.len()
    );
}
