//! Type 1 app ("ghost") login DATA (`specs/draarl-apps.md` §2.1, §2.3):
//! the strict JSON request, the instance id and capability rules shared
//! with the WebSocket handshake (§4.2), and the success JSON.
//!
//! The request is exactly one JSON object with the keys `version`,
//! `token`, `client_instance_id` and (optionally) `capabilities`, nothing
//! before it but whitespace and nothing after it but whitespace. Unlike the
//! reference, keys are case-sensitive and a repeated key is refused (§2.1
//! "quirks not worth copying").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Capabilities every app session must announce (§2.1).
pub const REQUIRED_CAPABILITIES: [&str; 2] = ["multi_receive_v1", "source_group_v1"];

/// Why a Type 1 request (or a `/ws` handshake) was refused before the
/// account was looked at: §2.2 steps 1–3, all with status code 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppLoginError {
    /// Step 1: not the strict JSON of §2.1 (or an empty instance id).
    UpgradeRequired,
    /// Step 2: the instance id is not a valid non-nil UUID.
    InvalidInstanceId,
    /// Step 3: `multi_receive_v1` or `source_group_v1` is missing.
    CapabilitiesRequired,
}

impl AppLoginError {
    /// The stable text after the status byte (§2.2) and the `/ws` 401 body
    /// (§4.2 rows 2–4).
    pub fn text(self) -> &'static str {
        match self {
            Self::UpgradeRequired => "ghost_protocol_upgrade_required",
            Self::InvalidInstanceId => "invalid_client_instance_id",
            Self::CapabilitiesRequired => "ghost_capabilities_required",
        }
    }
}

/// A request that passed §2.2 steps 1–3.
#[derive(Clone, PartialEq, Eq)]
pub struct AppLoginRequest {
    /// The access token as sent (non-empty after trimming).
    pub token: String,
    /// Lower-case hyphenated UUID.
    pub client_instance_id: String,
    /// Trimmed, lower-cased, deduplicated and sorted; contains both
    /// [`REQUIRED_CAPABILITIES`].
    pub capabilities: Vec<String>,
}

impl std::fmt::Debug for AppLoginRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppLoginRequest")
            .field("token", &"<hidden>")
            .field("client_instance_id", &self.client_instance_id)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

/// The request object: the four keys only, each at most once.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    version: Value,
    token: Value,
    client_instance_id: Value,
    #[serde(default)]
    capabilities: Option<Value>,
}

/// JSON whitespace (RFC 8259): what "outer whitespace" trims.
fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Parses Type 1 DATA (§2.1) and applies §2.2 steps 1–3 in order.
pub fn parse_login_request(data: &[u8]) -> Result<AppLoginRequest, AppLoginError> {
    use AppLoginError::UpgradeRequired;
    let start = data.iter().position(|&b| !is_json_space(b));
    let end = data.iter().rposition(|&b| !is_json_space(b));
    let trimmed = match (start, end) {
        (Some(s), Some(e)) => &data[s..=e],
        _ => return Err(UpgradeRequired),
    };
    if trimmed.first() != Some(&b'{') {
        return Err(UpgradeRequired);
    }
    let mut de = serde_json::Deserializer::from_slice(trimmed);
    let raw = RawRequest::deserialize(&mut de).map_err(|_| UpgradeRequired)?;
    de.end().map_err(|_| UpgradeRequired)?;
    if raw.version.as_u64() != Some(1) {
        return Err(UpgradeRequired);
    }
    let token = non_blank_string(raw.token).ok_or(UpgradeRequired)?;
    let instance = non_blank_string(raw.client_instance_id).ok_or(UpgradeRequired)?;
    let capabilities = match raw.capabilities {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(
            items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(UpgradeRequired),
                })
                .collect::<Result<Vec<String>, _>>()?,
        ),
        Some(_) => return Err(UpgradeRequired),
    };
    let client_instance_id = normalize_instance_id(&instance)?;
    let capabilities = require_capabilities(capabilities.unwrap_or_default())?;
    Ok(AppLoginRequest {
        token,
        client_instance_id,
        capabilities,
    })
}

fn non_blank_string(v: Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s),
        _ => None,
    }
}

/// §2.1 "Instance id": after trimming, a non-nil UUID (hyphenated, 32 hex
/// digits, `{…}` or `urn:uuid:`), returned lower-case hyphenated. An empty
/// id is [`AppLoginError::UpgradeRequired`], anything else that does not
/// parse [`AppLoginError::InvalidInstanceId`].
pub fn normalize_instance_id(id: &str) -> Result<String, AppLoginError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(AppLoginError::UpgradeRequired);
    }
    match Uuid::try_parse(id) {
        Ok(u) if !u.is_nil() => Ok(u.hyphenated().to_string()),
        _ => Err(AppLoginError::InvalidInstanceId),
    }
}

