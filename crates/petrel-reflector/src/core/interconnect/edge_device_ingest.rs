//! Device datagrams at the edge (draarl-interconnect §3.8, §5.1, §6.1;
//! draarl-v1 §2.2, §2.4, §2.7):
//!
//! ```text
//!  datagram ─decode (§2.2)─▶ Type 1 ─▶ refused: node_ghost_multi_session_unsupported
//!    identity "<username>-<ssid>": live session at this address with a valid grant?
//!      no ─▶ Type 2 ∧ link ready ─▶ DeviceAuth (raw datagram + IP) │ else dropped
//!      yes ─▶ link policy: Drop (fail closed) │ LocalOnly (grace) │ Normal
//!             Type 2 ─▶ heartbeat answer (callsign from the grant); Normal: renew when due
//!             Type 3 ─▶ dropped (configuration is not proxied)
//!             Type 4/5, send allowed, domain ≠ 0 ─▶ forwarding rewrite (identity from the grant)
//!               LocalOnly: Type 5 under the edge-local floor ─▶ local fan-out only
//!               Normal:    Type 4 ─▶ local fan-out + RelayUpstream (lease 0)
//!                          Type 5 ─▶ EdgeSpeaker: deliver (lease id) │ buffer + claim │ drop
//! ```
//!
//! Replies are never larger than the request they answer (the
//! amplification bound); larger ones are withheld and counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::codec::{self, ForwardIdentity, Header, PacketType, HEADER_LEN};
use crate::core::replies::{app_login_reject, heartbeat_success};
use crate::model::{FrameKind, Transmit};

use super::device_sessions_edge::{identity_key, Touch};
use super::edge_devices::{EdgeAction, EdgeDevices, HeldFrame};
use super::edge_link::{EdgeLink, PacketPolicy};
use super::outbound::MessageIds;
use super::speaker_lease_edge::VoiceDecision;

/// The Type 1 refusal of an edge without ghost sessions (§3.12).
pub const GHOST_UNSUPPORTED: &str = "node_ghost_multi_session_unsupported";

impl EdgeDevices {
    /// Queues `payload` to `dst` unless it is larger than the `request_len`
    /// bytes that asked for it.
    pub(super) fn reply(&mut self, dst: SocketAddr, payload: Vec<u8>, request_len: usize) {
        if payload.is_empty() {
            return;
        }
        if payload.len() > request_len {
            self.counters.replies_withheld += 1;
            return;
        }
        self.actions
            .push(EdgeAction::Reply(Transmit { dst, payload }));
    }

    /// A device datagram `datagram` from `src` at `now` / `wall_ms` (see
    /// the module docs); `link` is the edge's link policy, `ids` the
    /// process's MessageID counter.
    pub fn handle_device(
        &mut self,
        link: &mut EdgeLink,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        src: SocketAddr,
        datagram: &[u8],
    ) {
        self.counters.packets += 1;
        let Ok(p) = codec::decode(datagram) else {
            self.counters.invalid_packets += 1;
            return;
        };
        let h = &p.header;
        if h.packet_type == PacketType::JwtAuth {
            self.refuse_app_login(src, h, datagram.len());
            return;
        }
        let Some(username) = h.username_str() else {
            self.counters.invalid_packets += 1;
            return;
        };
        let identity = identity_key(username, h.ssid);
        let heartbeat = h.packet_type == PacketType::Heartbeat;
        let live = self
            .sessions
            .get(&identity)
            .is_some_and(|s| s.addr == src && wall_ms < s.grant.expires_at_ms);
        if !live {
            if !heartbeat {
                self.counters.unknown_device_drops += 1;
            } else if !link.allows_new_auth() {
                self.counters.auth_unavailable_drops += 1;
            } else if let Some(send) = self.sessions.request_auth(
                ids,
                now,
                &identity,
                src,
                &src.ip().to_string(),
                datagram,
            ) {
                self.actions.push(EdgeAction::Control(send));
            }
            return;
        }
        let normal = match link.packet_policy(now) {
            PacketPolicy::Drop => return,
            PacketPolicy::Normal => true,
            PacketPolicy::LocalOnly => false,
        };
        let Touch::Live {
            session_id,
            session_epoch,
            renew,
            started_receiving,
        } = self
            .sessions
            .touch(ids, now, wall_ms, &identity, src, heartbeat && normal)
        else {
            return;
        };
        if let Some(renew) = renew {
            self.actions.push(EdgeAction::Control(renew));
        }
        if started_receiving {
            if let Some(s) = self.sessions.get(&identity) {
                self.receivers.set(session_id, src, &s.grant.route);
            }
        }
        match h.packet_type {
            PacketType::Heartbeat => {
                let callsign = self
                    .sessions
                    .get(&identity)
                    .map(|s| s.grant.route.callsign.clone())
                    .unwrap_or_default();
                self.counters.heartbeats_answered += 1;
                let answer = heartbeat_success(h, &callsign, p.data);
                self.reply(src, answer, datagram.len());
            }
            PacketType::Config => self.counters.config_drops += 1,
            PacketType::Text | PacketType::Voice => {
                let frame = Media {
                    session_id,
                    session_epoch,
                    voice: h.packet_type == PacketType::Voice,
                    normal,
                };
                self.media(link, ids, now, src, &identity, datagram, frame);
            }
            PacketType::JwtAuth => {}
        }
    }

