//! The client side of connection setup: drives a [`ClientHandshake`] until the server
//! accepts, then hands over to a registered connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use petrel_proto::handshake::{ClientHandshake, Established, HandshakeError};

use crate::connection_state::ConnShared;
use crate::error::ConnectError;
use crate::io::EndpointIo;

/// A `connect` in progress; the I/O drivers feed it the server's replies.
#[derive(Debug)]
pub(crate) struct PendingConnect {
    state: Mutex<PendingState>,
    notify: tokio::sync::Notify,
}

#[derive(Debug)]
struct PendingState {
    handshake: ClientHandshake,
    outcome: Option<Result<Arc<ConnShared>, ConnectError>>,
    /// The `connect` is over (returned, or its future was dropped): replies are
    /// no longer taken.
    ended: bool,
}

impl PendingConnect {
    pub(crate) fn new(handshake: ClientHandshake) -> Self {
        Self {
            state: Mutex::new(PendingState {
                handshake,
                outcome: None,
                ended: false,
            }),
            notify: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PendingState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Feeds a reply; returns true if this handshake consumed it. Once the server
    /// accepts, `create` registers the connection right here, under this handshake's
    /// lock, so data that follows the ACCEPT is never dropped for lack of a connection.
    pub(crate) fn handle_input(
        &self,
        now: Instant,
        dg: &[u8],
        create: impl FnOnce(&Established) -> Result<Arc<ConnShared>, ConnectError>,
    ) -> bool {
        let mut st = self.lock();
        if st.outcome.is_some() || st.ended {
            return false;
        }
        let before = st.handshake.ignored();
        match st.handshake.handle_input(now, dg) {
            Ok(Some(established)) => {
                st.outcome = Some(create(&established));
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

    /// The `connect` is over. When it was cancelled (its future dropped) after a
    /// reply opened the connection but before `drive` handed it out, nobody holds
    /// that connection: it is closed, as a dropped `Connection` is, rather than
    /// left registered — taking a slot and a receive-buffer reservation, and kept
    /// alive by keepalives for as long as the peer answers.
    pub(crate) fn end(&self) {
        let orphan = {
            let mut st = self.lock();
            st.ended = true;
            match st.outcome.take() {
                Some(Ok(conn)) => Some(conn),
                _ => None,
            }
        };
        if let Some(conn) = orphan {
            conn.request_close(Instant::now());
        }
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

/// Resends the opening datagram on the handshake's timer until a driver sets an
/// outcome (or the handshake times out). The datagrams leave through shard 0, where
/// outgoing connections live.
pub(crate) async fn drive(
    io: &EndpointIo,
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
                io.send_unattached(0, &out, peer);
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