/// §2.1 "Capabilities": entries trimmed, lower-cased, deduplicated and
/// sorted (empty entries dropped); both [`REQUIRED_CAPABILITIES`] must be
/// among them, extra ones are kept.
pub fn require_capabilities<S: AsRef<str>>(
    caps: impl IntoIterator<Item = S>,
) -> Result<Vec<String>, AppLoginError> {
    let mut caps: Vec<String> = caps
        .into_iter()
        .map(|c| c.as_ref().trim().to_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    caps.sort_unstable();
    caps.dedup();
    if REQUIRED_CAPABILITIES
        .iter()
        .all(|r| caps.iter().any(|c| c == r))
    {
        Ok(caps)
    } else {
        Err(AppLoginError::CapabilitiesRequired)
    }
}

/// The JSON after the `00` status byte of a Type 1 success (§2.3), keys in
/// the order the spec lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppLoginSuccess {
    /// Always 1.
    pub version: u32,
    /// Lower-case UUID v4.
    pub session_id: String,
    /// Non-zero; equals the header Reserved.
    pub session_tag: u32,
    /// The normalised instance id, echoed.
    pub client_instance_id: String,
    /// The group the session talks to.
    pub tx_group_id: i64,
    /// Ascending, without duplicates, containing `tx_group_id`.
    pub rx_group_ids: Vec<i64>,
}

impl AppLoginSuccess {
    /// DATA of the success reply: `00` followed by the JSON.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8];
        // Serialising a struct of strings and integers cannot fail.
        out.extend_from_slice(&serde_json::to_vec(self).unwrap_or_default());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IID: &str = "11111111-1111-4111-8111-111111111111";

    fn req(json: &str) -> Result<AppLoginRequest, AppLoginError> {
        parse_login_request(json.as_bytes())
    }

    #[test]
    fn the_android_request_parses_and_normalises() {
        let r = req(&format!(
            r#" {{"capabilities":[" Source_Group_V1","multi_receive_v1","x","multi_receive_v1"],"client_instance_id":" {} ","token":"new.jwt.token","version":1}}
"#,
            IID.to_uppercase()
        ))
        .unwrap();
        assert_eq!(r.token, "new.jwt.token");
        assert_eq!(r.client_instance_id, IID);
        assert_eq!(
            r.capabilities,
            vec!["multi_receive_v1", "source_group_v1", "x"]
        );
        assert!(!format!("{r:?}").contains("jwt"));
    }

