//! A web-style `/ws` client (`specs/draarl-apps.md` §4.1–§4.3): the upgrade
//! with the `ws_token` cookie and the query parameters, and reading the
//! session's messages with a 3 s bound.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::MaybeTlsStream;

/// The capabilities every test client announces (§4.1), URL-encoded.
pub const CAPS: &str = "multi_receive_v1%2Csource_group_v1";

/// An open `/ws` session.
pub type Client = tokio_tungstenite::WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// Upgrades `/ws` on `addr` for `token` (cookie) under `instance`, with
/// `origin` when given; asserts the 101.
pub async fn open(addr: SocketAddr, token: &str, instance: &str, origin: Option<&str>) -> Client {
    let url = format!(
        "ws://{addr}/ws?client_instance_id={instance}&protocol_version=1&capabilities={CAPS}"
    );
    let mut req = url.into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("cookie", format!("ws_token={token}").parse().unwrap());
    if let Some(origin) = origin {
        h.insert("origin", origin.parse().unwrap());
    }
    let (ws, resp) = tokio_tungstenite::connect_async(req).await.unwrap();
    assert_eq!(resp.status(), 101);
    ws
}

/// [`open`], then asserts that the first message is `auth_success` (§4.3).
pub async fn open_authed(
    addr: SocketAddr,
    token: &str,
    instance: &str,
    origin: Option<&str>,
) -> Client {
    let mut ws = open(addr, token, instance, origin).await;
    assert_eq!(next_text(&mut ws).await["type"], "auth_success");
    ws
}

/// The next data message (pings and pongs skipped); `None` once the
/// connection has ended (close frame, error or EOF). Panics after 3 s of
/// silence.
pub async fn next_message(ws: &mut Client) -> Option<Message> {
    loop {
        match tokio::time::timeout(Duration::from_secs(3), ws.next())
            .await
            .expect("no message within 3 s")
        {
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return None,
            Some(Ok(m)) => return Some(m),
        }
    }
}

/// The next text message as JSON, skipping binary ones.
pub async fn next_text(ws: &mut Client) -> Value {
    loop {
        match next_message(ws).await.expect("the session ended") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            _ => continue,
        }
    }
}

/// The next binary message, skipping text ones.
pub async fn next_binary(ws: &mut Client) -> Vec<u8> {
    loop {
        match next_message(ws).await.expect("the session ended") {
            Message::Binary(b) => return b.to_vec(),
            _ => continue,
        }
    }
}
