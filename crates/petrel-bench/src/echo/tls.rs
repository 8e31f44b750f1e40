//! TLS echo transport: [`tcp`](super::tcp) with every connection wrapped in
//! TLS 1.3 by `rustls` (through `tokio-rustls`, `ring` crypto provider). The
//! messages are framed as for TCP (u32 big-endian length prefix) inside the
//! TLS stream; `TCP_NODELAY` is set on both ends, so the comparison with
//! `tcp` isolates the record layer's encryption, framing and copies.
//!
//! The server presents a self-signed certificate for `localhost` made with
//! `rcgen` when the transport is created ([`TlsIdentity`]); clients trust
//! exactly that certificate, so the full handshake runs as in production.
//! The version and cipher suite the first client negotiated are recorded as
//! `parameters.tls`. Reliable: leftovers count as `unfinished`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, CommonState, RootCertStore, ServerConfig};
use tokio::io::{AsyncWriteExt, BufReader, ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::client::TlsStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::tcp::{encode_frame, read_frame};
use super::{peers, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers, TlsSession};
use crate::echo::config::MAX_PAYLOAD;

/// The server name in the certificate and the one clients ask for.
pub(super) const SERVER_NAME: &str = "localhost";

/// A self-signed server identity and the client configuration that trusts
/// it: TLS 1.3 only (the workspace builds `rustls` without TLS 1.2), the
/// `ring` provider's cipher suites in its order of preference.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

/// The TLS identity could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// `rcgen` could not make the key or certificate.
    #[error("cannot generate the TLS server certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// `rustls` refused the configuration.
    #[error("cannot configure rustls: {0}")]
    Config(#[from] rustls::Error),
}

impl TlsIdentity {
    /// Generates the certificate and both configurations.
    ///
    /// # Errors
    /// [`TlsSetupError`] if the certificate cannot be made or `rustls`
    /// refuses it.
    pub fn generate() -> Result<Self, TlsSetupError> {
        let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()])?;
        let cert: CertificateDer<'static> = certified.cert.der().clone();
        let key = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(
            certified.signing_key.serialize_der(),
        ));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)?;
        let mut roots = RootCertStore::empty();
        roots.add(cert)?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// Completes the server side of a handshake on `stream`.
    pub(super) async fn accept(
        &self,
        stream: TcpStream,
    ) -> io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
        TlsAcceptor::from(Arc::clone(&self.server))
            .accept(stream)
            .await
    }

    /// Connects to `server` over TCP (`TCP_NODELAY`) and completes the client
    /// side of a handshake; returns the stream and the TCP socket's buffers.
    pub(super) async fn connect(
        &self,
        server: SocketAddr,
    ) -> io::Result<(TlsStream<TcpStream>, SocketBuffers)> {
        let stream = TcpStream::connect(server).await?;
        stream.set_nodelay(true)?;
        let buffers = petrel_sys::socket::buffers_of(&stream)?;
        let name = ServerName::try_from(SERVER_NAME).map_err(io::Error::other)?;
        let tls = TlsConnector::from(Arc::clone(&self.client))
            .connect(name, stream)
            .await?;
        Ok((tls, buffers))
    }
}

/// The negotiated version and cipher suite of `conn`.
pub(super) fn session_of(conn: &CommonState) -> TlsSession {
    let debug = |v: Option<String>| v.unwrap_or_else(|| "none".to_owned());
    TlsSession {
        version: debug(conn.protocol_version().map(|v| format!("{v:?}"))),
        cipher_suite: debug(
            conn.negotiated_cipher_suite()
                .map(|s| format!("{:?}", s.suite())),
        ),
        library: peers::RUSTLS.to_owned(),
        certificate: format!("self-signed for {SERVER_NAME} (rcgen, generated in-process)"),
    }
}

/// The first session a client of this transport negotiated, shared by its clones.
#[derive(Debug, Clone, Default)]
pub(super) struct FirstSession(Arc<Mutex<Option<TlsSession>>>);

