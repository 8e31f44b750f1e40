//! The client side of connection setup: drives a [`ClientHandshake`] until the server
//! accepts, then hands over to a registered connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use petrel_proto::handshake::{ClientHandshake, HandshakeError};

use crate::conn::ConnShared;
use crate::endpoint::{wall_clock_ms, EndpointIo};
use crate::error::ConnectError;
use crate::stats::EndpointCounters;

/// A `connect` in progress; the reader task feeds it the server's replies.
#[derive(Debug)]
pub(crate) struct PendingConnect {
    state: Mutex<PendingState>,
    notify: tokio::sync::Notify,
}

#[derive(Debug)]
struct PendingState {
    handshake: ClientHandshake,
    outcome: Option<Result<Arc<ConnShared>, ConnectError>>,
}

impl PendingConnect {
    fn lock(&self) -> MutexGuard<'_, PendingState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Feeds a reply from `peer`; returns true if this handshake consumed it. Once the
    /// server accepts, the connection is registered right here so data that follows the
    /// ACCEPT is never dropped for lack of a connection.
    pub(crate) fn handle_input(
        &self,
        io: &Arc<EndpointIo>,
        now: Instant,
        peer: SocketAddr,
        dg: &[u8],
    ) -> bool {
        let mut st = self.lock();
        if st.outcome.is_some() {
            return false;
        }
        let before = st.handshake.ignored();
        match st.handshake.handle_input(now, dg) {
            Ok(Some(established)) => {
                st.outcome = Some(io.create_connection(now, peer, &established));
            }
            Ok(None) => {
                if st.handshake.ignored() > before {
                    return false;
                }
            }
            Err(e) => st.outcome = Some(Err(handshake_error(e))),
        }
        drop(st);
        self.notify.notify_one();
        true
    }

    pub(crate) fn fail(&self, err: ConnectError) {
        let mut st = self.lock();
        if st.outcome.is_none() {
            st.outcome = Some(Err(err));
        }
        drop(st);
        self.notify.notify_one();
    }
}

fn handshake_error(err: HandshakeError) -> ConnectError {
    match err {
        HandshakeError::Timeout(_) => ConnectError::TimedOut,
        other => ConnectError::Handshake(other.to_string()),
    }
}

/// Runs the client handshake with `peer` to completion.
pub(crate) async fn run(
    io: &Arc<EndpointIo>,
    peer: SocketAddr,
) -> Result<Arc<ConnShared>, ConnectError> {
    if io.is_gone() {
        return Err(ConnectError::EndpointGone);
    }
    let now = Instant::now();
    let handshake = ClientHandshake::new(io.mode, now, wall_clock_ms(), io.next_seed())
        .map_err(|e| ConnectError::Handshake(e.to_string()))?;
    if let Some(established) = handshake.established() {
        // Raw KCP: nothing to negotiate.
        let established = *established;
        let conn = io.create_connection(now, peer, &established)?;
        EndpointCounters::add(&io.counters.connections_connected, 1);
        return Ok(conn);
    }
    let pending = Arc::new(PendingConnect {
        state: Mutex::new(PendingState {
            handshake,
            outcome: None,
        }),
        notify: tokio::sync::Notify::new(),
    });
    io.pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(peer)
        .or_default()
        .push(pending.clone());
    let result = drive(io, peer, &pending).await;
    {
        let mut map = io.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = map.get_mut(&peer) {
            list.retain(|p| !Arc::ptr_eq(p, &pending));
            if list.is_empty() {
                map.remove(&peer);
            }
        }
    }
    if result.is_ok() {
        EndpointCounters::add(&io.counters.connections_connected, 1);
    }
    result
}

async fn drive(
    io: &Arc<EndpointIo>,
    peer: SocketAddr,
    pending: &PendingConnect,
) -> Result<Arc<ConnShared>, ConnectError> {
    let mut out = Vec::with_capacity(256);
    loop {
        let notified = pending.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let deadline = {
            let mut st = pending.lock();
            if let Some(outcome) = st.outcome.take() {
                return outcome;
            }
            let now = Instant::now();
            if let Err(e) = st.handshake.handle_timeout(now) {
                return Err(handshake_error(e));
            }
            while st.handshake.poll_transmit(now, &mut out) {
                io.send_unattached(&out, peer);
            }
            st.handshake.poll_timeout()
        };
        match deadline {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}
