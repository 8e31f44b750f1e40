//! Shared by `interop_kcptun.rs`: the kcptun processes, a TCP echo target, a TCP
//! client that pushes a payload through `kcptun-client` and checks the echo,
//! kcptun's SNMP log, the impairment relay and the Petrel side's configuration.
//!
//! Every process is killed by PID when its [`Proc`] drops; every thread stops on
//! its flag or when its socket closes; every wait is bounded.

#![allow(dead_code)] // each test binary uses part of it

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use petrel::{EndpointConfig, FecConfig, FecScheme, KcpConfig, KcpPreset, Mode};
use petrel_netem::{Profile, Relay, RelayConfig};
use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

/// kcptun's FEC shape in these tests (`--datashard 10 --parityshard 3`, its default).
pub const DATA_SHARDS: u8 = 10;
pub const PARITY_SHARDS: u8 = 3;
/// UDP payload limit on both sides, bytes (`--mtu`).
pub const MTU: usize = 1200;
/// KCP windows on both sides, segments (`--sndwnd`, `--rcvwnd`).
pub const SND_WND: u16 = 128;
pub const RCV_WND: u16 = 512;
/// kcptun `--mode` on both sides.
pub const PRESET: KcpPreset = KcpPreset::Fast3;

/// Kills its process (by PID, via `Child::kill`) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sets its flag when dropped, so helper threads stop even when a test panics.
pub struct StopOnDrop(pub Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The kcptun binary `name` from `PATH`; `None` (after saying why on stderr) when
/// it is missing, unless `PETREL_REQUIRE_KCPTUN` is set (CI), which fails instead.
pub fn kcptun(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let msg = format!("SKIPPED: {name} not in PATH (install: apt-get install -y kcptun)");
        assert!(std::env::var_os("PETREL_REQUIRE_KCPTUN").is_none(), "{msg}");
        let _ = writeln!(std::io::stderr(), "{msg}");
    }
    found
}

/// A free UDP port on 127.0.0.1 (bound and released: a race, but only this test uses it).
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A free TCP port on 127.0.0.1.
pub fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on `127.0.0.1:port` of `proto` ("udp" or "tcp",
/// Linux `/proc/net/*`); panics after `limit`.
pub fn wait_listener(proto: &str, port: u16, limit: Duration) {
    let needle = format!("0100007F:{port:04X} ");
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/net/{proto}")) {
            Ok(t) if t.contains(&needle) => return,
            Ok(_) => thread::sleep(Duration::from_millis(20)),
            Err(_) => return,
        }
    }
    panic!("nothing listens on {proto} 127.0.0.1:{port} after {limit:?}");
}

/// The kcptun arguments both sides share: crypt none, no compression, the FEC
/// shape, MTU, windows and preset above, smux v1, SNMP every second to `snmp`.
pub fn kcptun_args(snmp: &Path) -> Vec<String> {
    [
        "--crypt",
        "none",
        "--nocomp",
        "--mode",
        PRESET.as_str(),
        "--datashard",
        &DATA_SHARDS.to_string(),
        "--parityshard",
        &PARITY_SHARDS.to_string(),
        "--mtu",
        &MTU.to_string(),
        "--sndwnd",
        &SND_WND.to_string(),
        "--rcvwnd",
        &RCV_WND.to_string(),
        "--smuxver",
        "1",
        "--snmplog",
        snmp.to_str().unwrap(),
        "--snmpperiod",
        "1",
        "--quiet",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// Starts `bin` with `args` plus [`kcptun_args`], logging to `dir/name.log`.
pub fn spawn_kcptun(bin: &Path, args: &[&str], dir: &Path, name: &str) -> (Proc, PathBuf) {
    let snmp = dir.join(format!("{name}-snmp.csv"));
    let log = dir.join(format!("{name}.log"));
    let child = Command::new(bin)
        .args(args)
        .args(kcptun_args(&snmp))
        .args(["--log", log.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Proc(child), snmp)
}

/// A scratch directory for one test's logs. kcptun reads the `--snmplog` name as a
/// Go time layout, so the path must hold no digits that layout would replace:
/// the directory is named by letters only.
pub fn scratch_dir(test: &str) -> PathBuf {
    let letters: String = std::process::id()
        .to_string()
        .bytes()
        .map(|b| char::from(b'a' + (b - b'0')))
        .collect();
    let dir = std::env::temp_dir().join(format!("petrel-kcptun-{test}-{letters}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The last row of kcptun's SNMP CSV log (kcp-go `DefaultSnmp`), by column name.
pub fn snmp_last_row(path: &Path) -> Option<HashMap<String, u64>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let last = lines.last()?;
    Some(
        header
            .iter()
            .zip(last.split(','))
            .filter_map(|(k, v)| Some(((*k).to_owned(), v.parse().ok()?)))
            .collect(),
    )
}

/// Waits (≤ 5 s) for an SNMP row written after `after` (Unix seconds) and returns it.
pub fn snmp_row_after(path: &Path, after: u64) -> HashMap<String, u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(row) = snmp_last_row(path).filter(|r| r.get("Unix").is_some_and(|&t| t > after))
        {
            return row;
        }
        assert!(
            Instant::now() < deadline,
            "no kcptun SNMP row after {after} in {}",
            path.display()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// TCP echo server; every connection thread stops with `stop` or its peer.
pub fn echo_server(stop: Arc<AtomicBool>) -> (SocketAddr, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let h = thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut s, _)) = l.accept() else {
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) if s.write_all(&buf[..n]).is_ok() => {}
                        Ok(_) => break,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                        Err(_) => break,
                    }
                }
            });
        }
    });
    (addr, h)
}

