//! The kcptun child processes: finding the binaries and their version, starting
//! one with its flags, reading its stderr (the address it listens on, the last
//! lines for error messages), and stopping it by PID.
//!
//! Every wait is bounded; a child is killed and reaped when its [`KcptunChild`]
//! drops, and its stderr reader thread ends with the pipe.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How to install kcptun, for the message of a machine without it.
pub const INSTALL_HINT: &str = "apt install kcptun";

/// Stderr lines kept per child for error messages.
const STDERR_LINES: usize = 20;
/// Longest stderr line kept (bytes); the rest of a longer line is dropped.
const STDERR_LINE_BYTES: u64 = 4096;
/// How long a `--version` or `dpkg-query` call may take.
const VERSION_LIMIT: Duration = Duration::from_secs(3);
/// How often a wait polls.
const POLL: Duration = Duration::from_millis(20);

/// Paths of `kcptun-client` and `kcptun-server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KcptunBinaries {
    /// `kcptun-client`.
    pub client: PathBuf,
    /// `kcptun-server`.
    pub server: PathBuf,
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

impl KcptunBinaries {
    /// Both binaries from `PATH`; `None` when either is missing.
    pub fn from_path() -> Option<Self> {
        Some(Self {
            client: in_path("kcptun-client")?,
            server: in_path("kcptun-server")?,
        })
    }

    /// `"kcptun <version>"`: what `kcptun-client --version` reports, or the Debian
    /// package version when that says only `SELFBUILD` (Debian's build);
    /// `"kcptun (version unknown)"` when neither answers.
    pub fn version(&self) -> String {
        let own = run_bounded(Command::new(&self.client).arg("--version"))
            .and_then(|out| out.split_whitespace().last().map(str::to_owned))
            .filter(|v| v != "SELFBUILD");
        let version = own.or_else(|| {
            run_bounded(Command::new("dpkg-query").args(["-W", "-f=${Version}", "kcptun"]))
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        });
        match version {
            Some(v) => format!("kcptun {v}"),
            None => "kcptun (version unknown)".to_owned(),
        }
    }
}

/// Stdout of `cmd` if it exits successfully within [`VERSION_LIMIT`] (killed
/// otherwise); at most 4 KiB of it.
fn run_bounded(cmd: &mut Command) -> Option<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + VERSION_LIMIT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            _ => {
                // Already exited or failed: nothing left to stop.
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    child
        .stdout
        .take()?
        .take(4096)
        .read_to_string(&mut out)
        .ok()?;
    Some(out)
}

/// What a child's stderr showed so far.
#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
    listening: Option<String>,
}

fn lock(m: &Mutex<StderrTail>) -> MutexGuard<'_, StderrTail> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `stderr` line by line until it closes, keeping the last
/// [`STDERR_LINES`] lines and the address of kcptun's `listening on: ADDR` line.
fn read_stderr(stderr: ChildStderr, tail: Arc<Mutex<StderrTail>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(STDERR_LINE_BYTES)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            // An over-long line: skip the rest of it.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                return;
            }
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        let mut t = lock(&tail);
        if t.listening.is_none() {
            if let Some((_, addr)) = text.split_once("listening on: ") {
                t.listening = Some(addr.trim().to_owned());
            }
        }
        if t.lines.len() == STDERR_LINES {
            t.lines.pop_front();
        }
        t.lines.push_back(text);
    }
}

/// One running kcptun process.
#[derive(Debug)]
pub struct KcptunChild {
    name: &'static str,
    child: Child,
    tail: Arc<Mutex<StderrTail>>,
    reader: Option<JoinHandle<()>>,
}

impl KcptunChild {
    /// Starts `bin` with `args`, stdin and stdout closed, stderr read by a thread.
    ///
    /// # Errors
    /// The spawn failure, naming `name`.
    pub fn spawn(name: &'static str, bin: &Path, args: &[String]) -> io::Result<Self> {
        // Killed with this process even when it is killed (see petrel_sys::child);
        // spawned from the thread of the round's runtime, which outlives it.
        let mut child = petrel_sys::child::end_with_parent(&mut Command::new(bin))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name}: {e}")))?;
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let reader = match child.stderr.take() {
            Some(stderr) => {
                let tail = Arc::clone(&tail);
                Some(
                    thread::Builder::new()
                        .name(format!("{name}-stderr"))
                        .spawn(move || read_stderr(stderr, tail))?,
                )
            }
            None => None,
        };
        Ok(Self {
            name,
            child,
            tail,
            reader,
        })
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error naming the child, `what` happened, and its last stderr lines.
    pub fn failure(&self, what: &str) -> io::Error {
        let lines: Vec<String> = lock(&self.tail).lines.iter().cloned().collect();
        let stderr = if lines.is_empty() {
            "(no stderr)".to_owned()
        } else {
            lines.join(" | ")
        };
        io::Error::other(format!(
            "{} (pid {}) {what}; stderr: {stderr}",
            self.name,
            self.pid()
        ))
    }

    /// `Err` (with its stderr) if the child has exited.
    pub fn check_running(&mut self) -> io::Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => {
                // Give the stderr reader a moment to collect the last words.
                thread::sleep(POLL);
                Err(self.failure(&format!("exited ({status})")))
            }
        }
    }

    /// Waits at most `limit` for the `listening on: ADDR` line kcptun-client
    /// prints once its TCP listener is bound, and returns ADDR.
    ///
    /// # Errors
    /// The child exited, the limit passed, or ADDR is not a socket address.
    pub fn wait_listening(&mut self, limit: Duration) -> io::Result<SocketAddr> {
        let deadline = Instant::now() + limit;
        loop {
            let seen = lock(&self.tail).listening.clone();
            if let Some(addr) = seen {
                return addr
                    .parse()
                    .map_err(|_| self.failure(&format!("listens on {addr:?}, not an address")));
            }
            self.check_running()?;
            if Instant::now() >= deadline {
                return Err(self.failure(&format!("printed no listen address within {limit:?}")));
            }
            thread::sleep(POLL);
        }
    }

    /// Waits at most `limit` until a UDP socket is bound to `127.0.0.1:port`
    /// (`/proc/net/udp`); without `/proc`, a fixed 200 ms.
    ///
    /// # Errors
    /// The child exited or the limit passed.
    pub fn wait_udp_bound(&mut self, port: u16, limit: Duration) -> io::Result<()> {
        let needle = format!("0100007F:{port:04X} ");
        let deadline = Instant::now() + limit;
        loop {
            self.check_running()?;
            match std::fs::read_to_string("/proc/net/udp") {
                Ok(table) if table.contains(&needle) => return Ok(()),
                Ok(_) => {}
                Err(_) => {
                    thread::sleep(Duration::from_millis(200));
                    return self.check_running();
                }
            }
            if Instant::now() >= deadline {
                return Err(self.failure(&format!("bound no UDP port {port} within {limit:?}")));
            }
            thread::sleep(POLL);
        }
    }
}

impl Drop for KcptunChild {
    fn drop(&mut self) {
        // Kills by PID (`Child::kill`); an already exited child makes this a no-op.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            // The pipe closed with the process, so the reader has ended or is ending.
            let _ = reader.join();
        }
    }
}
