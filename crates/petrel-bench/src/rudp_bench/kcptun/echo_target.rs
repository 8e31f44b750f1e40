//! The TCP echo server behind `kcptun-server`: it speaks the framing of the TCP
//! echo adapter (`crate::echo::tcp`: a u32 big-endian length, then the message),
//! so the clients are that adapter's and the harness verifies every echo as for
//! any other case; it counts each echoed message.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::echo::{ServerStats, MAX_PAYLOAD};

/// Binds 127.0.0.1:0 and serves until the returned task is aborted (which aborts
/// every connection task with it).
///
/// # Errors
/// The bind failure.
pub async fn start(stats: Arc<ServerStats>) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    Ok((addr, tokio::spawn(accept_loop(listener, stats))))
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

/// Echoes frames until the stream ends; a framing or I/O error counts once and
/// closes the connection.
async fn echo_connection(stream: TcpStream, stats: Arc<ServerStats>) {
    if stream.set_nodelay(true).is_err() {
        stats.count_error();
    }
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut frame = Vec::with_capacity(4 + 1024);
    loop {
        let mut len = [0u8; 4];
        match reader.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return,
            Err(_) => {
                stats.count_error();
                return;
            }
        }
        let n = usize::try_from(u32::from_be_bytes(len)).unwrap_or(usize::MAX);
        if n > MAX_PAYLOAD {
            stats.count_error();
            return;
        }
        frame.clear();
        frame.extend_from_slice(&len);
        frame.resize(4 + n, 0);
        if reader.read_exact(&mut frame[4..]).await.is_err()
            || writer.write_all(&frame).await.is_err()
        {
            stats.count_error();
            return;
        }
        stats.count_echo();
    }
}
