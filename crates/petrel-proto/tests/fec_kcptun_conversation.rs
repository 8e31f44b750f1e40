//! A real conversation with kcptun (Debian `kcptun`, kcp-go and smux inside):
//! Petrel plays the kcptun *client*.
//!
//! Topology, all on loopback:
//! `this test (smux v1 → petrel_proto::kcp → FecEncoder/FecDecoder in kcp-go
//! framing → UdpSocket) ⇄ kcptun-server ⇄ TCP echo thread`.
//!
//! The test opens one smux stream, sends 200 000 deterministic bytes in PSH
//! frames, reads the echo back byte for byte, closes with FIN and waits for the
//! server's FIN and a keepalive NOP. It runs clean, with 5 % of the datagrams
//! Petrel sends dropped (kcptun must recover them from Petrel's parity or
//! retransmissions; kcptun's own SNMP log shows `FECRecovered`), and with 5 % of
//! the datagrams kcptun sends dropped (Petrel's decoder rebuilds them from
//! kcptun's parity). kcptun's `InCsumErrors` and `KCPInErrors` must stay 0: every
//! CRC-32 and every KCP segment Petrel wrote was accepted.
//!
//! Settings mirror `kcptun-client` with `--mode fast` (kcptun `main.go`, kcp-go
//! `sess.go`): nodelay 0, interval 30 ms, resend 2, no congestion control, ack
//! on the interval, windows 128/512, UDP mtu 1350 of which 28 bytes are the crypt
//! (20) and FEC (8) headers, random conv chosen by the client.
//!
//! smux v1 (xtaci/smux, `frame.go`): 8-byte header `ver u8 | cmd u8 | length u16
//! LE | stream id u32 LE`, cmd SYN 0, FIN 1, PSH 2, NOP 3. kcptun runs kcp-go in
//! stream mode; this test's Petrel side runs message mode, so each KCP message carries
//! at most one mss of the smux byte stream (`frg` = 0, as stream mode sends), and
//! received messages are concatenated back into a byte stream.
//!
//! Skipped, with a message on stderr, when `kcptun-server` is not in PATH; with
//! `PETREL_REQUIRE_KCPTUN` set (CI) its absence fails the test instead.
#![allow(clippy::unwrap_used)]

mod support_kcptun;

use petrel_proto::fec::{FecConfig, FecDecoder, FecEncoder, FecScheme, Framing};
use petrel_proto::kcp::{Kcp, KcpConfig, NORMAL_MIN_RTO};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support_kcptun::{
    echo_server, find_binary, kernel_drops, smux_frame, snmp_last_row, wait_udp_listener, Proc,
    SmuxRx, StopOnDrop, CMD_FIN, CMD_PSH, CMD_SYN, STREAM_ID,
};

const DS: u8 = 10;
const PS: u8 = 3;
/// kcptun's UDP mtu (its default), bytes.
const UDP_MTU: usize = 1350;
/// kcp-go's per-datagram header with crypt and FEC: 20 + 8 bytes.
const KCPGO_HEADERS: usize = 28;
/// Bytes sent through the stream and echoed back.
pub const TRANSFER: usize = 200_000;
/// Most datagrams read before the timers and output run again.
const RECV_BATCH: usize = 64;
/// Datagrams the socket reader thread may queue for the driver.
const INBOX_LIMIT: usize = 1024;
/// Whole conversation, setup to the server's FIN.
const CONVERSATION_LIMIT: Duration = Duration::from_secs(30);

/// Petrel's side: KCP under kcp-go-framed FEC over one connected UDP socket,
/// with seeded loss injected on each direction.
struct Client {
    sock: UdpSocket,
    kcp: Kcp,
    enc: FecEncoder,
    dec: FecDecoder,
    loss: ChaCha8Rng,
    tx_loss: f64,
    rx_loss: f64,
    tx_dropped: u64,
    rx_dropped: u64,
    fec_errors: u64,
    kcp_errors: u64,
    /// smux bytes not yet handed to KCP.
    unsent: Vec<u8>,
    smux: SmuxRx,
    datagram: Vec<u8>,
    wire: Vec<u8>,
    inbox: Inbox,
}

