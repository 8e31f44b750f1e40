//! The reflector soak (`benchmark` = `"reflector-soak"`,
//! `petrel bench reflector --soak SECONDS`): devices keep talking while they
//! log out and in, switch groups, get banned and unbanned and reconnect from
//! new ports; every missing datagram is attributed to a cause, and the
//! reflector child's memory and descriptors are compared from start to end.
//! Its parameters and its one element of `rounds`.

use serde::{Deserialize, Serialize};

/// Every parameter of a soak, as recorded in `parameters`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakParameters {
    /// Simulated devices.
    pub devices: usize,
    /// Groups, one speaker each.
    pub groups: usize,
    /// Voice interval per speaker, ms.
    pub interval_ms: u64,
    /// Voice DATA bytes per packet, bytes.
    pub payload: usize,
    /// Measured soak time, s (after the warm-up).
    pub soak_s: u64,
    /// Warm-up before the measurement (voice and churn already running), s.
    pub warmup_s: u64,
    /// Seed of the churn schedule.
    pub seed: u64,
    /// Churn actions started per second (logouts, group switches, bans,
    /// reconnects; the matching logins and unbans come on top).
    pub churn_per_s: u32,
    /// Around each churn action, how long before its start and after its
    /// end a receiver's misses count as `churn_window`, ms.
    pub settle_ms: u64,
    /// Reflector send paths.
    pub writers: usize,
    /// Reflector frame-age limit, ms.
    pub max_frame_age_ms: u64,
}

/// Where every expected but missing datagram went. The fields sum to
/// `missing` of [`SoakResult`]; all are datagram counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoakLoss {
    /// Frames no settled receiver got, matched one for one with the
    /// reflector's `frames_expired` (frames older than the frame-age limit),
    /// counted as the datagrams those frames were owed.
    pub frames_expired: u64,
    /// Likewise for the reflector's `frames_dropped` (evicted from a full queue).
    pub frames_dropped: u64,
    /// Likewise for the speaker's frames the reflector refused at the
    /// maximum talk time (`floor_talk_limit_cuts`) and during the hold-off
    /// after it (`floor_holdoff_drops`): a speaker that talks longer than
    /// `floor_max_talk_s` loses the floor for `floor_holdoff_ms`.
    #[serde(default)]
    pub floor_talk_limit: u64,
    /// The speaker was send-banned (admin comm-control) when it talked.
    pub ban_send: u64,
    /// The receiver was receive-banned (admin comm-control).
    pub ban_recv: u64,
    /// The receiver was logged out (its socket closed).
    pub offline: u64,
    /// The receiver was logging in (from a new port), or within the settle
    /// time after its login was answered.
    pub not_yet_receiving: u64,
    /// The receiver or the speaker had a group switch, ban, unban, logout or
    /// reconnect in progress, or within the settle time of one.
    pub churn_window: u64,
    /// Matched with the reflector's failed sends (`write_errors`).
    pub reflector_send_errors: u64,
    /// Matched with the host's UDP receive-buffer drops (`RcvbufErrors`):
    /// one datagram each, or one whole frame each when a frame was lost
    /// entirely (the reflector's own socket overflowed).
    pub receive_buffer_drops: u64,
    /// Missing datagrams no counter explains.
    pub unattributed: u64,
}

impl SoakLoss {
    /// Every attributed and unattributed datagram.
    pub fn total(&self) -> u64 {
        self.frames_expired
            + self.frames_dropped
            + self.floor_talk_limit
            + self.ban_send
            + self.ban_recv
            + self.offline
            + self.not_yet_receiving
            + self.churn_window
            + self.reflector_send_errors
            + self.receive_buffer_drops
            + self.unattributed
    }
}

/// Churn actions carried out during the whole run (warm-up included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoakChurn {
    /// Devices that closed their socket (logged out).
    pub logouts: u64,
    /// Logins of logged-out devices from a new socket, answered.
    pub logins: u64,
    /// Logins (after a logout or for a reconnect) never answered with a
    /// callsign; the device stays logged out.
    pub login_failures: u64,
    /// Group switches through the admin API.
    pub group_switches: u64,
    /// Receive bans through the admin API.
    pub recv_bans: u64,
    /// Send bans of speakers through the admin API.
    pub send_bans: u64,
    /// Bans lifted through the admin API.
    pub unbans: u64,
    /// Devices that logged in again from a new source port, then closed the old one.
    pub reconnects: u64,
    /// Admin API requests that failed (the action is then not counted).
    pub admin_errors: u64,
}

/// The figures of one soak: its only element of `rounds`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakResult {
    /// Voice frames the speakers sent during the measurement.
    pub frames_sent: u64,
    /// Σ over sent frames of the receivers the churn plan had in the
    /// speaker's group at send time (logged out and banned ones included),
    /// datagrams.
    pub expected: u64,
    /// Of `expected`, datagrams that arrived.
    pub received: u64,
    /// `expected` − `received`, datagrams.
    pub missing: u64,
    /// 100 × `missing` / `expected`.
    pub loss_pct: f64,
    /// Where the missing datagrams went.
    pub loss: SoakLoss,
    /// Datagrams that arrived at a device the plan had in another group, or
    /// at none, while it was in a churn window (not counted in `received`).
    pub received_in_churn: u64,
    /// Datagrams that arrived at a device the plan had in another group
    /// outside any churn window (a misrouting, not counted in `received`).
    pub misdelivered: u64,
    /// Datagrams of a frame that arrived twice at the same device.
    pub duplicates: u64,
    /// Datagrams that arrived after their frame was tallied.
    pub late: u64,
    /// Receivers that missed at least one datagram outside churn windows,
    /// bans and logouts (attributed to a counter or not).
    pub receivers_with_settled_loss: u64,
    /// Smallest share of its expected datagrams any receiver got outside
    /// churn windows, bans and logouts, %.
    pub worst_receiver_pct: f64,
    /// 99th-percentile latency of received datagrams, ms.
    pub latency_p99_ms: f64,
    /// Worst latency, ms.
    pub latency_max_ms: f64,
    /// Load-generator `recv` errors other than `EAGAIN`.
    pub recv_errors: u64,
    /// Churn actions carried out.
    pub churn: SoakChurn,
    /// The reflector's whole frames expired during the measurement.
    pub reflector_frames_expired: u64,
    /// The reflector's whole frames evicted from a full queue during the measurement.
    pub reflector_frames_dropped: u64,
    /// The reflector's failed sends during the measurement, datagrams.
    pub reflector_write_errors: u64,
    /// Voice and text the reflector dropped from send-banned devices.
    pub reflector_send_ban_drops: u64,
    /// Directory reloads the reflector skipped (a change then waits for the next one).
    pub reflector_reloads_skipped: u64,
    /// Host-wide UDP receive-buffer drops during the measurement, datagrams.
    pub host_rcvbuf_errors: u64,
    /// Reflector child's RSS after the warm-up, MiB.
    pub server_rss_start_mb: f64,
    /// Reflector child's RSS at the end (voice and churn stopped), MiB.
    pub server_rss_end_mb: f64,
    /// 100 × (end − start) / start of the child's RSS, %.
    pub server_rss_growth_pct: f64,
    /// Reflector child's open file descriptors after the warm-up.
    pub server_fds_start: usize,
    /// Reflector child's open file descriptors at the end.
    pub server_fds_end: usize,
    /// Why the soak failed (empty when it passed): unattributed loss, RSS
    /// growth over 5 %, descriptor growth.
    pub failures: Vec<String>,
}
