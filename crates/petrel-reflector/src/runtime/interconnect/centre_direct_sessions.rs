//! One session per device across the centre and its edges
//! (draarl-interconnect §3.8: the later activation replaces the earlier
//! one, `session_migrated`), for a device that moves between the centre's
//! own UDP port and an edge:
//!
//! ```text
//!  edge login activated (centre_device_auth) ─▶ DirectSessions::evict(key) ─▶ every shard's queue
//!       ─▶ shard loop: Reflector::end_migrated_session(key)
//!  shard: Reflector::poll_new_session (a direct login, or one at a new endpoint)
//!       ─▶ CentreRelay::direct_login ─▶ revoke_edge_session: the edge's session of that
//!          device dropped, 0x23 revoke (session_migrated) + RouteDelta remove
//! ```
//!
//! So voice is never delivered to one device twice (once by the centre's
//! fan-out, once through its edge). The eviction goes to every shard (a
//! shard without the session ignores it); a full queue is a counted drop
//! (`direct_eviction_drops`), after which the device keeps its stale
//! centre-direct session until it times out.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::centre_revoke::revoke_dropped;
use super::centre_tables::CentreTables;
use super::centre_voice_stats::CentreVoiceStats;
use crate::core::interconnect::{session_error, DeviceIdentity};
use crate::model::DeviceKey;

/// Evictions held per shard at most.
pub const EVICTION_QUEUE: usize = 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The way from the centre's edge logins to the shards' sessions.
#[derive(Debug)]
pub struct DirectSessions {
    shards: Vec<SyncSender<DeviceKey>>,
}

impl DirectSessions {
    /// Queues for `shards` shards, and the receiving end of each (in shard
    /// order).
    pub fn channels(shards: usize) -> (Self, Vec<Receiver<DeviceKey>>) {
        let (shards, receivers) = (0..shards)
            .map(|_| mpsc::sync_channel(EVICTION_QUEUE))
            .unzip();
        (Self { shards }, receivers)
    }

    /// Asks every shard to end its session of `key`, because the device
    /// logged in through an edge; counts into `stats`.
    pub fn evict(&self, key: DeviceKey, stats: &CentreVoiceStats) {
        let counters = &stats.dispatch;
        counters.direct_session_evictions.fetch_add(1, Relaxed);
        for shard in &self.shards {
            if shard.try_send(key).is_err() {
                counters.direct_eviction_drops.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A device `key` logged in directly at the centre: the session an edge
/// holds for it is dropped and revoked (`session_migrated`); whether there
/// was one.
pub(super) fn revoke_edge_session(
    tables: &CentreTables,
    stats: &CentreVoiceStats,
    key: DeviceKey,
) -> bool {
    let identity = DeviceIdentity {
        owner_id: key.0,
        ssid: key.1,
    };
    let mut routes = lock(&tables.routes);
    let mut devices = lock(&tables.devices);
    let Some(id) = devices.owners.session_of(identity).map(|s| s.session_id) else {
        return false;
    };
    let Some(session) = devices.owners.remove(id) else {
        return false;
    };
    revoke_dropped(
        tables,
        stats,
        &mut routes,
        &mut devices,
        Instant::now(),
        &session,
        session_error::SESSION_MIGRATED,
    );
    stats.dispatch.direct_login_migrations.fetch_add(1, Relaxed);
    true
}
