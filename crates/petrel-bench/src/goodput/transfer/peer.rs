//! External QUIC programs as child processes: finding them and their versions,
//! a scratch directory for their files, start-up, the client's download watched
//! as it grows, and stopping them by PID.
//!
//! Every child is spawned with `kill_on_drop`, so a transfer abandoned at its
//! timeout (the future dropped) still kills it; a normal end kills the server and
//! waits for both, so their CPU time is in `getrusage(RUSAGE_CHILDREN)`.

use std::io::Read as _;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket as StdUdpSocket};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::process::{Child, Command};

use super::{setup, transport, Receipt, TransferError, CHUNK};
use crate::goodput::pattern::{self, Verifier};

/// Set to `1` to make a missing peer an error instead of a skip (CI).
pub const REQUIRE_ENV: &str = "PETREL_REQUIRE_QUIC_INTEROP";
/// The Python that runs aioquic (default `python3`).
pub const PYTHON_ENV: &str = "PETREL_PYTHON";

/// The aioquic peer script, written into each transfer's scratch directory.
const AIOQUIC_SCRIPT: &str = include_str!("aioquic_peer.py");
/// The ngtcp2 example programs of Debian's `ngtcp2-client` / `ngtcp2-server`
/// (the GnuTLS builds).
pub(crate) const NGTCP2_CLIENT: &str = "gtlsclient";
pub(crate) const NGTCP2_SERVER: &str = "gtlsserver";
/// How long a peer may take to start listening, and a probe or version query to answer.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How often the client's download file is looked at.
const WATCH_INTERVAL: Duration = Duration::from_millis(2);
/// The name the payload is served and downloaded as.
pub(crate) const PAYLOAD: &str = "payload";

/// An external peer that cannot run here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{program} is not available ({why}); install it with `{install}`")]
pub struct PeerMissing {
    /// The program, e.g. `aioquic`.
    pub program: &'static str,
    /// What the probe found.
    pub why: String,
    /// The command that installs it.
    pub install: &'static str,
}

/// Whether [`REQUIRE_ENV`] is `1`.
pub fn peer_required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

pub(crate) fn python() -> String {
    std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into())
}

/// Runs `program args` to completion within [`STARTUP_TIMEOUT`]; its stdout, or why not.
fn query(program: &str, args: &[&str]) -> Result<String, String> {
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                let mut err = String::new();
                if let Some(mut s) = child.stdout.take() {
                    let _ = s.read_to_string(&mut out);
                }
                if let Some(mut s) = child.stderr.take() {
                    let _ = s.read_to_string(&mut err);
                }
                return if status.success() {
                    Ok(out.trim().to_owned())
                } else {
                    Err(err.lines().last().unwrap_or("no output").to_owned())
                };
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} did not answer within {STARTUP_TIMEOUT:?}"
                ));
            }
            Err(e) => return Err(format!("waiting for {program}: {e}")),
        }
    }
}

/// The aioquic version (`aioquic.__version__`) and the Python running it.
pub fn aioquic_version() -> Result<String, PeerMissing> {
    let python = python();
    query(
        &python,
        &[
            "-c",
            "import aioquic, platform; print(aioquic.__version__, platform.python_version())",
        ],
    )
    .map(|out| match out.split_once(' ') {
        Some((aioquic, py)) => format!("aioquic {aioquic} (Python {py})"),
        None => format!("aioquic {out}"),
    })
    .map_err(|why| PeerMissing {
        program: "aioquic",
        why,
        install: "python3 -m pip install aioquic",
    })
}

/// The ngtcp2 example programs' package versions (`dpkg-query`), once both run.
pub fn ngtcp2_version() -> Result<String, PeerMissing> {
    let missing = |why: String| PeerMissing {
        program: "ngtcp2 (gtlsclient, gtlsserver)",
        why,
        install: "apt-get install ngtcp2-client ngtcp2-server",
    };
    for program in [NGTCP2_CLIENT, NGTCP2_SERVER] {
        // `--help` exits 0 and proves the binary and its libraries load.
        query(program, &["--help"]).map_err(missing)?;
    }
    let versions = query(
        "dpkg-query",
        &[
            "-W",
            "-f",
            "${Package} ${Version}\n",
            "ngtcp2-client",
            "ngtcp2-server",
        ],
    )
    .map(|out| out.lines().collect::<Vec<_>>().join(", "))
    .unwrap_or_else(|_| "version unknown: not a Debian package".to_owned());
    Ok(format!("ngtcp2 examples ({versions})"))
}