impl FirstSession {
    /// Keeps `conn`'s session if none is kept yet.
    pub(super) fn note(&self, conn: &CommonState) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.is_none() {
            *kept = Some(session_of(conn));
        }
    }

    /// The kept session.
    pub(super) fn get(&self) -> Option<TlsSession> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// TCP + TLS 1.3 over 127.0.0.1 with a fresh self-signed certificate.
#[derive(Debug, Clone)]
pub struct TlsTransport {
    identity: TlsIdentity,
    session: FirstSession,
}

impl TlsTransport {
    /// TLS with a newly generated identity.
    ///
    /// # Errors
    /// [`TlsSetupError`] as [`TlsIdentity::generate`].
    pub fn new() -> Result<Self, TlsSetupError> {
        Ok(Self {
            identity: TlsIdentity::generate()?,
            session: FirstSession::default(),
        })
    }
}

impl EchoTransport for TlsTransport {
    type Client = TlsClient;

    fn name(&self) -> &'static str {
        "tls"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn peer(&self) -> Option<&'static str> {
        Some(peers::RUSTLS)
    }

    fn tls_session(&self) -> Option<TlsSession> {
        self.session.get()
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let actual = petrel_sys::socket::buffers_of(&listener)?;
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(accept_loop(
            listener,
            self.identity.clone(),
            Arc::clone(&stats),
        ));
        Ok(EchoServer::new(addr, task, stats, Some(actual)))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<TlsClient> {
        let (stream, buffers) = self.identity.connect(server).await?;
        self.session.note(stream.get_ref().1);
        let (reader, writer) = tokio::io::split(stream);
        Ok(TlsClient {
            reader: tokio::sync::Mutex::new(BufReader::new(reader)),
            writer: tokio::sync::Mutex::new(writer),
            buffers,
        })
    }
}

async fn accept_loop(listener: TcpListener, identity: TlsIdentity, stats: Arc<ServerStats>) {
    // Owning the connection tasks here means aborting this task (dropping
    // the EchoServer) aborts them all.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(echo_connection(stream, identity.clone(), Arc::clone(&stats)));
                }
                Err(_) => stats.count_error(),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn echo_connection(stream: TcpStream, identity: TlsIdentity, stats: Arc<ServerStats>) {
    if stream.set_nodelay(true).is_err() {
        stats.count_error();
    }
    let Ok(tls) = identity.accept(stream).await else {
        stats.count_error();
        return;
    };
    let (reader, mut writer) = tokio::io::split(tls);
    let mut reader = BufReader::new(reader);
    loop {
        let frame = match read_frame(&mut reader).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            // A client dropped without close_notify has left, as an EOF.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return,
            Err(_) => {
                stats.count_error();
                return;
            }
        };
        stats.work.apply(&frame);
        if writer.write_all(&encode_frame(&frame)).await.is_err() {
            stats.count_error();
            return;
        }
        if writer.flush().await.is_err() {
            stats.count_error();
            return;
        }
        stats.count_echo();
    }
}

/// One client's TLS stream, split so the harness's sender and receiver tasks
/// do not wait for each other's I/O.
#[derive(Debug)]
pub struct TlsClient {
    reader: tokio::sync::Mutex<BufReader<ReadHalf<TlsStream<TcpStream>>>>,
    writer: tokio::sync::Mutex<WriteHalf<TlsStream<TcpStream>>>,
    buffers: SocketBuffers,
}

impl EchoClient for TlsClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        if msg.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("message of {} bytes exceeds {MAX_PAYLOAD}", msg.len()),
            ));
        }
        let mut writer = self.writer.lock().await;
        writer.write_all(&encode_frame(&msg)).await?;
        // tokio-rustls buffers plaintext until flushed.
        writer.flush().await
    }

    async fn recv(&self) -> io::Result<Bytes> {
        let mut reader = self.reader.lock().await;
        read_frame(&mut *reader).await?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
        })
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
