//! aioquic (Python, PyPI) as a QUIC peer, speaking hq-interop through the same
//! emulated link: aioquic ↔ aioquic, aioquic client ↔ Petrel QUIC server, and
//! Petrel QUIC client ↔ aioquic server. The client downloads
//! [`GoodputConfig::size_bytes`] of the pattern from the server, so the server's
//! controller is the one under test. The peer is `aioquic_peer.py` (next to this
//! file, written into the transfer's scratch directory) run by `$PETREL_PYTHON`
//! (default `python3`).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use petrel_netem::Relay;
use petrel_quic::transport::{self as quic, QuicCongestion, QuicTransportConfig, SelfSigned};
use tokio::process::Command;

use super::hq_interop::{self, Identity, REQUEST, SERVER_NAME};
use super::peer::{free_udp_port, python, verify_download, PeerChild, ScratchDir};
use super::rtt::RttSampler;
use super::{chunks, loopback, setup, start_relay, transport, CpuMeter, Receipt, SenderStats};
use super::{Transfer, TransferError, SOCKET_BUFFER};
use crate::goodput::config::{aioquic_congestion, GoodputConfig};
use crate::goodput::pattern;

/// The request a server accepts, at most, bytes.
const MAX_REQUEST: usize = 1024;

fn aioquic_cc(cfg: &GoodputConfig) -> Result<&'static str, TransferError> {
    aioquic_congestion(cfg.cc).ok_or_else(|| setup(format!("aioquic has no {} controller", cfg.cc)))
}

fn petrel_config(cfg: &GoodputConfig, seed: u64) -> QuicTransportConfig {
    QuicTransportConfig {
        congestion: QuicCongestion::Petrel(cfg.cc),
        socket_buffer: SOCKET_BUFFER,
        seed,
        ..QuicTransportConfig::default()
    }
}

/// Starts the aioquic server on a free port, serving the scratch directory's payload.
async fn spawn_server(
    dir: &ScratchDir,
    script: &Path,
    cc: &str,
) -> Result<(PeerChild, SocketAddr), TransferError> {
    let port = free_udp_port()?;
    let mut command = Command::new(python());
    command
        .arg(script)
        .arg("server")
        .arg("--cert")
        .arg(Identity::cert_pem(dir.path()))
        .arg("--key")
        .arg(Identity::key_pem(dir.path()))
        .arg("--file")
        .arg(dir.payload())
        .arg("--port")
        .arg(port.to_string())
        .args(["--cc", cc]);
    let mut server = PeerChild::spawn("aioquic server", &mut command, dir)?;
    server.wait_listening(port).await?;
    Ok((server, SocketAddr::from((Ipv4Addr::LOCALHOST, port))))
}

/// Starts the aioquic client downloading from `target` into the scratch directory.
fn spawn_client(
    cfg: &GoodputConfig,
    dir: &ScratchDir,
    script: &Path,
    cc: &str,
    target: SocketAddr,
) -> Result<PeerChild, TransferError> {
    let mut command = Command::new(python());
    command
        .arg(script)
        .arg("client")
        .arg("--ca")
        .arg(Identity::cert_pem(dir.path()))
        .arg("--port")
        .arg(target.port().to_string())
        .arg("--out")
        .arg(dir.download())
        .args(["--cc", cc])
        .arg("--timeout")
        .arg(cfg.transfer_timeout().as_secs().to_string());
    PeerChild::spawn("aioquic client", &mut command, dir)
}

/// The receipt of a child client's download, its content checked.
fn checked(mut receipt: Receipt, dir: &ScratchDir) -> Result<Receipt, TransferError> {
    receipt.verifier = verify_download(&dir.download())?;
    Ok(receipt)
}

/// aioquic client ↔ aioquic server, both with aioquic's controller for `cfg.cc`.
pub(super) async fn self_pair(
    cfg: &GoodputConfig,
    seed: u64,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let cc = aioquic_cc(cfg)?;
    let dir = ScratchDir::new("aioquic", seed)?;
    dir.write_payload(cfg.size_bytes)?;
    let script = dir.write_aioquic_script()?;
    Identity::generate(dir.path())?;
    let (server, server_addr) = spawn_server(&dir, &script, cc).await?;
    let relay = start_relay(cfg, server_addr, seed)?;
    let target = relay.as_ref().map_or(server_addr, Relay::local_addr);

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let client = spawn_client(cfg, &dir, &script, cc, target)?;
    let receipt = client.watch_download(&dir.download(), progress).await?;
    server.stop().await?;
    let relay = relay.map(Relay::stop).transpose().map_err(transport)?;
    let cpu = cpu.stop(relay.as_ref());
    Ok(Transfer {
        started,
        receipt: checked(receipt, &dir)?,
        sender: SenderStats::default(),
        relay,
        rtt: None,
        cpu,
    })
}

