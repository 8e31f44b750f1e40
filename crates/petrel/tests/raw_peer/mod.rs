//! A peer that speaks Petrel's native protocol through `petrel-proto`'s sans-IO cores
//! over a plain tokio socket, so a test can send what no `Endpoint` would: forged or
//! hand-built datagrams, GSO trains mixing connections, floods.

#![allow(dead_code)] // each test binary uses part of it

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel_proto::handshake::{ClientHandshake, Established, HandshakeMode, NativeConfig};
use petrel_proto::kcp::segment::{encode_segment, Command, Header};
use tokio::net::UdpSocket;
use tokio::time::timeout;

/// Drives a native client handshake from `sock`; `None` if the server stops
/// answering within `limit` (a refused handshake gets no reply).
pub async fn native_handshake(
    sock: &UdpSocket,
    server: SocketAddr,
    seed: u64,
    limit: Duration,
) -> Option<Established> {
    let mode = HandshakeMode::Native(NativeConfig::default());
    let start = Instant::now();
    let mut hs = ClientHandshake::new(mode, start, 0, seed).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 2048];
    while start.elapsed() < limit {
        let now = Instant::now();
        hs.handle_timeout(now).ok()?;
        while hs.poll_transmit(now, &mut out) {
            sock.send_to(&out, server).await.unwrap();
        }
        if let Ok(Ok((n, _))) = timeout(Duration::from_millis(20), sock.recv_from(&mut buf)).await {
            if let Some(est) = hs.handle_input(Instant::now(), &buf[..n]).ok()? {
                return Some(est);
            }
        }
    }
    None
}

/// The first INITIAL a fresh native client with `seed` sends.
pub fn initial(seed: u64) -> Vec<u8> {
    let now = Instant::now();
    let mode = HandshakeMode::Native(NativeConfig::default());
    let mut hs = ClientHandshake::new(mode, now, 0, seed).unwrap();
    let mut out = Vec::new();
    assert!(hs.poll_transmit(now, &mut out));
    out
}

/// A KCP PUSH of `conv`/`sn` carrying `payload` (window 1024, `ts` and `una` 0).
pub fn push(conv: u32, sn: u32, payload: &[u8]) -> Vec<u8> {
    let header = Header {
        conv,
        cmd: Command::Push,
        frg: 0,
        wnd: 1024,
        ts: 0,
        sn,
        una: 0,
        len: 0,
    };
    let mut out = Vec::new();
    encode_segment(&header, payload, &mut out);
    out
}
