//! The reflector under test as its own process (`<program> reflector serve`),
//! so its CPU and RSS are read from `/proc/<child pid>` alone, as the spec
//! asks (benchmarks §D), instead of being shared with the load generator.
//!
//! The child gets a TOML config on a fresh store, prints its UDP and HTTP
//! addresses on stdout, answers `/api/stats` (and, for the soak, the admin
//! device routes) with a random admin token, and
//! is stopped with SIGINT (its graceful shutdown), then killed if it has not
//! exited within 10 s. As the centre of a cluster bench
//! ([`ServerChild::start_centre`]) it also runs the interconnect control
//! plane (draarl-interconnect §2, §3) on a loopback port it prints too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use petrel_reflector::model::FanoutConfig;

use super::LoadError;

/// How long the child may take to print its addresses.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the child may take to stop after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running reflector child; dropping it stops it.
pub(super) struct ServerChild {
    child: Child,
    config: PathBuf,
    token: String,
    /// UDP address devices talk to.
    pub udp: SocketAddr,
    /// HTTP address (admin API, app logins, `/metrics`).
    pub http: SocketAddr,
    /// Interconnect control address (TLS/TCP), for a centre.
    pub control: Option<SocketAddr>,
}

/// Fan-out counters read from the child's `/api/stats`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct FanoutCounters {
    pub frames_dropped: u64,
    pub frames_expired: u64,
    pub queue_high_water: u64,
    pub max_dispatch_ns: u64,
}

impl ServerChild {
    /// Starts `<program> reflector serve` on store `db` with `fanout`.
    pub(super) fn start(
        program: &Path,
        db: &str,
        fanout: &FanoutConfig,
    ) -> Result<Self, LoadError> {
        let token = format!("{:032x}", rand::random::<u128>());
        let config = std::env::temp_dir().join(format!(
            "petrel-refl-bench-{}-{}.toml",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::write(&config, config_toml(db, fanout, &token))?;
        Self::spawn(program, config, token, false)
    }

    /// Writes the config of a centre on store `db` with `fanout` and admin
    /// token `token` to `config`: `[interconnect]` enabled on a loopback
    /// control port. Written before the centre starts, so edges can be
    /// enrolled against it (`reflector edge add --config`) first.
    pub(super) fn write_centre_config(
        config: &Path,
        db: &str,
        fanout: &FanoutConfig,
        token: &str,
    ) -> Result<(), LoadError> {
        let toml = config_toml(db, fanout, token)
            + "\n[interconnect]\nenabled = true\ncontrol_listen = \"127.0.0.1:0\"\n";
        std::fs::write(config, toml)?;
        Ok(())
    }

    /// Starts `<program> reflector serve` as a centre on the config
    /// [`ServerChild::write_centre_config`] wrote (admin token `token`);
    /// the config file goes with the child.
    pub(super) fn start_centre(
        program: &Path,
        config: PathBuf,
        token: String,
    ) -> Result<Self, LoadError> {
        Self::spawn(program, config, token, true)
    }

    fn spawn(
        program: &Path,
        config: PathBuf,
        token: String,
        want_control: bool,
    ) -> Result<Self, LoadError> {
        let spawned = Command::new(program)
            .args(["reflector", "serve", "--config"])
            .arg(&config)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_file(&config);
                return Err(LoadError::Invalid(format!(
                    "starting {} reflector serve: {e}",
                    program.display()
                )));
            }
        };
        let addrs = child
            .stdout
            .take()
            .map(|out| read_addresses(out, want_control));
        let mut me = Self {
            child,
            config,
            token,
            udp: SocketAddr::from(([127, 0, 0, 1], 0)),
            http: SocketAddr::from(([127, 0, 0, 1], 0)),
            control: None,
        };
        match addrs {
            Some(Ok(a)) => {
                me.udp = a.udp;
                me.http = a.http;
                me.control = a.control;
                Ok(me)
            }
            Some(Err(e)) => Err(e),
            None => Err(LoadError::Invalid("reflector child has no stdout".into())),
        }
    }

    /// The child's process id, for `/proc`.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the fan-out counters from `/api/stats`.
    pub(super) fn fanout(&self) -> Result<FanoutCounters, LoadError> {
        let v = self.stats()?;
        let n = |k: &str| v["fanout"][k].as_u64().unwrap_or(0);
        Ok(FanoutCounters {
            frames_dropped: n("frames_dropped"),
            frames_expired: n("frames_expired"),
            queue_high_water: n("queue_high_water"),
            max_dispatch_ns: n("max_dispatch_ns"),
        })
    }

    /// The whole `/api/stats` answer.
    pub(super) fn stats(&self) -> Result<serde_json::Value, LoadError> {
        let body = http_request(self.http, "GET", "/api/stats", Some(&self.token), None)?;
        serde_json::from_str(&body).map_err(|e| LoadError::Invalid(format!("/api/stats: {e}")))
    }

