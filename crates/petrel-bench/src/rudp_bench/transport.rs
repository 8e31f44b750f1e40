//! The echo transport of one round: a Petrel RUDP echo server behind an impairment
//! relay, clients connecting through the relay, and the handles needed to read every
//! endpoint's and connection's counters once the harness is done.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use petrel::{Connection, ConnectionStats, Endpoint, EndpointConfig};
use petrel_netem::{Relay, RelayConfig, RelayStats};
use tokio::runtime::Handle;

use crate::echo::rudp::buffers_of;
use crate::echo::{
    BufferRequest, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers,
};

/// What the round's endpoints and connections counted, read at the end of the round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EndpointTotals {
    /// UDP payload bytes written by the server and every client endpoint.
    pub bytes_sent: u64,
    /// Datagrams written by the server and every client endpoint.
    pub datagrams_sent: u64,
    /// Retransmissions (timeout + fast) of every connection, both sides.
    pub retransmissions: u64,
    /// Times the endpoints' I/O drivers waited for a full socket buffer (nothing
    /// is dropped for it).
    pub send_waits: u64,
    /// FEC counters of every connection, when any runs FEC.
    pub fec: Option<FecTotals>,
}

/// FEC counters summed (or maximised) over every connection, both sides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FecTotals {
    /// Data shards rebuilt from parity, in packets.
    pub recoveries: u64,
    /// Groups retired with more shards lost than parity could repair.
    pub groups_unrecoverable: u64,
    /// Parity shards sent, in packets.
    pub parity_shards_sent: u64,
    /// Largest parity any group carried, in packets.
    pub max_parity: u8,
    /// Adaptive policy parity changes.
    pub policy_changes: u64,
    /// Largest encoder + decoder retained-bytes peak of any one connection (bytes).
    pub connection_peak_retained_bytes: u64,
    /// Peak of the retained bytes of all connections together, sampled every
    /// [`RETAINED_SAMPLE_PERIOD`] (bytes).
    pub sampled_peak_retained_bytes: u64,
}

/// How often [`ImpairedRudp::sample_retained`] reads the FEC retained bytes
/// (`specs/benchmarks.md` §B: "sampled every 100 ms, peak").
pub(crate) const RETAINED_SAMPLE_PERIOD: Duration = Duration::from_millis(100);

fn retained_now(s: &ConnectionStats) -> u64 {
    s.fec.map_or(0, |f| {
        (f.encoder.retained_bytes + f.decoder.retained_bytes) as u64
    })
}

impl EndpointTotals {
    fn add_connection(&mut self, s: &ConnectionStats) {
        self.retransmissions += s.kcp.retransmissions_timeout + s.kcp.retransmissions_fast;
        if let Some(f) = &s.fec {
            let t = self.fec.get_or_insert_with(FecTotals::default);
            t.recoveries += f.decoder.shards_recovered;
            t.groups_unrecoverable += f.decoder.groups_unrecoverable;
            t.parity_shards_sent += f.encoder.parity_shards_sent;
            t.max_parity = t.max_parity.max(f.encoder.max_parity_observed);
            t.policy_changes += f.encoder.policy_changes;
            t.connection_peak_retained_bytes = t
                .connection_peak_retained_bytes
                .max((f.encoder.peak_retained_bytes + f.decoder.peak_retained_bytes) as u64);
        }
    }

    fn add_endpoint(&mut self, e: &Endpoint) {
        let s = e.stats();
        self.bytes_sent += s.bytes_sent;
        self.datagrams_sent += s.datagrams_sent;
        self.send_waits += s.send_waits;
    }
}

#[derive(Debug, Default)]
struct Handles {
    relay: Option<Relay>,
    server: Option<Arc<Endpoint>>,
    server_conns: Vec<Connection>,
    clients: Vec<(Endpoint, Connection)>,
    sampled_peak_retained_bytes: u64,
}

/// RUDP through a relay for one round. Create one per round: it starts one relay.
#[derive(Debug)]
pub(crate) struct ImpairedRudp {
    config: EndpointConfig,
    buffers: BufferRequest,
    relay: RelayConfig,
    /// Runtimes the client endpoints are dealt to; empty: the caller's runtime.
    shards: Vec<Handle>,
    handles: Arc<Mutex<Handles>>,
}

