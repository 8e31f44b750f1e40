//! [`Connection`]: the application's handle on one reliable, ordered message stream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use petrel_proto::kcp::SendError;

use crate::connection_state::ConnShared;
use crate::driver::EndpointGuard;
use crate::error::ConnectionError;
use crate::stats::ConnectionStats;

/// A reliable, ordered connection: message-oriented (KCP message mode, the default),
/// or a byte stream when `KcpConfig::stream` is set, where [`send`](Self::send)
/// appends to the stream and [`recv`](Self::recv) returns the next ready piece of it.
///
/// Cheap to clone; all clones share the connection. `send` and `recv` may run
/// concurrently from different tasks. When the last clone is dropped without
/// [`close`](Self::close), the connection flushes and closes in the background for as long
/// as its [`Endpoint`](crate::Endpoint) lives.
#[derive(Debug, Clone)]
pub struct Connection {
    inner: Arc<Handle>,
}

#[derive(Debug)]
struct Handle {
    shared: Arc<ConnShared>,
    _endpoint: Arc<EndpointGuard>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.request_close(Instant::now());
    }
}

impl Connection {
    pub(crate) fn new(shared: Arc<ConnShared>, endpoint: Arc<EndpointGuard>) -> Self {
        Self {
            inner: Arc::new(Handle {
                shared,
                _endpoint: endpoint,
            }),
        }
    }

    fn shared(&self) -> &Arc<ConnShared> {
        &self.inner.shared
    }

    /// The peer's UDP address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared().peer
    }

    /// The KCP conversation id of this connection.
    pub fn conv(&self) -> u32 {
        self.shared().conv
    }

    /// The endpoint's socket shard (below `EndpointConfig::io_threads`) whose I/O
    /// driver sends this connection's datagrams and, when the shards are steered
    /// (native and legacy modes), reads its data datagrams.
    pub fn io_shard(&self) -> usize {
        self.shared().home
    }

    /// The largest message (in stream mode: the largest write) [`send`](Self::send)
    /// accepts, in bytes.
    pub fn max_message_size(&self) -> usize {
        self.shared().lock().session.max_message_size()
    }

    /// Queues one message for reliable, in-order delivery.
    ///
    /// Waits while the send queue is full (backpressure): a message is never dropped, the
    /// queue never grows past `KcpConfig::send_queue_limit` segments, and a message waits
    /// while `KcpConfig::notsent_lowat` bytes or more are queued (in stream mode, a write
    /// that fits in the last queued segment does not). Errors:
    /// [`ConnectionError::MessageTooLarge`] above [`max_message_size`](Self::max_message_size),
    /// or why the connection ended.
    pub async fn send(&self, msg: Bytes) -> Result<(), ConnectionError> {
        // Room now (the common case): no waiter is registered, which would take
        // the `Notify`'s lock twice.
        if let Some(result) = self.try_send(&msg) {
            return result;
        }
        let shared = self.shared();
        loop {
            // Registered (and counted) before the queue is checked again, so room
            // made after this check wakes us.
            let notified = shared.writable.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let _waiting = shared.writer_waits();
            match self.try_send(&msg) {
                Some(result) => return result,
                None => notified.await,
            }
        }
    }

    /// Queues `msg` if the send queue has room: `None` when it must wait.
    fn try_send(&self, msg: &Bytes) -> Option<Result<(), ConnectionError>> {
        self.shared().with_state(false, |st| {
            if let Some(end) = &st.end {
                return Some(Err(end.clone()));
            }
            if st.session.close_requested() {
                return Some(Err(ConnectionError::Closed));
            }
            let max = st.session.max_message_size();
            if msg.len() > max {
                let len = msg.len();
                return Some(Err(ConnectionError::MessageTooLarge { len, max }));
            }
            if !st.session.can_send(msg.len()) {
                return None;
            }
            match st.session.send_bytes(msg.clone()) {
                Ok(()) => Some(Ok(())),
                Err(SendError::QueueFull) => None,
                Err(e) => Some(Err(ConnectionError::from_send(e))),
            }
        })
    }

    /// Receives the next message in order (stream mode: the next piece of the stream,
    /// up to one 64 KiB receive chunk of whole segments, or one whole message when a
    /// message-mode peer sent a longer one).
    ///
    /// `Ok(None)` means the peer closed the connection gracefully and every message it sent
    /// has been received. `Err` says why the connection ended otherwise.
    pub async fn recv(&self) -> Result<Option<Bytes>, ConnectionError> {
        // A message ready now (the common case under load): no waiter is
        // registered, which would take the `Notify`'s lock twice.
        if let Some(result) = self.try_recv() {
            return result;
        }
        let shared = self.shared();
        loop {
            // Registered before the state is checked again, so a message that
            // completes after this check wakes us.
            let notified = shared.readable.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.try_recv() {
                Some(result) => return result,
                None => notified.await,
            }
        }
    }

    /// The next message, the end of the connection, or `None` when nothing is
    /// ready yet.
    fn try_recv(&self) -> Option<Result<Option<Bytes>, ConnectionError>> {
        self.shared().with_state(false, |st| {
            if let Some(msg) = st.session.recv() {
                return Some(Ok(Some(msg)));
            }
            match &st.end {
                Some(ConnectionError::Closed) => Some(Ok(None)),
                Some(err) => Some(Err(err.clone())),
                None if st.session.peer_closing() => Some(Ok(None)),
                None => None,
            }
        })
    }

    /// Closes gracefully: waits until everything sent was acknowledged, tells the peer, and
    /// waits for its acknowledgement (or the close timeout). Raw KCP mode has no close
    /// message, so there this returns once everything sent was acknowledged.
    pub async fn close(&self) -> Result<(), ConnectionError> {
        let shared = self.shared();
        shared.request_close(Instant::now());
        loop {
            let notified = shared.readable.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match shared.lock().end.clone() {
                Some(ConnectionError::Closed) => return Ok(()),
                Some(err) => return Err(err),
                None => {}
            }
            notified.await;
        }
    }

    /// A snapshot of the connection's counters.
    pub fn stats(&self) -> ConnectionStats {
        self.shared().lock().snapshot()
    }
}