    /// `PUT path` with the JSON `body` on the admin API (draarl-v1 §3.7
    /// routes, e.g. `/api/devices/{user}/{ssid}/group`); `Ok` on a 2xx answer.
    pub(super) fn admin_put(&self, path: &str, body: &str) -> Result<(), LoadError> {
        http_request(self.http, "PUT", path, Some(&self.token), Some(body)).map(drop)
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        stop_child(&mut self.child);
        let _ = std::fs::remove_file(&self.config);
    }
}

/// Stops `child` (spawned by this process, not yet reaped) with SIGINT, its
/// graceful shutdown, and kills it if it has not exited within
/// [`STOP_TIMEOUT`]; reaps it either way.
pub(super) fn stop_child(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a pid we spawned and have not reaped.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The addresses a reflector child prints on stdout.
struct ChildAddresses {
    udp: SocketAddr,
    http: SocketAddr,
    control: Option<SocketAddr>,
}

/// Parses `reflector listening on udp ADDR (pid N)`, `reflector http on
/// ADDR` and, with `want_control`, `reflector interconnect control on tcp
/// ADDR` from the child's stdout.
fn read_addresses(
    stdout: std::process::ChildStdout,
    want_control: bool,
) -> Result<ChildAddresses, LoadError> {
    let last = if want_control {
        "reflector interconnect control on tcp "
    } else {
        "reflector http on "
    };
    let lines = stdout_until(stdout, last, "reflector child")?;
    let addr = |prefix: &str| {
        lines.iter().find_map(|l| {
            l.strip_prefix(prefix)?
                .split_whitespace()
                .next()?
                .parse::<SocketAddr>()
                .ok()
        })
    };
    let control = addr("reflector interconnect control on tcp ");
    match (
        addr("reflector listening on udp "),
        addr("reflector http on "),
    ) {
        (Some(udp), Some(http)) if control.is_some() || !want_control => {
            Ok(ChildAddresses { udp, http, control })
        }
        _ => Err(LoadError::Invalid(
            "reflector child printed unparsable addresses".into(),
        )),
    }
}

/// The lines a child (`what`, for errors) prints on stdout up to and
/// including the first that starts with `last`; the rest is drained in the
/// background so the child never blocks on a full pipe.
///
/// # Errors
/// [`LoadError::Invalid`] when no such line comes within [`START_TIMEOUT`]
/// or stdout closes first.
pub(super) fn stdout_until(
    stdout: std::process::ChildStdout,
    last: &'static str,
    what: &str,
) -> Result<Vec<String>, LoadError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref().map_while(Result::ok) {
            let done = line.starts_with(last);
            seen.push(line);
            if done {
                let _ = tx.send(std::mem::take(&mut seen));
                break;
            }
        }
        for _ in lines {}
    });
    rx.recv_timeout(START_TIMEOUT).map_err(|e| {
        LoadError::Invalid(match e {
            RecvTimeoutError::Timeout => format!(
                "{what} did not report its addresses within {} s (see its stderr above)",
                START_TIMEOUT.as_secs()
            ),
            RecvTimeoutError::Disconnected => format!(
                "{what} closed its stdout before it reported its addresses (see its stderr above)"
            ),
        })
    })
}

/// The child's TOML config on store `db`.
fn config_toml(db: &str, fanout: &FanoutConfig, token: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\ndb = {db:?}\nadmin_token = \"{token}\"\nlogin_captcha = false\n\n[fanout]\nwriters = {}\nmax_frame_age_ms = {}\n\n# Every app login, routing call and WebSocket comes from 127.0.0.1.\n[apps]\nlogin_per_minute = 100000\nlogin_burst = 100000\n\n[http]\nmax_connections = 65536\nmax_connections_per_ip = 65536\nmax_connections_per_prefix = 65536\nper_ip_rps = 100000\nper_ip_burst = 100000\n",
        fanout.writers, fanout.max_frame_age_ms
    )
}

/// A minimal HTTP/1.1 request with an optional bearer token and an
/// optional JSON body; returns the body of a 2xx answer.
pub(super) fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Result<String, LoadError> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let body = body.unwrap_or("");
    let content = if body.is_empty() {
        String::new()
    } else {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}{content}Connection: close\r\n\r\n{body}"
    )?;
    let mut text = String::new();
    s.take(1 << 20).read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| LoadError::Invalid(format!("{path}: no HTTP body")))?;
    if !head.starts_with("HTTP/1.1 2") {
        let status = head.lines().next().unwrap_or("");
        return Err(LoadError::Invalid(format!("{path}: {status}")));
    }
    Ok(body.to_owned())
}
