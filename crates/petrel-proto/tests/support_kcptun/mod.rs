//! Helpers for `fec_kcptun_conversation.rs`: kcptun process and echo-server
//! plumbing, kcptun's SNMP log, Linux socket counters, and a minimal smux v1
//! framing written from smux's public description (xtaci/smux `frame.go`:
//! 8-byte header `ver u8 | cmd u8 | length u16 LE | stream id u32 LE`).

use super::TRANSFER;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const SMUX_VER: u8 = 1;
const SMUX_HDR: usize = 8;
pub const CMD_SYN: u8 = 0;
pub const CMD_FIN: u8 = 1;
pub const CMD_PSH: u8 = 2;
const CMD_NOP: u8 = 3;
/// smux clients number streams with odd ids, the first `OpenStream` getting 3
/// (`nextStreamID` starts at 1 and is advanced before use); checked on the wire:
/// Debian's kcptun-client opens its first stream with `SYN sid 3`.
pub const STREAM_ID: u32 = 3;

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

/// The first file called `name` in `PATH`.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// TCP echo server; every connection thread stops with `stop`.
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
                let mut buf = [0u8; 16384];
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

/// Waits until something listens on UDP `127.0.0.1:port` (Linux `/proc/net/udp`),
/// so the first datagrams are not refused; gives up quietly after `limit` (KCP
/// retransmits anyway).
pub fn wait_udp_listener(port: u16, limit: Duration) {
    let needle = format!("0100007F:{port:04X} ");
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match std::fs::read_to_string("/proc/net/udp") {
            Ok(t) if t.contains(&needle) => return,
            Ok(_) => thread::sleep(Duration::from_millis(20)),
            Err(_) => return,
        }
    }
}

pub fn smux_frame(cmd: u8, sid: u32, payload: &[u8], out: &mut Vec<u8>) {
    out.push(SMUX_VER);
    out.push(cmd);
    out.extend_from_slice(&u16::try_from(payload.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&sid.to_le_bytes());
    out.extend_from_slice(payload);
}

/// What the server said on the smux session.
#[derive(Debug, Default)]
pub struct SmuxRx {
    /// Unparsed tail of the byte stream (at most one frame, ≤ 65 543 bytes).
    pub pending: Vec<u8>,
    pub echoed: Vec<u8>,
    pub fin: bool,
    pub nops: u64,
}

impl SmuxRx {
    /// Appends KCP-delivered bytes and consumes every complete frame.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        while self.pending.len() - at >= SMUX_HDR {
            let h = &self.pending[at..at + SMUX_HDR];
            let (ver, cmd) = (h[0], h[1]);
            let len = usize::from(u16::from_le_bytes([h[2], h[3]]));
            let sid = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            assert_eq!(ver, SMUX_VER, "smux version from kcptun");
            if self.pending.len() - at < SMUX_HDR + len {
                break;
            }
            let body = &self.pending[at + SMUX_HDR..at + SMUX_HDR + len];
            match cmd {
                CMD_PSH => {
                    assert_eq!(sid, STREAM_ID, "PSH for a stream we did not open");
                    assert!(!self.fin, "PSH after FIN");
                    self.echoed.extend_from_slice(body);
                    assert!(self.echoed.len() <= TRANSFER, "more bytes echoed than sent");
                }
                CMD_FIN => {
                    assert_eq!(sid, STREAM_ID, "FIN for a stream we did not open");
                    self.fin = true;
                }
                CMD_NOP => self.nops += 1,
                other => panic!("unexpected smux cmd {other} (len {len}, sid {sid})"),
            }
            at += SMUX_HDR + len;
        }
        self.pending.drain(..at);
    }
}

/// Datagrams the kernel dropped on the UDP socket bound to `127.0.0.1:port`
/// (receive buffer full): the last column of Linux `/proc/net/udp`.
pub fn kernel_drops(port: u16) -> Option<u64> {
    let needle = format!("0100007F:{port:04X} ");
    let text = std::fs::read_to_string("/proc/net/udp").ok()?;
    let line = text.lines().find(|l| l.contains(&needle))?;
    line.split_whitespace().last()?.parse().ok()
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
