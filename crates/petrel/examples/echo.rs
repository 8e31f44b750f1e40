//! A Petrel echo server and a client in one program.
//!
//! Run with `cargo run -p petrel --example echo`.

use bytes::Bytes;
use petrel::{Endpoint, EndpointConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A server: accepts connections and echoes every message.
    let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::server()).await?;
    let server_addr = server.local_addr();
    tokio::spawn(async move {
        while let Some(conn) = server.accept().await {
            tokio::spawn(async move {
                while let Ok(Some(msg)) = conn.recv().await {
                    if conn.send(msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });

    // A client: one reliable, ordered message stream.
    let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default()).await?;
    let conn = client.connect(server_addr).await?;
    conn.send(Bytes::from_static(b"hello")).await?; // waits while the send queue is full
    let echo = conn.recv().await?;
    println!("echo: {:?}", echo.as_deref().map(String::from_utf8_lossy));
    conn.close().await?; // flushes, then closes both ways
                         // `cwnd` prints as u64::MAX when no congestion controller limits the window.
    println!("stats: {:?}", conn.stats().kcp);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        super::main().expect("the echo example succeeds");
    }
}
