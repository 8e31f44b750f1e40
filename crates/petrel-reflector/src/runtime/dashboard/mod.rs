//! The operator dashboard: one HTML page with its CSS and script inline
//! (`page.html`, compiled in), served at [`DASHBOARD_PATH`], and the JSON
//! it polls at [`DASHBOARD_DATA_PATH`] behind the admin sign-in: the
//! admin token, or an admin account signed in through `POST
//! /api/auth/login` (see `http.rs` and `app_http/admin_account.rs`). It shows what `/metrics` and the admin API
//! show (draarl-v1 §4.5, §5.4): "last heard" (the latest talk spurts), the
//! sessions online per group, and the ingress, fan-out and drop counters
//! with a chart of the last ten minutes.
//!
//! The page loads nothing from elsewhere: its Content-Security-Policy
//! ([`page_csp`]) allows only its own inline script and style (by their
//! SHA-256) and requests to its own origin, so it works offline and an
//! injected `<script>` or `<img onerror>` would not run; the script also
//! renders every string of the data as text, never as markup. The
//! credential lives in the tab's `sessionStorage` only and travels in the
//! `Authorization` header, never in a URL.
//!
//! # `GET /api/admin/dashboard` (JSON)
//!
//! ```text
//! {
//!   "now_unix_ms": i64,             server wall clock, Unix ms
//!   "online": usize,                devices online (petrel_reflector_online_devices)
//!   "groups": [                     groups with a session online, ascending id
//!     {"group_id": i64, "name": string|null,
//!      "udp": usize, "ghost": usize, "websocket": usize,   sessions by kind
//!      "sessions": usize}                                   their sum
//!   ],
//!   "last_heard": {
//!     "capacity": 50, "evicted": u64,
//!     "entries": [HeardEntry, …]    newest first (see last_heard.rs)
//!   },
//!   "counters": CounterSample,      now (see counter_history.rs)
//!   "history": {
//!     "interval_ms": 5000, "capacity": 120, "evicted": u64,
//!     "samples": [CounterSample, …] oldest first
//!   },
//!   "nodes": [EdgeNodeView, …]      with `[interconnect] enabled` only (a
//!                                   centre): its edge nodes, online first
//!                                   (see edge_nodes.rs)
//! }
//! ```
//!
//! A `HeardEntry` is `{"callsign", "user", "ssid", "kind": "udp"|"ghost"|
//! "websocket", "group_id", "group_name", "started_unix_ms",
//! "duration_ms", "talking"}`; a `CounterSample` is `{"unix_ms",
//! "ingress_read", "ingress_rate_limit_drops", "ingress_queue_full_drops",
//! "fanout_sent", "fanout_frames_dropped", "fanout_text_frames_dropped",
//! "fanout_frames_expired"}`, each counter the cumulative total `/metrics`
//! exports under the same name. An `EdgeNodeView` is `{"node_id",
//! "online", "disabled", "session_id" (decimal string), "remote",
//! "connected_unix_ms", "last_heartbeat_unix_ms", "projection_version"}`,
//! the session fields `null` for an offline node.

mod counter_history;
mod edge_nodes;
mod last_heard;

use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use base64::Engine as _;
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use counter_history::{CounterHistory, CounterSample, HISTORY_SAMPLES, SAMPLE_EVERY};
pub use edge_nodes::{EdgeNodeView, EdgeNodes};
pub use last_heard::{HeardEntry, LastHeard, LAST_HEARD_CAPACITY};

use super::stats::{ServerStats, StatsSource};
use super::wall_clock::unix_ms;
use crate::core::{GroupSessions, TalkSpurt};
use crate::model::Directory;

/// Where the page is served.
pub const DASHBOARD_PATH: &str = "/dashboard";
/// Where the page reads its data (under the admin API's `/api/`).
pub const DASHBOARD_DATA_PATH: &str = "/api/admin/dashboard";

/// The page: one HTML document with inline CSS and script.
pub const PAGE: &str = include_str!("page.html");

