//! The app clients' HTTP calls on raw HTTP/1.1 (`specs/draarl-apps.md` §1,
//! §3): one request per connection, the answer split into status, head and
//! JSON body; login and Bearer helpers.

use std::net::SocketAddr;

use serde_json::{json, Value};

use super::app_server::PASSWORD;

/// An answer: status, head (header names lower-cased) and JSON body
/// (`Null` if the body is not JSON).
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: Value,
}

impl Answer {
    /// The `Set-Cookie` values, in order.
    pub fn cookies(&self) -> Vec<String> {
        self.head
            .lines()
            .filter_map(|l| l.strip_prefix("set-cookie: "))
            .map(str::to_owned)
            .collect()
    }

    /// The envelope's `message` (§1.1), empty if there is none.
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

/// Status and body of one raw HTTP/1.1 request.
pub fn raw(addr: SocketAddr, req: &str) -> (u16, String) {
    let (status, text) = super::http(addr, req);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// `method path` with the extra header lines `headers` and `body` as JSON
/// (a `Content-Length` whenever there is a body or the method is POST).
pub fn send(addr: SocketAddr, method: &str, path: &str, headers: &[&str], body: &str) -> Answer {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let (status, text) = super::http(addr, &req);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let head = head
        .lines()
        .map(|l| match l.split_once(':') {
            Some((k, v)) => format!("{}:{v}", k.to_ascii_lowercase()),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    Answer {
        status,
        head,
        body: serde_json::from_str(body).unwrap_or(Value::Null),
    }
}

/// `GET path`.
pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> Answer {
    send(addr, "GET", path, headers, "")
}

/// `POST path` with `body`.
pub fn post(addr: SocketAddr, path: &str, headers: &[&str], body: &str) -> Answer {
    send(addr, "POST", path, headers, body)
}

/// `POST /api/auth/login` with `name` and `password` (§1.2).
pub fn login(addr: SocketAddr, name: &str, password: &str) -> Answer {
    post(
        addr,
        "/api/auth/login",
        &[],
        &json!({"username": name, "password": password}).to_string(),
    )
}

/// `name`'s access token from a real login with [`PASSWORD`].
pub fn access_token(addr: SocketAddr, name: &str) -> String {
    let a = login(addr, name, PASSWORD);
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["data"]["token"].as_str().unwrap().to_owned()
}

/// The `Authorization` header line for `token`.
pub fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

/// The wall clock in Unix seconds, for issuing test tokens (§1.4 `iat`,
/// `exp`).
pub fn unix_s() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_secs()).unwrap()
}
