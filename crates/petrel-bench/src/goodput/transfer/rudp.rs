//! Petrel RUDP: one `petrel::Connection` in KCP stream mode, written in [`CHUNK`]-byte
//! pieces.
//!
//! Windows: `GoodputConfig::rudp_window` (default
//! [`DEFAULT_RUDP_WINDOW`](crate::goodput::DEFAULT_RUDP_WINDOW)); MTU:
//! `GoodputConfig::rudp_mtu` (default
//! [`DEFAULT_RUDP_MTU`](crate::goodput::DEFAULT_RUDP_MTU), 1400 bytes).
//!
//! Stream mode because the benchmark moves a byte stream, as TCP and a QUIC stream do
//! (and as kcptun runs kcp-go): writes fill whole segments, so every datagram of the
//! transfer has the same size and the driver sends them as long GSO trains. In
//! message mode the short last fragment of each 16 KiB write ends a train.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig, KcpConfig};
use petrel_netem::Relay;

use super::{chunks, loopback, setup, start_relay, transport, Receipt, SenderStats, Transfer};
use super::{rtt::RttSampler, CpuMeter, TransferError, CHUNK, SOCKET_BUFFER};
use crate::goodput::config::GoodputConfig;
use crate::goodput::pattern;
use crate::measure::endpoint_io;

/// Both ends run KCP stream mode (see the module docs).
pub(crate) const STREAM_MODE: bool = true;

fn endpoint_config(cfg: &GoodputConfig, server: bool) -> EndpointConfig {
    EndpointConfig {
        kcp: KcpConfig {
            mtu: usize::from(cfg.rudp_mtu),
            snd_wnd: cfg.rudp_window,
            rcv_wnd: cfg.rudp_window,
            congestion: cfg.cc,
            stream: STREAM_MODE,
            ..KcpConfig::default()
        },
        accept_incoming: server,
        send_buffer: Some(SOCKET_BUFFER),
        recv_buffer: Some(SOCKET_BUFFER),
        ..EndpointConfig::default()
    }
}

pub(super) async fn run(
    cfg: &GoodputConfig,
    seed: u64,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let server_config = endpoint_config(cfg, true);
    server_config.validate().map_err(setup)?;
    let server = Endpoint::bind(loopback(), server_config)
        .await
        .map_err(setup)?;
    let recv_buffer = server.socket_buffers().recv_actual;
    let relay = start_relay(cfg, server.local_addr(), seed)?;
    let target = relay
        .as_ref()
        .map_or_else(|| server.local_addr(), Relay::local_addr);

    let progress = Arc::clone(progress);
    let receiver = tokio::spawn(async move {
        let conn = server
            .accept()
            .await
            .ok_or_else(|| transport("the server endpoint closed before a connection"))?;
        let mut receipt = Receipt::default();
        while let Some(msg) = conn.recv().await.map_err(transport)? {
            receipt.on_data(&msg, &progress);
        }
        Ok::<_, TransferError>((receipt, server.stats()))
    });

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let client = Endpoint::bind(loopback(), endpoint_config(cfg, false))
        .await
        .map_err(setup)?;
    let conn = client.connect(target).await.map_err(transport)?;
    if conn.max_message_size() < CHUNK {
        return Err(setup(format!(
            "RUDP messages are limited to {} bytes, below the {CHUNK}-byte chunk",
            conn.max_message_size()
        )));
    }
    let sampled = conn.clone();
    let rtt = RttSampler::start(move || {
        let srtt_us = sampled.stats().kcp.srtt_us;
        // KCP has no estimate before its first acknowledgement.
        (srtt_us > 0).then(|| Duration::from_micros(srtt_us))
    });
    for (offset, len) in chunks(cfg.size_bytes) {
        let chunk = Bytes::from(pattern::chunk(offset, len));
        conn.send(chunk).await.map_err(transport)?;
    }
    // Returns once every message is acknowledged and the server has seen the close,
    // which ends its `recv` loop.
    conn.close().await.map_err(transport)?;
    let (receipt, receiver_stats) = receiver.await.map_err(transport)??;
    let rtt = rtt.finish().await;
    let stats = conn.stats();
    let messages = chunks(cfg.size_bytes).count() as u64;
    let sender_io = endpoint_io(&client.stats(), messages);
    let receiver_io = endpoint_io(&receiver_stats, messages);
    let relay = relay.map(Relay::stop).transpose().map_err(transport)?;
    Ok(Transfer {
        rtt: Some(rtt),
        cpu: cpu.stop(relay.as_ref()),
        started,
        receipt,
        sender: SenderStats {
            packets_sent: Some(stats.kcp.datagrams_sent),
            packets_lost_or_retransmitted: Some(
                stats.kcp.retransmissions_timeout + stats.kcp.retransmissions_fast,
            ),
            cwnd_bytes: Some(stats.kcp.cwnd),
            srtt_ms: Some(stats.kcp.srtt_us as f64 / 1e3),
            send_buffer: Some(client.socket_buffers().send_actual),
            recv_buffer: Some(recv_buffer),
            sender_io: Some(sender_io),
            receiver_io: Some(receiver_io),
        },
        relay,
    })
}
