//! Kernel TCP over loopback, the reference: one connection, the congestion
//! controller set on the sender's socket with `TCP_CONGESTION` (Linux), Nagle off,
//! socket buffers left to the kernel's autotuning.
//! TCP cannot cross the UDP relay, so it has no emulated link.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use petrel_sys::socket::buffers_of;
use socket2::SockRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

use super::{chunks, loopback, setup, transport, Receipt, SenderStats, Transfer};
use super::{CpuMeter, TransferError, CHUNK};
use crate::goodput::config::{tcp_congestion, GoodputConfig};
use crate::goodput::pattern;

pub(super) async fn run(
    cfg: &GoodputConfig,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let algorithm = tcp_congestion(cfg.cc)
        .ok_or_else(|| setup(format!("Linux TCP has no {} controller", cfg.cc)))?;
    let listener = TcpListener::bind(loopback()).await.map_err(setup)?;
    let server_addr = listener.local_addr().map_err(setup)?;
    let progress = Arc::clone(progress);
    let receiver = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.map_err(transport)?;
        let recv_buffer = buffers_of(&stream).ok().map(|b| b.recv_actual);
        let mut receipt = Receipt::default();
        let mut buf = vec![0; CHUNK * 4];
        loop {
            let n = stream.read(&mut buf).await.map_err(transport)?;
            if n == 0 {
                return Ok::<_, TransferError>((receipt, recv_buffer));
            }
            receipt.on_data(&buf[..n], &progress);
        }
    });

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let socket = TcpSocket::new_v4().map_err(setup)?;
    SockRef::from(&socket)
        .set_tcp_congestion(algorithm.as_bytes())
        .map_err(|e| setup(format!("TCP_CONGESTION {algorithm}: {e}")))?;
    let mut stream = socket.connect(server_addr).await.map_err(transport)?;
    stream.set_nodelay(true).map_err(setup)?;
    let send_buffer = buffers_of(&stream).ok().map(|b| b.send_actual);
    for (offset, len) in chunks(cfg.size_bytes) {
        let chunk = pattern::chunk(offset, len);
        stream.write_all(&chunk).await.map_err(transport)?;
    }
    stream.shutdown().await.map_err(transport)?;
    let (receipt, recv_buffer) = receiver.await.map_err(transport)??;
    Ok(Transfer {
        started,
        receipt,
        sender: SenderStats {
            send_buffer,
            recv_buffer,
            ..SenderStats::default()
        },
        relay: None,
        rtt: None,
        cpu: cpu.stop(None),
    })
}
