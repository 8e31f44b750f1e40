//! The simulated devices: their 127.x.y.z addresses, accounts and SSIDs,
//! their sockets, and their login by heartbeat (draarl-v1 §7.2).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use petrel_reflector::codec::{decode, encode, encode_into, Header, PacketType};
use petrel_sys::socket::{set_buffers, BufferRequest, OnRefusal};

use super::LoadError;

/// Marks the load generator's voice payloads (first 8 bytes).
pub(super) const MARKER: &[u8; 8] = b"DRABENCH";
/// Device password of every bench account.
pub(super) const PASSWORD: &str = "Bench123";
/// Devices per user: SSIDs 1–99 and 106–254.
pub(super) const DEVICES_PER_USER: usize = 248;

/// Pause before the next attempt after a reject (e.g. `server_busy` while the
/// first device of a user has its password checked).
const LOGIN_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// How long a device keeps retrying rejected logins. The reflector answers
/// `server_busy` while its Argon2 budget (10 checks/s by default) works
/// through the users; a real device simply heartbeats again, so only a
/// device still refused after this long counts as failed.
const LOGIN_DEADLINE: Duration = Duration::from_secs(30);

/// Address of device `i` (n = i + 1): 127.(64 + n/254²).(1 + (n/254) mod 254).(1 + n mod 254).
pub fn device_ip(i: usize) -> Ipv4Addr {
    let n = i + 1;
    Ipv4Addr::new(
        127,
        (64 + n / (254 * 254)) as u8,
        (1 + (n / 254) % 254) as u8,
        (1 + n % 254) as u8,
    )
}

/// SSID of device `i` within its user.
pub(super) fn ssid_of(i: usize) -> u8 {
    let k = i % DEVICES_PER_USER;
    if k < 99 {
        (k + 1) as u8
    } else {
        (k - 99 + 106) as u8
    }
}

/// Account name of device `i`.
pub(super) fn user_of(i: usize) -> String {
    format!("bench{:04}", i / DEVICES_PER_USER)
}

/// Wall-clock time, Unix ns (the send and receive stamps share this clock).
pub(super) fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One simulated device: its connected socket, its header and its heartbeat.
pub(super) struct Device {
    pub(super) sock: UdpSocket,
    pub(super) header: Header,
    pub(super) heartbeat: Vec<u8>,
    /// Reserved in the voice frames it receives: 0 for a physical device,
    /// the source group for an app session (draarl-apps §2.7).
    pub(super) downlink_reserved: u32,
    /// Its row in the stage's frame receipts (`receipts.rs`), if kept.
    pub(super) receipt_row: usize,
}

