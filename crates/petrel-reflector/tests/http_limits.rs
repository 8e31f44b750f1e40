//! The HTTP endpoint's limits on real loopback TCP: the admin token's
//! minimum length, 401/404 answers, body size, request and header timeouts,
//! the connection cap and the per-IP budget. Each test runs its own server
//! on a fresh SQLite store (the store plays no part here).
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use petrel_reflector::model::{Backend, HttpConfig, ServerConfig};
use petrel_reflector::runtime::server::{ServerError, ServerHandle};
use tokio::runtime::Runtime;

mod support;
use support::{connect, http, read_answer, ScratchStore};

const TOKEN: &str = "0123456789abcdef-admin";

/// Starts a server with `admin_token` and `http` limits, runs `body` with
/// its HTTP address, then shuts it down and removes the store.
fn with_server(
    name: &str,
    admin_token: Option<&str>,
    http: HttpConfig,
    body: impl FnOnce(&ServerHandle, SocketAddr),
) {
    let config = |db: &str| ServerConfig {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        admin_token: admin_token.map(str::to_owned),
        http,
        ..support::udp_config(db)
    };
    support::with_sqlite_server(name, [], config, |srv| {
        body(srv, srv.http_addr().unwrap());
    });
}

fn get(addr: SocketAddr, path: &str, auth: &str) -> u16 {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    )
    .0
}