    /// Refuses a Type 1 app login (`specs/draarl-apps.md` §2.2 reject
    /// header: username echoed, password and callsign empty, SSID =
    /// DevModel, DMRID 0, Reserved 0; DATA = 1 + reason).
    fn refuse_app_login(&mut self, src: SocketAddr, req: &Header, request_len: usize) {
        self.counters.app_logins_refused += 1;
        if let Some(payload) = app_login_reject(req, 1, GHOST_UNSUPPORTED) {
            self.reply(src, payload, request_len);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn media(
        &mut self,
        link: &mut EdgeLink,
        ids: &mut MessageIds,
        now: Instant,
        src: SocketAddr,
        identity: &str,
        datagram: &[u8],
        m: Media,
    ) {
        let Some(s) = self.sessions.get(identity) else {
            return;
        };
        let route = &s.grant.route;
        if route.disable_send {
            self.counters.send_ban_drops += 1;
            return;
        }
        let domain = route.domain_id;
        if domain == 0 {
            self.counters.no_domain_drops += 1;
            return;
        }
        let who = ForwardIdentity::new(
            &route.username,
            &route.callsign,
            route.dev_model,
            route.ssid,
            s.grant.dmrid,
        );
        let mut buf = datagram.to_vec();
        if buf.len() < HEADER_LEN || !codec::rewrite_forward(&mut buf, &who) {
            self.counters.invalid_packets += 1;
            return;
        }
        let kind = if m.voice {
            self.counters.voice_frames += 1;
            FrameKind::Voice
        } else {
            self.counters.text_frames += 1;
            FrameKind::Text
        };
        let frame = HeldFrame {
            session_id: m.session_id,
            session_epoch: m.session_epoch,
            domain,
            packet: Arc::from(buf),
            from: src,
            created: now,
        };
        if !m.normal {
            // The grace period (§6.1): local only, voice under the
            // edge-local floor.
            if !m.voice || link.local_voice(now, domain, m.session_id) {
                self.fan_out(domain, frame.packet, kind, src, now);
            }
            return;
        }
        if !m.voice {
            self.deliver(frame, 0, kind);
            return;
        }
        let decision =
            self.speaker
                .handle_voice(ids, now, m.session_id, m.session_epoch, domain, frame);
        match decision {
            VoiceDecision::Deliver {
                frame,
                lease_id,
                renew,
            } => {
                if let Some(send) = renew {
                    self.actions.push(EdgeAction::Claim { domain, send });
                }
                self.deliver(frame, lease_id, kind);
            }
            VoiceDecision::Buffered { claim } => {
                if let Some(send) = claim {
                    self.actions.push(EdgeAction::Claim { domain, send });
                }
            }
            // Counted by the speaker state.
            VoiceDecision::Dropped(_) => {}
        }
    }
}

/// A Type 4/5 frame of a live session on its way through `media`.
struct Media {
    session_id: u64,
    session_epoch: u64,
    voice: bool,
    normal: bool,
}