/// Binds device `i` to its own address and connects it to `server`.
pub(super) fn make_device(i: usize, server: SocketAddr) -> Result<Device, LoadError> {
    let sock = UdpSocket::bind(SocketAddrV4::new(device_ip(i), 0))?;
    let recv = BufferRequest {
        send: None,
        recv: Some(256 << 10),
    };
    let _ = set_buffers(&sock, recv, OnRefusal::Ignore);
    sock.connect(server)?;
    let mut header = Header::new(PacketType::Heartbeat);
    header.set_username(&user_of(i));
    header.set_password(PASSWORD);
    header.ssid = ssid_of(i);
    header.dev_model = 2;
    let n = (i + 1) as u32;
    let mut data = vec![0u8; 24];
    let b = n.to_be_bytes();
    data.extend_from_slice(
        format!("02:42:{:02X}:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2], b[3]).as_bytes(),
    );
    let heartbeat = encode(&header, &data).map_err(|e| LoadError::Invalid(e.to_string()))?;
    Ok(Device {
        sock,
        header,
        heartbeat,
        downlink_reserved: 0,
        receipt_row: 0,
    })
}

/// Encodes `d`'s voice packet of round `k` into `packet`, after writing the
/// stage id `stage_id`, the round and the send time (Unix ns) into
/// `payload` behind its marker (draarl-v1 §7.3).
pub(super) fn encode_voice(
    d: &Device,
    payload: &mut [u8],
    stage_id: u64,
    k: u64,
    packet: &mut Vec<u8>,
) -> Result<(), LoadError> {
    payload[8..16].copy_from_slice(&stage_id.to_be_bytes());
    payload[16..24].copy_from_slice(&k.to_be_bytes());
    payload[24..32].copy_from_slice(&unix_ns().to_be_bytes());
    let mut h = d.header.clone();
    h.packet_type = PacketType::Voice;
    encode_into(&h, payload, packet).map_err(|e| LoadError::Invalid(e.to_string()))
}

/// Heartbeats until one is answered with a callsign: up to 4 unanswered
/// heartbeats, each waiting 2.5 s for a reply (§7.2); a reject is retried
/// after a short pause until [`LOGIN_DEADLINE`].
pub(super) fn login(d: &Device) -> bool {
    let _ = d.sock.set_read_timeout(Some(Duration::from_millis(2500)));
    let mut buf = [0u8; 1500];
    let started = Instant::now();
    let mut unanswered = 0;
    while unanswered < 4 && started.elapsed() < LOGIN_DEADLINE {
        if d.sock.send(&d.heartbeat).is_err() {
            unanswered += 1;
            continue;
        }
        // The heartbeat reply, skipping Type 3 pushes: accepted (a callsign) or not.
        let mut accepted = None;
        while let Ok(n) = d.sock.recv(&mut buf) {
            if let Ok(p) = decode(&buf[..n]) {
                if p.header.packet_type == PacketType::Heartbeat {
                    accepted = Some(p.header.callsign_str().is_some_and(|c| !c.is_empty()));
                    break;
                }
            }
        }
        match accepted {
            Some(true) => return true,
            Some(false) => std::thread::sleep(LOGIN_RETRY_PAUSE),
            None => unanswered += 1,
        }
    }
    false
}

/// Threads logging devices in at once.
const LOGIN_THREADS: usize = 8;

/// Starts the logins of the login threads no faster than a set rate: the
/// k-th starts `k / rate` seconds after the first.
#[derive(Debug)]
struct LoginPacer {
    start: Instant,
    gap: Duration,
    next: AtomicU32,
}

impl LoginPacer {
    fn new(per_s: u32) -> Self {
        Self {
            start: Instant::now(),
            gap: Duration::from_secs(1) / per_s.max(1),
            next: AtomicU32::new(0),
        }
    }

    /// Waits for the next login's turn.
    fn wait(&self) {
        let due = self.start + self.gap * self.next.fetch_add(1, Relaxed);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
}

/// Logs in every device of `devices` from `LOGIN_THREADS` threads; how many
/// failed to log in.
pub(super) fn login_all(devices: &[Device]) -> usize {
    let accepted: Vec<AtomicBool> = devices.iter().map(|_| AtomicBool::new(false)).collect();
    login_all_marking(devices, &accepted, None)
}

/// [`login_all`], setting `accepted[i]` once device `i` is logged in
/// (`accepted` has one flag per device), starting at most `per_s` logins a
/// second when given.
pub(super) fn login_all_marking(
    devices: &[Device],
    accepted: &[AtomicBool],
    per_s: Option<u32>,
) -> usize {
    let per = devices.len().div_ceil(LOGIN_THREADS).max(1);
    let pacer = per_s.map(LoginPacer::new);
    let pacer = pacer.as_ref();
    std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .chunks(per)
            .zip(accepted.chunks(per))
            .map(|(c, flags)| {
                s.spawn(move || {
                    c.iter()
                        .zip(flags)
                        .filter(|(d, flag)| {
                            if let Some(p) = pacer {
                                p.wait();
                            }
                            let ok = login(d);
                            flag.store(ok, Relaxed);
                            !ok
                        })
                        .count()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(usize::MAX))
            .sum::<usize>()
    })
}
