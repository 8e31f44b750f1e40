//! `GET /ws`: the web client's WebSocket ghost sessions
//! (`specs/draarl-apps.md` §4.2–§4.5), on the HTTP port.
//!
//! **Before the upgrade** (each failure an HTTP 401 whose plain-text body
//! is the code and a newline, in this order): no `ws_token` cookie
//! (`token_required`); `protocol_version` not 1 or an empty instance id
//! (`ghost_protocol_upgrade_required`); an instance id that is not a
//! non-nil UUID (`invalid_client_instance_id`); a missing capability
//! (`ghost_capabilities_required`); then the account store's verdict on the
//! token (`invalid_token`, `user_not_found`, `user_disabled`,
//! `user_not_approved`, `client_preference_unavailable`; without an
//! [`AppAuthority`] every token is invalid). The `X-DraARL-*` headers win
//! over the query parameters; the token comes only from the cookie. The
//! origin guard and the refusal of token-like query keys (§1.1) are the
//! account side's middleware, in front of every route.
//!
//! **After the upgrade** frames and messages are read up to [`MAX_FRAME`]
//! bytes (§5.3 allows a read limit of 64 KiB or more); the session
//! (DevModel and SSID 105) is registered in the shared
//! [`GhostRegistry`](crate::core::GhostRegistry); a failure
//! sends a close frame 1008 whose reason is the stable code. Otherwise the
//! first message is `auth_success`; `routing_updated` follows each routing
//! change. Binary frames in are one DraARLv1 packet each: magic and Type
//! checked, length not; each decodable one refreshes liveness; Type 2 is
//! answered, Types 4/5 go to a shard and are forwarded as the session's,
//! Types 1/3 are ignored. Frames out (fan-out, replies, events, pings
//! every 30 s) go through the connection's bounded queue
//! ([`WebSocketHub`]). The session ends, and the connection closes without
//! a close frame, when it is replaced, deleted or silent for more than
//! 20 s, when a ping cannot be queued, or when a write fails; with the
//! close frame 1008 `websocket_sessions_full` when the hub is full
//! (`[apps] max_websocket_sessions`) and it is the idlest connection as a
//! new one opens.
//!
//! Why axum's `ws` feature rather than tokio-tungstenite directly: the
//! upgrade is one more route of the same router, so the per-prefix budget,
//! the connection caps during the handshake, the header timeout and the
//! account side's middleware apply to it unchanged; axum does the
//! handshake checks and hands over tokio-tungstenite's stream.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::app_authority::AppAuthority;
use super::shard::Datagram;
use super::shared_tables::SharedTables;
use super::wall_clock::unix_ms;
use super::websocket_hub::{
    enqueue, Closing, LastFrame, Outbound, WebSocketHub, EVICTED_REASON, WRITE_QUEUE,
};
use crate::codec::{
    self, decode_unframed, normalize_instance_id, require_capabilities, AppLoginError, PacketType,
};
use crate::core::{NewGhost, RegisterError};
use crate::model::{
    AppAuthRequest, AppGrant, AppReject, ConnectionId, Endpoint, Routing, DEV_MODEL_WEB,
};

/// How often a ping is queued (§4.5).
const PING_EVERY: Duration = Duration::from_secs(30);
/// How long the close frame of an evicted connection may take to write;
/// then the connection is dropped without it.
const CLOSE_WRITE: Duration = Duration::from_secs(1);
/// The largest frame and message read, bytes (§5.3: "a limit of 64 KiB or
/// more is safe"; a DraARLv1 packet is under 1 KiB). A longer one ends
/// the connection as soon as its header announces it, so a client
/// cannot make the server buffer the library's defaults (16 MiB frames,
/// 64 MiB messages) per connection.
pub const MAX_FRAME: usize = 64 << 10;

/// What `/ws` needs from the server.
#[derive(Clone)]
pub(crate) struct WebSocketState {
    pub(crate) shared: Arc<SharedTables>,
    pub(crate) authority: Option<Arc<dyn AppAuthority>>,
    pub(crate) hub: Arc<WebSocketHub>,
    /// The shard queues, for Types 4/5 (a connection's go to one shard).
    pub(super) shards: Vec<SyncSender<Datagram>>,
    /// `ghost_subscriptions`.
    pub(crate) subscriptions: usize,
}

