//! ngtcp2 as a QUIC peer: Debian's example programs (`ngtcp2-client`,
//! `ngtcp2-server`: `gtlsclient` / `gtlsserver`, ngtcp2 with nghttp3 and GnuTLS)
//! as a self-pair through the same emulated link. The client downloads the
//! payload over HTTP/3 from the server's document root.
//!
//! Only the self-pair runs: these examples speak HTTP/3 alone (ALPN `h3`; the
//! hq-interop examples `h09client`/`h09server` are not packaged), and Petrel's QUIC
//! transport has no HTTP/3 layer, so neither program can talk to it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use petrel_netem::Relay;
use tokio::process::Command;

use super::hq_interop::Identity;
use super::peer::{free_udp_port, verify_download, PeerChild, ScratchDir, PAYLOAD};
use super::peer::{NGTCP2_CLIENT, NGTCP2_SERVER};
use super::{setup, start_relay, transport, CpuMeter, SenderStats, Transfer, TransferError};
use crate::goodput::config::{ngtcp2_congestion, GoodputConfig};

/// Flow-control credit the client grants (connection and stream), as the other peers.
pub(crate) const WINDOW: &str = "16M";

pub(super) async fn self_pair(
    cfg: &GoodputConfig,
    seed: u64,
    progress: &Arc<AtomicU64>,
) -> Result<Transfer, TransferError> {
    let cc = ngtcp2_congestion(cfg.cc)
        .ok_or_else(|| setup(format!("ngtcp2 has no {} controller", cfg.cc)))?;
    let dir = ScratchDir::new("ngtcp2", seed)?;
    dir.write_payload(cfg.size_bytes)?;
    Identity::generate(dir.path())?;
    let port = free_udp_port()?;
    let mut command = Command::new(NGTCP2_SERVER);
    command
        .arg("-q")
        .arg("-d")
        .arg(dir.path().join("htdocs"))
        .arg(format!("--cc={cc}"))
        .arg("127.0.0.1")
        .arg(port.to_string())
        .arg(Identity::key_pem(dir.path()))
        .arg(Identity::cert_pem(dir.path()));
    let mut server = PeerChild::spawn("ngtcp2 server", &mut command, &dir)?;
    server.wait_listening(port).await?;
    let server_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let relay = start_relay(cfg, server_addr, seed)?;
    let target = relay.as_ref().map_or(server_addr, Relay::local_addr);

    let started = Instant::now();
    let cpu = CpuMeter::start();
    let download = dir.download();
    let download_dir = download.parent().unwrap_or(dir.path());
    let mut command = Command::new(NGTCP2_CLIENT);
    command
        .arg("-q")
        .arg("--exit-on-all-streams-close")
        .arg(format!("--download={}", download_dir.display()))
        .arg(format!("--cc={cc}"))
        .arg(format!("--max-data={WINDOW}"))
        .arg(format!("--max-stream-data-bidi-local={WINDOW}"))
        .arg(format!("--timeout={}s", cfg.transfer_timeout().as_secs()))
        .arg("127.0.0.1")
        .arg(target.port().to_string())
        .arg(format!("https://127.0.0.1:{}/{PAYLOAD}", target.port()));
    let client = PeerChild::spawn("ngtcp2 client", &mut command, &dir)?;
    let mut receipt = client.watch_download(&download, progress).await?;
    server.stop().await?;
    let relay = relay.map(Relay::stop).transpose().map_err(transport)?;
    let cpu = cpu.stop(relay.as_ref());
    receipt.verifier = verify_download(&download)?;
    Ok(Transfer {
        started,
        receipt,
        sender: SenderStats::default(),
        relay,
        rtt: None,
        cpu,
    })
}
