//! QUIC through the Petrel QUIC transport (`petrel_quic::transport`): one
//! connection, one unidirectional stream carrying the whole transfer, written in
//! chunks of [`CHUNK`] bytes and read as it arrives. Windows are the transport's
//! defaults (8 MiB per stream, 16 MiB per connection and for sending).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use petrel_netem::Relay;
use petrel_quic::transport::{self as quic, QuicCongestion, QuicTransportConfig, SelfSigned};

use super::{chunks, loopback, setup, start_relay, transport, Receipt, SenderStats, Transfer};
use super::{rtt::RttSampler, CpuMeter, TransferError, SOCKET_BUFFER};
use crate::goodput::config::{GoodputConfig, GoodputTransport};
use crate::goodput::pattern;

/// The transport settings of `cfg`: a Petrel controller for `quic`, quinn's own for
/// `quinn`.
fn transport_config(cfg: &GoodputConfig, seed: u64) -> Result<QuicTransportConfig, TransferError> {
    let congestion = match cfg.transport {
        GoodputTransport::Quinn => QuicCongestion::quinn_own(cfg.cc)
            .ok_or_else(|| setup(format!("quinn has no {} controller", cfg.cc)))?,
        _ => QuicCongestion::Petrel(cfg.cc),
    };
    Ok(QuicTransportConfig {
        congestion,
        socket_buffer: SOCKET_BUFFER,
        seed,
        ..QuicTransportConfig::default()
    })
}

pub(super) async fn run(
    cfg: &GoodputConfig,
    seed: u64,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let config = transport_config(cfg, seed)?;
    let identity = SelfSigned::generate("localhost").map_err(setup)?;
    let server = quic::server(loopback(), &identity, &config).map_err(setup)?;
    let server_addr = server.endpoint.local_addr().map_err(setup)?;
    let recv_buffer = server.recv_buffer;
    let relay = start_relay(cfg, server_addr, seed)?;
    let target = relay.as_ref().map_or(server_addr, Relay::local_addr);

    let progress = Arc::clone(progress);
    let receiver = tokio::spawn(async move {
        let endpoint = server.endpoint;
        let incoming = endpoint
            .accept()
            .await
            .ok_or_else(|| transport("the server endpoint closed before a connection"))?;
        let conn = incoming.await.map_err(transport)?;
        let mut stream = conn.accept_uni().await.map_err(transport)?;
        let mut receipt = Receipt::default();
        while let Some(chunk) = stream
            .read_chunk(usize::MAX, true)
            .await
            .map_err(transport)?
        {
            receipt.on_data(&chunk.bytes, &progress);
        }
        conn.close(0u32.into(), b"done");
        // The endpoint goes back to the caller so it outlives the client's last reads.
        Ok::<_, TransferError>((receipt, endpoint))
    });

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let client = quic::client(loopback(), &identity, &config).map_err(setup)?;
    let conn = client
        .endpoint
        .connect(target, identity.server_name())
        .map_err(setup)?
        .await
        .map_err(transport)?;
    let mut stream = conn.open_uni().await.map_err(transport)?;
    let sampled = conn.clone();
    let rtt = RttSampler::start(move || Some(sampled.rtt()));
    for (offset, len) in chunks(cfg.size_bytes) {
        let chunk = Bytes::from(pattern::chunk(offset, len));
        stream.write_chunk(chunk).await.map_err(transport)?;
    }
    stream.finish().map_err(transport)?;
    let (receipt, _server) = receiver.await.map_err(transport)??;
    let rtt = rtt.finish().await;
    let stats = conn.stats();
    conn.close(0u32.into(), b"bye");
    let relay = relay.map(Relay::stop).transpose().map_err(transport)?;
    Ok(Transfer {
        rtt: Some(rtt),
        cpu: cpu.stop(relay.as_ref()),
        started,
        receipt,
        sender: SenderStats {
            packets_sent: Some(stats.path.sent_packets),
            packets_lost_or_retransmitted: Some(stats.path.lost_packets),
            cwnd_bytes: Some(stats.path.cwnd),
            srtt_ms: Some(stats.path.rtt.as_secs_f64() * 1e3),
            send_buffer: Some(client.send_buffer),
            recv_buffer: Some(recv_buffer),
            ..SenderStats::default()
        },
        relay,
    })
}