/// aioquic client downloading from a Petrel QUIC server (the Petrel controller sends).
pub(super) async fn to_petrel_server(
    cfg: &GoodputConfig,
    seed: u64,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let cc = aioquic_congestion(cfg.cc).unwrap_or("cubic");
    let config = petrel_config(cfg, seed);
    let dir = ScratchDir::new("aioquic-quic", seed)?;
    let script = dir.write_aioquic_script()?;
    let identity = Identity::generate(dir.path())?;
    // Bound with the Petrel transport's socket settings, then given the hq-interop
    // TLS configuration (the bind needs an identity of its own; it is replaced).
    let binding = SelfSigned::generate(SERVER_NAME).map_err(setup)?;
    let server = quic::server(loopback(), &binding, &config).map_err(setup)?;
    server
        .endpoint
        .set_server_config(Some(hq_interop::server_config(&identity, &config)?));
    let server_addr = server.endpoint.local_addr().map_err(setup)?;
    let relay = start_relay(cfg, server_addr, seed)?;
    let target = relay.as_ref().map_or(server_addr, Relay::local_addr);

    let size = cfg.size_bytes;
    let endpoint = server.endpoint.clone();
    let sender = tokio::spawn(async move {
        let incoming = endpoint
            .accept()
            .await
            .ok_or_else(|| transport("the server endpoint closed before a connection"))?;
        let conn = incoming.await.map_err(transport)?;
        let sampled = conn.clone();
        let rtt = RttSampler::start(move || Some(sampled.rtt()));
        let (mut send, mut recv) = conn.accept_bi().await.map_err(transport)?;
        let request = recv.read_to_end(MAX_REQUEST).await.map_err(transport)?;
        if request != REQUEST {
            return Err(transport(format!(
                "aioquic client asked for {:?}",
                String::from_utf8_lossy(&request)
            )));
        }
        for (offset, len) in chunks(size) {
            let chunk = Bytes::from(pattern::chunk(offset, len));
            send.write_chunk(chunk).await.map_err(transport)?;
        }
        send.finish().map_err(transport)?;
        // The client closes once it has read everything.
        conn.closed().await;
        Ok::<_, TransferError>((conn.stats(), rtt.finish().await))
    });

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let client = spawn_client(cfg, &dir, &script, cc, target)?;
    let receipt = client.watch_download(&dir.download(), progress).await?;
    let (stats, rtt) = sender.await.map_err(transport)??;
    let relay = relay.map(Relay::stop).transpose().map_err(transport)?;
    let cpu = cpu.stop(relay.as_ref());
    Ok(Transfer {
        started,
        receipt: checked(receipt, &dir)?,
        sender: SenderStats {
            packets_sent: Some(stats.path.sent_packets),
            packets_lost_or_retransmitted: Some(stats.path.lost_packets),
            cwnd_bytes: Some(stats.path.cwnd),
            srtt_ms: Some(stats.path.rtt.as_secs_f64() * 1e3),
            send_buffer: Some(server.send_buffer),
            recv_buffer: None,
            ..SenderStats::default()
        },
        relay,
        rtt: Some(rtt),
        cpu,
    })
}

/// A Petrel QUIC client downloading from an aioquic server (aioquic's controller sends).
pub(super) async fn from_petrel_client(
    cfg: &GoodputConfig,
    seed: u64,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let cc = aioquic_cc(cfg)?;
    let config = petrel_config(cfg, seed);
    let dir = ScratchDir::new("quic-aioquic", seed)?;
    dir.write_payload(cfg.size_bytes)?;
    let script = dir.write_aioquic_script()?;
    let identity = Identity::generate(dir.path())?;
    let (server, server_addr) = spawn_server(&dir, &script, cc).await?;
    let relay = start_relay(cfg, server_addr, seed)?;
    let target = relay.as_ref().map_or(server_addr, Relay::local_addr);

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let binding = SelfSigned::generate(SERVER_NAME).map_err(setup)?;
    let client = quic::client(loopback(), &binding, &config).map_err(setup)?;
    let conn = client
        .endpoint
        .connect_with(
            hq_interop::client_config(&identity, &config)?,
            target,
            SERVER_NAME,
        )
        .map_err(setup)?
        .await
        .map_err(transport)?;
    let (mut send, mut recv) = conn.open_bi().await.map_err(transport)?;
    send.write_all(REQUEST).await.map_err(transport)?;
    send.finish().map_err(transport)?;
    let mut receipt = Receipt::default();
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await.map_err(transport)? {
        receipt.on_data(&chunk.bytes, progress);
    }
    conn.close(0u32.into(), b"done");
    client.endpoint.wait_idle().await;
    server.stop().await?;
    let relay = relay.map(Relay::stop).transpose().map_err(transport)?;
    let cpu = cpu.stop(relay.as_ref());
    Ok(Transfer {
        started,
        receipt,
        sender: SenderStats {
            recv_buffer: Some(client.recv_buffer),
            ..SenderStats::default()
        },
        relay,
        rtt: None,
        cpu,
    })
}
