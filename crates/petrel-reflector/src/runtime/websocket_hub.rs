//! The open WebSocket connections of app sessions and their write queues
//! (`specs/draarl-apps.md` §4.5).
//!
//! Each connection has one writer fed by a bounded queue of
//! [`WRITE_QUEUE`] messages. Enqueueing never blocks: a full queue drops
//! the new message (counted in `writes_dropped`), so a slow client never
//! delays the fan-out or anyone else. A frame's payload is one shared
//! [`Bytes`] (a reference to the fan-out frame's own copy), so a broadcast
//! copies nothing per connection.
//!
//! The map holds open connections only, each with a registered app
//! session. Once upgraded, a connection has left the HTTP connection caps,
//! so the hub bounds them itself: at most `[apps] max_websocket_sessions`
//! open at once; a new one beyond it evicts the idlest open connection
//! (longest since its client's last decodable frame, or since it opened),
//! which gets the close frame 1008 [`EVICTED_REASON`] (counted in
//! `sessions_evicted`). The reference has no such bound (§4.5); 1008 is
//! its one close code that the web client does not reconnect after.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::fanout::ConnectionSink;
use crate::model::ConnectionId;

/// Messages one connection may have queued (§4.5: 64).
pub const WRITE_QUEUE: usize = 64;

/// The close reason (code 1008) of a connection evicted to make room.
pub const EVICTED_REASON: &str = "websocket_sessions_full";

/// How a connection is ended by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closing {
    /// At TCP level, without a close frame (§4.5: replaced, deleted,
    /// expired).
    Silently,
    /// With the close frame 1008 [`EVICTED_REASON`]: the hub was full.
    Evicted,
}

/// When a connection's client last sent a decodable frame (or the
/// connection opened), ms since the hub was made; the connection's reader
/// updates it ([`WebSocketHub::touch`]) without taking the hub's lock.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastFrame(Arc<AtomicU64>);

/// What a connection's writer sends.
#[derive(Debug, Clone)]
pub(crate) enum Outbound {
    /// A JSON event (`auth_success`, `routing_updated`).
    Text(String),
    /// One DraARLv1 packet.
    Binary(Bytes),
    /// An empty-payload ping.
    Ping,
}

/// WebSocket counters (draarl-v1 §4.5 `websocket`).
#[derive(Debug, Default)]
pub struct WebSocketStats {
    pub(crate) upgrades: AtomicU64,
    pub(crate) upgrades_refused: AtomicU64,
    pub(crate) registrations_failed: AtomicU64,
    pub(crate) closed: AtomicU64,
    pub(crate) frames_received: AtomicU64,
    pub(crate) frames_malformed: AtomicU64,
    pub(crate) uplink_queue_full: AtomicU64,
    pub(crate) writes_queued: AtomicU64,
    pub(crate) writes_dropped: AtomicU64,
    pub(crate) fanout_sent: AtomicU64,
    pub(crate) sessions_evicted: AtomicU64,
}

impl WebSocketStats {
    /// Every counter with its name, for metrics export.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("upgrades", self.upgrades.load(Relaxed)),
            ("upgrades_refused", self.upgrades_refused.load(Relaxed)),
            (
                "registrations_failed",
                self.registrations_failed.load(Relaxed),
            ),
            ("closed", self.closed.load(Relaxed)),
            ("frames_received", self.frames_received.load(Relaxed)),
            ("frames_malformed", self.frames_malformed.load(Relaxed)),
            ("uplink_queue_full", self.uplink_queue_full.load(Relaxed)),
            ("writes_queued", self.writes_queued.load(Relaxed)),
            ("writes_dropped", self.writes_dropped.load(Relaxed)),
            ("fanout_sent", self.fanout_sent.load(Relaxed)),
            ("sessions_evicted", self.sessions_evicted.load(Relaxed)),
        ]
    }
}

struct Open {
    queue: mpsc::Sender<Outbound>,
    close: oneshot::Sender<Closing>,
    last_frame: LastFrame,
}

