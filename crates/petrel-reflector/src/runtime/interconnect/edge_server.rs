//! A running edge reflector (draarl-interconnect §1, §2, §3.6, §5, §6.1,
//! §10): one UDP socket for devices and for Type 0 to and from the
//! centre, its reader thread, the local fan-out engine, the control client
//! and the edge node driving it, and an optional HTTP endpoint with
//! `/metrics`.
//!
//! ```text
//!   devices ⇄ UDP socket (Edge.Listen) ⇄ centre UDP (CenterUDP)
//!               │ reader thread (edge_reader.rs) ──▶ EdgeState (link, routes, devices) ◀── EdgeNode task
//!               │                                         │ actions                     ▲ EdgeEvents
//!               └── EdgeOutput (edge_output.rs) ◀─────────┘                           EdgeControl (TLS)
//!                     ├ FanoutEngine (whole frames, send threads)
//!                     └ DataPlane (seal upstream, DataBind proof)
//!   --http: GET /metrics, /healthz (edge_metrics.rs)
//! ```
//!
//! The edge keeps no store: users, devices and domains are the centre's;
//! sessions come from its grants (§1).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use petrel_sys::error_queue::enable_recv_errors;
use petrel_sys::socket::{bind_udp, BufferRequest, OnRefusal, UdpOptions};

use super::super::fanout::FanoutEngine;
use super::super::http_server;
use super::super::icmp::{IcmpWatch, REPORT_QUEUE};
use super::super::server_error::ServerError;
use super::edge::{EdgeControl, EdgeControlConfig};
use super::edge_metrics::{self, EdgeStats, EdgeStatsSource};
use super::edge_node::{EdgeNode, EdgeNodeConfig, EdgeState};
use super::edge_output::EdgeOutput;
use super::edge_reader::{reader_loop, EdgeReader, ReaderCounters, TIMER_TICK};
use crate::core::interconnect::LinkState;
use crate::core::Ingress;
use crate::model::{FanoutConfig, HttpConfig, SessionConfig};

/// The default device port (§2 `Edge.Listen`).
pub const DEFAULT_EDGE_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::UNSPECIFIED,
    60050,
));
/// The centre's default UDP port (§2 `CenterUDP`: the centre's host, port
/// 60050).
pub const DEFAULT_CENTRE_UDP_PORT: u16 = 60050;

/// How an edge runs.
#[derive(Debug, Clone)]
pub struct EdgeServerConfig {
    /// The device socket ([`DEFAULT_EDGE_LISTEN`]).
    pub listen: SocketAddr,
    /// The control client: the centre's control address, credential, trust.
    pub control: EdgeControlConfig,
    /// Grace, device limits and timers, `CenterUDP`, DataBind period.
    pub node: EdgeNodeConfig,
    /// The local fan-out engine (edges: 500 ms frame age, §5.3).
    pub fanout: FanoutConfig,
    /// `GET /metrics` and `/healthz` here when set.
    pub http_listen: Option<SocketAddr>,
    /// Limits of the HTTP endpoint.
    pub http: HttpConfig,
    /// Device datagrams per second per source IP (draarl-v1 §3.4: 600).
    pub per_ip_pps: u32,
    /// Device datagrams per second per source IP:port (150).
    pub per_endpoint_pps: u32,
    /// Sources tracked by the rate limits (least recently seen evicted).
    pub rate_table_max: usize,
    /// Socket buffers asked for (receive and send), bytes.
    pub socket_buffer_bytes: usize,
}

impl EdgeServerConfig {
    /// The defaults of §2 for `control`.
    pub fn new(control: EdgeControlConfig) -> Self {
        let session = SessionConfig::default();
        Self {
            listen: DEFAULT_EDGE_LISTEN,
            control,
            node: EdgeNodeConfig::default(),
            fanout: FanoutConfig::default(),
            http_listen: None,
            http: HttpConfig::default(),
            per_ip_pps: session.per_ip_pps,
            per_endpoint_pps: session.per_endpoint_pps,
            rate_table_max: session.rate_table_max,
            socket_buffer_bytes: 4 * 1024 * 1024,
        }
    }
}

/// A running edge. Stop it with [`EdgeServer::shutdown`].
#[derive(Debug)]
pub struct EdgeServer {
    local_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    node: Option<EdgeNode>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    http: Option<tokio::task::JoinHandle<()>>,
    stats: EdgeStatsSource,
}

fn bind(cfg: &EdgeServerConfig) -> Result<UdpSocket, ServerError> {
    let (sock, _) = bind_udp(&UdpOptions {
        buffers: BufferRequest::both(cfg.socket_buffer_bytes),
        on_refusal: OnRefusal::Ignore,
        dual_stack: true,
        ..UdpOptions::new(cfg.listen)
    })
    .map_err(|cause| ServerError::Bind {
        what: "UDP listen socket",
        addr: cfg.listen,
        cause,
    })?;
    sock.set_read_timeout(Some(TIMER_TICK))?;
    // ICMP errors end the session of an unreachable device, as on a single
    // node (see `edge_reader.rs`); without them (off Linux) sessions end
    // at the device timeout only.
    if !enable_recv_errors(&sock)? {
        tracing::info!("ICMP errors are not reported on this platform");
    }
    Ok(sock)
}

