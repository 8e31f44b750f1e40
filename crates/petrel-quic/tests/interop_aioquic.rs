//! Interop with an independent QUIC stack: Petrel's QUIC (quinn with a Petrel
//! congestion controller from `PetrelControllerFactory`) against aioquic, speaking
//! hq-interop (ALPN `hq-interop`, the QUIC interop runner's HTTP/0.9 profile).
//!
//! Both roles, over real loopback sockets, once per controller kind:
//! - quinn client fetches 4 MiB from an aioquic server;
//! - aioquic client fetches 4 MiB from a quinn server (here the Petrel controller
//!   governs the sender, so this is the direction that exercises it).
//!
//! The body is `/pattern/<seed>/<size>` as defined in `aioquic_peer.py` (SHA-256
//! counter blocks); both sides build it independently and the test compares
//! byte-for-byte.
//!
//! The peer is `tests/aioquic_peer.py` run with `$PETREL_PYTHON` (default `python3`).
//! Without python3 + aioquic the tests skip with a message on stderr, unless
//! `PETREL_REQUIRE_QUIC_INTEROP=1`, which makes them fail instead (CI).
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use petrel_proto::cc::{Bbr, CongestionController, CongestionKind, Cubic, NewReno};
use petrel_quic::{PetrelController, PetrelControllerFactory};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ClientConfig, Endpoint, ServerConfig, TransportConfig};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

const PEER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/aioquic_peer.py");
const REQUIRE_ENV: &str = "PETREL_REQUIRE_QUIC_INTEROP";
const PYTHON_ENV: &str = "PETREL_PYTHON";
const ALPN: &[u8] = b"hq-interop";
/// Bytes per transfer.
const SIZE: usize = 4 << 20;
const SEED: u64 = 0x5045_5452_454c;
const KINDS: [CongestionKind; 3] = [
    CongestionKind::NewReno,
    CongestionKind::Cubic,
    CongestionKind::BbrV3,
];
/// Bound on anything that waits for the peer: start-up, one transfer, shutdown.
/// aioquic (pure Python) moves 4 MiB over loopback in a few seconds on a loaded
/// 2-core machine; the margin is for slower CI, and a broken peer fails the test
/// instead of hanging it.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_REQUEST_BYTES: usize = 1024;

/// `/pattern/<seed>/<size>`: SHA-256(seed BE64 ‖ block index BE64) blocks, truncated.
fn pattern(seed: u64, size: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(size + 32);
    let mut index = 0u64;
    while body.len() < size {
        let mut block = Sha256::new();
        block.update(seed.to_be_bytes());
        block.update(index.to_be_bytes());
        body.extend_from_slice(&block.finalize());
        index += 1;
    }
    body.truncate(size);
    body
}

fn pattern_path(seed: u64, size: usize) -> String {
    format!("/pattern/{seed}/{size}")
}

/// `(seed, size)` from `GET /pattern/<seed>/<size>\r\n`, or `None`.
fn parse_request(request: &[u8]) -> Option<(u64, usize)> {
    let line = std::str::from_utf8(request).ok()?.strip_suffix("\r\n")?;
    let (seed, size) = line.strip_prefix("GET /pattern/")?.split_once('/')?;
    let size = size.parse().ok().filter(|&size| size <= SIZE)?;
    Some((seed.parse().ok()?, size))
}

fn python() -> String {
    std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into())
}

/// Whether the peer can run; when it cannot, skips (message on stderr) or, with
/// `PETREL_REQUIRE_QUIC_INTEROP=1`, panics.
async fn interop_available(test: &str) -> bool {
    let probe = Command::new(python())
        .args(["-c", "import aioquic"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let missing = match timeout(STEP_TIMEOUT, probe).await {
        Ok(Ok(output)) if output.status.success() => return true,
        // The last line of the traceback, e.g. "ModuleNotFoundError: ...".
        Ok(Ok(output)) => String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or("no output")
            .to_owned(),
        Ok(Err(error)) => format!("cannot run {}: {error}", python()),
        Err(_) => format!("`{} -c 'import aioquic'` did not finish", python()),
    };
    let why = format!("python3 with aioquic is needed (python3 -m pip install aioquic): {missing}");
    if std::env::var(REQUIRE_ENV).is_ok_and(|value| value == "1") {
        panic!("{test}: {why}");
    }
    // Straight to the process's stderr: libtest captures `eprintln!` of passing
    // tests, and a skip must be visible in CI logs.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {why}; set {REQUIRE_ENV}=1 to fail instead"
    );
    false
}

/// A self-signed certificate for `localhost`, as DER for rustls and as PEM files
/// for aioquic, in a directory removed on drop.
struct Credentials {
    dir: PathBuf,
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Credentials {
    fn new(test: &str) -> Self {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("interop-aioquic-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.join("cert.pem"), generated.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), generated.signing_key.serialize_pem()).unwrap();
        Self {
            dir,
            cert: generated.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()),
        }
    }

    fn cert_pem(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    fn key_pem(&self) -> PathBuf {
        self.dir.join("key.pem")
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn petrel_transport(kind: CongestionKind) -> Arc<TransportConfig> {
    let mut transport = TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(PetrelControllerFactory::with_seed(kind, 1)));
    Arc::new(transport)
}

fn client_config(kind: CongestionKind, credentials: &Credentials) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(credentials.cert.clone()).unwrap();
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    config.transport_config(petrel_transport(kind));
    config
}

fn server_config(kind: CongestionKind, credentials: &Credentials) -> ServerConfig {
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![credentials.cert.clone()],
        credentials.key.clone_key().into(),
    )
    .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let mut config = ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()));
    config.transport_config(petrel_transport(kind));
    config
}