/// A scratch directory for one transfer (certificate, key, payload, script,
/// download), removed on drop.
pub(crate) struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    pub(crate) fn new(label: &str, seed: u64) -> Result<Self, TransferError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "petrel-goodput-{label}-{}-{seed}-{n}",
            std::process::id()
        ));
        std::fs::create_dir_all(path.join("htdocs")).map_err(setup)?;
        std::fs::create_dir_all(path.join("download")).map_err(setup)?;
        Ok(Self { path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where the server finds the payload.
    pub(crate) fn payload(&self) -> PathBuf {
        self.path.join("htdocs").join(PAYLOAD)
    }

    /// Where the client writes the download.
    pub(crate) fn download(&self) -> PathBuf {
        self.path.join("download").join(PAYLOAD)
    }

    /// Writes `size` bytes of the pattern as the payload.
    pub(crate) fn write_payload(&self, size: u64) -> Result<(), TransferError> {
        use std::io::Write as _;
        let mut file =
            std::io::BufWriter::new(std::fs::File::create(self.payload()).map_err(setup)?);
        for (offset, len) in super::chunks(size) {
            file.write_all(&pattern::chunk(offset, len))
                .map_err(setup)?;
        }
        file.flush().map_err(setup)
    }

    /// Writes the aioquic peer script; its path.
    pub(crate) fn write_aioquic_script(&self) -> Result<PathBuf, TransferError> {
        let path = self.path.join("aioquic_peer.py");
        std::fs::write(&path, AIOQUIC_SCRIPT).map_err(setup)?;
        Ok(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A loopback UDP port nobody holds right now (the peer binds it just after).
pub(crate) fn free_udp_port() -> Result<u16, TransferError> {
    let probe = StdUdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(setup)?;
    Ok(probe.local_addr().map_err(setup)?.port())
}

/// A child process of the transfer.
pub(crate) struct PeerChild {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// Lines of a peer's stderr quoted in an error.
const LOG_TAIL_LINES: usize = 3;

impl PeerChild {
    /// Spawns `command` with stdin and stdout closed and stderr into
    /// `<dir>/<name>.log` (quoted when the peer fails); killed if dropped.
    pub(crate) fn spawn(
        name: &'static str,
        command: &mut Command,
        dir: &ScratchDir,
    ) -> Result<Self, TransferError> {
        let log = dir.path().join(format!("{}.log", name.replace(' ', "-")));
        let stderr = std::fs::File::create(&log).map_err(setup)?;
        // Also killed when this process is killed (no destructor runs then); the
        // spawning thread is a runtime worker, which outlives the transfer.
        petrel_sys::child::end_with_parent(command.as_std_mut());
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| setup(format!("cannot start {name}: {e}")))?;
        Ok(Self { name, child, log })
    }

    /// The last lines the peer wrote to stderr, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(LOG_TAIL_LINES).collect();
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        if tail.is_empty() {
            "no output".to_owned()
        } else {
            tail.join(" | ")
        }
    }

    /// Waits until something listens on UDP `port`: a probe datagram (which a QUIC
    /// server drops as garbage) draws no "port unreachable" for 50 ms.
    pub(crate) async fn wait_listening(&mut self, port: u16) -> Result<(), TransferError> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let probe = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(setup)?;
        probe
            .connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .map_err(setup)?;
        let mut buf = [0u8; 64];
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().map_err(setup)? {
                return Err(setup(format!(
                    "{} exited before listening ({status}): {}",
                    self.name,
                    self.log_tail()
                )));
            }
            // A send error is the refusal of an earlier probe, reported late.
            if probe.send(&[0]).await.is_ok() {
                let answer = probe.recv(&mut buf);
                // Silence for 50 ms: no refusal, so a server holds the port.
                if tokio::time::timeout(Duration::from_millis(50), answer)
                    .await
                    .is_err()
                {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(setup(format!(
            "{} did not listen on port {port} within {STARTUP_TIMEOUT:?}",
            self.name
        )))
    }

    /// Kills the process by its PID and waits for it.
    pub(crate) async fn stop(mut self) -> Result<(), TransferError> {
        self.child.kill().await.map_err(transport)
    }

    /// Waits for the client to exit while its download at `path` grows; the
    /// receipt times the first and last growth seen (every [`WATCH_INTERVAL`]),
    /// publishing the size to `progress`. Content is checked afterwards
    /// ([`verify_download`]).
    pub(crate) async fn watch_download(
        mut self,
        path: &Path,
        progress: &AtomicU64,
    ) -> Result<Receipt, TransferError> {
        let mut receipt = Receipt::default();
        let mut seen = 0u64;
        let mut tick = tokio::time::interval(WATCH_INTERVAL);
        loop {
            tick.tick().await;
            let exited = self.child.try_wait().map_err(transport)?;
            let size = std::fs::metadata(path).map_or(0, |m| m.len());
            if size > seen {
                let now = Instant::now();
                receipt.first_byte.get_or_insert(now);
                receipt.last_byte = Some(now);
                seen = size;
                progress.store(size, Ordering::Relaxed);
            }
            if let Some(status) = exited {
                if !status.success() {
                    return Err(transport(format!(
                        "{} exited with {status} after {seen} bytes: {}",
                        self.name,
                        self.log_tail()
                    )));
                }
                return Ok(receipt);
            }
        }
    }
}

/// Checks the downloaded file against the pattern: the verifier's counts.
pub(crate) fn verify_download(path: &Path) -> Result<Verifier, TransferError> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| transport(format!("no download at {}: {e}", path.display())))?;
    let mut verifier = Verifier::default();
    let mut buf = vec![0; CHUNK * 64];
    loop {
        let n = file.read(&mut buf).map_err(transport)?;
        if n == 0 {
            return Ok(verifier);
        }
        verifier.check(&buf[..n]);
    }
}
