//! Loopback tests of batched send and receive with real sockets.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use super::*;

fn rx() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    // Room for the largest burst a test sends (150 datagrams of 1 KiB).
    socket2::SockRef::from(&s)
        .set_recv_buffer_size(4 << 20)
        .unwrap();
    s
}

fn addr(s: &UdpSocket) -> SocketAddr {
    s.local_addr().unwrap()
}

/// Reads `n` datagrams one at a time.
fn read_n(s: &UdpSocket, n: usize) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; MAX_UDP_PAYLOAD];
    (0..n)
        .map(|_| {
            let (len, _) = s.recv_from(&mut buf).unwrap();
            buf[..len].to_vec()
        })
        .collect()
}

#[test]
fn sendmmsg_to_three_destinations_arrives_at_each() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let rxs = [rx(), rx(), rx()];
    let datagrams = [
        Transmit {
            destination: Some(addr(&rxs[0])),
            payload: b"zero",
        },
        Transmit {
            destination: Some(addr(&rxs[1])),
            payload: b"one",
        },
        Transmit {
            destination: Some(addr(&rxs[2])),
            payload: b"two",
        },
        Transmit {
            destination: Some(addr(&rxs[0])),
            payload: b"three",
        },
    ];
    // Capacity 2: two system calls, same result.
    let mut batch = SendBatch::new(2);
    assert_eq!(batch.send(&tx, &datagrams).unwrap(), 4);
    assert_eq!(read_n(&rxs[0], 2), [b"zero".to_vec(), b"three".to_vec()]);
    assert_eq!(read_n(&rxs[1], 1), [b"one".to_vec()]);
    assert_eq!(read_n(&rxs[2], 1), [b"two".to_vec()]);
}

#[test]
fn send_to_one_destination_and_on_a_connected_socket() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100]).collect();
    let mut batch = SendBatch::new(8);
    assert_eq!(batch.send_to(&tx, &payloads, Some(addr(&r))).unwrap(), 5);
    assert_eq!(read_n(&r, 5), payloads);
    tx.connect(addr(&r)).unwrap();
    assert_eq!(batch.send_to(&tx, &payloads[..2], None).unwrap(), 2);
    assert_eq!(read_n(&r, 2), payloads[..2]);
}

#[test]
fn send_to_each_reaches_every_target_and_counts_failures() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let rxs: Vec<UdpSocket> = (0..10).map(|_| rx()).collect();
    let targets: Vec<SocketAddr> = rxs.iter().map(addr).collect();
    let mut batch = SendBatch::new(4);
    let excluded = targets[3];
    let r = batch.send_to_each(
        &tx,
        b"hello",
        targets.iter().copied().filter(|a| *a != excluded),
    );
    assert_eq!((r.attempted, r.sent, r.errors), (9, 9, 0));
    for (i, s) in rxs.iter().enumerate() {
        if i == 3 {
            s.set_nonblocking(true).unwrap();
            assert!(s.recv_from(&mut [0u8; 16]).is_err());
        } else {
            assert_eq!(read_n(s, 1), [b"hello".to_vec()]);
        }
    }
    let big = vec![0u8; 70_000];
    let r = batch.send_to_each(&tx, &big, [targets[0], targets[1]]);
    assert_eq!((r.sent, r.errors, r.message_too_large), (0, 2, 2));
}

#[test]
fn full_buffer_reports_would_block_and_a_prefix() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&tx)
        .set_send_buffer_size(4096)
        .unwrap();
    tx.set_nonblocking(true).unwrap();
    let r = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&r)
        .set_recv_buffer_size(4096)
        .unwrap();
    let payloads = vec![vec![7u8; 1200]; 64];
    let mut batch = SendBatch::new(64);
    // Loopback delivers synchronously into the receiver's small buffer, which
    // drops rather than blocks; sending keeps succeeding or stops with a prefix,
    // and never claims more than it was given.
    let n = batch.send_to(&tx, &payloads, Some(addr(&r))).unwrap();
    assert!(n <= payloads.len());
    let mut rb = RecvBatch::new(4);
    r.set_nonblocking(true).unwrap();
    let mut got = 0;
    loop {
        match rb.recv(&r) {
            Ok(k) => got += k,
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
                break;
            }
        }
    }
    assert!(got >= 1 && got <= n, "{got} of {n}");
}

