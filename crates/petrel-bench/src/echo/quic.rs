//! QUIC echo transport through `quinn` (RFC 9000) with `rustls` and the
//! `ring` crypto provider: one endpoint (one UDP socket) and connection per
//! client, and **one bidirectional stream per client** carrying every
//! message, each framed with a u32 big-endian length prefix as in
//! [`tcp`](super::tcp). One long stream rather than a stream per message
//! matches how the other reliable transports here are driven (one ordered
//! channel per client); a stream per message would add stream set-up and
//! flow-control credit to every round trip.
//!
//! The server presents a self-signed certificate for `localhost` made with
//! `rcgen` when the transport is created; clients trust exactly that
//! certificate, so the full TLS 1.3 handshake and packet protection run as
//! in production. Socket buffers are requested as for raw UDP. Transport
//! parameters are quinn's defaults. Reliable: leftovers count as
//! `unfinished`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use quinn::{Connection, Endpoint, EndpointConfig, RecvStream, SendStream, TokioRuntime, VarInt};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::BufReader;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use super::tcp::{encode_frame, read_frame};
use super::udp::bind_loopback;
use super::{
    peers, BufferRequest, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers,
};
use crate::echo::config::MAX_PAYLOAD;

/// The server name in the certificate and the one clients ask for.
const SERVER_NAME: &str = "localhost";

/// `quinn` over 127.0.0.1 with a fresh self-signed certificate.
#[derive(Debug, Clone)]
pub struct QuicTransport {
    buffers: BufferRequest,
    cert: CertificateDer<'static>,
    key_pkcs8: Vec<u8>,
}

/// The self-signed certificate could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("cannot generate the QUIC server certificate: {0}")]
pub struct CertificateError(#[from] rcgen::Error);

impl QuicTransport {
    /// QUIC with the given socket buffer requests, applied to server and
    /// client sockets; generates the server certificate.
    ///
    /// # Errors
    /// [`CertificateError`] if `rcgen` cannot make the key or certificate.
    pub fn new(buffers: BufferRequest) -> Result<Self, CertificateError> {
        let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()])?;
        Ok(Self {
            buffers,
            cert: certified.cert.der().clone(),
            key_pkcs8: certified.signing_key.serialize_der(),
        })
    }

    fn endpoint(
        &self,
        server: Option<quinn::ServerConfig>,
    ) -> io::Result<(Endpoint, SocketBuffers)> {
        let (socket, actual) = bind_loopback(self.buffers)?;
        let endpoint = Endpoint::new(
            EndpointConfig::default(),
            server,
            socket,
            Arc::new(TokioRuntime),
        )?;
        Ok((endpoint, actual))
    }
}

impl EchoTransport for QuicTransport {
    type Client = QuicClient;

    fn name(&self) -> &'static str {
        "quic"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn peer(&self) -> Option<&'static str> {
        Some(peers::QUIC)
    }

    fn requested_buffers(&self) -> BufferRequest {
        self.buffers
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let key = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(self.key_pkcs8.clone()));
        let config = quinn::ServerConfig::with_single_cert(vec![self.cert.clone()], key)
            .map_err(io::Error::other)?;
        let (endpoint, actual) = self.endpoint(Some(config))?;
        let addr = endpoint.local_addr()?;
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(accept_loop(endpoint, Arc::clone(&stats)));
        Ok(EchoServer::new(addr, task, stats, Some(actual)))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<QuicClient> {
        let (mut endpoint, buffers) = self.endpoint(None)?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.clone()).map_err(io::Error::other)?;
        let config = quinn::ClientConfig::with_root_certificates(Arc::new(roots))
            .map_err(io::Error::other)?;
        endpoint.set_default_client_config(config);
        let conn = endpoint
            .connect(server, SERVER_NAME)
            .map_err(io::Error::other)?
            .await
            .map_err(io::Error::from)?;
        let (send, recv) = conn.open_bi().await.map_err(io::Error::from)?;
        Ok(QuicClient {
            send: Mutex::new(send),
            recv: Mutex::new(BufReader::new(recv)),
            buffers,
            _conn: conn,
            _endpoint: endpoint,
        })
    }
}

async fn accept_loop(endpoint: Endpoint, stats: Arc<ServerStats>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    connections.spawn(serve_connection(incoming, Arc::clone(&stats)));
                }
                None => return,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(incoming: quinn::Incoming, stats: Arc<ServerStats>) {
    let Ok(conn) = incoming.await else {
        stats.count_error();
        return;
    };
    let mut streams = JoinSet::new();
    loop {
        tokio::select! {
            accepted = conn.accept_bi() => match accepted {
                Ok((send, recv)) => {
                    streams.spawn(echo_stream(conn.clone(), send, recv, Arc::clone(&stats)));
                }
                // The client closing its connection ends it here.
                Err(_) => return,
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
        }
    }
}

/// A client closing its connection with application code 0 (what quinn
/// does when the last handle drops, as the harness does once a client has
/// drained) has left, as an EOF does for TCP; it is not a server failure.
fn peer_left(conn: &Connection) -> bool {
    matches!(
        conn.close_reason(),
        Some(quinn::ConnectionError::ApplicationClosed(close)) if close.error_code == VarInt::from_u32(0)
    )
}

async fn echo_stream(
    conn: Connection,
    mut send: SendStream,
    recv: RecvStream,
    stats: Arc<ServerStats>,
) {
    let mut recv = BufReader::new(recv);
    loop {
        let frame = match read_frame(&mut recv).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(_) if peer_left(&conn) => return,
            Err(_) => {
                stats.count_error();
                return;
            }
        };
        stats.work.apply(&frame);
        if send.write_all(&encode_frame(&frame)).await.is_err() {
            stats.count_error();
            return;
        }
        stats.count_echo();
    }
}

/// One client's endpoint, connection and stream halves.
#[derive(Debug)]
pub struct QuicClient {
    send: Mutex<SendStream>,
    recv: Mutex<BufReader<RecvStream>>,
    buffers: SocketBuffers,
    _conn: Connection,
    _endpoint: Endpoint,
}

impl EchoClient for QuicClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        if msg.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("message of {} bytes exceeds {MAX_PAYLOAD}", msg.len()),
            ));
        }
        self.send
            .lock()
            .await
            .write_all(&encode_frame(&msg))
            .await
            .map_err(io::Error::from)
    }

    async fn recv(&self) -> io::Result<Bytes> {
        let mut recv = self.recv.lock().await;
        read_frame(&mut *recv).await?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server finished the stream")
        })
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
