//! A file transfer with forward error correction through the in-process link
//! emulator: a client sends 2 MB in 16 KiB messages to a server through a
//! `petrel_netem::Relay` at the `random` profile (5 % loss, 10 ms one way, 1 %
//! duplication, 5 % reordered, both ways, seed 42), with fixed FEC of 8 data + 2
//! parity shards. The server checks every byte (SHA-256) and prints how many
//! lost datagrams FEC rebuilt, next to the retransmissions the ARQ still needed
//! and the loss the emulator applied.
//!
//! Run with `cargo run -p petrel --example fec_transfer` (a few seconds; loopback
//! only). Change `scheme` to `FecScheme::None` to see the same transfer lean on
//! retransmissions alone, or to `FecScheme::ADAPTIVE_DEFAULT` for parity that
//! follows the measured loss.

use std::time::{Duration, Instant};

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig, FecConfig, FecScheme};
use petrel_netem::{Profile, Relay, RelayConfig};
use sha2::{Digest, Sha256};

/// Bytes transferred.
const FILE_BYTES: usize = 2_000_000;
/// Bytes per message.
const CHUNK: usize = 16 * 1024;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What one transfer showed.
struct Transfer {
    /// Bytes the server received.
    received: usize,
    /// Whether their SHA-256 matched the file's.
    verified: bool,
    /// Datagrams the server's FEC decoder rebuilt from parity.
    recovered: u64,
    /// Retransmissions the client's ARQ made (timeouts + fast).
    retransmissions: u64,
    /// Share of the client's datagrams the emulator dropped, 0..1.
    upstream_loss: f64,
}

/// Deterministic file contents (a simple LCG, so the example needs no files).
fn file_contents() -> Vec<u8> {
    let mut x: u32 = 0x2545_f491;
    (0..FILE_BYTES)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect()
}

async fn run() -> Result<Transfer, Error> {
    let fec = FecConfig {
        scheme: FecScheme::Fixed {
            data_shards: 8,
            parity_shards: 2,
        },
        ..FecConfig::default()
    };

    // The server: receives until the client closes, hashing as it goes.
    let server = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointConfig {
            fec,
            ..EndpointConfig::server()
        },
    )
    .await?;
    let server_addr = server.local_addr();
    let receiver = tokio::spawn(async move {
        let conn = server.accept().await.ok_or("server endpoint closed")?;
        let (mut hasher, mut received) = (Sha256::new(), 0);
        while let Some(msg) = conn.recv().await? {
            hasher.update(&msg);
            received += msg.len();
        }
        let recovered = conn.stats().fec.map_or(0, |f| f.decoder.shards_recovered);
        Ok::<_, Error>((received, hasher.finalize(), recovered))
    });

    // The emulated link in front of the server (a thread of its own).
    let mut relay_config = RelayConfig::new("127.0.0.1:0".parse()?, server_addr);
    relay_config.route = Profile::Random.route();
    relay_config.seed = 42;
    let relay = Relay::start(relay_config)?;

    // The client connects to the relay, not to the server. Native mode negotiates
    // the FEC shape in the handshake.
    let client = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointConfig {
            fec,
            ..EndpointConfig::default()
        },
    )
    .await?;
    let conn = client.connect(relay.local_addr()).await?;
    let file = Bytes::from(file_contents());
    let start = Instant::now();
    for chunk in file.chunks(CHUNK) {
        conn.send(file.slice_ref(chunk)).await?; // waits while the send queue is full
    }
    conn.close().await?; // returns once everything was acknowledged
    let elapsed = start.elapsed();
    let kcp = conn.stats().kcp;

    let (received, digest, recovered) = receiver.await??;
    let link = relay.stop()?;
    let transfer = Transfer {
        received,
        verified: digest == Sha256::digest(&file),
        recovered,
        retransmissions: kcp.retransmissions_timeout + kcp.retransmissions_fast,
        upstream_loss: link.upstream_total.observed_loss(),
    };
    println!(
        "{} bytes in {elapsed:.2?} ({:.2} MB/s), sha256 {}",
        transfer.received,
        transfer.received as f64 / elapsed.as_secs_f64() / 1e6,
        if transfer.verified {
            "verified"
        } else {
            "MISMATCH"
        },
    );
    println!(
        "emulator dropped {:.1} % of the client's datagrams; FEC rebuilt {} of them, \
         the ARQ retransmitted {}",
        transfer.upstream_loss * 100.0,
        transfer.recovered,
        transfer.retransmissions,
    );
    Ok(transfer)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let transfer = tokio::time::timeout(Duration::from_secs(60), run()).await??;
    if !transfer.verified {
        return Err("the received file differs".into());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails loudly
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_file_arrives_intact_and_fec_rebuilds_lost_datagrams() {
        let t = super::run().await.expect("the transfer completes");
        assert_eq!(t.received, super::FILE_BYTES);
        assert!(t.verified, "the received bytes differ");
        assert!(t.upstream_loss > 0.02, "loss {}", t.upstream_loss);
        assert!(t.recovered > 0, "no FEC recovery under 5 % loss");
    }
}