impl std::fmt::Debug for WebSocketState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocketState")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

/// The `/ws` route over `st`, to merge into the server's router.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(st: WebSocketState) -> Router<S> {
    Router::new().route("/ws", get(upgrade)).with_state(st)
}

/// The `ws_token` cookie's value, if any `Cookie` header has one.
pub fn ws_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().strip_prefix("ws_token="))
        .find(|t| !t.is_empty())
}

/// What §4.2 rows 2–4 accept: (normalised instance id, capabilities).
pub fn handshake_parameters(
    headers: &HeaderMap,
    query: &[(String, String)],
) -> Result<(String, Vec<String>), AppLoginError> {
    let param = |header: &str, key: &str| -> Option<String> {
        headers
            .get(header)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .or_else(|| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
    };
    let version = param("x-draarl-protocol-version", "protocol_version");
    if version.as_deref().map(str::trim) != Some("1") {
        return Err(AppLoginError::UpgradeRequired);
    }
    let instance = param("x-draarl-client-instance-id", "client_instance_id").unwrap_or_default();
    let instance = normalize_instance_id(&instance)?;
    let caps = param("x-draarl-capabilities", "capabilities").unwrap_or_default();
    let caps = require_capabilities(caps.split(','))?;
    Ok((instance, caps))
}

fn refuse(hub: &WebSocketHub, code: &str) -> Response {
    hub.stats.upgrades_refused.fetch_add(1, Relaxed);
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{code}\n"),
    )
        .into_response()
}

async fn upgrade(
    State(st): State<WebSocketState>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Some(token) = ws_token(&headers) else {
        return refuse(&st.hub, "token_required");
    };
    let (instance, capabilities) = match handshake_parameters(&headers, &query) {
        Ok(p) => p,
        Err(e) => return refuse(&st.hub, e.text()),
    };
    let verdict = match st.authority.as_ref() {
        Some(a) => {
            a.authorize(AppAuthRequest {
                token: token.to_owned(),
                dev_model: DEV_MODEL_WEB,
                client_instance_id: instance.clone(),
            })
            .await
        }
        None => Err(AppReject::InvalidToken),
    };
    let grant = match verdict {
        Ok(g) if g.routing.rx_group_ids.len() <= st.subscriptions => g,
        Ok(_) => return refuse(&st.hub, AppReject::PreferenceUnavailable.ws_text()),
        Err(r) => return refuse(&st.hub, r.ws_text()),
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    st.hub.stats.upgrades.fetch_add(1, Relaxed);
    ws.max_frame_size(MAX_FRAME)
        .max_message_size(MAX_FRAME)
        .on_upgrade(move |socket| run(st, socket, grant, instance, capabilities))
}

/// The close reason of a failed registration (§4.2).
fn close_reason(e: RegisterError) -> &'static str {
    match e {
        RegisterError::SessionLimit { .. } => "ghost_session_limit",
        RegisterError::SubscriptionLimit { .. } => "subscription_limit",
        RegisterError::Failed => "ghost_session_registration_failed",
    }
}

/// `routing_updated` for `session_id` (§4.3).
pub(crate) fn routing_updated(session_id: &str, routing: &Routing) -> String {
    json!({"type": "routing_updated", "data": {
        "session_id": session_id,
        "tx_group_id": routing.tx_group_id,
        "rx_group_ids": routing.rx_group_ids,
    }})
    .to_string()
}