#[test]
fn gso_split_arrives_as_separate_datagrams() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    // 10 segments of 1200 bytes and a 500-byte tail, each segment numbered.
    let mut payload = Vec::new();
    for i in 0..10u8 {
        payload.extend(std::iter::repeat_n(i, 1200));
    }
    payload.extend(std::iter::repeat_n(0xee, 500));
    let mut batch = SendBatch::new(8);
    assert_eq!(
        batch
            .send_segments(&tx, Some(addr(&r)), &payload, 1200)
            .unwrap(),
        11
    );
    let got = read_n(&r, 11);
    let want: Vec<Vec<u8>> = payload.chunks(1200).map(<[u8]>::to_vec).collect();
    assert_eq!(got, want);
    // More than one GSO call's worth (64 segments) and a segment size that
    // bounds a call by bytes (65507 / 1024 = 63 segments per call).
    let payload: Vec<u8> = (0..150 * 1024).map(|i| (i / 1024) as u8).collect();
    assert_eq!(
        batch
            .send_segments(&tx, Some(addr(&r)), &payload, 1024)
            .unwrap(),
        150
    );
    let got = read_n(&r, 150);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, d)| d.len() == 1024 && d[0] == i as u8));
    assert_eq!(
        batch.send_segments(&tx, Some(addr(&r)), &[], 1200).unwrap(),
        0
    );
    assert!(batch.send_segments(&tx, Some(addr(&r)), b"x", 0).is_err());
}

#[test]
fn gso_refusal_falls_back_and_is_remembered() {
    // A kernel refusal cannot be provoked portably over loopback; start from the
    // state it leaves and check that the segments still go out, one each.
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    let mut batch = SendBatch::new(8);
    batch.set_gso(false);
    let payload = vec![3u8; 1200 * 5];
    assert_eq!(
        batch
            .send_segments(&tx, Some(addr(&r)), &payload, 1200)
            .unwrap(),
        5
    );
    assert_eq!(read_n(&r, 5), vec![vec![3u8; 1200]; 5]);
    assert!(!batch.gso_enabled());
}

