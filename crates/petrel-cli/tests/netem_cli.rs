//! `petrel netem` as a standalone process: flag validation and a real relay run.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PETREL: &str = env!("CARGO_BIN_EXE_petrel");

/// Gives a test socket a large receive buffer so a busy machine does not drop echoes
/// that the relay counted as forwarded.
fn roomy(s: &UdpSocket) {
    socket2::SockRef::from(s)
        .set_recv_buffer_size(4 << 20)
        .unwrap();
}

fn petrel(args: &[&str]) -> std::process::Output {
    Command::new(PETREL).args(args).output().unwrap()
}

#[test]
fn invalid_flags_exit_with_code_2_and_say_why() {
    let base = [
        "netem",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:9",
    ];
    let cases: [(&[&str], &str); 10] = [
        (&["--loss=-1"], "percentage"),
        (&["--loss", "-1"], "percentage"),
        (&["--delay", "-5"], "0..=60000 ms"),
        (&["--loss", "150"], "percentage"),
        (&["--duplicate", "100.5%"], "percentage"),
        (&["--reorder", "x"], "not a number"),
        (&["--rate", "0"], "1 bit/s"),
        (&["--profile", "lossy"], "unknown profile"),
        (&["--burst", "5/4"], "K <= N"),
        (&["--gilbert", "1,2,3"], "four percentages"),
    ];
    for (extra, needle) in cases {
        let out = petrel(&[&base[..], extra].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    let out = petrel(&[
        "netem",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "0.0.0.0:0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("upstream"));
}

#[test]
fn relays_a_real_udp_program_with_the_random_profile() {
    // The "server": an echo on loopback.
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    roomy(&server);
    let server_addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_echo = Arc::clone(&stop);
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop_echo.load(Ordering::SeqCst) {
            if let Ok((n, from)) = server.recv_from(&mut buf) {
                server.send_to(&buf[..n], from).unwrap();
            }
        }
    });

    let json = std::env::temp_dir().join(format!("petrel-netem-cli-{}.json", std::process::id()));
    let mut child = Command::new(PETREL)
        .args([
            "netem",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &server_addr.to_string(),
        ])
        .args([
            "--profile",
            "random",
            "--seed",
            "42",
            "--json",
            json.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    let relay: SocketAddr = banner
        .strip_prefix("petrel netem: ")
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("banner: {banner}"))
        .parse()
        .unwrap();

    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    roomy(&client);
    // Long enough that a loaded machine's scheduling stall does not end the run.
    client
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let rx = client.try_clone().unwrap();
    let start = Instant::now();
    let receiver = std::thread::spawn(move || {
        let mut rtts = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(n) = rx.recv(&mut buf) {
            let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
            rtts.push((n, start.elapsed() - Duration::from_micros(500) * i));
        }
        rtts
    });
    for i in 0..2000u32 {
        let mut msg = [0u8; 32];
        msg[..4].copy_from_slice(&i.to_be_bytes());
        client.send_to(&msg, relay).unwrap();
        let next = start + Duration::from_micros(500) * (i + 1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let rtts = receiver.join().unwrap();

    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) takes no pointers; `pid` is our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("final counters"), "{rest}");
    stop.store(true, Ordering::SeqCst);
    echo.join().unwrap();

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    let up = &report["stats"]["upstream_total"];
    assert_eq!(up["in_packets"], 2000);
    let random = up["dropped"]["random"].as_u64().unwrap();
    assert!(
        (60..=140).contains(&random),
        "5 % of 2000 randomly dropped, got {random}"
    );
    assert!(up["duplicated"].as_u64().unwrap() > 0);
    assert!(up["reordered"].as_u64().unwrap() > 0);
    let route = &report["stats"]["routes"][0];
    assert!((route["upstream"]["configured_loss"].as_f64().unwrap() - 0.05).abs() < 1e-9);
    let down = &report["stats"]["downstream_total"];
    // Every echo the client saw was forwarded downstream, and delayed 10 ms each way.
    assert_eq!(
        down["forwarded_packets"].as_u64().unwrap(),
        rtts.len() as u64
    );
    assert!(rtts
        .iter()
        .all(|&(n, rtt)| n == 32 && rtt >= Duration::from_millis(20)));
    assert!(
        rtts.len() > 1600 && rtts.len() < 2000,
        "{} echoes",
        rtts.len()
    );
}
