//! The reflector under test as its own process (`<program> reflector serve`),
//! so its CPU and RSS are read from `/proc/<child pid>` alone, as the spec
//! asks (benchmarks §D), instead of being shared with the load generator.
//!
//! The child gets a TOML config on a fresh store, prints its UDP and HTTP
//! addresses on stdout, answers `/api/stats` (and, for the soak, the admin
//! device routes) with a random admin token, and
//! is stopped with SIGINT (its graceful shutdown), then killed if it has not
//! exited within 10 s.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
    /// HTTP address (admin API, app logins).
    pub http: SocketAddr,
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
        let toml = format!(
            "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\ndb = {db:?}\nadmin_token = \"{token}\"\nlogin_captcha = false\n\n[fanout]\nwriters = {}\nmax_frame_age_ms = {}\n\n# Every app login, routing call and WebSocket comes from 127.0.0.1.\n[apps]\nlogin_per_minute = 100000\nlogin_burst = 100000\n\n[http]\nmax_connections = 65536\nmax_connections_per_ip = 65536\nmax_connections_per_prefix = 65536\nper_ip_rps = 100000\nper_ip_burst = 100000\n",
            fanout.writers, fanout.max_frame_age_ms
        );
        std::fs::write(&config, toml)?;
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
        let addrs = child.stdout.take().map(read_addresses);
        let mut me = Self {
            child,
            config,
            token,
            udp: SocketAddr::from(([127, 0, 0, 1], 0)),
            http: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        match addrs {
            Some(Ok((udp, http))) => {
                me.udp = udp;
                me.http = http;
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
        let body = http_request(self.http, "GET", "/api/stats", &self.token, None)?;
        serde_json::from_str(&body).map_err(|e| LoadError::Invalid(format!("/api/stats: {e}")))
    }

    /// `PUT path` with the JSON `body` on the admin API (draarl-v1 §3.7
    /// routes, e.g. `/api/devices/{user}/{ssid}/group`); `Ok` on a 2xx answer.
    pub(super) fn admin_put(&self, path: &str, body: &str) -> Result<(), LoadError> {
        http_request(self.http, "PUT", path, &self.token, Some(body)).map(drop)
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a pid we spawned and have not reaped.
            unsafe {
                libc::kill(pid, libc::SIGINT);
            }
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

/// Parses `reflector listening on udp ADDR (pid N)` and `reflector http on ADDR`
/// from the child's stdout, then drains the rest in the background.
fn read_addresses(
    stdout: std::process::ChildStdout,
) -> Result<(SocketAddr, SocketAddr), LoadError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let mut udp = None;
        for line in lines.by_ref().map_while(Result::ok) {
            if let Some(a) = line.strip_prefix("reflector listening on udp ") {
                udp = a
                    .split_whitespace()
                    .next()
                    .and_then(|a| a.parse::<SocketAddr>().ok());
            } else if let Some(a) = line.strip_prefix("reflector http on ") {
                let _ = tx.send((udp, a.trim().parse::<SocketAddr>().ok()));
                break;
            }
        }
        // Keep reading so the child never blocks on a full pipe.
        for _ in lines {}
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok((Some(udp), Some(http))) => Ok((udp, http)),
        Ok(_) => Err(LoadError::Invalid(
            "reflector child printed unparsable addresses".into(),
        )),
        Err(_) => Err(LoadError::Invalid(format!(
            "reflector child did not report its addresses within {} s (see its stderr above)",
            START_TIMEOUT.as_secs()
        ))),
    }
}

/// A minimal HTTP/1.1 request with a bearer token and an optional JSON
/// body; returns the body of a 2xx answer.
fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: &str,
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
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n{content}Connection: close\r\n\r\n{body}"
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
