//! The HTTP calls the app receivers make, as the Android app and the web
//! client make them (draarl-apps §1.3, §3.4, §4.1): log in, move a session
//! to a group, and set the `ws_token` cookie's value for the WebSocket.
//! The bench's reflector runs with `login_captcha = false`, so the login
//! carries no captcha.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use super::LoadError;

/// Per-request time limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The reflector's HTTP API at one address.
#[derive(Debug, Clone)]
pub(super) struct AppApi {
    base: String,
    agent: ureq::Agent,
}

impl AppApi {
    pub(super) fn new(http: SocketAddr) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(REQUEST_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        Self {
            base: format!("http://{http}"),
            agent,
        }
    }

    /// `POST /api/auth/login` (§1.3); the access token of `user`.
    pub(super) fn login(&self, user: &str, password: &str) -> Result<String, LoadError> {
        let v = self.call(
            self.agent
                .post(format!("{}/api/auth/login", self.base))
                .send_json(json!({"username": user, "password": password})),
            "POST /api/auth/login",
        )?;
        v["data"]["token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| LoadError::Invalid(format!("login of {user}: no data.token in {v}")))
    }

    /// `PUT /api/radio/sessions/{id}/routing` (§3.4): the session talks to
    /// and hears `group` only.
    pub(super) fn route_to(
        &self,
        token: &str,
        session_id: &str,
        group: i64,
    ) -> Result<(), LoadError> {
        self.call(
            self.agent
                .put(format!(
                    "{}/api/radio/sessions/{session_id}/routing",
                    self.base
                ))
                .header("Authorization", &format!("Bearer {token}"))
                .send_json(json!({"tx_group_id": group, "rx_group_ids": [group]})),
            "PUT /api/radio/sessions/:id/routing",
        )
        .map(drop)
    }

    /// The body of a 2xx answer whose envelope `code` is 2xx too (§1.1).
    fn call(
        &self,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        what: &str,
    ) -> Result<Value, LoadError> {
        let mut resp = sent.map_err(|e| LoadError::Invalid(format!("{what}: {e}")))?;
        let status = resp.status().as_u16();
        let v: Value = resp
            .body_mut()
            .read_json()
            .map_err(|e| LoadError::Invalid(format!("{what}: HTTP {status}, body: {e}")))?;
        let code = v["code"].as_u64().unwrap_or(u64::from(status));
        if !(200..300).contains(&status) || !(200..300).contains(&code) {
            return Err(LoadError::Invalid(format!("{what}: HTTP {status}: {v}")));
        }
        Ok(v)
    }
}
