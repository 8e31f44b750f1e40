//! `petrel reflector login`: logs one device in to a running reflector by
//! heartbeat, as a physical device does (draarl-v1 §3.1), and reports the
//! answer (§2.7): the callsign on success, the reject reason otherwise. An
//! operator's check that an installation serves devices.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use petrel_reflector::codec::{decode, encode, Header, HeartbeatData, Mac, PacketType};

/// How long one heartbeat waits for its reply before the next is sent
/// (a device's retry interval, draarl-v1 §7.2).
const REPLY_WAIT: Duration = Duration::from_millis(2500);
/// Pause before retrying after `server_busy` (the reflector's Argon2
/// budget is spent; a retry, not a failure).
const BUSY_PAUSE: Duration = Duration::from_millis(250);
/// DevModel of the heartbeat: a plain physical device (draarl-v1 §2.5).
const DEV_MODEL: u8 = 2;
/// The heartbeat's MAC, locally administered (first octet 0x02).
const MAC: [u8; 6] = [0x02, 0x50, 0x45, 0x54, 0x52, 0x4c];

/// Log one device in and print the outcome.
#[derive(Args)]
pub struct LoginArgs {
    /// The reflector's UDP address, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:60050")]
    server: String,
    /// Account name (the username devices send).
    #[arg(long)]
    user: String,
    /// Device SSID (1-99, 106-254).
    #[arg(long, default_value_t = 1)]
    ssid: u8,
    /// The account's device password. Visible in the process list: prefer
    /// standard input, read (first line) when this flag is absent.
    #[arg(long)]
    device_password: Option<String>,
    /// Give up after this many seconds without an accepted or refused
    /// login (1-120).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=120))]
    timeout_secs: u64,
}

impl std::fmt::Debug for LoginArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginArgs")
            .field("server", &self.server)
            .field("user", &self.user)
            .field("ssid", &self.ssid)
            .field(
                "device_password",
                &self.device_password.as_ref().map(|_| "***"),
            )
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

/// The reflector's answer to a login.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// Logged in; the account's callsign.
    Accepted(String),
    /// Refused: the status byte and the reason text (draarl-v1 §2.7).
    Refused(u8, String),
}

