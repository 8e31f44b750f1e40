//! The user object of the login answer and `/api/me`
//! (`specs/draarl-apps.md` §1.3, §1.5), and the time formats of the app
//! API: legacy `YYYY-MM-DD HH:MM:SS` and RFC 3339 with nanoseconds (UTC,
//! trailing zeros trimmed).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::runtime::store::WebUser;

fn system_time(unix_ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(unix_ms).unwrap_or(0))
}

/// `unix_ms` as `YYYY-MM-DD HH:MM:SS` (UTC).
pub(crate) fn legacy_time(unix_ms: i64) -> String {
    let t = humantime::format_rfc3339_seconds(system_time(unix_ms)).to_string();
    t.trim_end_matches('Z').replacen('T', " ", 1)
}

/// `unix_ms` as RFC 3339 UTC with the fraction's trailing zeros trimmed
/// (Go's `RFC3339Nano`).
pub(crate) fn rfc3339_nano(unix_ms: i64) -> String {
    let t = humantime::format_rfc3339_nanos(system_time(unix_ms)).to_string();
    let body = t.trim_end_matches('Z');
    let body = match body.split_once('.') {
        Some((secs, frac)) if frac.trim_end_matches('0').is_empty() => secs.to_owned(),
        Some((secs, frac)) => format!("{secs}.{}", frac.trim_end_matches('0')),
        None => body.to_owned(),
    };
    format!("{body}Z")
}

/// `role`: `admin` if any role is admin, else `user` (§1.3, test vector 36).
fn role(u: &WebUser) -> &'static str {
    if u.is_admin() {
        "admin"
    } else {
        "user"
    }
}

/// The role string, `user` when empty.
fn roles(u: &WebUser) -> &str {
    if u.roles.is_empty() {
        "user"
    } else {
        &u.roles
    }
}

/// The user object of the login answer: `roles` is an array, and
/// `last_group_id` is the stored DevModel-105 last group (default 999).
pub(crate) fn login_user(u: &WebUser, last_group_id: i64) -> Value {
    let mut v = common(u, last_group_id);
    v["roles"] = json!([roles(u)]);
    v
}

/// The user object of `/api/me`: `roles` is the raw string, plus `email`,
/// `email_verified` and `review_note`.
pub(crate) fn me_user(u: &WebUser, last_group_id: i64) -> Value {
    let mut v = common(u, last_group_id);
    v["roles"] = json!(roles(u));
    v["email"] = json!(u.email.clone().unwrap_or_default());
    v["email_verified"] = json!(false);
    v["review_note"] = json!(u.review_note);
    v
}

fn common(u: &WebUser, last_group_id: i64) -> Value {
    json!({
        "id": u.id,
        "username": u.name,
        "nickname": u.nickname,
        "callsign": u.callsign,
        "role": role(u),
        "status": u.status,
        "approval_status": u.approval_status,
        "avatar": "",
        "avatar_thumb": "",
        "phone": "",
        "address": "",
        "introduction": "",
        "sex": 0,
        "birthday": "",
        "isAdmin": u.is_admin(),
        "dmrid": u.dmrid,
        "mdcid": "",
        "alarm_msg": false,
        "last_group_id": last_group_id,
        "last_login_time": u.last_login_ms.map(legacy_time).unwrap_or_default(),
        "last_login_ip": u.last_login_ip,
        "last_login_ip_location": "",
        "login_err_times": u.login_err_times,
        "created_at": legacy_time(u.created_at_ms),
        "updated_at": legacy_time(u.updated_at_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_formats() {
        assert_eq!(legacy_time(1_785_931_200_000), "2026-08-05 12:00:00");
        assert_eq!(rfc3339_nano(1_785_931_200_000), "2026-08-05T12:00:00Z");
        assert_eq!(rfc3339_nano(1_785_931_200_120), "2026-08-05T12:00:00.12Z");
    }
}
