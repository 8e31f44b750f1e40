//! An edge node under test as its own process (`<program> reflector serve
//! --role edge`, draarl-interconnect §1, §2), enrolled at the centre first
//! with `<program> reflector edge add` (§3.3): its node token goes from that
//! command's stdout into a file only this user can read, which the edge gets
//! with `--node-token-file`, so the token never appears in a process list or
//! in this program's output.
//!
//! The edge listens for devices (and Type 0 from the centre) on a loopback
//! UDP port and serves `/metrics` on a loopback HTTP port, both chosen by
//! the kernel and read from its start-up line (`edge started on ADDR (pid
//! N), metrics on http://ADDR/metrics`). It is ready once its link to the
//! centre is (`petrel_reflector_edge_link_state` 2, §6.1: after the route
//! snapshot). Dropping an [`EdgeChild`] stops the process like
//! [`super::child::ServerChild`]: SIGINT, then a kill after 10 s.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::child::{stdout_until, stop_child};
use super::node_metrics::MetricsReading;
use super::LoadError;

/// How long an edge may take to be ready after it printed its addresses.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The edge's link state gauge and its value when ready (§6.1).
const LINK_STATE: (&str, f64) = ("petrel_reflector_edge_link_state", 2.0);
/// The start-up line's prefix.
const STARTED: &str = "edge started on ";
/// Pause between readiness checks.
const POLL: Duration = Duration::from_millis(100);

/// A running edge child; dropping it stops it.
#[derive(Debug)]
pub(super) struct EdgeChild {
    child: Child,
    /// Node id, e.g. `edge-a`.
    pub name: String,
    /// UDP address devices log in through.
    pub udp: SocketAddr,
    /// HTTP address of its `/metrics`.
    pub http: SocketAddr,
}

impl EdgeChild {
    /// Starts edge `name` with the token in `token_file`, connecting to the
    /// centre's control plane at `control` and its UDP data plane at
    /// `centre_udp`; returns once the edge's link is ready.
    ///
    /// # Errors
    /// [`LoadError`] when it cannot be started, exits, or is not ready
    /// within 30 s of printing its addresses.
    pub(super) fn start(
        program: &Path,
        name: &str,
        token_file: &Path,
        control: SocketAddr,
        centre_udp: SocketAddr,
    ) -> Result<Self, LoadError> {
        let mut child = Command::new(program)
            .args(["reflector", "serve", "--role", "edge", "--centre"])
            .arg(control.to_string())
            .arg("--centre-udp")
            .arg(centre_udp.to_string())
            .arg("--node-token-file")
            .arg(token_file)
            .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                LoadError::Invalid(format!(
                    "starting {} reflector serve --role edge: {e}",
                    program.display()
                ))
            })?;
        let stdout = child.stdout.take();
        let mut me = Self {
            child,
            name: name.to_owned(),
            udp: SocketAddr::from(([127, 0, 0, 1], 0)),
            http: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let stdout =
            stdout.ok_or_else(|| LoadError::Invalid(format!("edge {name} has no stdout")))?;
        let lines = stdout_until(stdout, STARTED, &format!("edge {name}"))?;
        (me.udp, me.http) = lines.last().and_then(|l| parse_started(l)).ok_or_else(|| {
            LoadError::Invalid(format!("edge {name} printed unparsable addresses"))
        })?;
        me.wait_ready()?;
        Ok(me)
    }

    /// The edge's process id, for `/proc`.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Why the edge is no longer running, if it has exited.
    pub(super) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!(
                "edge {} exited ({status}; see its stderr above)",
                self.name
            )),
            _ => None,
        }
    }

    fn wait_ready(&mut self) -> Result<(), LoadError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(gone) = self.exited() {
                return Err(LoadError::Invalid(gone));
            }
            let state = MetricsReading::fetch(self.http)
                .ok()
                .and_then(|m| m.get(LINK_STATE.0));
            if state == Some(LINK_STATE.1) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(LoadError::Invalid(format!(
                    "edge {} was not ready within {} s (link state {state:?})",
                    self.name,
                    READY_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(POLL);
        }
    }
}

/// The UDP and HTTP addresses of `edge started on ADDR (pid N), metrics on
/// http://ADDR/metrics`.
fn parse_started(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let udp = line.strip_prefix(STARTED)?.split_whitespace().next()?;
    let http = line.split("http://").nth(1)?.split('/').next()?;
    Some((udp.parse().ok()?, http.parse().ok()?))
}

impl Drop for EdgeChild {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Enrols edge `name` at the centre whose store is `db` and config
/// `centre_config` (`<program> reflector edge add NAME --db DB --config
/// FILE`) and writes its node token to `token_file` (mode 0600).
///
/// # Errors
/// [`LoadError`] when the command fails or prints no token; its stderr is
/// passed through, its stdout (which holds the token) never.
pub(super) fn enrol(
    program: &Path,
    db: &str,
    centre_config: &Path,
    name: &str,
    token_file: &Path,
) -> Result<(), LoadError> {
    let out = Command::new(program)
        .args(["reflector", "edge", "add", name, "--db", db, "--config"])
        .arg(centre_config)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| LoadError::Invalid(format!("running reflector edge add {name}: {e}")))?;
    if !out.status.success() {
        return Err(LoadError::Invalid(format!(
            "reflector edge add {name}: {} (see its stderr above)",
            out.status
        )));
    }
    // The token is the last line: `edge node NAME added; its node token …:` comes first.
    let text = String::from_utf8_lossy(&out.stdout);
    let token = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.contains(' '))
        .ok_or_else(|| LoadError::Invalid(format!("reflector edge add {name} printed no token")))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(token_file)?;
    writeln!(f, "{token}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_start_up_line() {
        let line =
            "edge started on 127.0.0.1:40001 (pid 7), metrics on http://127.0.0.1:40002/metrics";
        assert_eq!(
            parse_started(line),
            Some((
                SocketAddr::from(([127, 0, 0, 1], 40001)),
                SocketAddr::from(([127, 0, 0, 1], 40002))
            ))
        );
        assert_eq!(
            parse_started("edge started on 127.0.0.1:40001 (pid 7)"),
            None
        );
        assert_eq!(parse_started("something else"), None);
    }
}