    #[test]
    fn upstream_vectors() {
        // §6 vectors 1–4, 22, 23.
        use AppLoginError::*;
        assert_eq!(req("legacy.jwt.token"), Err(UpgradeRequired));
        let ok = format!(
            r#"{{"version":1,"token":"new.jwt.token","client_instance_id":"{IID}","capabilities":["multi_receive_v1","source_group_v1"]}}"#
        );
        assert_eq!(req(&ok).unwrap().capabilities.len(), 2);
        assert_eq!(
            req(r#"{"version":1,"token":"new.jwt.token","client_instance_id":""}"#),
            Err(UpgradeRequired)
        );
        assert_eq!(
            req(&format!(
                r#"{{"version":1,"token":"token","client_instance_id":"{IID}"}}{{}}"#
            )),
            Err(UpgradeRequired)
        );
        assert_eq!(normalize_instance_id(""), Err(UpgradeRequired));
        assert_eq!(normalize_instance_id("hardware-id"), Err(InvalidInstanceId));
        assert_eq!(
            req(&format!(
                r#"{{"version":1,"token":"t","client_instance_id":"{IID}","capabilities":["source_group_v1"]}}"#
            )),
            Err(CapabilitiesRequired)
        );
    }

    #[test]
    fn strictness() {
        use AppLoginError::*;
        let with = |version: &str, extra: &str| {
            req(&format!(
                r#"{{"version":{version},"token":"t","client_instance_id":"{IID}","capabilities":["multi_receive_v1","source_group_v1"]{extra}}}"#
            ))
        };
        assert!(with("1", "").is_ok());
        for v in [r#""1""#, "1.5", "2", "1.0", "-1", "null"] {
            assert_eq!(with(v, ""), Err(UpgradeRequired), "{v}");
        }
        assert_eq!(with("1", r#","extra":1"#), Err(UpgradeRequired));
        assert_eq!(with("1", r#","token":"u""#), Err(UpgradeRequired));
        let good = with("1", "").map(|_| ());
        let padded = {
            let mut d = format!(
                r#"{{"version":1,"token":"t","client_instance_id":"{IID}","capabilities":["multi_receive_v1","source_group_v1"]}}"#
            )
            .into_bytes();
            d.extend_from_slice(&[0, 0, 0]);
            d
        };
        assert_eq!(good, Ok(()));
        assert_eq!(parse_login_request(&padded), Err(UpgradeRequired));
        assert_eq!(parse_login_request(b""), Err(UpgradeRequired));
        assert_eq!(parse_login_request(b"  \n "), Err(UpgradeRequired));
        assert_eq!(parse_login_request(b"[1]"), Err(UpgradeRequired));
        // Non-string token, blank token, non-array or mixed capabilities.
        for bad in [
            format!(r#"{{"version":1,"token":5,"client_instance_id":"{IID}"}}"#),
            format!(r#"{{"version":1,"token":"  ","client_instance_id":"{IID}"}}"#),
            format!(
                r#"{{"version":1,"token":"t","client_instance_id":"{IID}","capabilities":"multi_receive_v1"}}"#
            ),
            format!(
                r#"{{"version":1,"token":"t","client_instance_id":"{IID}","capabilities":["multi_receive_v1",1]}}"#
            ),
            r#"{"version":1,"token":"t"}"#.to_owned(),
        ] {
            assert_eq!(req(&bad), Err(UpgradeRequired), "{bad}");
        }
        // Absent or null capabilities fail step 3, not step 1.
        for caps in ["", r#","capabilities":null"#] {
            assert_eq!(
                req(&format!(
                    r#"{{"version":1,"token":"t","client_instance_id":"{IID}"{caps}}}"#
                )),
                Err(CapabilitiesRequired)
            );
        }
        // The instance id is checked before the capabilities.
        assert_eq!(
            req(
                r#"{"version":1,"token":"t","client_instance_id":"00000000-0000-0000-0000-000000000000"}"#
            ),
            Err(InvalidInstanceId)
        );
    }

    #[test]
    fn instance_id_forms() {
        for form in [
            IID.to_owned(),
            IID.replace('-', ""),
            format!("{{{IID}}}"),
            format!("urn:uuid:{IID}"),
            format!("  {}  ", IID.to_uppercase()),
        ] {
            assert_eq!(normalize_instance_id(&form).as_deref(), Ok(IID), "{form}");
        }
    }

    #[test]
    fn success_encodes_with_status_byte_and_round_trips() {
        let s = AppLoginSuccess {
            version: 1,
            session_id: "session-1".into(),
            session_tag: 42,
            client_instance_id: IID.into(),
            tx_group_id: 999,
            rx_group_ids: vec![999, 1001],
        };
        let data = s.encode();
        assert_eq!(data[0], 0);
        let back: AppLoginSuccess = serde_json::from_slice(&data[1..]).unwrap();
        assert_eq!(back, s);
        assert!(std::str::from_utf8(&data[1..])
            .unwrap()
            .starts_with(r#"{"version":1,"session_id":"session-1","session_tag":42,"#));
    }

    mod model {
        //! The parser against an independent model of §2.1 over generated
        //! requests, and against arbitrary bytes.

        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum V {
            Int(i64),
            Float,
            Str(&'static str),
            Null,
            Strings(Vec<&'static str>),
            Mixed,
        }

        const KEYS: [&str; 6] = [
            "version",
            "token",
            "client_instance_id",
            "capabilities",
            "extra",
            "Version",
        ];
        const STRINGS: [&str; 12] = [
            "tok",
            "",
            "  ",
            "1",
            "hardware-id",
            "11111111-1111-4111-8111-111111111111",
            "{22222222-2222-4222-8222-222222222222}",
            "urn:uuid:33333333-3333-4333-8333-333333333333",
            "00000000-0000-0000-0000-000000000000",
            "multi_receive_v1",
            " Source_Group_V1 ",
            "x",
        ];
        const VALID_IDS: [&str; 3] = [
            "11111111-1111-4111-8111-111111111111",
            "{22222222-2222-4222-8222-222222222222}",
            "urn:uuid:33333333-3333-4333-8333-333333333333",
        ];

        fn value() -> impl Strategy<Value = V> {
            prop_oneof![
                (0i64..3).prop_map(V::Int),
                Just(V::Float),
                prop::sample::select(&STRINGS[..]).prop_map(V::Str),
                Just(V::Null),
                prop::collection::vec(prop::sample::select(&STRINGS[..]), 0..4)
                    .prop_map(V::Strings),
                Just(V::Mixed),
            ]
        }

        fn json(v: &V) -> String {
            match v {
                V::Int(i) => i.to_string(),
                V::Float => "1.0".into(),
                V::Str(s) => serde_json::to_string(s).unwrap(),
                V::Null => "null".into(),
                V::Strings(items) => serde_json::to_string(items).unwrap(),
                V::Mixed => r#"["multi_receive_v1",1]"#.into(),
            }
        }

        /// What §2.1–§2.2 steps 1–3 say about the request.
        fn expected(
            fields: &[(usize, V)],
            suffix: &str,
        ) -> Result<(String, Vec<String>), AppLoginError> {
            use AppLoginError::*;
            let mut seen = std::collections::HashSet::new();
            if !suffix.trim_matches([' ', '\n']).is_empty()
                || fields.iter().any(|(k, _)| *k >= 4 || !seen.insert(*k))
            {
                return Err(UpgradeRequired);
            }
            let get = |k: usize| fields.iter().find(|(i, _)| *i == k).map(|(_, v)| v);
            let non_blank = |v: Option<&V>| match v {
                Some(V::Str(s)) if !s.trim().is_empty() => Some(*s),
                _ => None,
            };
            if !matches!(get(0), Some(V::Int(1))) {
                return Err(UpgradeRequired);
            }
            non_blank(get(1)).ok_or(UpgradeRequired)?;
            let id = non_blank(get(2)).ok_or(UpgradeRequired)?;
            let caps = match get(3) {
                None | Some(V::Null) => vec![],
                Some(V::Strings(items)) => items.clone(),
                Some(_) => return Err(UpgradeRequired),
            };
            if !VALID_IDS.contains(&id) {
                return Err(InvalidInstanceId);
            }
            let mut caps: Vec<String> = caps
                .iter()
                .map(|c| c.trim().to_lowercase())
                .filter(|c| !c.is_empty())
                .collect();
            caps.sort();
            caps.dedup();
            if !caps.contains(&"multi_receive_v1".to_owned())
                || !caps.contains(&"source_group_v1".to_owned())
            {
                return Err(CapabilitiesRequired);
            }
            let id = id.trim_start_matches("urn:uuid:").trim_matches(['{', '}']);
            Ok((id.to_owned(), caps))
        }

        proptest! {
            #[test]
            fn accepts_exactly_what_the_spec_accepts(
                fields in prop::collection::vec((0usize..KEYS.len(), value()), 0..6),
                prefix in prop::sample::select(vec!["", " ", "\n\t"]),
                suffix in prop::sample::select(vec!["", " \n", "\0", "{}", "x", " \0\0"]),
            ) {
                let body: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("\"{}\":{}", KEYS[*k], json(v)))
                    .collect();
                let text = format!("{prefix}{{{}}}{suffix}", body.join(","));
                let got = parse_login_request(text.as_bytes())
                    .map(|r| (r.client_instance_id, r.capabilities));
                prop_assert_eq!(got, expected(&fields, suffix), "{}", text);
            }

            /// Mostly valid requests (the four keys in any order), with
            /// at most one field changed or added.
            #[test]
            fn near_valid_requests_match_the_model(
                order in Just(vec![0usize, 1, 2, 3]).prop_shuffle(),
                id in prop::sample::select(&VALID_IDS[..]),
                extra_caps in prop::collection::vec(prop::sample::select(&STRINGS[..]), 0..3),
                change in prop::option::of((0usize..KEYS.len(), value())),
                suffix in prop::sample::select(vec!["", " \n", "\0", "{}"]),
            ) {
                let mut caps = vec!["multi_receive_v1", " Source_Group_V1 "];
                caps.extend(extra_caps);
                let mut fields: Vec<(usize, V)> = order
                    .iter()
                    .map(|k| (*k, match k {
                        0 => V::Int(1),
                        1 => V::Str("tok"),
                        2 => V::Str(id),
                        _ => V::Strings(caps.clone()),
                    }))
                    .collect();
                if let Some((k, v)) = change {
                    match fields.iter_mut().find(|(i, _)| *i == k) {
                        Some(f) if k < 4 => f.1 = v,
                        _ => fields.push((k, v)),
                    }
                }
                let body: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("\"{}\":{}", KEYS[*k], json(v)))
                    .collect();
                let text = format!("{{{}}}{suffix}", body.join(","));
                let got = parse_login_request(text.as_bytes())
                    .map(|r| (r.client_instance_id, r.capabilities));
                let want = expected(&fields, suffix);
                prop_assert_eq!(got, want, "{}", text);
            }

            #[test]
            fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..800)) {
                let _ = parse_login_request(&data);
            }
        }
    }
}