/// The name of the Petrel controller a quinn controller wraps.
fn controller_name(state: Box<dyn quinn::congestion::Controller>) -> &'static str {
    let any = state.into_any();
    let any = match any.downcast::<PetrelController<Bbr>>() {
        Ok(c) => return c.inner().name(),
        Err(any) => any,
    };
    let any = match any.downcast::<PetrelController<Cubic>>() {
        Ok(c) => return c.inner().name(),
        Err(any) => any,
    };
    match any.downcast::<PetrelController<NewReno>>() {
        Ok(c) => c.inner().name(),
        Err(_) => "not a Petrel controller",
    }
}

fn localhost() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

fn peer_command() -> Command {
    let mut command = Command::new(python());
    // The peer's stderr goes straight to the test's, so its errors show up in CI logs.
    command
        .arg(PEER_SCRIPT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    command
}

/// The aioquic server process; killed (SIGKILL to its PID) on drop.
struct AioquicServer {
    child: Child,
    addr: SocketAddr,
}

impl AioquicServer {
    async fn spawn(credentials: &Credentials) -> Self {
        let mut child = peer_command()
            .arg("server")
            .arg("--cert")
            .arg(credentials.cert_pem())
            .arg("--key")
            .arg(credentials.key_pem())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let line = timeout(STEP_TIMEOUT, BufReader::new(stdout).lines().next_line())
            .await
            .expect("aioquic server did not report its port in time")
            .unwrap()
            .expect("aioquic server exited before listening; see its stderr above");
        let port = line
            .strip_prefix("LISTENING ")
            .and_then(|port| port.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("aioquic server printed {line:?}, not `LISTENING <port>`"));
        Self {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        }
    }

    async fn stop(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// hq-interop GET of `path` by a quinn client running `kind`; the body, after
/// checking that the connection really ran the Petrel controller.
async fn quinn_fetch(
    kind: CongestionKind,
    credentials: &Credentials,
    server: SocketAddr,
    path: &str,
) -> Vec<u8> {
    let mut endpoint = Endpoint::client(localhost()).unwrap();
    endpoint.set_default_client_config(client_config(kind, credentials));
    let conn = endpoint
        .connect(server, "localhost")
        .unwrap()
        .await
        .expect("handshake with aioquic");
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(format!("GET {path}\r\n").as_bytes())
        .await
        .unwrap();
    send.finish().unwrap();
    let body = recv.read_to_end(SIZE + 1).await.expect("response body");
    assert_eq!(controller_name(conn.congestion_state()), kind.as_str());
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    body
}

#[tokio::test]
async fn quinn_client_fetches_a_file_from_an_aioquic_server() {
    let test = "quinn_client_fetches_a_file_from_an_aioquic_server";
    if !interop_available(test).await {
        return;
    }
    let credentials = Credentials::new("quinn-client");
    let server = AioquicServer::spawn(&credentials).await;
    let expected = pattern(SEED, SIZE);
    let path = pattern_path(SEED, SIZE);
    for kind in KINDS {
        let fetch = quinn_fetch(kind, &credentials, server.addr, &path);
        let body = timeout(STEP_TIMEOUT, fetch)
            .await
            .unwrap_or_else(|_| panic!("{kind}: transfer from aioquic took over {STEP_TIMEOUT:?}"));
        assert_eq!(body.len(), SIZE, "{kind}: body length");
        assert!(body == expected, "{kind}: body differs from the pattern");
    }
    server.stop().await;
}

/// What the quinn server saw of one hq-interop exchange.
#[derive(Debug)]
struct Served {
    controller: &'static str,
    stats: quinn::ConnectionStats,
}

/// Accepts one connection and answers one hq-interop request on it with the
/// pattern, then waits for the client to close.
async fn quinn_serve_one(endpoint: &Endpoint) -> Served {
    let incoming = endpoint.accept().await.expect("endpoint open");
    let conn = incoming.await.expect("handshake with aioquic");
    let (mut send, mut recv) = conn.accept_bi().await.unwrap();
    let request = recv.read_to_end(MAX_REQUEST_BYTES).await.unwrap();
    let (seed, size) = parse_request(&request)
        .unwrap_or_else(|| panic!("malformed request {:?}", String::from_utf8_lossy(&request)));
    send.write_all(&pattern(seed, size)).await.unwrap();
    send.finish().unwrap();
    let closed = conn.closed().await;
    assert!(
        matches!(
            closed,
            quinn::ConnectionError::ApplicationClosed(_)
                | quinn::ConnectionError::ConnectionClosed(_)
        ),
        "aioquic client ended the connection with {closed}"
    );
    Served {
        controller: controller_name(conn.congestion_state()),
        stats: conn.stats(),
    }
}

/// Runs the aioquic client against `server`; its exit status, stdout, and the
/// body it wrote.
async fn aioquic_fetch(
    credentials: &Credentials,
    server: SocketAddr,
    path: &str,
    out: &Path,
) -> (ExitStatus, String, Vec<u8>) {
    let child = peer_command()
        .arg("client")
        .arg("--ca")
        .arg(credentials.cert_pem())
        .arg("--port")
        .arg(server.port().to_string())
        .arg("--path")
        .arg(path)
        .arg("--out")
        .arg(out)
        .arg("--timeout")
        .arg(STEP_TIMEOUT.as_secs().to_string())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().await.unwrap();
    let body = std::fs::read(out).unwrap_or_default();
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (output.status, stdout, body)
}

#[tokio::test]
async fn aioquic_client_fetches_a_file_from_a_quinn_server() {
    let test = "aioquic_client_fetches_a_file_from_a_quinn_server";
    if !interop_available(test).await {
        return;
    }
    let credentials = Credentials::new("quinn-server");
    let expected = pattern(SEED, SIZE);
    let expected_report = format!("{SIZE} {:x}", Sha256::digest(&expected));
    let path = pattern_path(SEED, SIZE);
    for kind in KINDS {
        let endpoint = Endpoint::server(server_config(kind, &credentials), localhost()).unwrap();
        let addr = endpoint.local_addr().unwrap();
        let out = credentials.dir.join(format!("{kind}.bin"));
        let exchange = async {
            tokio::join!(
                quinn_serve_one(&endpoint),
                aioquic_fetch(&credentials, addr, &path, &out)
            )
        };
        let (served, (status, report, body)) = timeout(STEP_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| panic!("{kind}: transfer to aioquic took over {STEP_TIMEOUT:?}"));
        assert!(
            status.success(),
            "{kind}: aioquic client failed ({status}); see its stderr above"
        );
        assert_eq!(body.len(), SIZE, "{kind}: body length");
        assert!(body == expected, "{kind}: body differs from the pattern");
        assert_eq!(
            report, expected_report,
            "{kind}: aioquic's own length and SHA-256"
        );
        assert_eq!(served.controller, kind.as_str());
        assert!(
            served.stats.path.cwnd > 0,
            "{kind}: {:?}",
            served.stats.path
        );
        eprintln!(
            "{kind}: served {SIZE} bytes to aioquic in {} packets, {} lost, rtt {:?}, final cwnd {} bytes",
            served.stats.path.sent_packets,
            served.stats.path.lost_packets,
            served.stats.path.rtt,
            served.stats.path.cwnd
        );
        timeout(STEP_TIMEOUT, endpoint.wait_idle())
            .await
            .unwrap_or_else(|_| panic!("{kind}: quinn server did not drain"));
    }
}

#[tokio::test]
async fn aioquic_server_resets_a_malformed_request_and_quinn_reports_it() {
    let test = "aioquic_server_resets_a_malformed_request_and_quinn_reports_it";
    if !interop_available(test).await {
        return;
    }
    let credentials = Credentials::new("malformed");
    let server = AioquicServer::spawn(&credentials).await;
    let exchange = async {
        let mut endpoint = Endpoint::client(localhost()).unwrap();
        endpoint.set_default_client_config(client_config(CongestionKind::BbrV3, &credentials));
        let conn = endpoint
            .connect(server.addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(b"GET /etc/passwd\r\n").await.unwrap();
        send.finish().unwrap();
        let outcome = recv.read_to_end(SIZE + 1).await;
        conn.close(0u32.into(), b"done");
        endpoint.wait_idle().await;
        outcome
    };
    let outcome = timeout(STEP_TIMEOUT, exchange)
        .await
        .expect("aioquic neither answered nor reset the stream");
    match outcome {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
            assert_eq!(code, quinn::VarInt::from_u32(1));
        }
        other => panic!("expected a stream reset, got {other:?}"),
    }
    server.stop().await;
}

#[test]
fn request_parser_matches_the_peer_format() {
    assert_eq!(
        parse_request(format!("GET {}\r\n", pattern_path(9, 100)).as_bytes()),
        Some((9, 100))
    );
    assert_eq!(parse_request(b"GET /pattern/9/100"), None);
    assert_eq!(parse_request(b"PUT /pattern/9/100\r\n"), None);
    assert_eq!(parse_request(b"GET /pattern/9\r\n"), None);
    assert_eq!(
        parse_request(format!("GET /pattern/1/{}\r\n", SIZE + 1).as_bytes()),
        None
    );
    assert_eq!(pattern(3, 70).len(), 70);
    assert_eq!(
        &pattern(3, 70)[..32],
        Sha256::digest([0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]).as_slice()
    );
}