/// Reads the socket on its own thread into a bounded channel, so the kernel
/// buffer (208 KiB by default, where kcptun asks for 4 MiB) is drained even while
/// a debug build decodes: kcp-go sends a whole window at once.
struct Inbox {
    rx: Receiver<Vec<u8>>,
    /// Datagrams dropped because the channel was full.
    overflow: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl Inbox {
    fn spawn(sock: UdpSocket) -> Inbox {
        let (tx, rx) = sync_channel(INBOX_LIMIT);
        let overflow = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let reader = {
            let (overflow, stop) = (overflow.clone(), stop.clone());
            thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    match sock.recv(&mut buf) {
                        Ok(n) => match tx.try_send(buf[..n].to_vec()) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => {
                                overflow.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(TrySendError::Disconnected(_)) => return,
                        },
                        // Timeouts, and ICMP "refused" before the server is up.
                        Err(e)
                            if matches!(
                                e.kind(),
                                ErrorKind::WouldBlock
                                    | ErrorKind::TimedOut
                                    | ErrorKind::ConnectionRefused
                            ) => {}
                        Err(e) => panic!("recv from kcptun-server: {e}"),
                    }
                }
            })
        };
        Inbox {
            rx,
            overflow,
            stop,
            reader: Some(reader),
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

impl Client {
    fn new(server: SocketAddr, seed: u64, tx_loss: f64, rx_loss: f64) -> Client {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        // kcp-go sends the whole echo in one burst; ask for the 4 MiB receive buffer
        // kcptun itself uses (capped by net.core.rmem_max), not the 208 KiB default.
        socket2::SockRef::from(&sock)
            .set_recv_buffer_size(4 << 20)
            .unwrap();
        sock.connect(server).unwrap();
        let config = KcpConfig {
            mtu: UDP_MTU - KCPGO_HEADERS,
            snd_wnd: 128,
            rcv_wnd: 512,
            interval: Duration::from_millis(30),
            nodelay: false,
            min_rto: NORMAL_MIN_RTO,
            fast_resend: 2,
            ack_nodelay: false,
            ..KcpConfig::default()
        };
        // kcp-go's client draws conv at random (`DialWithOptions`).
        let kcp = Kcp::new(rng.gen(), config, Instant::now()).unwrap();
        let fec = FecConfig {
            scheme: FecScheme::Fixed {
                data_shards: DS,
                parity_shards: PS,
            },
            ..FecConfig::default()
        };
        let framing = Framing::KcpGo { crypt_header: true };
        let mut enc = FecEncoder::new(&fec, framing).unwrap();
        enc.set_nonce_seed(rng.gen());
        Client {
            kcp,
            enc,
            dec: FecDecoder::new(&fec, framing).unwrap(),
            loss: rng,
            tx_loss,
            rx_loss,
            tx_dropped: 0,
            rx_dropped: 0,
            fec_errors: 0,
            kcp_errors: 0,
            unsent: Vec::new(),
            smux: SmuxRx::default(),
            datagram: Vec::new(),
            wire: Vec::new(),
            inbox: Inbox::spawn(sock.try_clone().unwrap()),
            sock,
        }
    }

    fn write_frame(&mut self, cmd: u8, payload: &[u8]) {
        smux_frame(cmd, STREAM_ID, payload, &mut self.unsent);
    }

    /// Moves smux bytes into KCP (one mss per message) and KCP's datagrams
    /// through the FEC encoder onto the socket.
    fn flush(&mut self, now: Instant) {
        let mss = self.kcp.mss();
        while !self.unsent.is_empty() {
            let n = mss.min(self.unsent.len());
            if !self.kcp.can_send(n) {
                break;
            }
            self.kcp.send(&self.unsent[..n]).unwrap();
            self.unsent.drain(..n);
        }
        while self.kcp.poll_transmit(now, &mut self.datagram) {
            self.enc.push(now, &self.datagram).unwrap();
        }
        while self.enc.poll_transmit(now, &mut self.wire) {
            if self.loss.gen_bool(self.tx_loss) {
                self.tx_dropped += 1;
                continue;
            }
            match self.sock.send(&self.wire) {
                Ok(_) => {}
                // The server socket is not up yet; KCP retransmits.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
                Err(e) => panic!("send to kcptun-server: {e}"),
            }
        }
    }

    /// Waits for datagrams or the next deadline (≤ 50 ms), feeds them up the
    /// stack, runs the timers and sends what is due.
    fn step(&mut self) {
        let now = Instant::now();
        let wake = [self.kcp.poll_timeout(), self.dec.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + Duration::from_millis(50));
        let wait = wake
            .saturating_duration_since(now)
            .clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut batch = Vec::new();
        if let Ok(d) = self.inbox.rx.recv_timeout(wait) {
            batch.push(d);
            batch.extend(self.inbox.rx.try_iter().take(RECV_BATCH - 1));
        }
        let now = Instant::now();
        for d in &batch {
            if self.loss.gen_bool(self.rx_loss) {
                self.rx_dropped += 1;
            } else if self.dec.input(now, d).is_err() {
                self.fec_errors += 1;
            }
            while self.dec.poll_datagram(&mut self.datagram) {
                if self.kcp.input(now, &self.datagram).is_err() {
                    self.kcp_errors += 1;
                }
            }
        }
        let now = Instant::now();
        self.kcp.handle_timeout(now);
        self.dec.handle_timeout(now);
        while let Some(m) = self.kcp.recv() {
            self.smux.feed(&m);
        }
        self.flush(now);
    }

    /// Steps until `done` holds; panics with `what` and kcptun's log at `deadline`.
    fn run_until(
        &mut self,
        deadline: Instant,
        log: &Path,
        what: &str,
        done: impl Fn(&Client) -> bool,
    ) {
        while !done(self) {
            assert!(
                self.kcp.error().is_none(),
                "KCP failed while waiting for {what}: {:?}",
                self.kcp.error()
            );
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {} of {TRANSFER} bytes echoed, kcp {:?}, \
                 fec {:?}; kcptun log:\n{}",
                self.smux.echoed.len(),
                self.kcp.stats(),
                self.dec.stats(),
                std::fs::read_to_string(log).unwrap_or_default()
            );
            self.step();
        }
    }
}

