//! A Petrel server that `kcptun-client` reaches: it accepts kcp-go sessions
//! (`Mode::KcpGo`) and echoes every smux stream, so whatever a TCP client sends
//! to `kcptun-client` comes back.
//!
//! ```text
//! cargo run -p petrel --example kcptun_server -- 127.0.0.1:29900 &
//! kcptun-client -l 127.0.0.1:12948 -r 127.0.0.1:29900 --crypt none --nocomp \
//!     --mode fast3 --datashard 10 --parityshard 3 --mtu 1350 &
//! echo hello | nc -q 1 127.0.0.1 12948
//! ```
//!
//! Options (each must match the client's flag of the same name): `--datashard N`
//! (default 10), `--parityshard N` (3), `--mtu BYTES` (1350), `--mode
//! normal|fast|fast2|fast3` (fast); `--crypt` must be `none` on the client.
//! Each connection's counters are printed when it ends.

use std::net::SocketAddr;

use petrel::smux::{SmuxConfig, SmuxSession};
use petrel::{Endpoint, EndpointConfig, FecConfig, FecScheme, KcpConfig, KcpPreset, Mode};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn parse_args() -> Result<(SocketAddr, EndpointConfig), Error> {
    let mut positional = Vec::new();
    let (mut data_shards, mut parity_shards, mut mtu) = (10, 3, 1350);
    let mut preset = KcpPreset::Fast;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--datashard" => data_shards = value()?.parse()?,
            "--parityshard" => parity_shards = value()?.parse()?,
            "--mtu" => mtu = value()?.parse()?,
            "--mode" => preset = value()?.parse()?,
            _ if arg.starts_with("--") => return Err(format!("unknown option {arg}").into()),
            _ => positional.push(arg),
        }
    }
    let [listen] = <[String; 1]>::try_from(positional)
        .map_err(|_| "usage: kcptun_server [options] LISTEN_ADDR")?;
    let config = EndpointConfig {
        mode: Mode::KcpGo { crypt_none: true },
        kcp: KcpConfig {
            mtu,
            ..KcpConfig::default()
        }
        .with_preset(preset),
        fec: FecConfig {
            scheme: FecScheme::Fixed {
                data_shards,
                parity_shards,
            },
            ..FecConfig::default()
        },
        ..EndpointConfig::server()
    };
    Ok((listen.parse()?, config))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (listen, config) = parse_args()?;
    let endpoint = Endpoint::bind(listen, config).await?;
    println!("listening on {}", endpoint.local_addr());
    while let Some(conn) = endpoint.accept().await {
        println!(
            "kcp-go session from {} (conv {})",
            conn.peer_addr(),
            conn.conv()
        );
        tokio::spawn(async move {
            let session = match SmuxSession::server(conn.clone(), SmuxConfig::default()) {
                Ok(session) => session,
                Err(e) => return eprintln!("smux: {e}"),
            };
            while let Some(mut stream) = session.accept().await {
                tokio::spawn(async move {
                    while let Ok(Some(chunk)) = stream.read().await {
                        if stream.write(&chunk).await.is_err() {
                            return;
                        }
                    }
                    let _ = stream.close().await;
                });
            }
            println!(
                "session from {} ended ({:?}): {:?}",
                conn.peer_addr(),
                session.error(),
                conn.stats()
            );
        });
    }
    Ok(())
}
