//! Types 3/4/5 from a bound endpoint: config reports, and voice/text
//! planned for fan-out with the sender's store identity (draarl-v1 §2.4,
//! §2.8, §3.7). Text is limited per device (`text_per_minute` with a burst
//! of `text_burst`; beyond it dropped, not stored, and counted in
//! `text_rate_drops`), since every text is also stored.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::cross_shard::SnapshotSource;
use super::reflector::Reflector;
use crate::codec::{self, ConfigCommand, ForwardIdentity, Header, PacketType};
use crate::model::{DeviceKey, Frame, FrameKind, StoreEvent, Transmit};
use crate::policy::FloorDecision;

impl Reflector {
    pub(super) fn unix_ms(&self, now: Instant) -> Option<i64> {
        let (at, ms) = self.wall?;
        let ahead =
            i64::try_from(now.saturating_duration_since(at).as_millis()).unwrap_or(i64::MAX);
        let behind =
            i64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(i64::MAX);
        Some(ms.saturating_add(ahead).saturating_sub(behind))
    }

    /// Queues a server→device Type 3 packet (spec §2.7: identity from the
    /// store, password empty, DevModel 0, DMRID 0).
    pub(super) fn send_config(
        &mut self,
        now: Instant,
        dst: SocketAddr,
        key: DeviceKey,
        cmd: &ConfigCommand,
    ) {
        let cmd = match cmd {
            ConfigCommand::TimeSync(_) => match self.unix_ms(now) {
                Some(ms) => ConfigCommand::TimeSync(ms),
                None => return,
            },
            other => other.clone(),
        };
        let (Some(user), Ok(data)) = (self.dir.user(key.0), cmd.encode()) else {
            return;
        };
        let mut h = Header::new(PacketType::Config);
        h.set_username(&user.name);
        h.set_callsign(&user.callsign);
        h.ssid = key.1;
        if let Ok(payload) = codec::encode(&h, &data) {
            self.stats.config_sent += 1;
            self.transmits.push_back(Transmit { dst, payload });
        }
    }

    /// The online device a Type 3/4/5 packet names, if it came from that
    /// device's authenticated endpoint (spec §9: bind data to the endpoint).
    pub(super) fn bound_device(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
    ) -> Option<DeviceKey> {
        let user_id = h
            .username_str()
            .and_then(|n| self.dir.user_by_name(n))
            .filter(|u| u.enabled)
            .map(|u| u.id);
        let key = user_id.map(|id| (id, h.ssid));
        let Some(s) = key.and_then(|k| self.sessions.get_mut(&k)) else {
            self.stats.unknown_device_drops += 1;
            return None;
        };
        if s.addr != src {
            self.stats.endpoint_mismatch_drops += 1;
            return None;
        }
        s.last_seen = now;
        let (waiting, group_id) = (!s.receiving, s.group_id);
        if let (true, Some(k)) = (waiting, key) {
            if self.heard(now, k) {
                self.move_session(k, group_id);
            }
        }
        key
    }

    pub(super) fn on_config(&mut self, now: Instant, src: SocketAddr, h: &Header, data: &[u8]) {
        let Some(key) = self.bound_device(now, src, h) else {
            return;
        };
        match ConfigCommand::parse(data) {
            Ok(ConfigCommand::Set(items)) => {
                self.stats.config_packets += 1;
                self.push_event(StoreEvent::DeviceConfig { device: key, items });
                // A time sync acknowledges a report (spec §2.8).
                self.send_config(now, src, key, &ConfigCommand::TimeSync(0));
            }
            Ok(_) => self.stats.config_packets += 1,
            Err(_) => self.stats.config_errors += 1,
        }
    }

    pub(super) fn on_media(&mut self, now: Instant, src: SocketAddr, h: &Header, datagram: &[u8]) {
        let Some(key) = self.bound_device(now, src, h) else {
            return;
        };
        let Some(rec) = self.dir.device(key.0, key.1) else {
            self.stats.non_forwarding_drops += 1;
            return;
        };
        if rec.disable_send {
            self.stats.send_ban_drops += 1;
            return;
        }
        let rec_group = rec.group_id;
        let Some(domain_id) = self.dir.domain_of(rec.group_id).map(|d| d.id) else {
            self.stats.non_forwarding_drops += 1;
            return;
        };
        let voice = h.packet_type == PacketType::Voice;
        if !voice
            && !self
                .sessions
                .get_mut(&key)
                .is_some_and(|s| s.text.take(now))
        {
            self.stats.text_rate_drops += 1;
            return;
        }
        let targets = if voice {
            self.shared.voice_targets(&self.dir, domain_id, key, now)
        } else {
            Ok(self.shared.targets(&self.dir, domain_id))
        };
        let (snapshot, source) = match targets {
            Ok(t) => t,
            Err(refused) => {
                match refused {
                    FloorDecision::TalkLimit => self.stats.floor_talk_limit_cuts += 1,
                    FloorDecision::HeldOff => self.stats.floor_holdoff_drops += 1,
                    FloorDecision::Busy | FloorDecision::Granted => {
                        self.stats.floor_busy_drops += 1
                    }
                }
                return;
            }
        };
        match source {
            SnapshotSource::Cached => self.stats.snapshot_hits += 1,
            SnapshotSource::Rebuilt => self.stats.snapshot_rebuilds += 1,
        }
        let (Some(user), Some(rec)) = (self.dir.user(key.0), self.dir.device(key.0, key.1)) else {
            return;
        };
        let id = ForwardIdentity::new(
            &user.name,
            &user.callsign,
            rec.dev_model,
            rec.ssid,
            rec.dmrid,
        );
        // One allocation per frame, shared by every target.
        let mut packet: Arc<[u8]> = Arc::from(datagram);
        let rewritten =
            Arc::get_mut(&mut packet).is_some_and(|buf| codec::rewrite_forward(buf, &id));
        if !rewritten {
            return;
        }
        if voice {
            self.stats.voice_frames += 1;
            let unix_ms = self.unix_ms(now).unwrap_or(0);
            if let Some(kind) = self.sessions.get(&key).map(|s| s.kind) {
                self.spurts
                    .push(now, unix_ms, key, kind, rec_group, &mut self.stats);
            }
            if let Some(r) = self.recorder.as_mut() {
                r.push(
                    now,
                    unix_ms,
                    key,
                    rec_group,
                    packet.get(codec::HEADER_LEN..).unwrap_or_default(),
                );
            }
        } else {
            self.stats.text_frames += 1;
            let (group_id, unix_ms) = (rec_group, self.unix_ms(now).unwrap_or(0));
            self.push_event(StoreEvent::Text {
                device: key,
                group_id,
                unix_ms,
                text: packet.get(codec::HEADER_LEN..).unwrap_or_default().to_vec(),
            });
        }
        self.frames.push_back(Frame {
            kind: if voice {
                FrameKind::Voice
            } else {
                FrameKind::Text
            },
            created: now,
            packet,
            snapshot,
            exclude: src,
        });
    }
}
