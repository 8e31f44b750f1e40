//! The guards every non-admin request passes when the app API is on
//! (`specs/draarl-apps.md` §1.1): the refusal of token-like query keys
//! (400 `token_query_not_allowed`) and the origin guard (403
//! `origin_not_allowed`, CORS preflights answered here).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::envelope;
use crate::model::normalise_origin;
use crate::runtime::app_auth_stats::AppAuthStats;

/// Query keys refused on every route (compared case-insensitively).
const TOKEN_KEYS: [&str; 6] = [
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "jwt",
    "authorization",
];

/// What the guards need: the normalised allow-list and the counters.
#[derive(Debug, Clone)]
pub(crate) struct Guards {
    pub(crate) allowed_origins: Arc<[String]>,
    pub(crate) stats: Arc<AppAuthStats>,
}

/// Whether the query string `query` has a token-like key (keys
/// percent-decoded first, so `%74oken` is `token`).
pub(crate) fn has_token_key(query: &str) -> bool {
    query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or_default();
        let key = percent_decode(key);
        TOKEN_KEYS.iter().any(|t| key.eq_ignore_ascii_case(t))
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| char::from(c).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                // Two hex digits make one byte (at most 255).
                out.push(u8::try_from(h * 16 + l).unwrap_or(0));
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `scheme://host[:port]` the request comes from: its `Origin`, or
/// failing that the origin part of its `Referer`. `None` without either.
fn request_origin(headers: &HeaderMap) -> Option<String> {
    if let Some(o) = headers.get(header::ORIGIN) {
        return Some(o.to_str().unwrap_or("invalid").to_owned());
    }
    let referer = headers.get(header::REFERER)?.to_str().unwrap_or("invalid");
    let after_scheme = referer.find("://").map_or(0, |i| i + 3);
    let end = referer[after_scheme..]
        .find(['/', '?', '#'])
        .map_or(referer.len(), |i| after_scheme + i);
    Some(referer[..end].to_owned())
}

/// Whether the request may go on: `PUT /api/storage/put` and
/// `GET /api/storage/get` are exempt from the query rule (§1.1).
fn exempt_from_query_rule(method: &Method, path: &str) -> bool {
    (method == Method::PUT && path == "/api/storage/put")
        || (method == Method::GET && path == "/api/storage/get")
}

/// The middleware: token-like query keys, then the origin guard.
pub(crate) async fn guard(State(g): State<Guards>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if super::is_admin_api(path) {
        return next.run(req).await;
    }
    if let Some(q) = req.uri().query() {
        if has_token_key(q) && !exempt_from_query_rule(req.method(), path) {
            g.stats.token_query_refused.fetch_add(1, Relaxed);
            return envelope(StatusCode::BAD_REQUEST, "token_query_not_allowed", None);
        }
    }
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let Some(origin) = request_origin(req.headers()) else {
        return next.run(req).await;
    };
    let allowed = normalise_origin(&origin).is_some_and(|o| g.allowed_origins.contains(&o));
    if !allowed {
        g.stats.origin_refused.fetch_add(1, Relaxed);
        if preflight {
            return StatusCode::FORBIDDEN.into_response();
        }
        return envelope(StatusCode::FORBIDDEN, "origin_not_allowed", None);
    }
    // Only an `Origin` header is echoed (a Referer-only request is not CORS).
    let echo = req.headers().get(header::ORIGIN).cloned();
    let mut resp = if preflight {
        let mut r = StatusCode::NO_CONTENT.into_response();
        let h = r.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type, Authorization, X-Requested-With"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
        r
    } else {
        next.run(req).await
    };
    if let Some(o) = echo {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.insert(
            header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_keys_are_found_in_any_case_and_encoding() {
        for q in [
            "token=x",
            "a=1&TOKEN=x",
            "access_token",
            "%74oken=1",
            "Refresh_Token=",
            "jwt=1",
            "authorization=Bearer+x",
            "id_token=&b=2",
        ] {
            assert!(has_token_key(q), "{q}");
        }
        for q in [
            "",
            "tokens=1",
            "page=1&page_size=20",
            "client_instance_id=x",
        ] {
            assert!(!has_token_key(q), "{q}");
        }
    }

    #[test]
    fn the_origin_is_the_origin_header_or_the_referers_origin() {
        let mut h = HeaderMap::new();
        assert_eq!(request_origin(&h), None);
        h.insert(
            header::REFERER,
            HeaderValue::from_static("http://localhost:5173/radio?x=1"),
        );
        assert_eq!(request_origin(&h).as_deref(), Some("http://localhost:5173"));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://app.example.com"),
        );
        assert_eq!(
            request_origin(&h).as_deref(),
            Some("https://app.example.com")
        );
    }
}
