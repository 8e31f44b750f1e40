//! A Petrel client that reaches a `kcptun-server` and moves a file through it,
//! verified: the file goes up one smux stream and must come back byte for byte
//! (SHA-256), so the server's target must echo. `--echo-target ADDR` runs that
//! echo (a TCP echo server on ADDR) in this program.
//!
//! ```text
//! kcptun-server -l 127.0.0.1:29900 -t 127.0.0.1:12948 --crypt none --nocomp \
//!     --mode fast3 --datashard 10 --parityshard 3 --mtu 1350 &
//! cargo run -p petrel --example kcptun_client -- --echo-target 127.0.0.1:12948 \
//!     127.0.0.1:29900 /path/to/file
//! ```
//!
//! Options (each must match the server's flag of the same name): `--datashard N`
//! (default 10), `--parityshard N` (3), `--mtu BYTES` (1350), `--mode
//! normal|fast|fast2|fast3` (fast); `--crypt` must be `none` on the server.

use std::net::SocketAddr;
use std::time::Instant;

use petrel::smux::{SmuxConfig, SmuxSession};
use petrel::{Endpoint, EndpointConfig, FecConfig, FecScheme, KcpConfig, KcpPreset, Mode};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

type Error = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    server: SocketAddr,
    file: std::path::PathBuf,
    echo_target: Option<SocketAddr>,
    data_shards: u8,
    parity_shards: u8,
    mtu: usize,
    preset: KcpPreset,
}

fn parse_args() -> Result<Args, Error> {
    let mut positional = Vec::new();
    let (mut echo_target, mut data_shards, mut parity_shards, mut mtu) = (None, 10, 3, 1350);
    let mut preset = KcpPreset::Fast;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--echo-target" => echo_target = Some(value()?.parse()?),
            "--datashard" => data_shards = value()?.parse()?,
            "--parityshard" => parity_shards = value()?.parse()?,
            "--mtu" => mtu = value()?.parse()?,
            "--mode" => preset = value()?.parse()?,
            _ if arg.starts_with("--") => return Err(format!("unknown option {arg}").into()),
            _ => positional.push(arg),
        }
    }
    let [server, file] = <[String; 2]>::try_from(positional)
        .map_err(|_| "usage: kcptun_client [options] SERVER_ADDR FILE")?;
    Ok(Args {
        server: server.parse()?,
        file: file.into(),
        echo_target,
        data_shards,
        parity_shards,
        mtu,
        preset,
    })
}

/// A TCP echo server on `addr`, for `kcptun-server -t addr`.
async fn echo_target(addr: SocketAddr) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = tcp.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(parse_args()?).await
}

/// Moves the file up and back through the server; an error when the echo differs.
async fn run(args: Args) -> Result<(), Error> {
    if let Some(addr) = args.echo_target {
        echo_target(addr).await?;
    }
    let data = tokio::fs::read(&args.file).await?;
    let config = EndpointConfig {
        mode: Mode::KcpGo { crypt_none: true },
        kcp: KcpConfig {
            mtu: args.mtu,
            ..KcpConfig::default()
        }
        .with_preset(args.preset),
        fec: FecConfig {
            scheme: FecScheme::Fixed {
                data_shards: args.data_shards,
                parity_shards: args.parity_shards,
            },
            ..FecConfig::default()
        },
        ..EndpointConfig::default()
    };
    let endpoint = Endpoint::bind("0.0.0.0:0".parse()?, config).await?;
    let conn = endpoint.connect(args.server).await?;
    let session = SmuxSession::client(conn.clone(), SmuxConfig::default())?;
    let mut stream = session.open().await?;
    let start = Instant::now();

    // Up on one task, the echo back on this one.
    let writer = stream.writer();
    let up = data.clone();
    let send = tokio::spawn(async move {
        for chunk in up.chunks(64 * 1024) {
            writer.write(chunk).await?;
        }
        Ok::<_, petrel::smux::SmuxError>(())
    });
    let mut echoed = Vec::with_capacity(data.len());
    while echoed.len() < data.len() {
        match stream.read().await? {
            Some(chunk) => echoed.extend_from_slice(&chunk),
            None => return Err(format!("stream closed after {} bytes", echoed.len()).into()),
        }
    }
    send.await??;
    let elapsed = start.elapsed();
    stream.close().await?;

    let (sent, back) = (Sha256::digest(&data), Sha256::digest(&echoed));
    let mut out = tokio::io::stdout();
    let line = format!(
        "{} bytes up and back in {elapsed:?} ({:.2} MB/s each way); sha256 {:x} {}\n\
         connection: {:?}\n",
        data.len(),
        data.len() as f64 / elapsed.as_secs_f64() / 1e6,
        sent,
        if sent == back { "verified" } else { "MISMATCH" },
        conn.stats(),
    );
    out.write_all(line.as_bytes()).await?;
    if sent != back {
        return Err("the echo differs from the file".into());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails loudly
mod tests {
    //! Runs the example against a real `kcptun-server` (Debian `kcptun`), started
    //! with the flags of the top comment; skipped with a message when it is not
    //! installed, unless `PETREL_REQUIRE_KCPTUN` is set (CI).

    use std::net::{TcpListener, UdpSocket};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use super::{run, Args};
    use petrel::KcpPreset;

    /// Kills the server by PID when dropped, also when the test fails.
    struct Server(Child);

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn free_port(udp: bool) -> u16 {
        let port = if udp {
            UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr())
        } else {
            TcpListener::bind("127.0.0.1:0").and_then(|s| s.local_addr())
        };
        port.expect("a free loopback port").port()
    }

    #[tokio::test]
    async fn a_file_goes_through_kcptun_server_and_back_verified() {
        let installed = std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|d| d.join("kcptun-server").is_file())
        });
        if !installed {
            let msg = "SKIPPED: kcptun-server not in PATH (apt-get install -y kcptun)";
            assert!(std::env::var_os("PETREL_REQUIRE_KCPTUN").is_none(), "{msg}");
            eprintln!("{msg}");
            return;
        }
        let (udp, tcp) = (free_port(true), free_port(false));
        let _server = Server(
            Command::new("kcptun-server")
                .args(["-l", &format!("127.0.0.1:{udp}")])
                .args(["-t", &format!("127.0.0.1:{tcp}")])
                .args(["--crypt", "none", "--nocomp", "--mode", "fast", "--quiet"])
                .args(["--datashard", "10", "--parityshard", "3", "--mtu", "1350"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("kcptun-server starts"),
        );
        let file =
            std::env::temp_dir().join(format!("petrel-kcptun-example-{}", std::process::id()));
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(&file, &data).expect("scratch file");
        let args = Args {
            server: format!("127.0.0.1:{udp}").parse().unwrap(),
            file: file.clone(),
            echo_target: Some(format!("127.0.0.1:{tcp}").parse().unwrap()),
            data_shards: 10,
            parity_shards: 3,
            mtu: 1350,
            preset: KcpPreset::Fast,
        };
        // Wait (at most 5 s) until kcptun-server holds its UDP port.
        for _ in 0..100 {
            if UdpSocket::bind(("127.0.0.1", udp)).is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let outcome = tokio::time::timeout(Duration::from_secs(30), run(args)).await;
        let _ = std::fs::remove_file(&file);
        outcome
            .expect("bounded")
            .expect("the file comes back verified");
    }
}
