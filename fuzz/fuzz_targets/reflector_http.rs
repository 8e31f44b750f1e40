//! What the reflector's HTTP endpoint parses out of a request
//! (`runtime/http.rs`): the `Authorization: Bearer` header, the admin token
//! compare, the admin JSON bodies (through axum's `Json`, as the extractor
//! reads them), and the per-source-prefix budget of requests without a
//! valid token (`policy::IpRateTable`). Asserted:
//!
//! - the token matches exactly the configured string, and its `Debug` output
//!   does not show it;
//! - `bearer` returns exactly what follows `Bearer ` in the first
//!   `Authorization` value, and nothing for a value without that prefix;
//! - a body parses into `GroupBody` / `CommControl` exactly when it is a JSON
//!   object with just their fields, of their types (or, as serde's derive
//!   allows, an array of those values in field order);
//! - with room for every source, no source key gets more than
//!   burst + rate × length over any window; the table stays within its
//!   size; the source key is the /24 for IPv4 (also mapped) and the /64
//!   for IPv6.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use axum::http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use axum::http::HeaderMap;
use axum::Json;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use petrel_fuzz::WindowBound;
use petrel_reflector::policy::{source_key, IpRateTable};
use petrel_reflector::runtime::http::{bearer, AdminToken, CommControl, GroupBody};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

#[derive(Arbitrary, Debug)]
struct Input {
    token: String,
    given: String,
    authorization: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
    rate: u8,
    burst: u8,
    small_table: bool,
    requests: Vec<(u32, u8)>,
}

fuzz_target!(|input: Input| {
    token(&input.token, &input.given);
    header(&input.headers, &input.authorization, &input.token);
    bodies(&input.body);
    budget(&input);
});

fn token(token: &str, given: &str) {
    let t = AdminToken::new(token);
    assert!(t.matches(token));
    assert_eq!(t.matches(given), token == given);
    assert_eq!(format!("{t:?}"), "AdminToken(***)");
}

fn header(extra: &[(Vec<u8>, Vec<u8>)], authorization: &[u8], token: &str) {
    let mut headers = HeaderMap::new();
    for (name, value) in extra {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            headers.append(n, v);
        }
    }
    if let Ok(v) = HeaderValue::from_bytes(authorization) {
        headers.insert(AUTHORIZATION, v);
    }
    let first = headers.get(AUTHORIZATION).map(HeaderValue::as_bytes);
    match bearer(&headers) {
        Some(given) => {
            let raw = first.expect("a token comes from an Authorization header");
            assert_eq!(raw, [b"Bearer ", given.as_bytes()].concat());
            let t = AdminToken::new(token);
            assert_eq!(t.matches(given), given == token);
        }
        None => {
            let visible = |b: &[u8]| b.iter().all(|&c| c == b'\t' || (0x20..0x7f).contains(&c));
            assert!(!first.is_some_and(|raw| raw.starts_with(b"Bearer ") && visible(raw)));
        }
    }
}

/// A JSON object's members in order, duplicates kept (a `Map` keeps only
/// the last of a repeated key, where the bodies' derived parsers refuse it).
struct Members(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = a.next_entry()? {
                    out.push(kv);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn bodies(body: &[u8]) {
    let members = serde_json::from_slice::<Members>(body).ok();
    let array = serde_json::from_slice::<Vec<Value>>(body).ok();
    // The values of `names`: from an object with exactly those members (each
    // once, in any order), or from an array of as many values in field order
    // (serde's derived parsers take a struct in either form).
    let fields = |names: &[&str]| -> Option<Vec<&Value>> {
        if let Some(a) = array.as_ref().filter(|a| a.len() == names.len()) {
            return Some(a.iter().collect());
        }
        let m = members.as_ref()?;
        let found: Option<Vec<&Value>> = names
            .iter()
            .map(|n| m.0.iter().find(|(k, _)| k == n).map(|(_, v)| v))
            .collect();
        found.filter(|_| m.0.len() == names.len())
    };
    let group = Json::<GroupBody>::from_bytes(body)
        .ok()
        .map(|Json(g)| g.group_id);
    let want = fields(&["group_id"]).and_then(|v| v[0].as_i64());
    assert_eq!(group, want, "{:?}", String::from_utf8_lossy(body));
    let comm = Json::<CommControl>::from_bytes(body)
        .ok()
        .map(|Json(c)| (c.disable_send, c.disable_recv));
    let want = fields(&["disable_send", "disable_recv"])
        .and_then(|v| Some((v[0].as_bool()?, v[1].as_bool()?)));
    assert_eq!(comm, want, "{:?}", String::from_utf8_lossy(body));
}

/// 6 IPv4 hosts in three /24s, their IPv4-mapped forms, and 6 IPv6 hosts
/// in two /64s.
fn ip(i: u8) -> IpAddr {
    let v4 = Ipv4Addr::new(10, 0, i % 3, i % 6 + 1);
    match i % 18 {
        0..=5 => IpAddr::V4(v4),
        6..=11 => IpAddr::V6(v4.to_ipv6_mapped()),
        n => IpAddr::from([0x2001, 0xdb8, 0, u16::from(n % 2), 0, 0, 0, u16::from(n)]),
    }
}

fn budget(input: &Input) {
    let rate = 1 + u32::from(input.rate % 50);
    let burst = 1 + u32::from(input.burst % 50);
    // 3 IPv4 /24 keys and 2 IPv6 /64 keys: a table of 8 never evicts.
    let max = if input.small_table { 3 } else { 8 };
    let mut table = IpRateTable::new(rate, burst, max);
    let mut bound = WindowBound::new(f64::from(rate), f64::from(burst));
    let t0 = Instant::now();
    let mut elapsed = Duration::ZERO;
    for &(advance_us, who) in &input.requests {
        elapsed += Duration::from_micros(u64::from(advance_us % 10_000_000));
        let ip = ip(who);
        let key = source_key(ip);
        assert_eq!(source_key(key), key);
        match (ip.to_canonical(), key) {
            (IpAddr::V4(a), k) => {
                assert_eq!(k, IpAddr::V4(Ipv4Addr::from(u32::from(a) & 0xffff_ff00)));
            }
            (IpAddr::V6(a), IpAddr::V6(k)) => {
                assert_eq!(u128::from(k), u128::from(a) & !u128::from(u64::MAX));
            }
            (a, k) => panic!("{a} keyed as {k}"),
        }
        if table.admit(ip, t0 + elapsed) && !input.small_table {
            bound.admit(key, elapsed.as_secs_f64());
        }
        assert!(table.len() <= max && table.is_empty() == (table.len() == 0));
        if !input.small_table {
            assert_eq!(table.evictions(), 0);
        }
    }
}
