//! The HTTP endpoint's accept loop and connection limits: at most
//! `max_connections` open at once (beyond it a `503` and close, counted),
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

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
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
            stats.connections_refused.fetch_add(1, Relaxed);
            // Best effort: a fresh socket's send buffer takes these bytes
            // at once; dropping the stream closes it either way.
            let _ = stream.try_write(REFUSED);
            continue;
        };
        stats.connections_accepted.fetch_add(1, Relaxed);
        let (app, stats, limits) = (app.clone(), Arc::clone(&stats), limits.clone());
        tokio::spawn(async move {
            serve_connection(stream, peer, app, &limits, &stats).await;
            drop(slot);
        });
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
