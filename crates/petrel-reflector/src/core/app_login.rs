//! Type 1 app ("ghost") login over UDP (`specs/draarl-apps.md` §2.1–§2.3,
//! draarl-v1 §3.3): the strict JSON, then the account check, then
//! registration, each failure answered with its exact status code and
//! text.
//!
//! Steps 1–3 (JSON, instance id, capabilities) run here at once. Steps 4–6
//! need the account store, so the login leaves the core as an
//! [`AppLoginCheck`] (polled like a password check) and comes back through
//! [`Reflector::handle_app_login`]; the core then applies step 4's verdict,
//! its own step 5 (DevModel 101–104), step 6's, and registers the session
//! (step 7) in the shared [`GhostRegistry`](super::GhostRegistry). The
//! order of §2.2 is kept even though the store answers steps 4 and 6
//! together: a reject of step 4 wins over a wrong DevModel, which wins over
//! an unavailable preference.
//!
//! Type 1 failures never count on the failed-auth ban ladder (v1 §3.2):
//! only the packet rate limits apply. A login still waiting for the store
//! after 10 s (Android's whole attempt) is abandoned; when
//! `app_logins_in_flight` are waiting, the oldest is abandoned for a new
//! one.
//!
//! **Amplification bound.** A Type 1 source address is unproven (UDP
//! sources can be forged), so a reject is sent only if it is no larger
//! than the request it answers; otherwise it is counted
//! (`app_replies_withheld`) and not sent. A real client's request carries
//! a token and a 36-character instance id, so it is always larger than any
//! reject text. The success reply is exempt: it needs a valid token.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ghost_registry::{NewGhost, RegisterError};
use super::reflector::{PendingAppLogin, Reflector};
use super::replies::app_login_reject;
use crate::codec::{self, parse_login_request, AppLoginSuccess, Header, PacketType};
use crate::model::{
    AppAuthRequest, AppGrant, AppLoginCheck, AppReject, Endpoint, Transmit, UDP_GHOST_DEV_MODELS,
};

/// How long a login waits for the account store before it is abandoned.
pub(super) const APP_LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

impl Reflector {
    /// Sends a Type 1 reject (§2.2 "Reject header"): the request's
    /// username, empty password and callsign, DevModel echoed, SSID =
    /// DevModel, DMRID 0, Reserved 0. Not sent, only counted, if larger
    /// than the request's `request_len` bytes (module docs).
    pub(super) fn app_reject(
        &mut self,
        src: SocketAddr,
        req: &Header,
        request_len: usize,
        code: u8,
        text: &str,
    ) {
        self.stats.app_login_rejects += 1;
        match app_login_reject(req, code, text) {
            Some(payload) if payload.len() > request_len => self.stats.app_replies_withheld += 1,
            Some(payload) => self.transmits.push_back(Transmit { dst: src, payload }),
            None => {}
        }
    }

    pub(super) fn on_app_login(&mut self, now: Instant, src: SocketAddr, h: &Header, data: &[u8]) {
        self.stats.app_logins += 1;
        let request_len = codec::HEADER_LEN + data.len();
        let req = match parse_login_request(data) {
            Ok(r) => r,
            Err(e) => {
                self.app_reject(src, h, request_len, 1, e.text());
                return;
            }
        };
        if self.pending_app.len() >= self.cfg.app_logins_in_flight {
            if let Some((&oldest, _)) = self.pending_app.iter().next() {
                self.pending_app.remove(&oldest);
                self.app_checks_out.retain(|c| c.id != oldest);
                self.stats.app_login_checks_evicted += 1;
            }
        }
        let id = self.next_app_id;
        self.next_app_id += 1;
        self.app_checks_out.push_back(AppLoginCheck {
            id,
            request: AppAuthRequest {
                token: req.token,
                dev_model: h.dev_model,
                client_instance_id: req.client_instance_id.clone(),
            },
        });
        self.pending_app.insert(
            id,
            PendingAppLogin {
                src,
                header: h.clone(),
                request_len,
                client_instance_id: req.client_instance_id,
                capabilities: req.capabilities,
                started: now,
            },
        );
    }

    /// Next app login for the runtime to authorise.
    pub fn poll_app_login(&mut self) -> Option<AppLoginCheck> {
        self.app_checks_out.pop_front()
    }

    /// App logins waiting for their answer.
    pub fn app_logins_in_flight(&self) -> usize {
        self.pending_app.len()
    }

