//! Interop with the reference C KCP (ikcp.c, through the PyPI package `kcp`).
//!
//! Petrel in raw-KCP mode exchanges 1000 messages each way with the C implementation
//! over loopback, with 10 % loss injected on every datagram in both directions; the C
//! side verifies order and content of what Petrel sent, Petrel verifies the echoes.
//!
//! Needs `python3` with `pip install kcp`. Without it the test prints why and passes,
//! unless `PETREL_REQUIRE_INTEROP=1` (set by `.ci/run`), where it fails.

#![allow(clippy::unwrap_used)] // tests fail loudly on any unexpected error

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig, Mode};

const CONV: u32 = 0x1122_3344;
const MESSAGES: u32 = 1000;

fn message(i: u32) -> Bytes {
    let len = [4usize, 60, 500, 1176, 1177, 3000][i as usize % 6] - 4;
    let mut v = i.to_be_bytes().to_vec();
    v.extend((0..len).map(|j| (i as usize * 31 + j) as u8));
    Bytes::from(v)
}

fn c_kcp_available() -> bool {
    Command::new("python3")
        .args(["-c", "import kcp.extension"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn exchanges_messages_with_reference_c_kcp_under_loss() {
    if !c_kcp_available() {
        let msg = "reference C KCP not available: install it with `pip install kcp`";
        assert!(
            std::env::var("PETREL_REQUIRE_INTEROP").as_deref() != Ok("1"),
            "{msg}"
        );
        eprintln!("skipped: {msg}");
        return;
    }
    let endpoint = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointConfig {
            mode: Mode::Raw { conv: CONV },
            ..EndpointConfig::default()
        },
    )
    .await
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/c_kcp_peer.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args(["--conv", &CONV.to_string()])
        .args(["--peer-port", &endpoint.local_addr().port().to_string()])
        .args(["--messages", &MESSAGES.to_string()])
        .args(["--loss", "0.1", "--seed", "7", "--timeout", "90"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start python3");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let port: serde_json::Value = serde_json::from_str(&first).unwrap();
    let port = port["port"].as_u64().unwrap() as u16;

    let conn = endpoint
        .connect(format!("127.0.0.1:{port}").parse().unwrap())
        .await
        .unwrap();
    let sender = {
        let conn = conn.clone();
        tokio::spawn(async move {
            for i in 0..MESSAGES {
                conn.send(message(i)).await.unwrap();
            }
        })
    };
    let received = tokio::time::timeout(Duration::from_secs(90), async {
        for i in 0..MESSAGES {
            let got = conn.recv().await.unwrap().expect("stream ended early");
            assert_eq!(got, message(i), "echo {i} differs");
        }
    })
    .await;
    sender.await.unwrap();
    let status = tokio::task::spawn_blocking(move || {
        let report: Vec<String> = lines.map_while(Result::ok).collect();
        (child.wait(), report)
    })
    .await
    .unwrap();
    let (exit, report) = status;
    let exit = exit.unwrap();
    assert!(received.is_ok(), "echoes timed out; C peer said {report:?}");
    assert!(exit.success(), "C peer failed: {report:?}");
    let last: serde_json::Value = serde_json::from_str(report.last().unwrap()).unwrap();
    assert_eq!(last["verified"], MESSAGES);
    assert!(
        last["dropped_in"].as_u64().unwrap() > 0,
        "loss was injected"
    );
    let stats = conn.stats();
    assert!(
        stats.kcp.retransmissions_timeout + stats.kcp.retransmissions_fast > 0,
        "10 % loss must have caused retransmissions: {stats:?}"
    );
}