/// Runs `petrel reflector login`: exit 0 when the device is logged in, 1
/// when it is refused or no answer came within `--timeout-secs`.
pub fn run(args: LoginArgs) -> anyhow::Result<ExitCode> {
    let password = match args.device_password {
        Some(p) => p,
        None => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the device password from standard input")?;
            line.trim_end_matches(['\n', '\r']).to_owned()
        }
    };
    anyhow::ensure!(!password.is_empty(), "no device password given");
    let server = resolve(&args.server)?;
    let heartbeat = heartbeat(&args.user, args.ssid, &password)?;
    let deadline = Duration::from_secs(args.timeout_secs);
    match login(server, &heartbeat, deadline)? {
        Some(Answer::Accepted(callsign)) => {
            println!(
                "accepted: {}-{} logged in to {server}, callsign {callsign}",
                args.user, args.ssid
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(Answer::Refused(status, reason)) => {
            println!(
                "refused: {}-{} by {server}: {reason} (status {status})",
                args.user, args.ssid
            );
            Ok(ExitCode::FAILURE)
        }
        None => {
            println!("no answer from {server} within {} s", args.timeout_secs);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The first address `text` (HOST:PORT) resolves to.
fn resolve(text: &str) -> anyhow::Result<SocketAddr> {
    text.to_socket_addrs()
        .with_context(|| format!("resolving {text}"))?
        .next()
        .with_context(|| format!("{text} resolves to no address"))
}

/// The Type 2 heartbeat of device `user`-`ssid`: header with the device
/// password, DATA = the MAC without a GPS block (draarl-v1 §2.3).
fn heartbeat(user: &str, ssid: u8, password: &str) -> anyhow::Result<Vec<u8>> {
    let mut header = Header::new(PacketType::Heartbeat);
    header.set_username(user);
    header.set_password(password);
    header.ssid = ssid;
    header.dev_model = DEV_MODEL;
    let data = HeartbeatData {
        gps: None,
        mac: Some(Mac(MAC)),
    }
    .encode();
    encode(&header, &data).map_err(|e| anyhow::anyhow!("building the heartbeat: {e}"))
}

/// Heartbeats `server` until a reply accepts or refuses the login (a
/// `server_busy` refusal is retried), or `deadline` has passed: `None`.
fn login(
    server: SocketAddr,
    heartbeat: &[u8],
    deadline: Duration,
) -> anyhow::Result<Option<Answer>> {
    let local: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).context("binding a UDP socket")?;
    sock.connect(server)
        .with_context(|| format!("connecting to {server}"))?;
    let started = Instant::now();
    let mut buf = [0u8; 2048];
    while started.elapsed() < deadline {
        // A refused port (ICMP) shows as an error on send or receive; keep
        // trying until the deadline, as a device would.
        let _ = sock.send(heartbeat);
        let wait_until =
            Instant::now() + REPLY_WAIT.min(deadline.saturating_sub(started.elapsed()));
        while let Some(left) = wait_until.checked_duration_since(Instant::now()) {
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left))
                .context("setting the receive timeout")?;
            let Ok(n) = sock.recv(&mut buf) else {
                // Timeout, or a refused port: wait out the interval.
                std::thread::sleep(wait_until.saturating_duration_since(Instant::now()));
                break;
            };
            match answer(&buf[..n]) {
                Some(Answer::Refused(_, reason)) if reason == "server_busy" => {
                    std::thread::sleep(BUSY_PAUSE);
                    break;
                }
                Some(a) => return Ok(Some(a)),
                // Type 3 pushes and anything else: not the reply.
                None => {}
            }
        }
    }
    Ok(None)
}

/// A heartbeat reply's meaning: a non-empty callsign accepts, an empty one
/// refuses with DATA = status byte + reason (draarl-v1 §2.7); `None` for any
/// other datagram.
fn answer(datagram: &[u8]) -> Option<Answer> {
    let packet = decode(datagram).ok()?;
    if packet.header.packet_type != PacketType::Heartbeat {
        return None;
    }
    match packet.header.callsign_str() {
        Some(c) if !c.is_empty() => Some(Answer::Accepted(c.to_owned())),
        _ => {
            let (status, reason) = packet.data.split_first().unwrap_or((&0, &[]));
            Some(Answer::Refused(
                *status,
                String::from_utf8_lossy(reason).into_owned(),
            ))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_carries_the_identity_and_a_mac() {
        let bytes = heartbeat("alice", 7, "Secret12").unwrap();
        let p = decode(&bytes).unwrap();
        assert_eq!(p.header.packet_type, PacketType::Heartbeat);
        assert_eq!(p.header.username_str(), Some("alice"));
        assert_eq!(p.header.ssid, 7);
        assert_eq!(p.header.password_bytes(), b"Secret12");
        let data = HeartbeatData::parse(p.data).unwrap();
        assert_eq!(data.mac, Some(Mac(MAC)));
    }

    #[test]
    fn replies_are_read_as_accepted_or_refused() {
        let mut ok = Header::new(PacketType::Heartbeat);
        ok.set_callsign("N0CALL");
        let ok = encode(&ok, &[]).unwrap();
        assert_eq!(answer(&ok), Some(Answer::Accepted("N0CALL".into())));

        let refused = encode(&Header::new(PacketType::Heartbeat), b"\x03invalid_password").unwrap();
        assert_eq!(
            answer(&refused),
            Some(Answer::Refused(3, "invalid_password".into()))
        );

        let push = encode(&Header::new(PacketType::Config), &[]).unwrap();
        assert_eq!(answer(&push), None);
        assert_eq!(answer(b"not a packet"), None);
    }
}
