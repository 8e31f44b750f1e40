//! Type 2 login: password check with the ban ladder, reserved SSIDs, the
//! address-conflict rule and device records (draarl-v1 §3.1, §3.2, §3.5).
//!
//! # Who can lock a user out
//!
//! The failed-auth ladder is keyed by (source IP, username), as in §3.2, and
//! is checked before the password. Failures from one address therefore never
//! block the same user from another address: a correct password from an
//! address that is not banned is never refused because of what other
//! addresses sent. Only a password that Argon2 found wrong counts as a
//! failure (and unknown usernames, on one shared key per address); a
//! malformed password (not 6–10 ASCII letters and digits) or an unapproved
//! account is refused with `invalid_password` without counting, unlike the
//! reference (§3.1 step 2), so datagrams forged with a victim's address or
//! sent from behind its carrier NAT cannot ban the victim without a real
//! Argon2 check each, which the per-prefix budget rations. A prefix's
//! spent budget answers `server_busy` (a retry, not a ban), and never
//! affects a user whose password is already verified.

use std::net::SocketAddr;
use std::time::Instant;

use super::auth::AuthStep;
use super::endpoint_caps::EndpointLimit;
use super::reflector::Reflector;
use super::replies::{self, RejectReason};
use crate::codec::{ConfigCommand, Header, HeartbeatData, Mac};
use crate::model::DEV_MODEL_ANDROID;
use crate::model::{
    is_reserved_ssid, DeviceKey, DeviceKind, DeviceRecord, Directory, StoreEvent, Transmit,
    UserRecord, UNGROUPED,
};
use crate::policy::BanCheck;

/// Failed-auth ladder key of every username the directory does not know.
/// The reference keys `ip:username` (draarl-v1 §3.2), so one address sending
/// made-up names took one table entry per name and could fill the table,
/// after which no new `ip:username` was tracked and wrong passwords for real users went
/// unbanned. No account has this name: it starts with NUL.
const UNKNOWN_USER: &str = "\0unknown-user";

impl Reflector {
    pub(super) fn reject(&mut self, src: SocketAddr, h: &Header, reason: RejectReason) {
        match reason.code() {
            1 => self.stats.rejects_conflict += 1,
            2 => self.stats.rejects_reserved_ssid += 1,
            _ => self.stats.rejects_auth += 1,
        }
        self.transmits.push_back(Transmit {
            dst: src,
            payload: replies::heartbeat_reject(h, reason),
        });
    }

    pub(super) fn on_heartbeat(&mut self, now: Instant, src: SocketAddr, h: &Header, data: &[u8]) {
        self.stats.heartbeats += 1;
        if is_reserved_ssid(h.ssid) {
            if h.reserved != 0 {
                self.stats.reserved_tag_drops += 1;
            } else {
                self.reject(src, h, RejectReason::ReservedSsid);
            }
            return;
        }
        let Some(name) = h.username_str().map(str::to_owned) else {
            self.reject(src, h, RejectReason::UserNotFound);
            return;
        };
        let Some(user) = self.dir.user_by_name(&name).cloned() else {
            self.auth_failure(now, src, h, UNKNOWN_USER, RejectReason::UserNotFound);
            return;
        };
        let key = (user.id, h.ssid);
        let mac = HeartbeatData::parse(data).unwrap_or_default().mac;
        let timeout = self.cfg.offline_timeout();
        // A disabled account is re-checked (and refused) even mid-session.
        let same_endpoint = user.enabled
            && self.sessions.get(&key).is_some_and(|s| {
                s.addr == src && now.saturating_duration_since(s.last_seen) <= timeout
            });
        // A device evicted from a full prefix (see `endpoint_caps.rs`) by a
        // login on any shard: its session ends here, and this heartbeat logs
        // it in anew under the caps.
        let same_endpoint = same_endpoint && {
            let held = self.shared.renew_endpoint(key, src, now);
            if !held {
                self.stats.evicted_sessions_ended += 1;
                self.drop_session(key);
            }
            held
        };
        if !same_endpoint {
            if self.check_pending(key, src) {
                self.stats.password_check_pending_drops += 1;
                return;
            }
            match self.authenticate(now, src, h, data, &user) {
                Err(reason) => {
                    self.reject(src, h, reason);
                    return;
                }
                Ok(AuthStep::Pending) => return,
                Ok(AuthStep::Verified) => {}
            }
            if let Err(reason) = self.admit(now, src, h, key, mac) {
                self.reject(src, h, reason);
                return;
            }
        }
        self.accept(now, src, h, data, &user, key, mac);
    }