/// See the module docs.
pub struct WebSocketHub {
    conns: Mutex<HashMap<ConnectionId, Open>>,
    next_id: AtomicU64,
    /// Most connections open at once (≥ 1).
    max_open: usize,
    /// Origin of the [`LastFrame`] times.
    started: Instant,
    pub(crate) stats: WebSocketStats,
}

impl std::fmt::Debug for WebSocketHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocketHub")
            .field("open", &self.open())
            .field("max_open", &self.max_open)
            .finish_non_exhaustive()
    }
}

impl WebSocketHub {
    /// An empty hub for at most `max_open` connections at once (0 is
    /// taken as 1).
    pub fn new(max_open: usize) -> Self {
        Self {
            conns: Mutex::default(),
            next_id: AtomicU64::new(0),
            max_open: max_open.max(1),
            started: Instant::now(),
            stats: WebSocketStats::default(),
        }
    }

    /// A fresh connection id (from 1).
    pub(crate) fn next_id(&self) -> ConnectionId {
        self.next_id.fetch_add(1, Relaxed) + 1
    }

    /// Connections open.
    pub fn open(&self) -> usize {
        self.lock().len()
    }

    /// The counters.
    pub fn stats(&self) -> &WebSocketStats {
        &self.stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectionId, Open>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ms_since_start(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.started).as_millis()).unwrap_or(u64::MAX)
    }

    /// Records a decodable frame from the client of `last` at `now`.
    pub(crate) fn touch(&self, last: &LastFrame, now: Instant) {
        last.0.store(self.ms_since_start(now), Relaxed);
    }

    /// Makes `conn` reachable: its write queue, how to close it, and its
    /// [`LastFrame`] (set to `now`). When `max_open` are open already, the
    /// idlest one is evicted first ([`Closing::Evicted`], counted); its
    /// id is returned (ties: the oldest id).
    pub(crate) fn insert(
        &self,
        conn: ConnectionId,
        queue: mpsc::Sender<Outbound>,
        close: oneshot::Sender<Closing>,
        last_frame: LastFrame,
        now: Instant,
    ) -> Option<ConnectionId> {
        self.touch(&last_frame, now);
        let mut conns = self.lock();
        let mut evicted = None;
        while conns.len() >= self.max_open {
            let Some(idlest) = conns
                .iter()
                .min_by_key(|(id, o)| (o.last_frame.0.load(Relaxed), **id))
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some(open) = conns.remove(&idlest) {
                self.stats.sessions_evicted.fetch_add(1, Relaxed);
                let _ = open.close.send(Closing::Evicted);
                evicted = Some(idlest);
            }
        }
        conns.insert(
            conn,
            Open {
                queue,
                close,
                last_frame,
            },
        );
        evicted
    }

    /// Forgets `conn` (its connection ended).
    pub(crate) fn remove(&self, conn: ConnectionId) {
        self.lock().remove(&conn);
    }

    /// Closes `conn` at TCP level, without a close frame (§4.5: replaced,
    /// deleted, expired).
    pub(crate) fn close(&self, conn: ConnectionId) {
        if let Some(open) = self.lock().remove(&conn) {
            self.stats.closed.fetch_add(1, Relaxed);
            let _ = open.close.send(Closing::Silently);
        }
    }

    /// Queues `msg` for `conn` without waiting; false if the connection is
    /// unknown or its queue is full (the message is dropped, counted).
    pub(crate) fn send(&self, conn: ConnectionId, msg: Outbound) -> bool {
        let conns = self.lock();
        let Some(open) = conns.get(&conn) else {
            return false;
        };
        enqueue(&self.stats, &open.queue, msg)
    }
}

/// Queues `msg` on `queue` without waiting, counting the outcome.
pub(crate) fn enqueue(
    stats: &WebSocketStats,
    queue: &mpsc::Sender<Outbound>,
    msg: Outbound,
) -> bool {
    match queue.try_send(msg) {
        Ok(()) => {
            stats.writes_queued.fetch_add(1, Relaxed);
            true
        }
        Err(_) => {
            stats.writes_dropped.fetch_add(1, Relaxed);
            false
        }
    }
}

