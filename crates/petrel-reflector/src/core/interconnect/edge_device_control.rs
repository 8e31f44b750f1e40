//! The centre's messages for the edge's device side
//! (draarl-interconnect §3.8, §3.10, §4.7, §5.3), from the control
//! connection or, for RelayDownstream, from UDP:
//!
//! ```text
//!  0x20 DeviceAuth response ─▶ installed: the centre's reply (or a synthesised heartbeat answer),
//!                              receivers listed │ refused: the centre's reply │ endpoint taken: report
//!  0x21 renew response ─▶ grant extended │ 0x23 revoke (same epoch) ─▶ session removed
//!  0x28 grant / deny ─▶ buffered frames released (local fan-out + upstream) │ domain blocked
//!  0x31 RelayDownstream ─▶ ProjectionWait (§4.7) ─▶ local fan-out to every receiver of the
//!                          domain, no source exclusion, Reserved cleared (physical devices)
//! ```
//!
//! Downstream frames are never relayed upstream again (§5.4).

use std::sync::Arc;
use std::time::Instant;

use serde::de::DeserializeOwned;

use crate::codec::interconnect::messages::{
    DeviceAuthResponse, DeviceSessionRenew, DeviceSessionRevoke, SpeakerLease,
};
use crate::codec::interconnect::{check_inner, EnvelopeHeader, InnerKind, NodeId, Subtype};
use crate::codec::{self, Header, PacketType};
use crate::core::replies::heartbeat_success;
use crate::model::FrameKind;

use super::accepted::Accepted;
use super::device_sessions_edge::AuthOutcome;
use super::edge_devices::{EdgeAction, EdgeDevices, NO_SENDER};
use super::outbound::MessageIds;
use super::projection_wait::WaitVerdict;

impl EdgeDevices {
    fn decode<T: DeserializeOwned>(&mut self, payload: &[u8]) -> Option<T> {
        let v = serde_json::from_slice(payload).ok();
        if v.is_none() {
            self.counters.bad_payloads += 1;
        }
        v
    }

    /// A control envelope from the centre (already through the §3.4
    /// checks) at `now` / `wall_ms`: DeviceAuth, renew and revoke, speaker
    /// lease answers and RelayDownstream. Returns `false` for other
    /// subtypes (route sync and DataBind belong elsewhere).
    pub fn handle_control(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        header: &EnvelopeHeader,
        payload: &[u8],
    ) -> bool {
        match header.subtype {
            Subtype::DEVICE_AUTH => {
                if let Some(resp) = self.decode::<DeviceAuthResponse>(payload) {
                    self.auth_response(ids, now, wall_ms, resp);
                }
            }
            Subtype::DEVICE_SESSION_RENEW => {
                if let Some(resp) = self.decode::<DeviceSessionRenew>(payload) {
                    self.sessions.handle_renew_response(&resp);
                }
            }
            Subtype::DEVICE_SESSION_REVOKE => {
                if let Some(revoke) = self.decode::<DeviceSessionRevoke>(payload) {
                    if let Some(r) = self.sessions.handle_revoke(ids, &revoke) {
                        self.removed(r);
                    }
                }
            }
            Subtype::SPEAKER_LEASE => {
                if let Some(answer) = self.decode::<SpeakerLease>(payload) {
                    if let Some(released) = self.speaker.handle_answer(now, &answer) {
                        for f in released.frames {
                            self.deliver(f, released.lease_id, FrameKind::Voice);
                        }
                    }
                }
            }
            Subtype::RELAY_DOWNSTREAM => self.handle_downstream(
                now,
                Accepted {
                    node_id: NodeId::CENTRE,
                    header: *header,
                    payload: payload.to_vec(),
                    received_at: now,
                },
            ),
            _ => return false,
        }
        true
    }

    fn auth_response(
        &mut self,
        ids: &mut MessageIds,
        now: Instant,
        wall_ms: i64,
        resp: DeviceAuthResponse,
    ) {
        match self.sessions.handle_auth_response(ids, now, wall_ms, resp) {
            AuthOutcome::Installed {
                session_id,
                addr,
                response_packet,
                request_len,
                replaced,
                evicted,
                receiving,
            } => {
                if let Some(old) = replaced {
                    self.receivers.remove(old.session_id());
                    self.speaker.release_session(old.session_id());
                }
                for ev in evicted {
                    self.removed(ev);
                }
                let mut answer = response_packet;
                if let Some(s) = self.sessions.by_session_id(session_id) {
                    let route = s.grant.route.clone();
                    if answer.is_empty() {
                        let mut h = Header::new(PacketType::Heartbeat);
                        h.set_username(&route.username);
                        h.ssid = route.ssid;
                        h.dev_model = route.dev_model;
                        h.dmrid = s.grant.dmrid;
                        answer = heartbeat_success(&h, &route.callsign, &[]);
                    }
                    if receiving {
                        self.receivers.set(session_id, addr, &route);
                    }
                }
                self.counters.installed += 1;
                self.reply(addr, answer, request_len);
            }
            AuthOutcome::Failed {
                addr,
                response_packet,
                request_len,
                ..
            } => self.reply(addr, response_packet, request_len),
            AuthOutcome::EndpointTaken { report, .. } => {
                self.actions.push(EdgeAction::Control(report));
            }
            AuthOutcome::EndpointLimit {
                addr,
                reply,
                request_len,
                report,
            } => {
                self.actions.push(EdgeAction::Control(report));
                self.reply(addr, reply, request_len);
            }
            AuthOutcome::Unknown => {}
        }
    }

    /// An accepted RelayDownstream at `now` (§4.7): delivered now, parked
    /// for a newer projection, or dropped (counted by the wait rule).
    pub fn handle_downstream(&mut self, now: Instant, frame: Accepted) {
        if let WaitVerdict::Deliver(a) = self.wait.handle_downstream(now, frame) {
            self.deliver_downstream(a);
        }
    }

    /// Local fan-out of a released downstream frame (§5.3): every local
    /// receiver of the domain, Reserved cleared; its age counts from when
    /// it was read off the socket.
    pub(super) fn deliver_downstream(&mut self, a: Accepted) {
        let Some(relay) = a.relay() else {
            self.counters.downstream_invalid += 1;
            return;
        };
        let kind = match check_inner(relay.inner) {
            Ok(InnerKind::Voice) => FrameKind::Voice,
            Ok(InnerKind::Text) => FrameKind::Text,
            Err(_) => {
                self.counters.downstream_invalid += 1;
                return;
            }
        };
        let domain = relay.header.domain_id;
        let mut inner = relay.inner.to_vec();
        codec::set_reserved(&mut inner, 0);
        self.counters.downstream_frames += 1;
        self.fan_out(domain, Arc::from(inner), kind, NO_SENDER, a.received_at);
    }
}