/// Sends an admin `PUT` of bob-1's group with the token, `framing`
/// (`Content-Length` or `Transfer-Encoding` header lines) and `body`; the
/// status code.
fn put_group(web: SocketAddr, framing: &str, body: &str) -> u16 {
    http(
        web,
        &format!(
            "PUT /api/devices/bob/1/group HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\n{framing}Connection: close\r\n\r\n{body}",
            bearer(TOKEN)
        ),
    )
    .0
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

#[test]
fn short_or_empty_admin_token_refuses_to_start() {
    let rt = Runtime::new().unwrap();
    let scratch = rt
        .block_on(ScratchStore::create(Backend::Sqlite, "short_token"))
        .unwrap()
        .unwrap();
    for token in ["", "fifteen-chars!!"] {
        let cfg = ServerConfig {
            http_listen: Some("127.0.0.1:0".parse().unwrap()),
            admin_token: Some(token.into()),
            ..support::udp_config(scratch.location())
        };
        match rt.block_on(ServerHandle::start(cfg)) {
            Err(ServerError::Config(e)) => {
                assert_eq!(e.field, "admin_token");
                let text = ServerError::Config(e).to_string();
                assert!(text.starts_with("config: admin_token = "), "{text}");
                assert!(token.is_empty() || !text.contains(token), "{text}");
            }
            other => panic!("token {token:?} accepted: {other:?}"),
        }
    }
    rt.block_on(scratch.remove()).unwrap();
}

#[test]
fn admin_routes_need_the_exact_token_and_are_off_without_one() {
    with_server(
        "admin_401",
        Some(TOKEN),
        HttpConfig::default(),
        |srv, web| {
            assert_eq!(get(web, "/api/stats", ""), 401);
            assert_eq!(get(web, "/api/stats", "Authorization: Basic eA==\r\n"), 401);
            for wrong in ["x", "0123456789abcdef", "0123456789abcdef-admin-and-more"] {
                assert_eq!(get(web, "/api/stats", &bearer(wrong)), 401, "{wrong}");
            }
            assert_eq!(get(web, "/api/stats", &bearer(TOKEN)), 200);
            assert_eq!(srv.stats().http.unauthorized, 5);
        },
    );
    with_server("admin_off", None, HttpConfig::default(), |_, web| {
        // No token configured: the admin API is disabled, not open.
        assert_eq!(get(web, "/api/stats", ""), 404);
        assert_eq!(get(web, "/api/stats", &bearer("")), 404);
        assert_eq!(get(web, "/healthz", ""), 200);
    });
}

#[test]
fn oversize_bodies_get_413_and_slow_bodies_408() {
    let http_cfg = HttpConfig {
        max_body_bytes: 256,
        request_timeout_ms: 300,
        ..HttpConfig::default()
    };
    with_server("body_413", Some(TOKEN), http_cfg, |srv, web| {
        // Announced too large: refused before the body is read.
        let code = put_group(web, "Content-Length: 100000\r\n", "{\"group_id\"");
        assert_eq!(code, 413);
        // Chunked, growing past the limit while read.
        let chunk = format!("{:x}\r\n{}\r\n", 300, " ".repeat(300));
        let code = put_group(
            web,
            "Transfer-Encoding: chunked\r\n",
            &format!("{chunk}0\r\n\r\n"),
        );
        assert_eq!(code, 413);
        // A body that never completes: the whole request times out.
        let started = Instant::now();
        let code = put_group(web, "Content-Length: 20\r\n", "{\"gro");
        assert_eq!(code, 408);
        assert!(started.elapsed() < Duration::from_secs(3));
        let s = srv.stats().http;
        assert_eq!((s.body_too_large, s.request_timeouts), (2, 1));
    });
}

#[test]
fn slow_loris_is_closed_after_the_header_timeout() {
    let http_cfg = HttpConfig {
        header_timeout_ms: 300,
        ..HttpConfig::default()
    };
    with_server("slow_loris", None, http_cfg, |srv, web| {
        let mut s = connect(web);
        let started = Instant::now();
        // Headers trickle in and never end.
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let _ = s.write_all(b"X-Slow: 1\r\n");
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap_or(0);
        let closed_after = started.elapsed();
        assert!(
            !String::from_utf8_lossy(&buf[..n]).contains("200 OK"),
            "answered"
        );
        assert!(
            closed_after >= Duration::from_millis(250) && closed_after < Duration::from_secs(2),
            "{closed_after:?}"
        );
        // An idle connection (no byte at all) is closed the same way.
        let mut idle = connect(web);
        let started = Instant::now();
        let _ = idle.read(&mut buf);
        assert!(started.elapsed() < Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(srv.stats().http.header_timeouts, 2);
        assert_eq!(get(web, "/healthz", ""), 200);
    });
}

#[test]
fn connection_cap_refuses_and_frees_slots() {
    let http_cfg = HttpConfig {
        max_connections: 2,
        header_timeout_ms: 10_000,
        ..HttpConfig::default()
    };
    with_server("conn_cap", None, http_cfg, |srv, web| {
        let a = connect(web);
        let b = connect(web);
        std::thread::sleep(Duration::from_millis(100));
        // Both slots are held by idle connections: the next gets 503.
        for _ in 0..3 {
            assert_eq!(get(web, "/healthz", ""), 503);
        }
        let s = srv.stats().http;
        assert_eq!((s.connections_accepted, s.connections_refused), (2, 3));
        // Closing one frees its slot.
        drop(a);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(web, "/healthz", ""), 200);
        drop(b);
    });
}

#[test]
fn requests_without_the_token_are_limited_per_ip() {
    let http_cfg = HttpConfig {
        per_ip_rps: 1,
        per_ip_burst: 3,
        ..HttpConfig::default()
    };
    with_server("per_ip", Some(TOKEN), http_cfg, |srv, web| {
        let codes: Vec<u16> = (0..5).map(|_| get(web, "/healthz", "")).collect();
        assert_eq!(codes, vec![200, 200, 200, 429, 429]);
        // Wrong tokens spend the same budget (no brute force around it).
        assert_eq!(get(web, "/api/stats", &bearer("wrong-token-0000000")), 429);
        // The admin is not limited.
        for _ in 0..5 {
            assert_eq!(get(web, "/api/stats", &bearer(TOKEN)), 200);
        }
        assert_eq!(srv.stats().http.rate_limited, 3);
        let (code, body) = http(
            web,
            &format!(
                "GET /metrics HTTP/1.1\r\nHost: x\r\n{}Connection: close\r\n\r\n",
                bearer(TOKEN)
            ),
        );
        assert_eq!(code, 200);
        assert!(
            body.contains("\npetrel_reflector_http_rate_limited_total 3\n"),
            "{body}"
        );
        assert!(body.contains("# TYPE petrel_reflector_history_text_bytes gauge\n"));
        assert!(body.contains("# TYPE petrel_reflector_history_recordings_pruned_total counter\n"));
        assert!(body.contains("petrel_reflector_fanout_text_frames_dropped_total 0\n"));
    });
}

#[test]
fn one_source_cannot_take_every_connection() {
    let http_cfg = HttpConfig {
        max_connections_per_ip: 2,
        header_timeout_ms: 10_000,
        ..HttpConfig::default()
    };
    with_server("conn_per_ip", None, http_cfg, |srv, web| {
        let held = [connect(web), connect(web)];
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(web, "/healthz", ""), 503);
        // Another source still gets in.
        let other =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        other
            .bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
            .unwrap();
        other.connect(&web.into()).unwrap();
        let mut other = TcpStream::from(other);
        other
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        other
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        assert_eq!(read_answer(&mut other).0, 200);
        let s = srv.stats().http;
        assert_eq!(
            (s.connections_refused_per_ip, s.connections_refused),
            (1, 0)
        );
        drop(held);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(get(web, "/healthz", ""), 200);
    });
}
