//! Sending one frame's datagram to the targets of one partition, leaving
//! out its sender. The system calls (`sendmmsg(2)` batches on Linux, one
//! `send_to` per target elsewhere) are `petrel-sys`'s [`SendBatch`].

use std::net::{SocketAddr, UdpSocket};

pub use petrel_sys::batch::{SendBatch, SendReport};

/// Sends `payload` to every target except `exclude`, as many per system
/// call as `batch` holds; every target is tried once and failures are
/// counted by cause.
pub fn send_to_many(
    sock: &UdpSocket,
    payload: &[u8],
    targets: &[SocketAddr],
    exclude: SocketAddr,
    batch: &mut SendBatch,
) -> SendReport {
    batch.send_to_each(
        sock,
        payload,
        targets.iter().copied().filter(|a| *a != exclude),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn batches_reach_every_target_but_the_excluded_one() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rxs: Vec<UdpSocket> = (0..10)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let targets: Vec<SocketAddr> = rxs.iter().map(|s| s.local_addr().unwrap()).collect();
        let mut batch = SendBatch::new(4);
        let r = send_to_many(&tx, b"hello", &targets, targets[3], &mut batch);
        assert_eq!((r.attempted, r.sent, r.errors), (9, 9, 0));
        for (i, s) in rxs.iter().enumerate() {
            s.set_read_timeout(Some(Duration::from_millis(if i == 3 { 50 } else { 2000 })))
                .unwrap();
            let mut buf = [0u8; 16];
            let got = s.recv_from(&mut buf);
            if i == 3 {
                assert!(got.is_err());
            } else {
                assert_eq!(&buf[..got.unwrap().0], b"hello");
            }
        }
    }

    #[test]
    fn oversized_datagram_is_counted_not_fatal() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let big = vec![0u8; 70_000];
        let mut batch = SendBatch::new(8);
        let r = send_to_many(
            &tx,
            &big,
            &[rx.local_addr().unwrap()],
            "0.0.0.0:0".parse().unwrap(),
            &mut batch,
        );
        assert_eq!((r.sent, r.errors, r.message_too_large), (0, 1, 1));
    }
}
