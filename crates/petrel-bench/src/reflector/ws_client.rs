//! Web-style WebSocket receivers (draarl-apps §4): each connects to `/ws`
//! with its access token in the `ws_token` cookie and its instance id,
//! protocol version and capabilities in the query (§4.2), waits for
//! `auth_success` (§4.3), moves its session to its group with the routing
//! API and waits for `routing_updated`, then heartbeats every 10 s (§0
//! correction 1) and counts the marked voice frames of the stage it
//! receives (§4.4), checking Reserved = the source group.
//!
//! All connections run as tasks of one current-thread runtime on the
//! thread [`WS_THREAD`], so their CPU is measured apart from the UDP
//! receive threads'.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use petrel_reflector::codec::{encode, Header, PacketType};
use petrel_reflector::model::DEV_MODEL_WEB;
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

use super::app_http::AppApi;
use super::receive::Tally;
use super::LoadError;

/// Name of the thread that runs every WebSocket receiver.
pub(super) const WS_THREAD: &str = "lg-ws";
/// Web client heartbeat period (§0 correction 1).
const HEARTBEAT: Duration = Duration::from_secs(10);
/// How long a connection may take to be upgraded, authenticated and routed.
const SETUP_TIMEOUT: Duration = Duration::from_secs(15);
/// How often a receiver looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// One WebSocket receiver to connect: its account's token and its group.
#[derive(Debug, Clone)]
pub(super) struct WsPlan {
    pub(super) username: String,
    pub(super) token: String,
    pub(super) group_id: i64,
}

/// Connects every receiver of `plans` to `http`, reports `Ok(())` (or the
/// first setup error) on `ready`, then receives until `stop` and returns
/// the merged tally. Runs on its own thread.
pub(super) fn run(
    http: SocketAddr,
    plans: &[WsPlan],
    stage: u64,
    ready: &mpsc::Sender<Result<(), String>>,
    stop: &AtomicBool,
) -> Result<Tally, LoadError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let api = AppApi::new(http);
        let mut conns = Vec::with_capacity(plans.len());
        for p in plans {
            let set_up = match tokio::time::timeout(SETUP_TIMEOUT, connect(http, &api, p)).await {
                Ok(r) => r,
                Err(_) => Err(LoadError::Invalid(format!(
                    "WebSocket receiver not set up within {} s",
                    SETUP_TIMEOUT.as_secs()
                ))),
            };
            match set_up {
                Ok(c) => conns.push(c),
                Err(e) => {
                    let _ = ready.send(Err(e.to_string()));
                    return Err(e);
                }
            }
        }
        let _ = ready.send(Ok(()));
        let receivers = conns.into_iter().map(|c| receive(c, stage, stop));
        let mut total = Tally::new()?;
        for t in futures_util::future::join_all(receivers).await {
            total.merge(&t?);
        }
        Ok(total)
    })
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A routed connection and what its frames must carry.
struct Connection {
    ws: Socket,
    heartbeat: Vec<u8>,
    group_id: i64,
}

/// Upgrade (§4.2), `auth_success` first (§4.3), then the routing change
/// and its `routing_updated` event.
async fn connect(http: SocketAddr, api: &AppApi, plan: &WsPlan) -> Result<Connection, LoadError> {
    let bad = |m: String| LoadError::Invalid(format!("WebSocket receiver: {m}"));
    let instance = uuid::Uuid::new_v4().hyphenated().to_string();
    let url = format!(
        "ws://{http}/ws?client_instance_id={instance}&protocol_version=1&capabilities=multi_receive_v1%2Csource_group_v1"
    );
    let mut req = url.into_client_request().map_err(|e| bad(e.to_string()))?;
    let cookie = HeaderValue::from_str(&format!("ws_token={}", plan.token))
        .map_err(|e| bad(e.to_string()))?;
    req.headers_mut().insert("Cookie", cookie);
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| bad(format!("upgrade refused: {e}")))?;
    let first = next_event(&mut ws).await?;
    if first["type"] != "auth_success" {
        return Err(bad(format!("first frame is not auth_success: {first}")));
    }
    let session_id = first["data"]["session_id"]
        .as_str()
        .ok_or_else(|| bad(format!("auth_success without session_id: {first}")))?
        .to_owned();
    let route_api = api.clone();
    let (token, group) = (plan.token.clone(), plan.group_id);
    let sid = session_id.clone();
    tokio::task::spawn_blocking(move || route_api.route_to(&token, &sid, group))
        .await
        .map_err(|e| bad(e.to_string()))??;
    loop {
        let ev = next_event(&mut ws).await?;
        if ev["type"] == "routing_updated" {
            if ev["data"]["tx_group_id"].as_i64() != Some(plan.group_id) {
                return Err(bad(format!("routing_updated with another group: {ev}")));
            }
            break;
        }
    }
    let mut h = Header::new(PacketType::Heartbeat);
    h.set_username(&plan.username);
    h.dev_model = DEV_MODEL_WEB;
    h.ssid = DEV_MODEL_WEB;
    let heartbeat = encode(&h, &[0u8; 24]).map_err(|e| bad(e.to_string()))?;
    ws.send(Message::binary(heartbeat.clone()))
        .await
        .map_err(|e| bad(e.to_string()))?;
    Ok(Connection {
        ws,
        heartbeat,
        group_id: plan.group_id,
    })
}

/// The next text event, skipping binary frames (heartbeat replies).
async fn next_event(ws: &mut Socket) -> Result<Value, LoadError> {
    while let Some(m) = ws.next().await {
        match m.map_err(|e| LoadError::Invalid(format!("WebSocket receiver: {e}")))? {
            Message::Text(t) => {
                return serde_json::from_str(t.as_str())
                    .map_err(|e| LoadError::Invalid(format!("WebSocket event: {e}")));
            }
            Message::Close(c) => {
                return Err(LoadError::Invalid(format!(
                    "WebSocket closed by the reflector: {c:?}"
                )))
            }
            _ => {}
        }
    }
    Err(LoadError::Invalid(
        "WebSocket closed by the reflector".into(),
    ))
}

/// Counts this stage's marked voice frames until `stop`, heartbeating.
async fn receive(mut c: Connection, stage: u64, stop: &AtomicBool) -> Result<Tally, LoadError> {
    let mut tally = Tally::new()?;
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.tick().await;
    let mut check = tokio::time::interval(STOP_CHECK);
    let expected_reserved = u32::try_from(c.group_id).unwrap_or(0);
    while !stop.load(Relaxed) {
        tokio::select! {
            m = c.ws.next() => match m {
                Some(Ok(Message::Binary(b))) => {
                    tally.count(&b, stage, expected_reserved);
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => {
                    tally.recv_errors += 1;
                    break;
                }
            },
            _ = beat.tick() => {
                if c.ws.send(Message::binary(c.heartbeat.clone())).await.is_err() {
                    tally.recv_errors += 1;
                    break;
                }
            }
            _ = check.tick() => {}
        }
    }
    let _ = c.ws.close(None).await;
    Ok(tally)
}
