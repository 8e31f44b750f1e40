//! Names and versions of the peer libraries the echo benchmark compares
//! Petrel with, as recorded in each result's `parameters.peer`.
//!
//! The versions are the ones `Cargo.lock` resolved when this crate was built
//! (read by `build.rs`), so a result names the exact code it measured.

/// `tokio-tungstenite` (WebSocket), e.g. `"tokio-tungstenite 0.30.0"`.
pub const WEBSOCKET: &str = concat!(
    "tokio-tungstenite ",
    env!("PETREL_PEER_VERSION_TOKIO_TUNGSTENITE")
);
/// `tokio_kcp` (KCP), e.g. `"tokio_kcp 0.9.8"`.
pub const KCP: &str = concat!("tokio_kcp ", env!("PETREL_PEER_VERSION_TOKIO_KCP"));
/// `quinn` (QUIC), e.g. `"quinn 0.11.12"`.
pub const QUIC: &str = concat!("quinn ", env!("PETREL_PEER_VERSION_QUINN"));
/// `rustls` (TLS of the `tls` and `wss` protocols), e.g. `"rustls 0.23.46"`.
pub const RUSTLS: &str = concat!("rustls ", env!("PETREL_PEER_VERSION_RUSTLS"));

#[cfg(test)]
mod tests {
    use super::*;

    /// The recorded versions are the ones in the workspace's `Cargo.lock`.
    #[test]
    fn versions_match_the_lock_file() {
        let lock =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock"))
                .unwrap();
        for peer in [WEBSOCKET, KCP, QUIC, RUSTLS] {
            let (name, version) = peer.split_once(' ').unwrap();
            let entry = format!("name = \"{name}\"\nversion = \"{version}\"");
            assert!(lock.contains(&entry), "{peer} not in Cargo.lock");
        }
    }
}