impl ConnectionSink for WebSocketHub {
    fn send_frame(
        &self,
        targets: &[ConnectionId],
        exclude: Option<ConnectionId>,
        packet: &Arc<[u8]>,
    ) {
        let payload = Bytes::from_owner(Arc::clone(packet));
        let conns = self.lock();
        for conn in targets.iter().filter(|c| Some(**c) != exclude) {
            if let Some(open) = conns.get(conn) {
                if enqueue(&self.stats, &open.queue, Outbound::Binary(payload.clone())) {
                    self.stats.fanout_sent.fetch_add(1, Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §6 vector 44, scaled: slow clients get exactly the first 64 frames
    /// and drop the rest, counted; the payload is shared, never copied.
    #[test]
    fn full_queues_drop_new_messages_and_share_one_payload() {
        let hub = WebSocketHub::new(64);
        let mut readers = Vec::new();
        for conn in 1..=20 {
            let (tx, rx) = mpsc::channel(WRITE_QUEUE);
            let (close, _closed) = oneshot::channel();
            hub.insert(conn, tx, close, LastFrame::default(), Instant::now());
            readers.push(rx);
        }
        let targets: Vec<ConnectionId> = (1..=20).collect();
        let packet: Arc<[u8]> = Arc::from(vec![7u8; 120]);
        for _ in 0..96 {
            hub.send_frame(&targets, Some(3), &packet);
        }
        assert_eq!(hub.stats.writes_queued.load(Relaxed), 19 * 64);
        assert_eq!(hub.stats.writes_dropped.load(Relaxed), 19 * 32);
        let mut first = readers.remove(0);
        let mut got = 0;
        while let Ok(Outbound::Binary(b)) = first.try_recv() {
            assert_eq!(b.as_ptr(), packet.as_ptr());
            got += 1;
        }
        assert_eq!(got, 64);
        assert!(readers[1].try_recv().is_err(), "the excluded sender");
        // Closing forgets the connection.
        hub.close(2);
        assert!(!hub.send(2, Outbound::Ping));
        assert_eq!(hub.open(), 19);
    }

    /// A full hub evicts the connection whose client was silent longest
    /// (a frame refreshes it; ties go to the oldest), with the 1008 close,
    /// counted; replacement closes stay silent.
    #[test]
    fn a_full_hub_evicts_the_idlest_connection() {
        let hub = WebSocketHub::new(3);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut closes = Vec::new();
        let mut lasts = Vec::new();
        for conn in 1..=3 {
            let (tx, _rx) = mpsc::channel(WRITE_QUEUE);
            let (close, closed) = oneshot::channel();
            let last = LastFrame::default();
            assert_eq!(
                hub.insert(conn, tx, close, last.clone(), at(conn * 10)),
                None
            );
            closes.push(closed);
            lasts.push(last);
        }
        // Connection 1 talks later than 2 and 3: 2 is now the idlest.
        hub.touch(&lasts[0], at(100));
        let (tx, _rx) = mpsc::channel(WRITE_QUEUE);
        let (close, _closed) = oneshot::channel();
        assert_eq!(
            hub.insert(4, tx, close, LastFrame::default(), at(200)),
            Some(2)
        );
        assert_eq!(closes[1].try_recv(), Ok(Closing::Evicted));
        assert!(closes[0].try_recv().is_err() && closes[2].try_recv().is_err());
        assert_eq!(hub.open(), 3);
        assert_eq!(hub.stats.sessions_evicted.load(Relaxed), 1);
        assert!(!hub.send(2, Outbound::Ping));
        // A silent close is not an eviction.
        hub.close(3);
        assert_eq!(closes[2].try_recv(), Ok(Closing::Silently));
        assert_eq!(hub.stats.sessions_evicted.load(Relaxed), 1);
    }
}