/// What the dashboard keeps between requests (cheap to clone).
#[derive(Debug, Clone)]
pub struct Dashboard {
    last_heard: Arc<Mutex<LastHeard>>,
    history: Arc<Mutex<CounterHistory>>,
    /// The directory last loaded, for group names.
    directory: Arc<Mutex<Arc<Directory>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Dashboard {
    /// An empty dashboard naming groups after `dir`.
    pub fn new(dir: Directory) -> Self {
        Self {
            last_heard: Arc::default(),
            history: Arc::default(),
            directory: Arc::new(Mutex::new(Arc::new(dir))),
        }
    }

    /// Takes a reloaded directory for the group names.
    pub fn set_directory(&self, dir: Directory) {
        *lock(&self.directory) = Arc::new(dir);
    }

    /// Records talk spurts polled from a shard core whose directory is `dir`.
    pub fn record_spurts(&self, spurts: &[TalkSpurt], dir: &Directory) {
        if spurts.is_empty() {
            return;
        }
        let mut lh = lock(&self.last_heard);
        for s in spurts {
            lh.record(s, dir);
        }
    }

    /// Adds a sample of the counters to the chart's history.
    pub fn sample(&self, s: CounterSample) {
        lock(&self.history).push(s);
    }

    /// The JSON document of `GET /api/admin/dashboard` (module docs) for
    /// counters `stats`, online sessions `groups` and, on a centre, its
    /// edge `nodes`, at `now_unix_ms`.
    pub fn view(
        &self,
        stats: &ServerStats,
        groups: Vec<GroupSessions>,
        nodes: Option<Vec<EdgeNodeView>>,
        now_unix_ms: i64,
    ) -> DashboardView {
        let dir = Arc::clone(&lock(&self.directory));
        let groups = groups
            .into_iter()
            .map(|g| GroupView {
                group_id: g.group_id,
                name: dir.group(g.group_id).map(|r| r.name.clone()),
                udp: g.udp,
                ghost: g.ghost,
                websocket: g.websocket,
                sessions: g.udp + g.ghost + g.websocket,
            })
            .collect();
        let last_heard = {
            let lh = lock(&self.last_heard);
            LastHeardView {
                capacity: LAST_HEARD_CAPACITY,
                evicted: lh.evicted(),
                entries: lh.entries(now_unix_ms),
            }
        };
        let history = {
            let h = lock(&self.history);
            HistoryView {
                interval_ms: u64::try_from(SAMPLE_EVERY.as_millis()).unwrap_or(u64::MAX),
                capacity: HISTORY_SAMPLES,
                evicted: h.evicted(),
                samples: h.samples(),
            }
        };
        DashboardView {
            now_unix_ms,
            online: stats.online,
            groups,
            last_heard,
            counters: CounterSample::of(stats, now_unix_ms),
            history,
            nodes,
        }
    }
}

/// The data endpoint's JSON document (see the module docs).
#[derive(Debug, Serialize)]
pub struct DashboardView {
    /// Server wall clock, Unix milliseconds.
    pub now_unix_ms: i64,
    /// Devices online.
    pub online: usize,
    /// Groups with a session online, ascending by id.
    pub groups: Vec<GroupView>,
    /// The latest talk spurts.
    pub last_heard: LastHeardView,
    /// The chart's counters now.
    pub counters: CounterSample,
    /// The chart's counters over the last ten minutes.
    pub history: HistoryView,
    /// A centre's edge nodes, online first; absent without `[interconnect]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<EdgeNodeView>>,
}

/// One group's online sessions.
#[derive(Debug, Serialize)]
pub struct GroupView {
    /// The group.
    pub group_id: i64,
    /// Its name, if the directory has it.
    pub name: Option<String>,
    /// Devices logged in with a password over UDP.
    pub udp: usize,
    /// UDP ghost sessions.
    pub ghost: usize,
    /// WebSocket sessions.
    pub websocket: usize,
    /// All sessions: `udp + ghost + websocket`.
    pub sessions: usize,
}

/// "Last heard" and its bound.
#[derive(Debug, Serialize)]
pub struct LastHeardView {
    /// Entries kept at most.
    pub capacity: usize,
    /// Entries evicted since the start.
    pub evicted: u64,
    /// Newest first.
    pub entries: Vec<HeardEntry>,
}

/// The chart's samples and their spacing.
#[derive(Debug, Serialize)]
pub struct HistoryView {
    /// Milliseconds between two samples.
    pub interval_ms: u64,
    /// Samples kept at most.
    pub capacity: usize,
    /// Samples evicted since the start.
    pub evicted: u64,
    /// Oldest first.
    pub samples: Vec<CounterSample>,
}

/// Samples the counters of `stats` into `dashboard` every
/// [`SAMPLE_EVERY`], the first at once; runs until aborted.
pub(crate) fn spawn_sampler(
    stats: StatsSource,
    dashboard: Dashboard,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            dashboard.sample(CounterSample::of(&stats.read(), unix_ms()));
        }
    })
}

/// `'sha256-…'` of the text between the first `<{tag}>` and `</{tag}>`
/// of the page.
fn inline_hash(tag: &str) -> String {
    let open = format!("<{tag}>");
    let body = PAGE
        .split_once(&open)
        .and_then(|(_, rest)| rest.split_once(&format!("</{tag}>")))
        .map_or("", |(body, _)| body);
    let digest = Sha256::digest(body.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The page's Content-Security-Policy: nothing from elsewhere; only the
/// page's own inline script and style (by hash), requests to its own
/// origin, images from it or inline (`data:`, the login captcha of
/// `GET /api/captcha`), no frames, forms or plugins.
pub fn page_csp() -> &'static str {
    static CSP: LazyLock<String> = LazyLock::new(|| {
        format!(
            "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            inline_hash("script"),
            inline_hash("style"),
        )
    });
    &CSP
}

#[cfg(test)]
mod tests;
