//! Property tests: the segment codec round-trips, and no input — random bytes or
//! well-formed segments with hostile field values — panics the decoder or `Kcp`.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use petrel_proto::kcp::segment::{encode_segment, segments, Command, Header};
use petrel_proto::kcp::{Kcp, KcpConfig};
use proptest::prelude::*;

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        Just(Command::Push),
        Just(Command::Ack),
        Just(Command::WindowAsk),
        Just(Command::WindowTell),
    ]
}

fn segment(conv: Option<u32>) -> impl Strategy<Value = (Header, Vec<u8>)> {
    (
        any::<u32>(),
        command(),
        any::<u8>(),
        any::<u16>(),
        any::<u32>(),
        // Small sns and unas hit the windows, large ones test wrap-around.
        prop_oneof![0u32..600, any::<u32>()],
        prop_oneof![0u32..600, any::<u32>()],
        proptest::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(move |(c, cmd, frg, wnd, ts, sn, una, payload)| {
            let header = Header {
                conv: conv.unwrap_or(c),
                cmd,
                frg,
                wnd,
                ts,
                sn,
                una,
                len: payload.len() as u32,
            };
            (header, payload)
        })
}

proptest! {
    #[test]
    fn segments_round_trip(segs in proptest::collection::vec(segment(None), 1..8)) {
        let mut datagram = Vec::new();
        for (h, p) in &segs {
            encode_segment(h, p, &mut datagram);
        }
        let decoded: Vec<_> = segments(&datagram).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(decoded.len(), segs.len());
        for (d, (h, p)) in decoded.iter().zip(&segs) {
            prop_assert_eq!(&d.header, h);
            prop_assert_eq!(d.payload, &p[..]);
        }
    }

    #[test]
    fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut consumed = 0;
        for seg in segments(&bytes) {
            match seg {
                Ok(s) => consumed += 24 + s.payload.len(),
                Err(_) => break,
            }
        }
        prop_assert!(consumed <= bytes.len());
    }

    #[test]
    fn kcp_survives_random_bytes(
        datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..10)
    ) {
        let start = Instant::now();
        let mut kcp = Kcp::new(7, KcpConfig::default(), start).unwrap();
        for (i, d) in datagrams.iter().enumerate() {
            let now = start + Duration::from_millis(i as u64);
            // Random bytes rarely carry conv 7, so splice it in half the time.
            let mut d = d.clone();
            if i % 2 == 0 && d.len() >= 4 {
                d[..4].copy_from_slice(&7u32.to_le_bytes());
            }
            let _ = kcp.input(now, &d);
        }
        exercise(&mut kcp, start + Duration::from_secs(1));
    }

    #[test]
    fn kcp_survives_hostile_segments(
        datagrams in proptest::collection::vec(proptest::collection::vec(segment(Some(7)), 1..6), 1..30)
    ) {
        let start = Instant::now();
        let config = KcpConfig { rcv_wnd: 32, snd_wnd: 16, ..KcpConfig::default() };
        let mut kcp = Kcp::new(7, config, start).unwrap();
        for i in 0..20u8 {
            kcp.send(&[i; 1000]).unwrap();
        }
        let mut out = Vec::new();
        while kcp.poll_transmit(start, &mut out) {}
        for (i, segs) in datagrams.iter().enumerate() {
            let now = start + Duration::from_millis(5 * i as u64);
            let mut d = Vec::new();
            for (h, p) in segs {
                encode_segment(h, p, &mut d);
            }
            prop_assert!(kcp.input(now, &d).is_ok());
            exercise(&mut kcp, now);
            // Everything stays bounded by the configured windows and queue.
            prop_assert!(kcp.pending_segments() <= 20);
            let s = kcp.stats();
            prop_assert!(s.rcv_wnd <= 32);
        }
    }
}

/// Drives every entry point once; datagrams must stay within the MTU.
fn exercise(kcp: &mut Kcp, now: Instant) {
    while kcp.recv().is_some() {}
    if let Some(t) = kcp.poll_timeout() {
        kcp.handle_timeout(t.max(now));
    }
    let mut out = Vec::new();
    let mut count = 0;
    while kcp.poll_transmit(now, &mut out) {
        assert!(out.len() <= 1200);
        count += 1;
        assert!(count < 10_000, "poll_transmit never ends");
    }
}