#[test]
fn recvmmsg_reads_a_batch_with_sources() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    for i in 0..6u8 {
        tx.send_to(&[i; 10], addr(&r)).unwrap();
    }
    let mut rb = RecvBatch::new(4);
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let n = rb.recv(&r).unwrap();
        assert!((1..=4).contains(&n));
        for d in rb.iter() {
            assert_eq!(d.source, Some(addr(&tx)));
            assert!(!d.truncated);
            assert_eq!(d.segment_size, None);
            seen.push(d.data[0]);
        }
        assert!(rb.get(n).is_none());
    }
    assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
    r.set_nonblocking(true).unwrap();
    assert_eq!(
        rb.recv(&r).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

/// A batch the socket could not fill emptied it: `drained` says so, and the read
/// that would have returned `WouldBlock` is not needed. A full batch says
/// nothing, and neither does a full batch of one.
#[cfg(target_os = "linux")]
#[test]
fn a_short_batch_reports_the_socket_drained() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    r.set_nonblocking(true).unwrap();
    let send = |n: u8| {
        for i in 0..n {
            tx.send_to(&[i; 10], addr(&r)).unwrap();
        }
        // Loopback delivers within the send call; wait for the last anyway.
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut rb = RecvBatch::new(4);
    send(4);
    assert_eq!(rb.recv(&r).unwrap(), 4);
    assert!(!rb.drained());
    send(3);
    assert_eq!(rb.recv(&r).unwrap(), 3);
    assert!(rb.drained());
    assert_eq!(
        rb.recv(&r).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    let mut one = RecvBatch::new(1);
    send(1);
    assert_eq!(one.recv(&r).unwrap(), 1);
    assert!(!one.drained());
}

#[test]
fn gro_coalesces_a_gso_train_with_its_segment_size() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    if !enable_gro(&r).unwrap() {
        return; // kernel without UDP_GRO: nothing to check
    }
    let payload: Vec<u8> = (0..8 * 1200 + 100).map(|i| (i / 1200) as u8).collect();
    let mut batch = SendBatch::new(8);
    assert_eq!(
        batch
            .send_segments(&tx, Some(addr(&r)), &payload, 1200)
            .unwrap(),
        9
    );
    let mut rb = RecvBatch::new(8);
    let mut datagrams: Vec<Vec<u8>> = Vec::new();
    let mut coalesced = false;
    while datagrams.len() < 9 {
        rb.recv(&r).unwrap();
        for d in rb.iter() {
            if let Some(size) = d.segment_size {
                assert_eq!(size, 1200);
                coalesced |= d.data.len() > size;
            }
            datagrams.extend(d.datagrams().map(<[u8]>::to_vec));
        }
    }
    let want: Vec<Vec<u8>> = payload.chunks(1200).map(<[u8]>::to_vec).collect();
    assert_eq!(datagrams, want);
    // Over loopback a GSO train reaches a GRO socket whole; without GSO (kernel
    // refused it) the datagrams may arrive one by one.
    assert!(coalesced || !batch.gso_enabled());
}

#[cfg(target_os = "linux")]
#[test]
fn send_to_each_retries_a_target_that_drew_an_earlier_icmp_error() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    crate::error_queue::enable_recv_errors(&tx).unwrap();
    let closed = addr(&UdpSocket::bind("127.0.0.1:0").unwrap());
    let open = rx();
    tx.send_to(b"a", closed).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // The queued error fails the next send once; that target is retried.
    let mut batch = SendBatch::new(8);
    let r = batch.send_to_each(&tx, b"c", [addr(&open)]);
    assert_eq!((r.sent, r.errors, r.deferred_errors), (1, 0, 1));
    assert_eq!(read_n(&open, 1), vec![b"c".to_vec()]);
}

#[test]
fn send_train_gathers_separate_buffers_with_gso_and_without() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = rx();
    // 70 segments of 1000 bytes and a shorter last one: two GSO calls (64 + 7).
    let mut segments: Vec<Vec<u8>> = (0..70u8).map(|i| vec![i; 1000]).collect();
    segments.push(vec![0xee; 300]);
    for gso in [true, false] {
        let mut batch = SendBatch::new(16);
        batch.set_gso(gso);
        assert_eq!(
            batch.send_train(&tx, Some(addr(&r)), &segments).unwrap(),
            segments.len()
        );
        assert_eq!(read_n(&r, segments.len()), segments, "gso {gso}");
    }
    // Uneven sizes (a longer segment after a shorter one) go out as a batch, intact.
    let uneven = [vec![1u8; 10], vec![2u8; 20], vec![3u8; 5]];
    let mut batch = SendBatch::new(16);
    assert_eq!(batch.send_train(&tx, Some(addr(&r)), &uneven).unwrap(), 3);
    assert_eq!(read_n(&r, 3), uneven);
}

#[test]
fn send_slices_reaches_each_destination_and_counts_system_calls() {
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let rxs = [rx(), rx()];
    let payloads = [vec![1u8; 3], vec![2u8; 4], vec![3u8; 5]];
    let dests = [addr(&rxs[0]), addr(&rxs[1]), addr(&rxs[0])];
    let mut batch = SendBatch::new(2);
    assert_eq!(batch.send_slices(&tx, &payloads, &dests).unwrap(), 3);
    assert_eq!(
        read_n(&rxs[0], 2),
        [payloads[0].clone(), payloads[2].clone()]
    );
    assert_eq!(read_n(&rxs[1], 1), [payloads[1].clone()]);
    // Capacity 2: two sendmmsg calls on Linux, one send_to each elsewhere.
    let expected = if cfg!(target_os = "linux") { 2 } else { 3 };
    assert_eq!(batch.system_calls(), expected);
}
