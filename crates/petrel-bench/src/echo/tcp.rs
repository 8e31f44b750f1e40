//! TCP echo transport: each message is framed with a u32 big-endian length
//! prefix; `TCP_NODELAY` is set on both ends so a message is not held back
//! by Nagle's algorithm. Buffers keep the OS defaults (autotuning); the
//! recorded server values are the listening socket's initial sizes, the
//! client values are read right after connecting. TCP delivers everything
//! or fails, so leftovers count as `unfinished`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use super::config::MAX_PAYLOAD;
use super::{EchoClient, EchoServer, EchoTransport, ServerStats, SocketBuffers};

/// TCP over 127.0.0.1 with length-prefixed messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpTransport;

impl EchoTransport for TcpTransport {
    type Client = TcpClient;

    fn name(&self) -> &'static str {
        "tcp"
    }

    fn reliable(&self) -> bool {
        true
    }

    async fn start_server(&self) -> io::Result<EchoServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let actual = petrel_sys::socket::buffers_of(&listener)?;
        let stats = Arc::new(ServerStats::default());
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&stats)));
        Ok(EchoServer::new(addr, task, stats, Some(actual)))
    }

    async fn connect(&self, server: SocketAddr, _client_id: u32) -> io::Result<TcpClient> {
        let stream = TcpStream::connect(server).await?;
        stream.set_nodelay(true)?;
        let buffers = petrel_sys::socket::buffers_of(&stream)?;
        let (reader, writer) = stream.into_split();
        Ok(TcpClient {
            reader: Mutex::new(BufReader::new(reader)),
            writer: Mutex::new(writer),
            buffers,
        })
    }
}

/// Serves the TCP echo on `listener` until the task is aborted (which aborts every
/// connection task with it). Also the echo target behind `kcptun-server`
/// (`rudp_bench::kcptun`), whose clients are this adapter's.
pub(crate) async fn accept_loop(listener: TcpListener, stats: Arc<ServerStats>) {
    // Owning the connection tasks here means aborting this task (dropping
    // the EchoServer) aborts them all.
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
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    loop {
        let frame = match read_frame(&mut reader).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
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
        stats.count_echo();
    }
}

/// Length prefix plus message in one buffer, so one write (and, with
/// `TCP_NODELAY`, usually one segment) carries it.
pub(super) fn encode_frame(msg: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + msg.len());
    // MAX_PAYLOAD bounds every message the harness sends and read_frame
    // accepts, so the length fits in u32.
    buf.put_u32(u32::try_from(msg.len()).unwrap_or(u32::MAX));
    buf.put_slice(msg);
    buf.freeze()
}

/// Reads one frame; `Ok(None)` on a clean end of stream between frames.
///
/// # Errors
/// `InvalidData` for a length above [`MAX_PAYLOAD`], `UnexpectedEof` for a
/// stream that ends mid-frame, or the read error.
pub(super) async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> io::Result<Option<Bytes>> {
    let mut len = [0u8; 4];
    let first = reader.read(&mut len[..1]).await?;
    if first == 0 {
        return Ok(None);
    }
    reader.read_exact(&mut len[1..]).await?;
    let len = usize::try_from(u32::from_be_bytes(len)).unwrap_or(usize::MAX);
    if len > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {MAX_PAYLOAD}"),
        ));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    Ok(Some(Bytes::from(body)))
}

/// One client's TCP connection; the read and write halves are used by the
/// harness's receiver and sender tasks independently.
#[derive(Debug)]
pub struct TcpClient {
    reader: Mutex<BufReader<OwnedReadHalf>>,
    writer: Mutex<OwnedWriteHalf>,
    buffers: SocketBuffers,
}

impl EchoClient for TcpClient {
    async fn send(&self, msg: Bytes) -> io::Result<()> {
        if msg.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("message of {} bytes exceeds {MAX_PAYLOAD}", msg.len()),
            ));
        }
        self.writer
            .lock()
            .await
            .write_all(&encode_frame(&msg))
            .await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_lengths_are_rejected() {
        let mut wire = encode_frame(b"hello").to_vec();
        wire.extend_from_slice(&encode_frame(b""));
        let mut r = &wire[..];
        assert_eq!(
            read_frame(&mut r).await.unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(read_frame(&mut r).await.unwrap().as_deref(), Some(&b""[..]));
        assert!(read_frame(&mut r).await.unwrap().is_none());

        let huge = (MAX_PAYLOAD as u32 + 1).to_be_bytes();
        let err = read_frame(&mut &huge[..]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);

        let truncated = [0u8, 0, 0, 10, 1, 2];
        let err = read_frame(&mut &truncated[..]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
