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
use crate::model::{ConnectionId, DeviceKey, DeviceKind, Frame, FrameKind, StoreEvent, Transmit};
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
        let (group_id, dev_model, ssid, dmrid) = (rec.group_id, rec.dev_model, rec.ssid, rec.dmrid);
        if self.dir.domain_of(group_id).is_none() {
            self.stats.non_forwarding_drops += 1;
            return;
        }
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
        let Some(user) = self.dir.user(key.0) else {
            return;
        };
        let identity = ForwardIdentity::new(&user.name, &user.callsign, dev_model, ssid, dmrid);
        self.forward(
            now,
            Outgoing {
                talker: key,
                kind: DeviceKind::Udp,
                group_id,
                voice,
                identity,
                datagram,
                exclude: src,
                exclude_connection: None,
            },
        );
    }

    /// Plans the fan-out of one Type 4/5 packet to the domain of
    /// `out.group_id` (voice through the floor, text straight), records or
    /// stores it, and queues the frame; returns whether it was queued.
    /// Session-aware receivers get a copy with Reserved = `out.group_id`
    /// (`specs/draarl-apps.md` §2.7).
    pub(super) fn forward(&mut self, now: Instant, out: Outgoing<'_>) -> bool {
        let Some(domain_id) = self.dir.domain_of(out.group_id).map(|d| d.id) else {
            self.stats.non_forwarding_drops += 1;
            return false;
        };
        let targets = if out.voice {
            self.shared
                .voice_targets(&self.dir, domain_id, out.talker, now)
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
                return false;
            }
        };
        match source {
            SnapshotSource::Cached => self.stats.snapshot_hits += 1,
            SnapshotSource::Rebuilt => self.stats.snapshot_rebuilds += 1,
        }
        // One allocation per frame (two with session-aware receivers),
        // shared by every target.
        let mut packet: Arc<[u8]> = Arc::from(out.datagram);
        let rewritten =
            Arc::get_mut(&mut packet).is_some_and(|buf| codec::rewrite_forward(buf, &out.identity));
        if !rewritten {
            return false;
        }
        let session_packet = snapshot.has_sessions().then(|| {
            let mut copy = packet.to_vec();
            // A group id beyond u32 cannot be told apart; 0 says "none".
            let group = u32::try_from(out.group_id).unwrap_or(0);
            codec::set_reserved(&mut copy, group);
            Arc::from(copy)
        });
        let payload = packet.get(codec::HEADER_LEN..).unwrap_or_default();
        let unix_ms = self.unix_ms(now).unwrap_or(0);
        if out.voice {
            self.stats.voice_frames += 1;
            self.spurts.push(
                now,
                unix_ms,
                out.talker,
                out.kind,
                out.group_id,
                &mut self.stats,
            );
            if let Some(r) = self.recorder.as_mut() {
                r.push(now, unix_ms, out.talker, out.group_id, payload);
            }
        } else {
            self.stats.text_frames += 1;
            let text = payload.to_vec();
            self.push_event(StoreEvent::Text {
                device: out.talker,
                group_id: out.group_id,
                unix_ms,
                text,
            });
        }
        self.frames.push_back(Frame {
            kind: if out.voice {
                FrameKind::Voice
            } else {
                FrameKind::Text
            },
            created: now,
            packet,
            session_packet,
            snapshot,
            exclude: out.exclude,
            exclude_connection: out.exclude_connection,
        });
        true
    }
}

/// One Type 4/5 packet to forward, with the sender's identity.
pub(super) struct Outgoing<'a> {
    /// Who claims the floor: a device, or an app session's (user, SSID).
    pub(super) talker: DeviceKey,
    /// What kind of endpoint sent it (the dashboard's "last heard").
    pub(super) kind: DeviceKind,
    /// The sender's group: the domain it goes to, and Reserved of the
    /// session-aware copy.
    pub(super) group_id: i64,
    pub(super) voice: bool,
    /// Written into the forwarded header.
    pub(super) identity: ForwardIdentity,
    /// The validated datagram as received.
    pub(super) datagram: &'a [u8],
    /// The sender's UDP address (unspecified for a WebSocket sender).
    pub(super) exclude: SocketAddr,
    /// The sender's WebSocket connection.
    pub(super) exclude_connection: Option<ConnectionId>,
}