struct Outcome {
    sent: Vec<u8>,
    client: Client,
    snmp: HashMap<String, u64>,
    elapsed: Duration,
    /// Datagrams to Petrel the kernel dropped (`None` without `/proc/net/udp`).
    kernel_drops: Option<u64>,
}

/// One full conversation against a fresh kcptun-server.
fn converse(server_bin: &Path, seed: u64, tx_loss: f64, rx_loss: f64) -> Outcome {
    let dir =
        std::env::temp_dir().join(format!("petrel-kcptun-conv-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // kcptun formats the snmplog file name as a Go time layout: no digits in it.
    let (snmp_path, log_path) = (dir.join("snmp.csv"), dir.join("kcptun.log"));
    let _ = std::fs::remove_file(&snmp_path);
    let _ = std::fs::remove_file(&log_path);

    let stop = Arc::new(AtomicBool::new(false));
    let (echo, echo_h) = echo_server(stop.clone());
    let stop_echo = StopOnDrop(stop);
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server_addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let (ds, ps, mtu) = (DS.to_string(), PS.to_string(), UDP_MTU.to_string());
    let server = Proc(
        Command::new(server_bin)
            .args(["-l", &server_addr.to_string(), "-t", &echo.to_string()])
            .args(["--crypt", "none", "--nocomp", "--mode", "fast"])
            .args(["--datashard", &ds, "--parityshard", &ps, "--mtu", &mtu])
            .args(["--smuxver", "1", "--keepalive", "1"])
            .args([
                "--snmplog",
                snmp_path.to_str().unwrap(),
                "--snmpperiod",
                "1",
            ])
            .args(["--log", log_path.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_udp_listener(port, Duration::from_secs(5));

    let start = Instant::now();
    let deadline = start + CONVERSATION_LIMIT;
    let mut client = Client::new(server_addr, seed, tx_loss, rx_loss);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED);
    let sent: Vec<u8> = (0..TRANSFER).map(|_| rng.gen()).collect();
    // SYN alone first, data once it is acked, so the data burst meets a session
    // kcptun has configured. Without this, 4 of 15 loaded runs saw the first
    // burst's acks arrive more than Petrel's 100 ms RTO floor late although kcptun
    // had every segment (its RepeatSegs = 64 after 64 spurious timeouts); a
    // listener-created kcp-go session flushes on its default 100 ms interval until
    // kcptun applies `--mode fast`, which would explain it.
    client.write_frame(CMD_SYN, &[]);
    client.flush(Instant::now());
    client.run_until(deadline, &log_path, "the SYN's ack", |c| {
        c.kcp.pending_segments() == 0
    });
    let mut at = 0;
    while at < TRANSFER {
        let n = rng.gen_range(1..=16_384).min(TRANSFER - at);
        client.write_frame(CMD_PSH, &sent[at..at + n]);
        at += n;
    }
    client.flush(Instant::now());
    client.run_until(deadline, &log_path, "the echo", |c| {
        c.smux.echoed.len() == TRANSFER
    });
    client.write_frame(CMD_FIN, &[]);
    client.run_until(deadline, &log_path, "the server's FIN", |c| {
        c.smux.fin && c.unsent.is_empty() && c.kcp.pending_segments() == 0
    });
    let elapsed = start.elapsed();
    // A keepalive NOP (1 s interval) and an SNMP row written after the end.
    let end_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let snmp_deadline = Instant::now() + Duration::from_secs(4);
    let snmp = loop {
        client.step();
        let row =
            snmp_last_row(&snmp_path).filter(|r| r.get("Unix").is_some_and(|&t| t > end_unix));
        match row {
            Some(r) if client.smux.nops > 0 => break r,
            _ => assert!(
                Instant::now() < snmp_deadline,
                "no NOP ({}) or SNMP row after the conversation",
                client.smux.nops
            ),
        }
    };
    let kernel_drops = kernel_drops(client.sock.local_addr().unwrap().port());
    drop(server);
    drop(stop_echo);
    echo_h.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Outcome {
        sent,
        client,
        snmp,
        elapsed,
        kernel_drops,
    }
}

/// Runs one conversation and checks what every run must show; `None` = skipped.
fn checked_conversation(name: &str, seed: u64, tx_loss: f64, rx_loss: f64) -> Option<Outcome> {
    let Some(server_bin) = find_binary("kcptun-server") else {
        // Written to stderr directly so the test harness's capture cannot hide it.
        let msg = "SKIPPED fec_kcptun_conversation: kcptun-server not in PATH (install: apt-get install -y kcptun)";
        assert!(std::env::var_os("PETREL_REQUIRE_KCPTUN").is_none(), "{msg}");
        let _ = writeln!(std::io::stderr(), "{msg}");
        return None;
    };
    let o = converse(&server_bin, seed, tx_loss, rx_loss);
    let c = &o.client;
    assert!(c.smux.echoed == o.sent, "echo through kcptun differs");
    assert!(c.smux.fin, "server FIN");
    assert!(c.smux.pending.is_empty(), "trailing partial smux frame");
    assert_eq!(
        (c.fec_errors, c.kcp_errors),
        (0, 0),
        "inputs Petrel rejected"
    );
    assert_eq!(c.dec.stats().malformed, 0);
    assert_eq!(c.enc.stats().tx_queue_dropped, 0);
    for counter in ["InCsumErrors", "KCPInErrors", "InErrs", "FECErrs"] {
        assert_eq!(
            o.snmp.get(counter),
            Some(&0),
            "kcptun {counter}: {:?}",
            o.snmp
        );
    }
    let (k, e, d) = (c.kcp.stats(), c.enc.stats(), c.dec.stats());
    eprintln!(
        "{name}: {TRANSFER} B echoed in {:?}; petrel sent {} data + {} parity shards \
         (dropped {}), retransmitted {} timeout + {} fast; received {} data + {} parity \
         (dropped {}, kernel drops {:?}, inbox overflow {}), recovered {}; {} NOPs; kcptun: FECRecovered {:?}, \
         RetransSegs {:?}, RepeatSegs {:?}, InPkts {:?}",
        o.elapsed,
        e.data_shards_sent,
        e.parity_shards_sent,
        c.tx_dropped,
        k.retransmissions_timeout,
        k.retransmissions_fast,
        d.data_shards_received,
        d.parity_shards_received,
        c.rx_dropped,
        o.kernel_drops,
        c.inbox.overflow.load(Ordering::Relaxed),
        d.shards_recovered,
        c.smux.nops,
        o.snmp.get("FECRecovered"),
        o.snmp.get("RetransSegs"),
        o.snmp.get("RepeatSegs"),
        o.snmp.get("InPkts"),
    );
    Some(o)
}

#[test]
fn echo_through_kcptun_server() {
    let Some(o) = checked_conversation("clean", 1, 0.0, 0.0) else {
        return;
    };
    assert!(o.snmp["FECParityShards"] > 0, "kcptun saw Petrel's parity");
    assert!(o.client.dec.stats().parity_shards_received > 0);
}

#[test]
fn kcptun_recovers_petrel_parity_under_send_loss() {
    let Some(o) = checked_conversation("tx loss 5 %", 2, 0.05, 0.0) else {
        return;
    };
    assert!(o.client.tx_dropped > 0);
    assert!(
        o.snmp["FECRecovered"] > 0,
        "kcptun rebuilt no shard from Petrel's parity: {:?}",
        o.snmp
    );
}

#[test]
fn petrel_recovers_kcptun_parity_under_receive_loss() {
    let Some(o) = checked_conversation("rx loss 5 %", 3, 0.0, 0.05) else {
        return;
    };
    assert!(o.client.rx_dropped > 0);
    assert!(o.client.dec.stats().shards_recovered > 0);
}