    /// The account store's answer to app login `id`, at `now`: the reject
    /// or the session (§2.2 steps 4–7, §2.3).
    pub fn handle_app_login(
        &mut self,
        now: Instant,
        id: u64,
        verdict: Result<AppGrant, AppReject>,
    ) {
        let Some(p) = self.pending_app.remove(&id) else {
            self.stats.app_login_results_unknown += 1;
            return;
        };
        let h = &p.header;
        let grant = match verdict {
            Err(r) if r != AppReject::PreferenceUnavailable => {
                return self.app_reject(p.src, h, p.request_len, r.udp_code(), r.udp_text());
            }
            _ if !UDP_GHOST_DEV_MODELS.contains(&h.dev_model) => {
                return self.app_reject(p.src, h, p.request_len, 5, "Invalid device model for UDP");
            }
            Err(r) => return self.app_reject(p.src, h, p.request_len, r.udp_code(), r.udp_text()),
            Ok(g) => g,
        };
        let routing_ok = grant.routing.tx_group_id > 0
            && grant.routing.rx_group_ids.iter().all(|g| *g > 0)
            && grant.routing.rx_group_ids.len() <= self.cfg.ghost_subscriptions;
        if !routing_ok {
            let r = AppReject::PreferenceUnavailable;
            return self.app_reject(p.src, h, p.request_len, r.udp_code(), r.udp_text());
        }
        let routing = crate::model::Routing::new(
            grant.routing.tx_group_id,
            grant.routing.rx_group_ids.clone(),
        );
        let new = NewGhost {
            user: Arc::new(grant.user),
            dev_model: h.dev_model,
            client_instance_id: p.client_instance_id,
            capabilities: p.capabilities,
            transport: Endpoint::Udp(p.src),
            routing,
        };
        let unix_ms = self.unix_ms(now).unwrap_or(0);
        let registered = {
            let rng = &mut *self.rng.0;
            self.shared.ghosts().register(new, now, unix_ms, rng)
        };
        let reg = match registered {
            Ok(r) => r,
            Err(e) => {
                match e {
                    RegisterError::SessionLimit { .. } => {
                        self.stats.ghost_session_limit_rejects += 1
                    }
                    _ => self.stats.ghost_registration_failures += 1,
                }
                let text = match e {
                    // Checked above: the stored routing is over the limit.
                    RegisterError::SubscriptionLimit { .. } => {
                        AppReject::PreferenceUnavailable.udp_text().to_owned()
                    }
                    other => other.text(),
                };
                return self.app_reject(p.src, h, p.request_len, 1, &text);
            }
        };
        self.stats.ghost_replacements += u64::from(reg.replaced.is_some());
        self.stats.ghost_sessions_evicted += u64::from(reg.evicted.is_some());
        self.stats.ghost_sessions_displaced += u64::from(reg.displaced.is_some());
        self.stats.snapshot_invalidations += self
            .shared
            .invalidate_groups(&self.dir, &reg.changed_groups());
        let s = &reg.session;
        let mut reply = Header::new(PacketType::JwtAuth);
        reply.set_username(&s.user.username);
        reply.set_callsign(&s.user.callsign);
        reply.dev_model = s.dev_model;
        reply.ssid = s.ssid;
        reply.reserved = s.tag;
        let data = AppLoginSuccess {
            version: 1,
            session_id: s.session_id.clone(),
            session_tag: s.tag,
            client_instance_id: s.client_instance_id.clone(),
            tx_group_id: s.routing.tx_group_id,
            rx_group_ids: s.routing.rx_group_ids.clone(),
        }
        .encode();
        match codec::encode(&reply, &data) {
            Ok(payload) => {
                self.stats.app_logins_accepted += 1;
                self.transmits.push_back(Transmit {
                    dst: p.src,
                    payload,
                });
            }
            Err(_) => {
                // Too many receive groups for one datagram.
                let session_id = s.session_id.clone();
                let groups = s.routing.rx_group_ids.clone();
                self.shared.ghosts().remove(&session_id);
                self.stats.snapshot_invalidations +=
                    self.shared.invalidate_groups(&self.dir, &groups);
                self.app_reject(p.src, h, p.request_len, 1, "authentication_response_failed");
            }
        }
    }

    /// Abandons app logins older than [`APP_LOGIN_TIMEOUT`].
    pub(super) fn expire_app_logins(&mut self, now: Instant) {
        let before = self.pending_app.len();
        self.pending_app
            .retain(|_, p| now.saturating_duration_since(p.started) <= APP_LOGIN_TIMEOUT);
        let abandoned = before - self.pending_app.len();
        if abandoned > 0 {
            let pending = &self.pending_app;
            self.app_checks_out.retain(|c| pending.contains_key(&c.id));
            self.stats.app_login_checks_abandoned += abandoned as u64;
        }
    }
}
