//! The HTTP endpoint's accept loop and connection limits: at most
//! `max_connections` open at once, `max_connections_per_ip` from one source
//! address and `max_connections_per_prefix` from one /24 (IPv4) or /64
//! (IPv6). A source over its caps gets a `503` and is closed (counted); a
//! newcomer finding every slot taken evicts the oldest connection that has
//! not yet sent its request headers (counted in `idle_evictions`) and is
//! refused only if every open connection is being served
//! (`http_connections.rs` holds the rule). Request headers complete within
//! `header_timeout_ms` (else the connection is closed, counted: a
//! slow-loris client holds a slot no longer than that, and less when
//! others need it), one request per connection (no keep-alive, so an idle
//! connection cannot hold a slot either), and every connection closed
//! after `header_timeout_ms + request_timeout_ms` whatever it is doing
//! (a client that never reads its response).
//!
//! Why our own loop instead of `axum::serve`: axum's server sets no hyper
//! timer, so it has no header read timeout and no way to cap connections;
//! `tower`'s concurrency limit counts requests in flight, not the sockets a
//! slow client keeps open before its request exists. The per-request
//! limits stay `tower-http` layers on the router (`http.rs`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, StatusCode};
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tower::ServiceExt;

use super::http_connections::{Admission, ConnectionCaps, ConnectionTable};
use super::http_stats::HttpStats;
use crate::model::HttpConfig;

/// What a refused connection reads before it is closed.
const REFUSED: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// Pause after a failed `accept` (e.g. out of descriptors) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The open connections, each with the sender that closes it when evicted.
type Connections = Arc<Mutex<ConnectionTable<oneshot::Sender<()>>>>;

/// Serves `app` on `listener` until the task is aborted.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpConfig,
    stats: Arc<HttpStats>,
) {
    let table: Connections = Arc::new(Mutex::new(ConnectionTable::new(ConnectionCaps {
        total: limits.max_connections,
        per_address: limits.max_connections_per_ip,
        per_prefix: limits.max_connections_per_prefix,
    })));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "http accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let (close, closed) = oneshot::channel();
        let admission = lock(&table).admit(peer.ip(), close);
        let id = match admission {
            Admission::Admitted { id, evicted } => {
                if let Some(evicted) = evicted {
                    stats.idle_evictions.fetch_add(1, Relaxed);
                    // The evicted task may have ended already; nothing to do then.
                    let _ = evicted.send(());
                }
                id
            }
            Admission::Full => {
                refuse(&stream, &stats.connections_refused);
                continue;
            }
            Admission::AddressFull => {
                refuse(&stream, &stats.connections_refused_per_ip);
                continue;
            }
            Admission::PrefixFull => {
                refuse(&stream, &stats.connections_refused_per_prefix);
                continue;
            }
        };
        stats.connections_accepted.fetch_add(1, Relaxed);
        let (app, stats, limits) = (app.clone(), Arc::clone(&stats), limits.clone());
        let slot = Slot {
            table: Arc::clone(&table),
            id,
        };
        tokio::spawn(async move {
            serve_connection(stream, peer, &slot, closed, app, &limits, &stats).await;
            drop(slot);
        });
    }
}

fn lock(table: &Connections) -> std::sync::MutexGuard<'_, ConnectionTable<oneshot::Sender<()>>> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Answers 503 and closes (by dropping the stream), counted in `counter`.
fn refuse(stream: &TcpStream, counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
    // Best effort: a fresh socket's send buffer takes these bytes at once.
    let _ = stream.try_write(REFUSED);
}

/// One admitted connection's entry in the table; dropping it removes the
/// entry (nothing if the connection was evicted, which removed it already).
struct Slot {
    table: Connections,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.table).remove(self.id);
    }
}

/// Serves one request on `stream`; returns when the connection ends, its
/// deadline passes, or `evicted` fires (the connection is then dropped,
/// which closes it).
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    slot: &Slot,
    evicted: oneshot::Receiver<()>,
    app: Router,
    limits: &HttpConfig,
    stats: &HttpStats,
) {
    let (table, id) = (Arc::clone(&slot.table), slot.id);
    // hyper calls the service once the request headers are complete: from
    // then on the connection is being served and no longer evictable.
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        lock(&table).headers_complete(id);
        req.extensions_mut().insert(ConnectInfo(peer));
        let app = app.clone();
        async move {
            let mut resp = app.oneshot(req).await?;
            // One request per connection: every answer but a WebSocket
            // upgrade closes it (hyper's own `keep_alive(false)` would
            // also mark the upgrade's 101 `Connection: close`).
            if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout())
        .serve_connection(TokioIo::new(stream), service)
        // A `/ws` upgrade leaves this task with the socket; the deadline
        // below then covers only its HTTP handshake.
        .with_upgrades();
    let deadline = limits.header_timeout() + limits.request_timeout();
    tokio::select! {
        served = tokio::time::timeout(deadline, http) => match served {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.is_timeout() => {
                stats.header_timeouts.fetch_add(1, Relaxed);
            }
            Ok(Err(e)) => tracing::debug!(error = %e, %peer, "http connection error"),
            Err(_) => {
                stats.connection_timeouts.fetch_add(1, Relaxed);
            }
        },
        // Evicted by a newcomer (counted by the accept loop).
        _ = evicted => {}
    }
}
