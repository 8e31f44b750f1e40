//! The app receivers of a stage (`--ghosts`, `--ws`, draarl-apps §2, §4):
//! their accounts, their logins through the reflector's HTTP API, and
//! their routing to the stage's groups.
//!
//! Receiver `j` of a kind listens in group `j mod groups`, as device `j`
//! does, so every speaker has app receivers when there are enough of them.
//! Accounts hold [`SESSIONS_PER_ACCOUNT`] sessions each, the reflector's
//! default per-owner limit (§2.4); ghosts and WebSocket sessions use
//! separate accounts.

use std::net::SocketAddr;

use super::app_http::AppApi;
use super::device::Device;
use super::ghost;
use super::ws_client::WsPlan;
use super::{LoadConfig, LoadError};

/// Sessions per app account (the reflector's default per-owner limit).
pub(super) const SESSIONS_PER_ACCOUNT: usize = 8;
/// Web/app password of every bench app account.
pub(super) const APP_PASSWORD: &str = "BenchApp123";

/// The kinds of app account a stage creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AppKind {
    Ghost,
    WebSocket,
}

impl AppKind {
    /// Account name of the `k`-th account of this kind.
    pub(super) fn account(self, k: usize) -> String {
        match self {
            Self::Ghost => format!("ghost{k:04}"),
            Self::WebSocket => format!("web{k:04}"),
        }
    }

    /// Accounts this kind needs for `receivers` sessions.
    pub(super) fn accounts(receivers: usize) -> usize {
        receivers.div_ceil(SESSIONS_PER_ACCOUNT)
    }
}

/// Receivers of a kind among `n` that listen in group `g` of `groups`.
pub(super) fn in_group(n: usize, g: usize, groups: usize) -> u64 {
    n.saturating_sub(g).div_ceil(groups.max(1)) as u64
}

/// The logged-in app receivers of a stage.
pub(super) struct AppReceivers {
    /// UDP ghosts, routed; their `downlink_reserved` is their group id.
    pub(super) ghosts: Vec<Device>,
    /// WebSocket receivers to connect (the WebSocket thread routes them).
    pub(super) ws: Vec<WsPlan>,
}

/// Logs in every app account of `cfg` at `http`, then every ghost over UDP
/// at `server` (from the device slots after the physical devices) and
/// routes it; the WebSocket receivers are planned, not yet connected.
pub(super) fn log_in(
    cfg: &LoadConfig,
    server: SocketAddr,
    http: SocketAddr,
    group_ids: &[i64],
) -> Result<AppReceivers, LoadError> {
    let api = AppApi::new(http);
    let group_of = |j: usize| group_ids[j % group_ids.len()];
    let tokens = |kind: AppKind, n: usize| -> Result<Vec<String>, LoadError> {
        (0..AppKind::accounts(n))
            .map(|k| api.login(&kind.account(k), APP_PASSWORD))
            .collect()
    };
    let ghost_tokens = tokens(AppKind::Ghost, cfg.ghosts)?;
    let mut ghosts = Vec::with_capacity(cfg.ghosts);
    for j in 0..cfg.ghosts {
        let token = &ghost_tokens[j / SESSIONS_PER_ACCOUNT];
        let instance = uuid::Uuid::new_v4().hyphenated().to_string();
        let g = ghost::login(cfg.devices + j, server, token, &instance)?;
        let group = group_of(j);
        api.route_to(token, &g.session_id, group)?;
        let mut d = g.device;
        d.downlink_reserved = u32::try_from(group).unwrap_or(0);
        ghosts.push(d);
    }
    let ws_tokens = tokens(AppKind::WebSocket, cfg.ws)?;
    let ws = (0..cfg.ws)
        .map(|j| WsPlan {
            username: AppKind::WebSocket.account(j / SESSIONS_PER_ACCOUNT),
            token: ws_tokens[j / SESSIONS_PER_ACCOUNT].clone(),
            group_id: group_of(j),
        })
        .collect();
    Ok(AppReceivers { ghosts, ws })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_spread_over_groups_like_devices() {
        // 10 receivers over 4 groups: 3, 3, 2, 2.
        let counts: Vec<u64> = (0..4).map(|g| in_group(10, g, 4)).collect();
        assert_eq!(counts, [3, 3, 2, 2]);
        assert_eq!(in_group(2, 3, 4), 0);
        assert_eq!(AppKind::accounts(17), 3);
        assert_eq!(AppKind::WebSocket.account(2), "web0002");
    }
}
