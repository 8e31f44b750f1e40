//! Secure WebSocket echo transport (`wss`): [`websocket`](super::websocket)
//! (`tokio-tungstenite`, binary messages, `TCP_NODELAY`) over TLS 1.3 from
//! `rustls` ([`TlsIdentity`]: a self-signed certificate for `localhost`,
//! generated in-process, trusted by the clients). The TLS handshake runs
//! first, then the HTTP upgrade inside it, as a browser's `wss://` does. The
//! version and cipher suite the first client negotiated are recorded as
//! `parameters.tls`. Reliable: leftovers count as `unfinished`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::client::TlsStream;

use super::tls::{FirstSession, TlsIdentity, TlsSetupError, SERVER_NAME};
use super::websocket::{handshake, serve, WebSocketClient};
use super::{peers, EchoServer, EchoTransport, ServerStats, TlsSession};

/// WebSocket over TLS over 127.0.0.1 with a fresh self-signed certificate.
#[derive(Debug, Clone)]
pub struct WssTransport {
    identity: TlsIdentity,
    session: FirstSession,
}

impl WssTransport {
    /// WSS with a newly generated identity.
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

impl EchoTransport for WssTransport {
    type Client = WebSocketClient<TlsStream<TcpStream>>;

    fn name(&self) -> &'static str {
        "wss"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn peer(&self) -> Option<&'static str> {
        Some(peers::WEBSOCKET)
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

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<Self::Client> {
        let (stream, buffers) = self.identity.connect(server).await?;
        self.session.note(stream.get_ref().1);
        let url = format!("wss://{SERVER_NAME}:{}/", server.port());
        handshake(url, stream, buffers).await
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
    match identity.accept(stream).await {
        Ok(tls) => serve(tls, &stats).await,
        Err(_) => stats.count_error(),
    }
}