impl EdgeServer {
    /// Binds the device socket (and the HTTP listener), starts the control
    /// client, the edge node, the fan-out engine and the reader. Must be
    /// called inside a tokio runtime. The edge serves devices once the
    /// centre's snapshot made it ready (§3.6).
    ///
    /// # Errors
    /// [`ServerError`].
    pub async fn start(cfg: EdgeServerConfig) -> Result<Self, ServerError> {
        cfg.fanout.validate()?;
        cfg.node.devices.sessions.endpoints.validate()?;
        let sock = bind(&cfg)?;
        let http_listener = match cfg.http_listen {
            Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.map_err(|cause| {
                ServerError::Bind {
                    what: "HTTP server",
                    addr,
                    cause,
                }
            })?),
            None => None,
        };
        let local_addr = sock.local_addr()?;
        let control = Arc::new(EdgeControl::start(cfg.control.clone())?);
        let engine = Arc::new(FanoutEngine::start(&sock, &cfg.fanout, None)?);
        let output = Arc::new(EdgeOutput::new(
            sock.try_clone()?,
            Arc::clone(&engine),
            Arc::clone(&control),
        ));
        let mut node_cfg = cfg.node;
        node_cfg.devices.partitions = cfg.fanout.writers;
        let node = EdgeNode::spawn_with(Arc::clone(&control), node_cfg, Some(Arc::clone(&output)))
            .ok_or_else(|| std::io::Error::other("the control client's events were taken"))?;
        let state: Arc<Mutex<EdgeState>> = node.state();
        let stats = EdgeStatsSource {
            state: Arc::clone(&state),
            control: Arc::clone(&control),
            data: control.data_plane(),
            output: Arc::clone(&output),
            fanout: Arc::clone(engine.stats()),
            reader: Arc::new(ReaderCounters::default()),
            ingress: Arc::default(),
            icmp: Arc::default(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let rate = SessionConfig {
            per_ip_pps: cfg.per_ip_pps,
            per_endpoint_pps: cfg.per_endpoint_pps,
            rate_table_max: cfg.rate_table_max,
            ..SessionConfig::default()
        };
        let (unreachable_tx, unreachable) = std::sync::mpsc::sync_channel(REPORT_QUEUE);
        let reader = EdgeReader {
            sock,
            ingress: Ingress::new(&rate, 1),
            state,
            data: control.data_plane(),
            ids: control.message_ids(),
            output,
            centre_udp: cfg.node.centre_udp,
            stop: Arc::clone(&stop),
            counters: Arc::clone(&stats.reader),
            ingress_stats: Arc::clone(&stats.ingress),
            icmp: IcmpWatch::new(vec![unreachable_tx], Arc::clone(&stats.icmp)),
            unreachable,
        };
        drop(engine);
        let reader = std::thread::Builder::new()
            .name("edge-reader".into())
            .spawn(move || reader_loop(reader))?;
        let (http_addr, http) = match http_listener {
            Some(listener) => {
                let addr = listener.local_addr()?;
                let app = edge_metrics::router(stats.clone());
                let task = tokio::spawn(http_server::serve(
                    listener,
                    app,
                    cfg.http.clone(),
                    Arc::default(),
                ));
                (Some(addr), Some(task))
            }
            None => (None, None),
        };
        tracing::info!(%local_addr, centre = %cfg.control.centre, "edge listening");
        Ok(Self {
            local_addr,
            http_addr,
            node: Some(node),
            stop,
            reader: Some(reader),
            http,
            stats,
        })
    }

    /// The bound device socket address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound HTTP address, with `http_listen`.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Every counter now.
    pub fn stats(&self) -> EdgeStats {
        self.stats.read()
    }

    /// The link state (§6.1).
    pub fn link_state(&self) -> LinkState {
        self.node
            .as_ref()
            .map_or(LinkState::Starting, EdgeNode::link_state)
    }

    /// Waits up to `within` for a link state satisfying `pred`.
    pub async fn wait_for_state(
        &self,
        within: Duration,
        pred: impl Fn(LinkState) -> bool,
    ) -> Option<LinkState> {
        match &self.node {
            Some(n) => n.wait_for_state(within, pred).await,
            None => None,
        }
    }

    /// The edge node (control client, shared state).
    pub fn node(&self) -> Option<&EdgeNode> {
        self.node.as_ref()
    }

    /// Stops the reader, the edge node, the control client, the fan-out
    /// threads and the HTTP endpoint; the socket closes.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(http) = self.http.take() {
            http.abort();
        }
        if let Some(node) = self.node.take() {
            node.shutdown().await;
        }
        let reader = self.reader.take();
        let stats = self.stats.clone();
        drop(self);
        // The last handles of the engine and the control client go here;
        // the engine's drop joins its send threads.
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(r) = reader {
                let _ = r.join();
            }
            drop(stats);
        })
        .await;
    }
}

impl Drop for EdgeServer {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(http) = &self.http {
            http.abort();
        }
    }
}