fn lock(m: &Mutex<Handles>) -> MutexGuard<'_, Handles> {
    // A poisoned lock means a harness task panicked, which the harness reports.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ImpairedRudp {
    /// `relay.upstream` is filled in when the server starts.
    pub(crate) fn new(
        config: EndpointConfig,
        buffers: BufferRequest,
        relay: RelayConfig,
        shards: Vec<Handle>,
    ) -> Self {
        Self {
            config: EndpointConfig {
                send_buffer: buffers.send,
                recv_buffer: buffers.recv,
                ..config
            },
            buffers,
            relay,
            shards,
            handles: Arc::default(),
        }
    }

    /// Reads every counter, then stops the relay and drops every endpoint.
    ///
    /// # Errors
    /// The relay's failure, if its thread stopped with one.
    pub(crate) fn finish(self) -> Result<(EndpointTotals, Option<RelayStats>), io::Error> {
        let h = std::mem::take(&mut *lock(&self.handles));
        let mut totals = EndpointTotals::default();
        if let Some(server) = &h.server {
            totals.add_endpoint(server);
        }
        for conn in &h.server_conns {
            totals.add_connection(&conn.stats());
        }
        for (endpoint, conn) in &h.clients {
            totals.add_endpoint(endpoint);
            totals.add_connection(&conn.stats());
        }
        if let Some(fec) = &mut totals.fec {
            fec.sampled_peak_retained_bytes = h.sampled_peak_retained_bytes;
        }
        let relay = h
            .relay
            .map(Relay::stop)
            .transpose()
            .map_err(io::Error::other)?;
        Ok((totals, relay))
    }

    /// Every [`RETAINED_SAMPLE_PERIOD`] adds up the FEC retained bytes of every
    /// connection and keeps the peak; runs until dropped.
    pub(crate) fn sample_retained(&self) -> impl std::future::Future<Output = ()> + Send {
        let handles = Arc::clone(&self.handles);
        async move {
            let mut tick = tokio::time::interval(RETAINED_SAMPLE_PERIOD);
            loop {
                tick.tick().await;
                let mut h = lock(&handles);
                let now: u64 = h
                    .server_conns
                    .iter()
                    .chain(h.clients.iter().map(|(_, c)| c))
                    .map(|c| retained_now(&c.stats()))
                    .sum();
                h.sampled_peak_retained_bytes = h.sampled_peak_retained_bytes.max(now);
            }
        }
    }
}

async fn connect_via(
    config: EndpointConfig,
    relay: SocketAddr,
) -> io::Result<(Endpoint, Connection)> {
    let endpoint = Endpoint::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config).await?;
    let conn = endpoint.connect(relay).await.map_err(io::Error::other)?;
    Ok((endpoint, conn))
}

impl EchoTransport for ImpairedRudp {
    type Client = ImpairedClient;

    fn name(&self) -> &'static str {
        "rudp"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn requested_buffers(&self) -> BufferRequest {
        self.buffers
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let config = EndpointConfig {
            accept_incoming: true,
            ..self.config.clone()
        };
        let endpoint =
            Arc::new(Endpoint::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), config).await?);
        let relay = Relay::start(RelayConfig {
            upstream: endpoint.local_addr(),
            ..self.relay.clone()
        })
        .map_err(io::Error::other)?;
        let relay_addr = relay.local_addr();
        let buffers = buffers_of(&endpoint);
        {
            let mut h = lock(&self.handles);
            h.relay = Some(relay);
            h.server = Some(Arc::clone(&endpoint));
        }
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(serve(
            endpoint,
            Arc::clone(&stats),
            Arc::clone(&self.handles),
        ));
        Ok(EchoServer::new(relay_addr, task, stats, Some(buffers)))
    }

    async fn connect(&self, relay: SocketAddr, client_id: u32) -> io::Result<ImpairedClient> {
        let config = EndpointConfig {
            accept_incoming: false,
            ..self.config.clone()
        };
        let (endpoint, conn) = if self.shards.is_empty() {
            connect_via(config, relay).await?
        } else {
            // Binding inside the shard's runtime puts the endpoint's reader and
            // timer tasks there.
            let shard = &self.shards[client_id as usize % self.shards.len()];
            shard
                .spawn(connect_via(config, relay))
                .await
                .map_err(io::Error::other)??
        };
        let client = ImpairedClient {
            conn: conn.clone(),
            buffers: buffers_of(&endpoint),
        };
        lock(&self.handles).clients.push((endpoint, conn));
        Ok(client)
    }
}

async fn serve(endpoint: Arc<Endpoint>, stats: Arc<ServerStats>, handles: Arc<Mutex<Handles>>) {
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(conn) = endpoint.accept().await {
        // `max_connections` bounds how many the endpoint accepts, so this list is
        // bounded too.
        lock(&handles).server_conns.push(conn.clone());
        let stats = Arc::clone(&stats);
        tasks.spawn(crate::echo::rudp::echo_connection(conn, stats));
    }
}

/// One client's connection (its endpoint is held by the transport for its counters).
#[derive(Debug)]
pub(crate) struct ImpairedClient {
    conn: Connection,
    buffers: SocketBuffers,
}

impl EchoClient for ImpairedClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        self.conn.send(msg).await.map_err(io::Error::other)
    }

    async fn recv(&self) -> io::Result<Bytes> {
        match self.conn.recv().await {
            Ok(Some(msg)) => Ok(msg),
            Ok(None) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "server closed the connection",
            )),
            Err(e) => Err(io::Error::other(e)),
        }
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
