//! WebSocket echo transport through `tokio-tungstenite` (RFC 6455): one TCP
//! connection per client, upgraded with the HTTP handshake, each echo
//! message one binary WebSocket message. `TCP_NODELAY` is set on both ends,
//! as for [`tcp`](super::tcp), so the comparison isolates the WebSocket
//! framing (and client-side masking) cost. Buffers keep the OS defaults.
//!
//! Messages and frames above [`MAX_PAYLOAD`] are refused by the library
//! (`max_message_size`), bounding what one peer can make the other buffer.
//! Reliable: leftovers count as `unfinished`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use super::config::MAX_PAYLOAD;
use super::{peers, EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers};

/// WebSocket (binary messages, no TLS) over 127.0.0.1 via `tokio-tungstenite`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebSocketTransport;

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_PAYLOAD))
        .max_frame_size(Some(MAX_PAYLOAD))
}

fn to_io(e: WsError) -> io::Error {
    io::Error::other(e)
}

impl EchoTransport for WebSocketTransport {
    type Client = WebSocketClient;

    fn name(&self) -> &'static str {
        "websocket"
    }

    fn reliable(&self) -> bool {
        true
    }

    fn peer(&self) -> Option<&'static str> {
        Some(peers::WEBSOCKET)
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let actual = petrel_sys::socket::buffers_of(&listener)?;
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&stats)));
        Ok(EchoServer::new(addr, task, stats, Some(actual)))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<WebSocketClient> {
        let stream = TcpStream::connect(server).await?;
        stream.set_nodelay(true)?;
        let buffers = petrel_sys::socket::buffers_of(&stream)?;
        handshake(format!("ws://{server}/"), stream, buffers).await
    }
}

/// The client side of the WebSocket handshake over `stream` (TCP, or TLS
/// for [`wss`](super::wss)).
pub(super) async fn handshake<S>(
    url: String,
    stream: S,
    buffers: SocketBuffers,
) -> io::Result<WebSocketClient<S>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (ws, _response) =
        tokio_tungstenite::client_async_with_config(url, stream, Some(ws_config()))
            .await
            .map_err(to_io)?;
    let (sink, stream) = ws.split();
    Ok(WebSocketClient {
        sink: Mutex::new(sink),
        stream: Mutex::new(stream),
        buffers,
    })
}

async fn accept_loop(listener: TcpListener, stats: Arc<ServerStats>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(echo_connection(stream, Arc::clone(&stats)));
                }
                Err(_) => stats.count_error(),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn echo_connection(stream: TcpStream, stats: Arc<ServerStats>) {
    if stream.set_nodelay(true).is_err() {
        stats.count_error();
    }
    serve(stream, &stats).await;
}

/// The server side of one WebSocket connection over `stream` (TCP, or TLS
/// for [`wss`](super::wss)): the handshake, then every binary message echoed.
pub(super) async fn serve<S>(stream: S, stats: &ServerStats)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut ws = match tokio_tungstenite::accept_async_with_config(stream, Some(ws_config())).await
    {
        Ok(ws) => ws,
        Err(_) => {
            stats.count_error();
            return;
        }
    };
    while let Some(msg) = ws.next().await {
        match msg {
            Ok(Message::Binary(data)) => {
                stats.work.apply(&data);
                if ws.send(Message::Binary(data)).await.is_err() {
                    stats.count_error();
                    return;
                }
                stats.count_echo();
            }
            // tungstenite answers pings itself; a close ends the connection.
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
            Ok(Message::Close(_)) => return,
            Err(e) if peer_left(&e) => return,
            Ok(Message::Text(_)) | Err(_) => {
                stats.count_error();
                return;
            }
        }
    }
}

/// A client that drops its connection without a close handshake (the
/// harness drops clients once they have drained) has left, as an EOF does
/// for TCP; it is not a server failure. Over TLS ([`wss`](super::wss)) the
/// same departure reads as an I/O error: an end of stream without TLS
/// `close_notify`, or a reset.
fn peer_left(e: &WsError) -> bool {
    match e {
        WsError::ConnectionClosed
        | WsError::AlreadyClosed
        | WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => true,
        WsError::Io(io) => matches!(
            io.kind(),
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
        ),
        _ => false,
    }
}

/// One client's WebSocket over `S` (TCP by default), split so the harness's
/// sender and receiver tasks do not wait for each other.
#[derive(Debug)]
pub struct WebSocketClient<S = TcpStream> {
    sink: Mutex<SplitSink<WebSocketStream<S>, Message>>,
    stream: Mutex<SplitStream<WebSocketStream<S>>>,
    buffers: SocketBuffers,
}

impl<S> EchoClient for WebSocketClient<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        self.sink
            .lock()
            .await
            .send(Message::Binary(msg))
            .await
            .map_err(to_io)
    }

    async fn recv(&self) -> io::Result<Bytes> {
        let mut stream = self.stream.lock().await;
        loop {
            match stream.next().await {
                Some(Ok(Message::Binary(data))) => return Ok(data),
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Text(_))) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "text message where binary was expected",
                    ))
                }
                Some(Ok(Message::Close(_))) | None => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "server closed the connection",
                    ))
                }
                Some(Err(e)) => return Err(to_io(e)),
            }
        }
    }

    fn socket_buffers(&self) -> Option<SocketBuffers> {
        Some(self.buffers)
    }
}