async fn run(
    st: WebSocketState,
    mut socket: WebSocket,
    grant: AppGrant,
    instance: String,
    capabilities: Vec<String>,
) {
    let conn = st.hub.next_id();
    let new = NewGhost {
        user: Arc::new(grant.user),
        dev_model: DEV_MODEL_WEB,
        client_instance_id: instance,
        capabilities,
        transport: Endpoint::WebSocket(conn),
        routing: Routing::new(grant.routing.tx_group_id, grant.routing.rx_group_ids),
    };
    let registered = {
        let mut rng = StdRng::from_entropy();
        st.shared
            .ghosts()
            .register(new, Instant::now(), unix_ms(), &mut rng)
    };
    let reg = match registered {
        Ok(r) => r,
        Err(e) => {
            st.hub.stats.registrations_failed.fetch_add(1, Relaxed);
            let close = CloseFrame {
                code: 1008,
                reason: close_reason(e).into(),
            };
            let _ = socket.send(Message::Close(Some(close))).await;
            return;
        }
    };
    let session = reg.session.clone();
    if let Some(Endpoint::WebSocket(old)) = reg.replaced.as_ref().map(|s| s.transport) {
        st.hub.close(old);
    }
    st.shared.invalidate_every_domain();
    let (queue, outbound) = mpsc::channel(WRITE_QUEUE);
    let (close, closed) = oneshot::channel();
    let auth = json!({"type": "auth_success", "data": {
        "session_id": session.session_id,
        "client_instance_id": session.client_instance_id,
        "protocol_version": 1,
        "tx_group_id": session.routing.tx_group_id,
        "rx_group_ids": session.routing.rx_group_ids,
    }});
    enqueue(&st.hub.stats, &queue, Outbound::Text(auth.to_string()));
    let last_frame = LastFrame::default();
    st.hub.insert(
        conn,
        queue.clone(),
        close,
        last_frame.clone(),
        Instant::now(),
    );
    let (sink, stream) = socket.split();
    let mut writer = tokio::spawn(write_loop(sink, outbound, closed));
    let callsign = session.user.callsign.clone();
    let client = Client {
        conn,
        callsign: &callsign,
        queue: &queue,
        last_frame: &last_frame,
    };
    serve(&st, &client, stream, &mut writer).await;
    writer.abort();
    st.hub.remove(conn);
    if st.shared.ghosts().remove_connection(conn).is_some() {
        st.shared.invalidate_every_domain();
    }
}

/// Writes the queued messages until the queue closes or a write fails;
/// ends at once when the hub closes the connection, after the close frame
/// 1008 [`EVICTED_REASON`] (at most [`CLOSE_WRITE`]) when it was evicted.
async fn write_loop(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut outbound: mpsc::Receiver<Outbound>,
    mut closing: oneshot::Receiver<Closing>,
) {
    loop {
        tokio::select! {
            msg = outbound.recv() => {
                let Some(msg) = msg else { return };
                let msg = match msg {
                    Outbound::Text(t) => Message::Text(t.into()),
                    Outbound::Binary(b) => Message::Binary(b),
                    Outbound::Ping => Message::Ping(Default::default()),
                };
                if sink.send(msg).await.is_err() {
                    return;
                }
            }
            how = &mut closing => {
                if how == Ok(Closing::Evicted) {
                    let close = CloseFrame {
                        code: 1008,
                        reason: EVICTED_REASON.into(),
                    };
                    let send = sink.send(Message::Close(Some(close)));
                    let _ = tokio::time::timeout(CLOSE_WRITE, send).await;
                }
                return;
            }
        }
    }
}

/// One open connection, as its reader sees it.
struct Client<'a> {
    conn: ConnectionId,
    callsign: &'a str,
    queue: &'a mpsc::Sender<Outbound>,
    last_frame: &'a LastFrame,
}

/// Reads the client until it goes, a ping cannot be queued or the writer
/// ends (a write failed, or the hub closed the connection).
async fn serve(
    st: &WebSocketState,
    client: &Client<'_>,
    mut stream: futures_util::stream::SplitStream<WebSocket>,
    writer: &mut tokio::task::JoinHandle<()>,
) {
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    let shard = st
        .shards
        .get((client.conn % st.shards.len().max(1) as u64) as usize);
    loop {
        tokio::select! {
            msg = stream.next() => match msg {
                Some(Ok(Message::Binary(frame))) => on_binary(st, client, shard, &frame),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                // Text frames are ignored; pings are answered by the library.
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if !enqueue(&st.hub.stats, client.queue, Outbound::Ping) {
                    return;
                }
            }
            _ = &mut *writer => return,
        }
    }
}

