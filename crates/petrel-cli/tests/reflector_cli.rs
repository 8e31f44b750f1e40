//! `petrel reflector …`: how `serve` starts and stops, and the store
//! commands' errors, run through the real binary against a scratch SQLite
//! file and loopback sockets.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A scratch directory for one test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "petrel-reflector-cli-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_owned()
    }

    /// A config file with the UDP socket on `listen` and HTTP on `http`.
    fn config(&self, listen: &str, http: &str) -> String {
        let path = self.path("reflector.toml");
        std::fs::write(
            &path,
            format!("listen = \"{listen}\"\nhttp_listen = \"{http}\"\n"),
        )
        .unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `petrel reflector serve` with `args`, its stdout piped.
fn serve(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["reflector", "serve"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits up to 20 s for `child` to exit; kills it and fails otherwise.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("petrel reflector serve did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_prints_its_pid_and_stops_cleanly_on_sigterm() {
    let dir = Scratch::new("sigterm");
    let config = dir.config("127.0.0.1:0", "127.0.0.1:0");
    let db = dir.path("store.db");
    let mut child = serve(&["--config", &config, "--db", &db]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(
        first.starts_with("reflector listening on udp 127.0.0.1:"),
        "{first}"
    );
    assert!(first.ends_with(&format!("(pid {})", child.id())), "{first}");
    let http = lines.next().unwrap().unwrap();
    assert!(http.starts_with("reflector http on 127.0.0.1:"), "{http}");
    let status = stop(&mut child, libc::SIGTERM);
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(status.code(), Some(0), "{status:?} {rest:?}");
    assert!(
        rest.iter().any(|l| l.starts_with("stopped: ")),
        "no summary after SIGTERM: {rest:?}"
    );
}

/// Sends `signal` to `child` and waits for it to exit.
fn stop(child: &mut Child, signal: i32) -> std::process::ExitStatus {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    wait_exit(child)
}

#[test]
fn a_taken_address_names_the_socket_and_creates_no_store() {
    let dir = Scratch::new("bind");
    let config = dir.config("127.0.0.1:0", "127.0.0.1:0");
    let mut first = serve(&["--config", &config, "--db", &dir.path("first.db")]);
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let udp_line = lines.next().unwrap().unwrap();
    let udp = udp_line
        .strip_prefix("reflector listening on udp ")
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    let http_line = lines.next().unwrap().unwrap();
    let http = http_line
        .strip_prefix("reflector http on ")
        .unwrap()
        .to_owned();
    for (listen, http_listen, needle) in [
        (
            "127.0.0.1:0",
            http.as_str(),
            format!("error: binding the HTTP server to {http}: Address already in use"),
        ),
        (
            udp.as_str(),
            "127.0.0.1:0",
            format!("error: binding the UDP listen socket to {udp}: Address already in use"),
        ),
    ] {
        let second_dir = Scratch::new("bind-second");
        let config = second_dir.config(listen, http_listen);
        let db = second_dir.path("second.db");
        let out = support::petrel(&["reflector", "serve", "--config", &config, "--db", &db]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&needle), "{stderr}");
        assert!(
            !std::path::Path::new(&db).exists(),
            "a failed start created {db}"
        );
    }
    assert_eq!(stop(&mut first, libc::SIGINT).code(), Some(0));
}

/// `petrel reflector ARGS… --db DB`: asserts the exit code and returns stderr.
fn manage(db: &str, args: &[&str], code: i32) -> String {
    let out = support::petrel(&[&["reflector"], args, &["--db", db]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    stderr
}

const ADD_N0CALL: &[&str] = &[
    "user",
    "add",
    "--name",
    "N0CALL",
    "--callsign",
    "N0CALL",
    "--device-password",
    "Pass1234",
];

#[test]
fn a_device_joins_only_an_existing_group() {
    let dir = Scratch::new("device-group");
    let db = dir.path("store.db");
    manage(&db, ADD_N0CALL, 0);
    let device_group = |group: &'static str| {
        [
            "device", "group", "--user", "N0CALL", "--ssid", "1", "--group", group,
        ]
    };
    let stderr = manage(&db, &device_group("424242"), 1);
    assert_eq!(stderr.trim_end(), "error: group 424242 not found");
    // The public group exists on a fresh store; 0 is "ungrouped".
    manage(&db, &device_group("999"), 0);
    manage(&db, &device_group("0"), 0);
}

#[test]
fn duplicate_names_say_which_value_is_taken() {
    let dir = Scratch::new("duplicates");
    let db = dir.path("store.db");
    manage(&db, ADD_N0CALL, 0);
    let stderr = manage(&db, ADD_N0CALL, 1);
    assert_eq!(
        stderr.trim_end(),
        r#"error: a user named "N0CALL" already exists"#
    );
    let other_name = [&ADD_N0CALL[..3], &["N1CALL"], &ADD_N0CALL[4..]].concat();
    let stderr = manage(&db, &other_name, 1);
    assert_eq!(stderr.trim_end(), r#"error: callsign "N0CALL" is taken"#);
    manage(&db, &["group", "add", "--name", "Test"], 0);
    let stderr = manage(&db, &["group", "add", "--name", "Test"], 1);
    assert_eq!(
        stderr.trim_end(),
        r#"error: a group named "Test" already exists"#
    );
}

/// `user add --password --admin` and `user passwd` (flag and standard
/// input) store a bcrypt web password that is not the device password, and
/// never print it.
#[test]
fn web_passwords_are_set_by_flag_or_stdin_and_never_printed() {
    use std::io::Write;
    let dir = Scratch::new("web_password");
    let db = dir.path("store.db");
    let add = support::petrel(&[
        "reflector",
        "user",
        "add",
        "--db",
        &db,
        "--name",
        "alice",
        "--callsign",
        "BA1AAA",
        "--device-password",
        "Secret12",
        "--password",
        "web-pass-1",
        "--admin",
    ]);
    let out =
        String::from_utf8_lossy(&add.stdout).into_owned() + &String::from_utf8_lossy(&add.stderr);
    assert!(add.status.success(), "{out}");
    assert!(
        out.contains("role admin") && !out.contains("web-pass-1"),
        "{out}"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_petrel"))
        .args(["reflector", "user", "passwd", "--db", &db, "alice"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from-stdin-2\n")
        .unwrap();
    let done = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&done.stdout).into_owned() + &String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{text}");
    assert!(!text.contains("from-stdin-2"), "{text}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let user = rt.block_on(async {
        let store = petrel_reflector::runtime::store::Store::open(&db, Default::default())
            .await
            .unwrap();
        store.web_user_by_name("alice").await.unwrap().unwrap()
    });
    assert!(user.is_admin());
    assert_eq!((user.status, user.approval_status), (1, 1));
    let hash = user.password_hash.unwrap();
    assert!(hash.starts_with("$2b$10$"), "{hash}");
    assert!(petrel_reflector::model::verify_web_password(
        "from-stdin-2",
        &hash
    ));
    assert!(!petrel_reflector::model::verify_web_password(
        "Secret12", &hash
    ));
    let e = manage(&db, &["user", "passwd", "--password", "x", "nobody"], 1);
    assert!(e.contains("user nobody not found"), "{e}");
}

/// Lines of `stream` as they come, read on a thread.
fn line_feed(stream: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line of `lines` containing `needle`, within 20 s.
fn line_with(lines: &std::sync::mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line with {needle:?} within 20 s"));
        if line.contains(needle) {
            return line;
        }
    }
}

/// The body of `GET path` on `addr` (HTTP/1.1, the server closes).
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    out
}

/// `edge add` prints a pinned node token once and stores only its hash;
/// a centre with `[interconnect]` accepts `serve --role edge` with it, and
/// the edge serves its device socket and `/metrics`.
#[test]
fn an_added_edge_node_connects_with_its_printed_token() {
    let dir = Scratch::new("edges");
    let db = dir.path("store.db");
    let out = support::petrel(&["reflector", "edge", "add", "edge-one", "--db", &db]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("edge node edge-one added"));
    let token = lines[1];
    let (credential, pin) = token.split_once('@').unwrap();
    assert!(pin.len() == 64 && pin.bytes().all(|b| b.is_ascii_hexdigit()));
    let secret = credential.strip_prefix("draarl-node.edge-one.").unwrap();
    assert_eq!(secret.len(), 43);
    let stderr = manage(&db, &["edge", "add", "edge-one"], 1);
    assert_eq!(
        stderr.trim_end(),
        r#"error: a node named "edge-one" already exists"#
    );
    let list = support::petrel(&["reflector", "edge", "list", "--db", &db]);
    assert!(String::from_utf8(list.stdout)
        .unwrap()
        .starts_with("edge-one enabled added "));

    let config = dir.path("centre.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\n\
         [interconnect]\nenabled = true\ncontrol_listen = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let mut centre = serve(&["--config", &config, "--db", &db]);
    let centre_out = line_feed(centre.stdout.take().unwrap());
    let udp = line_with(&centre_out, "reflector listening on udp ");
    let udp = udp.split(' ').nth(4).unwrap().to_owned();
    let control = line_with(&centre_out, "reflector interconnect control on tcp ");
    let control = control.rsplit(' ').next().unwrap().to_owned();
    let token_file = dir.path("edge-one.token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let mut edge = serve(&[
        "--role",
        "edge",
        "--centre",
        &control,
        "--node-token-file",
        &token_file,
        "--centre-udp",
        &udp,
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
    ]);
    let edge_out = line_feed(edge.stdout.take().unwrap());
    let edge_log = line_feed(edge.stderr.take().unwrap());
    let connected = line_with(&edge_log, "edge connected as edge-one, session ");
    assert!(!connected.contains(secret), "{connected}");
    // The centre answers node_ready with the projection; the edge ACKs it
    // and is ready (§3.6 steps 5–6).
    line_with(
        &edge_log,
        "edge ready: the centre's projection is committed",
    );
    // Its device socket and /metrics (draarl-interconnect §2, §7).
    let started = line_with(&edge_out, "edge started on 127.0.0.1:");
    let metrics = started
        .split("metrics on http://")
        .nth(1)
        .and_then(|m| m.strip_suffix("/metrics"))
        .unwrap()
        .to_owned();
    let body = http_get(&metrics, "/metrics");
    assert!(
        body.contains("petrel_reflector_edge_link_state 2\n"),
        "{body}"
    );
    assert!(body.contains("petrel_reflector_edge_node_bind_requests_total "));
    assert_eq!(stop(&mut edge, libc::SIGTERM).code(), Some(0));
    line_with(&edge_out, "stopped: 1 connects, 0 sessions");
    assert_eq!(stop(&mut centre, libc::SIGTERM).code(), Some(0));
    // Only the SHA-256 of the credential is stored.
    for file in ["store.db", "store.db-wal"] {
        let bytes = std::fs::read(dir.path(file)).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{file} holds the secret"
        );
    }
    manage(&db, &["edge", "remove", "edge-one"], 0);
    let list = support::petrel(&["reflector", "edge", "list", "--db", &db]);
    assert!(list.stdout.is_empty());
}

/// `petrel reflector login` against a real `serve`: the account's device
/// logs in (its callsign printed, exit 0), a wrong password is refused with
/// the reflector's reason (exit 1), the password is read from standard
/// input and never printed, and a port nobody answers on times out (exit 1).
#[test]
fn reflector_login_reports_accepted_refused_and_no_answer() {
    use std::io::Write;
    let dir = Scratch::new("login");
    let db = dir.path("store.db");
    manage(&db, ADD_N0CALL, 0);
    let config = dir.config("127.0.0.1:0", "127.0.0.1:0");
    let mut child = serve(&["--config", &config, "--db", &db]);
    let lines = line_feed(child.stdout.take().unwrap());
    let first = line_with(&lines, "reflector listening on udp ");
    let udp = first
        .strip_prefix("reflector listening on udp ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_owned();

    let login = |user: &str, ssid: &str, password: &str, timeout: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_petrel"))
            .args(["reflector", "login", "--server", &udp, "--user", user])
            .args(["--ssid", ssid, "--timeout-secs", timeout])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        writeln!(c.stdin.take().unwrap(), "{password}").unwrap();
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains(password), "password printed: {text}");
        (out.status.code(), text)
    };

    let (code, text) = login("N0CALL", "1", "Pass1234", "10");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.starts_with(&format!(
            "accepted: N0CALL-1 logged in to {udp}, callsign N0CALL"
        )),
        "{text}"
    );
    let (code, text) = login("N0CALL", "2", "Wrong999", "10");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("refused: N0CALL-2") && text.contains("invalid_password (status 3)"),
        "{text}"
    );
    let status = stop(&mut child, libc::SIGTERM);
    assert_eq!(status.code(), Some(0));
    let stopped = line_with(&lines, "stopped: ");
    assert!(!stopped.contains(" 0 logins"), "{stopped}");

    // The reflector is gone: nobody answers on its port.
    let (code, text) = login("N0CALL", "1", "Pass1234", "1");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(&format!("no answer from {udp} within 1 s")),
        "{text}"
    );
}