/// `len` bytes from a seeded generator, and their SHA-256.
pub fn payload(len: usize, seed: u64) -> (Vec<u8>, [u8; 32]) {
    let mut data = vec![0u8; len];
    rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut data);
    let hash = Sha256::digest(&data).into();
    (data, hash)
}

/// What came back through an echo.
#[derive(Debug)]
pub struct Echoed {
    pub bytes: usize,
    pub sha256: [u8; 32],
    pub elapsed: Duration,
}

/// Connects to `addr` (a `kcptun-client`), writes `data` from one thread while
/// reading the echo on this one, until `data.len()` bytes came back or `limit`.
pub fn tcp_echo_roundtrip(addr: SocketAddr, data: Arc<Vec<u8>>, limit: Duration) -> Echoed {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut w = s.try_clone().unwrap();
    let total = data.len();
    let writer = thread::spawn(move || {
        for chunk in data.chunks(64 * 1024) {
            if w.write_all(chunk).is_err() {
                return;
            }
        }
    });
    let mut hasher = Sha256::new();
    let mut got = 0;
    let mut buf = vec![0u8; 65536];
    while got < total {
        assert!(
            start.elapsed() < limit,
            "echo through kcptun-client: {got} of {total} bytes after {limit:?}"
        );
        match s.read(&mut buf) {
            Ok(0) => panic!("kcptun-client closed after {got} of {total} bytes"),
            Ok(n) => {
                hasher.update(&buf[..n]);
                got += n;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("read from kcptun-client: {e}"),
        }
    }
    let elapsed = start.elapsed();
    writer.join().unwrap();
    Echoed {
        bytes: got,
        sha256: hasher.finalize().into(),
        elapsed,
    }
}

/// The `random` impairment profile (5 % loss, 10 ms delay, 1 % duplication, 5 %
/// reordered by +15 ms) both ways between clients and `upstream`.
pub fn random_relay(upstream: SocketAddr, seed: u64) -> Relay {
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), upstream);
    config.route = Profile::Random.route();
    config.seed = seed;
    Relay::start(config).unwrap()
}

/// Petrel's endpoint configuration matching [`kcptun_args`].
pub fn petrel_config(accept_incoming: bool) -> EndpointConfig {
    petrel_config_shaped(accept_incoming, DATA_SHARDS, PARITY_SHARDS)
}

/// [`petrel_config`] with another FEC shape.
pub fn petrel_config_shaped(
    accept_incoming: bool,
    data_shards: u8,
    parity_shards: u8,
) -> EndpointConfig {
    EndpointConfig {
        mode: Mode::KcpGo { crypt_none: true },
        kcp: KcpConfig {
            mtu: MTU,
            snd_wnd: SND_WND,
            rcv_wnd: RCV_WND,
            ..KcpConfig::default()
        }
        .with_preset(PRESET),
        fec: FecConfig {
            scheme: FecScheme::Fixed {
                data_shards,
                parity_shards,
            },
            ..FecConfig::default()
        },
        recv_buffer: Some(4 << 20),
        send_buffer: Some(4 << 20),
        accept_incoming,
        ..EndpointConfig::default()
    }
}
