//! Feeds arbitrary datagrams to a `Kcp` that has data in flight, then drives every
//! other entry point. Run: `cargo +nightly fuzz run kcp_input` from the repository root.
//!
//! Input layout: a sequence of `len: u16 LE` + `len` bytes records, each one datagram,
//! so the fuzzer can build multi-datagram exchanges. The connection's conv is taken
//! from the first datagram, so segments are not all rejected for a conv mismatch.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use petrel_proto::kcp::{peek_conv, Kcp, KcpConfig};

fuzz_target!(|data: &[u8]| {
    let start = Instant::now();
    let mut datagrams = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        datagrams.push(&rest[2..2 + len]);
        rest = &rest[2 + len..];
    }
    let conv = datagrams.first().and_then(|d| peek_conv(d)).unwrap_or(0);
    let config = KcpConfig {
        snd_wnd: 16,
        rcv_wnd: 32,
        ..KcpConfig::default()
    };
    let Ok(mut kcp) = Kcp::new(conv, config, start) else {
        return;
    };
    for i in 0..8u8 {
        let _ = kcp.send(&[i; 700]);
    }
    let mut out = Vec::new();
    while kcp.poll_transmit(start, &mut out) {}
    for (i, datagram) in datagrams.iter().enumerate() {
        let now = start + Duration::from_millis(7 * i as u64);
        let _ = kcp.input(now, datagram);
        while kcp.recv().is_some() {}
        if let Some(deadline) = kcp.poll_timeout() {
            kcp.handle_timeout(deadline.max(now));
        }
        let mut sent = 0;
        while kcp.poll_transmit(now, &mut out) {
            assert!(out.len() <= config.mtu);
            sent += 1;
            assert!(sent < 100_000, "poll_transmit never ends");
        }
    }
    let _ = kcp.stats();
});
