//! A real quinn connection over loopback per Petrel controller: the client uploads
//! 4 MiB on a unidirectional stream with the controller installed through
//! `PetrelControllerFactory`; the server reads it all. Checks the bytes and that the
//! connection really ran the Petrel controller.
#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use petrel_proto::cc::{Bbr, CongestionController, CongestionKind, Cubic, NewReno};
use petrel_quic::{PetrelController, PetrelControllerFactory};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ClientConfig, Endpoint, ServerConfig, TransportConfig};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};

const SIZE: usize = 4 << 20;

fn configs(kind: CongestionKind) -> (ServerConfig, ClientConfig) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert_der = CertificateDer::from(cert.cert);
    let key = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());

    let server_tls = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key.into())
        .unwrap();
    let server =
        ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(server_tls).unwrap()));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let client_tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut client = ClientConfig::new(Arc::new(QuicClientConfig::try_from(client_tls).unwrap()));
    let mut transport = TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(PetrelControllerFactory::with_seed(kind, 1)));
    client.transport_config(Arc::new(transport));
    (server, client)
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

async fn transfer(kind: CongestionKind) {
    let (server_config, client_config) = configs(kind);
    let localhost = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let server = Endpoint::server(server_config, localhost).unwrap();
    let server_addr = server.local_addr().unwrap();
    let receiver = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let mut stream = conn.accept_uni().await.unwrap();
        let data = stream.read_to_end(SIZE + 1).await.unwrap();
        conn.close(0u32.into(), b"done");
        server.wait_idle().await;
        data
    });

    let mut client = Endpoint::client(localhost).unwrap();
    client.set_default_client_config(client_config);
    let conn = client
        .connect(server_addr, "localhost")
        .unwrap()
        .await
        .unwrap();
    let mut stream = conn.open_uni().await.unwrap();
    let payload: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    stream.write_all(&payload).await.unwrap();
    stream.finish().unwrap();
    let received = receiver.await.unwrap();
    assert_eq!(received.len(), SIZE, "{kind}");
    assert!(received == payload, "{kind}: corrupted");
    assert_eq!(controller_name(conn.congestion_state()), kind.as_str());
    let stats = conn.stats();
    assert!(stats.path.cwnd > 0);
    conn.close(0u32.into(), b"bye");
    client.wait_idle().await;
}

#[tokio::test]
async fn every_petrel_controller_carries_a_quinn_transfer() {
    for kind in [
        CongestionKind::NewReno,
        CongestionKind::Cubic,
        CongestionKind::BbrV1,
        CongestionKind::BbrV2,
        CongestionKind::BbrV3,
    ] {
        transfer(kind).await;
    }
}
