//! The HTTP endpoint's accept loop and connection limits: at most
//! `max_connections` open at once and `max_connections_per_ip` from one
//! source (beyond either a `503` and close, counted; the per-source counts
//! exist only for sources with a connection open, so that table is bounded
//! by `max_connections`),
//! request headers complete within `header_timeout_ms` (else the
//! connection is closed, counted: a slow-loris client holds a slot no
//! longer than that), one request per connection (no keep-alive, so an
//! idle connection cannot hold a slot either), and every connection closed
//! after `header_timeout_ms + request_timeout_ms` whatever it is doing
//! (a client that never reads its response).
//!
//! Why our own loop instead of `axum::serve`: axum's server sets no hyper
//! timer, so it has no header read timeout and no way to cap connections;
//! `tower`'s concurrency limit counts requests in flight, not the sockets a
//! slow client keeps open before its request exists. The per-request
//! limits stay `tower-http` layers on the router (`http.rs`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::http_stats::HttpStats;
use crate::model::HttpConfig;
use crate::policy::source_key;

/// What a refused connection reads before it is closed.
const REFUSED: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// Pause after a failed `accept` (e.g. out of descriptors) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` on `listener` until the task is aborted.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpConfig,
    stats: Arc<HttpStats>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let per_source = PerSource::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "http accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            refuse(&stream, &stats.connections_refused);
            continue;
        };
        let Some(source) = SourceSlot::take(&per_source, peer, limits.max_connections_per_ip)
        else {
            refuse(&stream, &stats.connections_refused_per_ip);
            continue;
        };
        stats.connections_accepted.fetch_add(1, Relaxed);
        let (app, stats, limits) = (app.clone(), Arc::clone(&stats), limits.clone());
        tokio::spawn(async move {
            serve_connection(stream, peer, app, &limits, &stats).await;
            drop(source);
            drop(slot);
        });
    }
}

/// Answers 503 and closes (by dropping the stream), counted in `counter`.
fn refuse(stream: &TcpStream, counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
    // Best effort: a fresh socket's send buffer takes these bytes at once.
    let _ = stream.try_write(REFUSED);
}

type PerSource = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One open connection counted against its source; dropping it uncounts.
struct SourceSlot {
    table: PerSource,
    key: IpAddr,
}

impl SourceSlot {
    /// Counts a connection from `peer`, or `None` if its source already
    /// has `max` open.
    fn take(table: &PerSource, peer: SocketAddr, max: usize) -> Option<Self> {
        let key = source_key(peer.ip());
        let mut open = table.lock().unwrap_or_else(PoisonError::into_inner);
        if open.get(&key).is_some_and(|n| *n >= max) {
            return None;
        }
        *open.entry(key).or_insert(0) += 1;
        Some(Self {
            table: Arc::clone(table),
            key,
        })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: &HttpConfig,
    stats: &HttpStats,
) {
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(req)
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout())
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let deadline = limits.header_timeout() + limits.request_timeout();
    match tokio::time::timeout(deadline, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.is_timeout() => {
            stats.header_timeouts.fetch_add(1, Relaxed);
        }
        Ok(Err(e)) => tracing::debug!(error = %e, %peer, "http connection error"),
        Err(_) => {
            stats.connection_timeouts.fetch_add(1, Relaxed);
        }
    }
}