/// One binary frame from the client (§4.4 "Uplink").
fn on_binary(
    st: &WebSocketState,
    client: &Client<'_>,
    shard: Option<&SyncSender<Datagram>>,
    frame: &[u8],
) {
    let (conn, callsign, queue) = (client.conn, client.callsign, client.queue);
    let stats = &st.hub.stats;
    let Ok(packet) = decode_unframed(frame) else {
        stats.frames_malformed.fetch_add(1, Relaxed);
        return;
    };
    stats.frames_received.fetch_add(1, Relaxed);
    let now = Instant::now();
    st.hub.touch(client.last_frame, now);
    if st.shared.ghosts().resolve_connection(conn, now).is_none() {
        return;
    }
    match packet.header.packet_type {
        PacketType::Heartbeat => {
            let mut h = packet.header.clone();
            h.device_password = [0; codec::PASSWORD_LEN];
            h.set_callsign(callsign);
            h.reserved = 0;
            if let Ok(reply) = codec::encode(&h, packet.data) {
                enqueue(stats, queue, Outbound::Binary(reply.into()));
            }
        }
        PacketType::Text | PacketType::Voice => {
            let queued = shard.is_some_and(|q| {
                q.try_send(Datagram::from_connection(now, conn, frame.to_vec()))
                    .is_ok()
            });
            if !queued {
                stats.uplink_queue_full.fetch_add(1, Relaxed);
            }
        }
        PacketType::JwtAuth | PacketType::Config => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const IID: &str = "11111111-1111-4111-8111-111111111111";

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        assert_eq!(ws_token(&h), None);
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; ws_token=; b=2"),
        );
        assert_eq!(ws_token(&h), None);
        h.append(
            header::COOKIE,
            HeaderValue::from_static("x=y;  ws_token=abc.def"),
        );
        assert_eq!(ws_token(&h), Some("abc.def"));
    }

    #[test]
    fn parameters_follow_the_handshake_rows_and_headers_win() {
        use AppLoginError::*;
        let caps = "multi_receive_v1,source_group_v1";
        let none = HeaderMap::new();
        let ok = q(&[
            ("protocol_version", "1"),
            ("client_instance_id", IID),
            ("capabilities", caps),
        ]);
        assert_eq!(
            handshake_parameters(&none, &ok).unwrap(),
            (
                IID.to_owned(),
                vec!["multi_receive_v1".into(), "source_group_v1".into()]
            )
        );
        for (pairs, want) in [
            (
                vec![("client_instance_id", IID), ("capabilities", caps)],
                UpgradeRequired,
            ),
            (
                vec![("protocol_version", "2"), ("client_instance_id", IID)],
                UpgradeRequired,
            ),
            (
                vec![("protocol_version", "1"), ("capabilities", caps)],
                UpgradeRequired,
            ),
            (
                vec![
                    ("protocol_version", "1"),
                    ("client_instance_id", "device-id"),
                ],
                InvalidInstanceId,
            ),
            (
                vec![
                    ("protocol_version", "1"),
                    ("client_instance_id", IID),
                    ("capabilities", "multi_receive_v1"),
                ],
                CapabilitiesRequired,
            ),
        ] {
            assert_eq!(
                handshake_parameters(&none, &q(&pairs)),
                Err(want),
                "{pairs:?}"
            );
        }
        let mut headers = HeaderMap::new();
        headers.insert("x-draarl-protocol-version", HeaderValue::from_static("2"));
        assert_eq!(handshake_parameters(&headers, &ok), Err(UpgradeRequired));
        let mut headers = HeaderMap::new();
        headers.insert("x-draarl-protocol-version", HeaderValue::from_static("1"));
        headers.insert("x-draarl-client-instance-id", HeaderValue::from_static(IID));
        headers.insert("x-draarl-capabilities", HeaderValue::from_static(caps));
        assert!(handshake_parameters(&headers, &[]).is_ok());
    }
}
