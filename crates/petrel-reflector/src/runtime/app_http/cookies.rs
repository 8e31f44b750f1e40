//! The `refresh_token` and `ws_token` cookies (`specs/draarl-apps.md`
//! §1.4, §4.1): `HttpOnly; SameSite=Lax`, `Secure` only when the request
//! came over TLS or carried `X-Forwarded-Proto: https`.

use axum::http::{header, HeaderMap, HeaderValue};

use crate::model::ACCESS_TOKEN_SECS;

/// Lifetime of a refresh token and its cookie, s (§1.4: 14 days).
pub(crate) const REFRESH_TOKEN_SECS: i64 = 1_209_600;
/// The `Expires` of a cleared cookie (§4.1).
const EPOCH_EXPIRES: &str = "Thu, 01 Jan 1970 00:00:01 GMT";

/// Whether cookies get `Secure`: the request carried
/// `X-Forwarded-Proto: https` (case-insensitive). The server itself speaks
/// plain HTTP only.
pub(crate) fn secure(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

fn cookie(name: &str, value: &str, path: &str, max_age: i64, secure: bool) -> String {
    let mut c = format!("{name}={value}; Path={path}; Max-Age={max_age}");
    if max_age == 0 {
        c.push_str("; Expires=");
        c.push_str(EPOCH_EXPIRES);
    }
    c.push_str("; HttpOnly; SameSite=Lax");
    if secure {
        c.push_str("; Secure");
    }
    c
}

/// `Set-Cookie` values setting both cookies.
pub(crate) fn set_both(access: &str, refresh: &str, secure: bool) -> Vec<String> {
    vec![
        cookie(
            "refresh_token",
            refresh,
            "/api/auth",
            REFRESH_TOKEN_SECS,
            secure,
        ),
        ws_token(access, secure),
    ]
}

/// The `Set-Cookie` value setting `ws_token`.
pub(crate) fn ws_token(access: &str, secure: bool) -> String {
    cookie("ws_token", access, "/", ACCESS_TOKEN_SECS, secure)
}

/// `Set-Cookie` values expiring `refresh_token` (on `/api/auth` and `/`)
/// and `ws_token`.
pub(crate) fn clear_all(secure: bool) -> Vec<String> {
    vec![
        cookie("refresh_token", "", "/api/auth", 0, secure),
        cookie("refresh_token", "", "/", 0, secure),
        cookie("ws_token", "", "/", 0, secure),
    ]
}

/// The value of cookie `name` in the request's `Cookie` headers, if
/// non-empty.
pub(crate) fn read<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, v)| *k == name && !v.is_empty())
        .map(|(_, v)| v)
}

/// Appends `cookies` as `Set-Cookie` headers (values that are not valid
/// header text are skipped; tokens are base64url and JWTs, always valid).
pub(crate) fn append(headers: &mut HeaderMap, cookies: Vec<String>) {
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(&c) {
            headers.append(header::SET_COOKIE, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_follow_the_reference() {
        assert_eq!(
            ws_token("T", false),
            "ws_token=T; Path=/; Max-Age=10800; HttpOnly; SameSite=Lax"
        );
        assert_eq!(
            set_both("A", "R", true)[0],
            "refresh_token=R; Path=/api/auth; Max-Age=1209600; HttpOnly; SameSite=Lax; Secure"
        );
        assert_eq!(
            clear_all(false),
            vec![
                "refresh_token=; Path=/api/auth; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT; HttpOnly; SameSite=Lax",
                "refresh_token=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT; HttpOnly; SameSite=Lax",
                "ws_token=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:01 GMT; HttpOnly; SameSite=Lax",
            ]
        );
    }

    #[test]
    fn secure_follows_x_forwarded_proto_and_cookies_are_read() {
        let mut h = HeaderMap::new();
        assert!(!secure(&h));
        h.insert("x-forwarded-proto", HeaderValue::from_static("HTTPS"));
        assert!(secure(&h));
        h.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        assert!(!secure(&h));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; refresh_token=abc; ws_token="),
        );
        assert_eq!(read(&h, "refresh_token"), Some("abc"));
        assert_eq!(read(&h, "ws_token"), None);
    }
}