    /// After a correct password: the online-conflict rule (spec §3.5), the
    /// session limit and the endpoint caps (see
    /// [`EndpointPolicy`](crate::model::EndpointPolicy)).
    pub(super) fn admit(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        key: DeviceKey,
        mac: Option<Mac>,
    ) -> Result<(), RejectReason> {
        if let Some(s) = self.sessions.get(&key) {
            let active = now.saturating_duration_since(s.last_seen) <= self.cfg.offline_timeout();
            let stored_mac = self.dir.device(key.0, key.1).and_then(|r| r.mac);
            let mac_matches = mac.is_some() && mac == stored_mac;
            let android_without_mac = h.dev_model == DEV_MODEL_ANDROID && mac.is_none();
            if active && !mac_matches && !android_without_mac {
                return Err(RejectReason::ConflictOnline);
            }
        } else if self.shared.online() >= self.cfg.max_sessions {
            return Err(RejectReason::ServerFull);
        }
        match self
            .shared
            .claim_endpoint(&self.dir, key, src, &self.cfg.endpoints, now)
        {
            Ok(claim) => {
                self.stats.snapshot_invalidations += claim.invalidations;
                self.stats.prefix_endpoint_evictions += u64::from(claim.evicted.is_some());
            }
            Err(EndpointLimit::Account) => {
                self.stats.account_endpoint_limit_rejects += 1;
                return Err(RejectReason::AccountEndpointLimit);
            }
            Err(EndpointLimit::Prefix) => {
                self.stats.prefix_endpoint_limit_rejects += 1;
                return Err(RejectReason::PrefixEndpointLimit);
            }
        }
        self.stats.logins += 1;
        Ok(())
    }

    /// Marks the device online at `src` and answers the heartbeat.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn accept(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        data: &[u8],
        user: &UserRecord,
        key: DeviceKey,
        mac: Option<Mac>,
    ) {
        let came_online = !self.sessions.contains_key(&key);
        let rec = self.update_device_record(key, user, h, mac);
        self.go_online(now, key, src, rec.group_id, DeviceKind::Udp);
        self.transmits.push_back(Transmit {
            dst: src,
            payload: replies::heartbeat_success(h, &user.callsign, data),
        });
        // Link boxes (models 1 and 2) are asked for their settings and get
        // the time when they come online (spec §2.8 flows).
        if came_online && matches!(rec.dev_model, 1 | 2) {
            self.send_config(now, src, key, &ConfigCommand::Query);
            self.send_config(now, src, key, &ConfigCommand::TimeSync(0));
        }
    }

    pub(super) fn auth_failure(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        name: &str,
        reason: RejectReason,
    ) {
        {
            let mut logins = self.shared.logins();
            if let BanCheck::Blocked(_) = logins.ban_check(src.ip(), name, now) {
                drop(logins);
                self.reject(src, h, RejectReason::TooManyFailures);
                return;
            }
            let evicted = logins.record_failure(src.ip(), name, now);
            drop(logins);
            self.stats.ban_table_evictions += u64::from(evicted);
        }
        self.reject(src, h, reason);
    }

    /// Loads or creates the device record and applies the reported model/MAC
    /// (spec §2.5, §3.1 step 4); emits a store event when it changed.
    pub(super) fn update_device_record(
        &mut self,
        key: DeviceKey,
        user: &UserRecord,
        h: &Header,
        mac: Option<Mac>,
    ) -> DeviceRecord {
        let (rec, changed) = device_record_after_login(&self.dir, key, user, h, mac);
        if changed {
            self.dir.put_device(rec.clone());
            self.push_event(StoreEvent::DeviceUpsert(rec.clone()));
        }
        rec
    }
}

/// The device record `key` has after a successful heartbeat login of `user`
/// with header `h` and heartbeat MAC `mac` (spec §2.5, §3.1 step 4): the
/// stored one, or a new one in the user's default group (see
/// [`default_group_of`]) with the user's DMR id; a valid reported model
/// (not 108–150) and a reported MAC replace the stored ones. The flag says
/// whether it differs from what `dir` holds (persist it then). Shared by
/// direct logins and the centre's proxied device authentication
/// (draarl-interconnect §3.8), so both create the same records.
pub(crate) fn device_record_after_login(
    dir: &Directory,
    key: DeviceKey,
    user: &UserRecord,
    h: &Header,
    mac: Option<Mac>,
) -> (DeviceRecord, bool) {
    let model_valid = !(108..=150).contains(&h.dev_model);
    let existing = dir.device(key.0, key.1);
    let mut rec = existing.cloned().unwrap_or_else(|| DeviceRecord {
        owner_id: user.id,
        ssid: key.1,
        dev_model: 0,
        dmrid: user.dmrid,
        group_id: default_group_of(dir, user),
        disable_send: false,
        disable_recv: false,
        mac: None,
    });
    if model_valid {
        rec.dev_model = h.dev_model;
    }
    if mac.is_some() {
        rec.mac = mac;
    }
    let changed = existing != Some(&rec);
    (rec, changed)
}

/// The group a new device of `user` joins: the user's default group if it
/// is enabled and not virtual, else [`UNGROUPED`].
pub(crate) fn default_group_of(dir: &Directory, user: &UserRecord) -> i64 {
    match dir.group(user.default_group_id) {
        Some(g) if g.enabled && !g.is_virtual => g.id,
        _ => UNGROUPED,
    }
}
