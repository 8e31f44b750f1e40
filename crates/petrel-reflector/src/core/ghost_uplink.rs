//! Packets of app sessions after login (`specs/draarl-apps.md` §2.5, §2.6;
//! correction 3): reserved SSIDs, tag resolution, heartbeat replies and
//! media to the session's TX group.
//!
//! Types 2–5 with SSID 100–105 or 255 never reach the physical-device
//! path. Untagged, they are answered with code 2 `reserved_ssid` in a
//! reply of the request's own Type (unless that reply would be larger than
//! the request); tagged with SSID 100–105, they are
//! resolved in the four steps of §2.5 (each failure dropped silently and
//! counted); tagged with SSID 255, dropped and counted.

use std::net::SocketAddr;
use std::time::Instant;

use super::forward::Outgoing;
use super::ghost_registry::{GhostUplink, UplinkReject};
use super::reflector::Reflector;
use super::replies::{self, RejectReason};
use crate::codec::{self, ForwardIdentity, Header, PacketType, HEADER_LEN, OFF_TYPE};
use crate::model::{ConnectionId, DeviceKind, Transmit};

/// SSIDs of app sessions (§2.5 "Resolution").
pub(super) const APP_SSIDS: std::ops::RangeInclusive<u8> = 100..=105;
/// The system SSID (draarl-v1 §2.6).
const SYSTEM_SSID: u8 = 255;

impl Reflector {
    /// Whether a Type 2–5 packet with this SSID takes the app-session path.
    pub(super) fn is_app_path(ssid: u8) -> bool {
        APP_SSIDS.contains(&ssid) || ssid == SYSTEM_SSID
    }

    /// A Type 2–5 packet with SSID 100–105 or 255.
    pub(super) fn on_app_packet(
        &mut self,
        now: Instant,
        src: SocketAddr,
        h: &Header,
        data: &[u8],
        datagram: &[u8],
    ) {
        if h.packet_type == PacketType::Heartbeat {
            self.stats.heartbeats += 1;
        }
        if h.reserved == 0 {
            self.reserved_ssid_reject(src, h, datagram.len());
            return;
        }
        if !APP_SSIDS.contains(&h.ssid) {
            self.stats.reserved_tag_drops += 1;
            return;
        }
        let resolved = self.shared.ghosts().resolve_udp(
            h.reserved,
            &h.username,
            h.ssid,
            h.dev_model,
            src,
            now,
        );
        let up = match resolved {
            Ok(up) => up,
            Err(e) => {
                match e {
                    UplinkReject::InvalidTag => self.stats.ghost_invalid_tags += 1,
                    UplinkReject::Identity => self.stats.ghost_identity_rejects += 1,
                    UplinkReject::Endpoint => self.stats.ghost_endpoint_rejects += 1,
                    UplinkReject::Registry => self.stats.ghost_registry_rejects += 1,
                }
                return;
            }
        };
        if let Some(groups) = &up.now_receiving {
            self.stats.snapshot_invalidations += self.shared.invalidate_groups(&self.dir, groups);
        }
        match h.packet_type {
            PacketType::Heartbeat => {
                self.stats.ghost_heartbeats += 1;
                self.transmits.push_back(Transmit {
                    dst: src,
                    payload: replies::heartbeat_success(h, &up.user.callsign, data),
                });
            }
            PacketType::Text | PacketType::Voice => {
                self.ghost_media(now, &up, h.packet_type, data, datagram);
            }
            // Type 3 is for link boxes; an app's refreshes liveness only.
            PacketType::Config | PacketType::JwtAuth => {}
        }
    }

    /// Correction 3: code 2 `reserved_ssid` in a reply of the request's
    /// Type; like a Type 1 reject, not sent (only counted in
    /// `app_replies_withheld`) if larger than the request's `request_len`
    /// bytes (the amplification bound of `core/app_login.rs`).
    fn reserved_ssid_reject(&mut self, src: SocketAddr, h: &Header, request_len: usize) {
        self.stats.rejects_reserved_ssid += 1;
        let payload = replies::reject_with_type(h, RejectReason::ReservedSsid);
        if payload.len() > request_len {
            self.stats.app_replies_withheld += 1;
            return;
        }
        self.transmits.push_back(Transmit { dst: src, payload });
    }

    /// Type 4/5 of a resolved app session, to its TX group (§2.5 "Media").
    /// The session is excluded from its own fan-out by its address (one
    /// live UDP session per address).
    pub(super) fn ghost_media(
        &mut self,
        now: Instant,
        up: &GhostUplink,
        packet_type: PacketType,
        data: &[u8],
        datagram: &[u8],
    ) {
        let voice = packet_type == PacketType::Voice;
        if voice && data.is_empty() {
            self.stats.non_forwarding_drops += 1;
            return;
        }
        if !voice && !self.shared.ghosts().take_text(&up.session_id, now) {
            self.stats.text_rate_drops += 1;
            return;
        }
        let user = &up.user;
        let out = Outgoing {
            talker: (user.user_id, up.dev_model),
            kind: if up.connection.is_some() {
                DeviceKind::WebSocket
            } else {
                DeviceKind::Ghost
            },
            group_id: up.tx_group_id,
            voice,
            identity: ForwardIdentity::new(
                &user.username,
                &user.callsign,
                up.dev_model,
                up.dev_model,
                0,
            ),
            datagram,
            exclude: up.addr,
            exclude_connection: up.connection,
        };
        if self.forward(now, out) && voice {
            self.shared.ghosts().mark_voice(&up.session_id, now);
        }
    }
}

impl Reflector {
    /// A Type 4/5 packet from WebSocket connection `conn` at `now`
    /// (`specs/draarl-apps.md` §4.4): one complete DraARLv1 packet whose
    /// magic and Type the connection checked; its length field is not
    /// checked, and every identity field is ignored. It is re-encoded with
    /// the session's identity (SSID and DevModel 105, DMRID 0, empty
    /// password) and forwarded like a UDP session's; DATA beyond 710 bytes
    /// is dropped (counted in `decode_errors`).
    pub fn handle_connection_packet(&mut self, now: Instant, conn: ConnectionId, packet: &[u8]) {
        self.stats.received += 1;
        let (Some(&kind), Some(data)) = (packet.get(OFF_TYPE), packet.get(HEADER_LEN..)) else {
            self.stats.decode_errors += 1;
            return;
        };
        let packet_type = match PacketType::from_u8(kind) {
            Some(t @ (PacketType::Text | PacketType::Voice)) => t,
            _ => return,
        };
        let Some(up) = self.shared.ghosts().resolve_connection(conn, now) else {
            self.stats.ghost_registry_rejects += 1;
            return;
        };
        let mut h = Header::new(packet_type);
        h.set_username(&up.user.username);
        h.dev_model = up.dev_model;
        h.ssid = up.dev_model;
        let Ok(datagram) = codec::encode(&h, data) else {
            self.stats.decode_errors += 1;
            return;
        };
        self.ghost_media(now, &up, packet_type, data, &datagram);
    }
}
