//! Receive-side memory under oversized KCP segments, measured as this process's RSS.
//!
//! Its own test binary so no other test's allocations move the figure. A peer that
//! completed the handshake fills the server's receive buffer and queue with segments of
//! 60 000 bytes — fifty times the negotiated mss — while the application does not read.
//! The receive side must stay near its window in bytes (`rcv_wnd × mss`, about 0.6 MB per
//! buffer with the defaults), not `rcv_wnd × 64 KiB`.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use petrel::{Endpoint, EndpointConfig};
use petrel_proto::handshake::{ClientHandshake, HandshakeMode, NativeConfig};
use petrel_proto::kcp::segment::{encode_segment, segments, Command, Header};
use tokio::net::UdpSocket;
use tokio::time::timeout;

fn rss_bytes() -> u64 {
    petrel_sys::proc::rss_bytes(std::process::id()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_segments_stay_within_the_window_in_bytes() {
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::server())
        .await
        .unwrap();
    let addr: SocketAddr = server.local_addr();
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let start = Instant::now();
    let mode = HandshakeMode::Native(NativeConfig::default());
    let mut hs = ClientHandshake::new(mode, start, 0, 5).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let est = loop {
        assert!(start.elapsed() < Duration::from_secs(5), "handshake");
        let now = Instant::now();
        hs.handle_timeout(now).unwrap();
        while hs.poll_transmit(now, &mut out) {
            sock.send_to(&out, addr).await.unwrap();
        }
        if let Ok(Ok((n, _))) = timeout(Duration::from_millis(20), sock.recv_from(&mut buf)).await {
            if let Some(est) = hs.handle_input(Instant::now(), &buf[..n]).unwrap() {
                break est;
            }
        }
    };
    // Accept and hold the connection; never read from it.
    let _conn = timeout(Duration::from_secs(2), server.accept())
        .await
        .unwrap()
        .unwrap();
    let rcv_wnd = u32::from(EndpointConfig::default().kcp.rcv_wnd);
    let payload = vec![0xA5u8; 60_000];
    let before = rss_bytes();
    // sn 0..rcv_wnd fills the in-order queue; rcv_wnd+1..2·rcv_wnd (skipping rcv_wnd)
    // sits in the out-of-order buffer behind the gap.
    let wanted: Vec<u32> = (0..rcv_wnd).chain(rcv_wnd + 1..2 * rcv_wnd).collect();
    let mut acked = HashSet::new();
    // Two passes: the second resends what the first lost to socket buffers; anything
    // still unacked after it was refused by the server.
    for _pass in 0..2 {
        let todo: Vec<u32> = wanted
            .iter()
            .copied()
            .filter(|sn| !acked.contains(sn))
            .collect();
        for (i, sn) in todo.iter().enumerate() {
            let header = Header {
                conv: est.conv,
                cmd: Command::Push,
                frg: 0,
                wnd: 128,
                ts: 0,
                sn: *sn,
                una: 0,
                len: 0,
            };
            out.clear();
            encode_segment(&header, &payload, &mut out);
            sock.send_to(&out, addr).await.unwrap();
            if i % 8 == 7 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            while let Ok((n, _)) = sock.try_recv_from(&mut buf) {
                for seg in segments(&buf[..n]).flatten() {
                    if seg.header.cmd == Command::Ack {
                        acked.insert(seg.header.sn);
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok((n, _)) = sock.try_recv_from(&mut buf) {
            for seg in segments(&buf[..n]).flatten() {
                if seg.header.cmd == Command::Ack {
                    acked.insert(seg.header.sn);
                }
            }
        }
    }
    let grown = rss_bytes().saturating_sub(before);
    let window_bytes = 2 * u64::from(rcv_wnd) * 1500;
    assert!(
        grown < 4 * window_bytes,
        "receive side grew by {} MB for {} acked 60 kB segments (window ≈ {} MB)",
        grown / 1_000_000,
        acked.len(),
        window_bytes / 1_000_000
    );
}
