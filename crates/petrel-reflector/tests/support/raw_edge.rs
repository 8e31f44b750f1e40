//! A hand-driven edge for testing a centre (draarl-interconnect §3.2,
//! §3.4, §3.7, §4.5): a pinned TLS control connection that completes the
//! `node_enroll` handshake and keeps the session key from `node_auth_ok`,
//! seals and opens `type0` envelopes with it, acknowledges route deltas
//! and commits so the centre keeps the session, and optionally a UDP
//! socket bound by a DataBind request over TLS and a proof over UDP.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;
use petrel_reflector::codec::interconnect::messages::{
    DeviceAuthRequest, DeviceAuthResponse, RouteAck, SpeakerLease,
};
use petrel_reflector::codec::interconnect::{
    encode_frame, open, seal, Channel, ControlMessage, DataBind, EnvelopeHeader, Flags,
    FrameReader, NodeId, NodeKey, RelayFrame, RelayHeader, Subtype, MAX_CONTROL_FRAME,
};
use petrel_reflector::model::NodeCredential;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_rustls::client::TlsStream;

use super::control_client::authenticate;

/// The wall clock, Unix ms.
pub fn wall_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// One envelope the centre sent over TLS.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its fields.
    pub header: EnvelopeHeader,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// A test edge; see the module docs.
pub struct RawEdge {
    /// The node id.
    pub node: NodeId,
    /// The node session id from `node_auth_ok`.
    pub session_id: u64,
    /// The session key.
    pub key: NodeKey,
    /// Its raw bytes.
    pub key_bytes: Vec<u8>,
    tls: TlsStream<TcpStream>,
    frames: FrameReader,
    inbox: VecDeque<Received>,
    next_id: u64,
    /// The UDP socket, once [`RawEdge::bind_udp`] ran.
    pub udp: Option<UdpSocket>,
}

impl RawEdge {
    /// Connects to `control` (certificate pinned by `pin`) as `cred` and
    /// completes the handshake.
    pub async fn connect(control: SocketAddr, pin: [u8; 32], cred: &NodeCredential) -> Self {
        let (tls, ok) = authenticate(control, pin, cred).await;
        let key_bytes = STANDARD_NO_PAD.decode(&ok.key).unwrap();
        Self {
            node: NodeId::new(cred.node_id()).unwrap(),
            session_id: ok.session_id,
            key: NodeKey::new(&key_bytes).unwrap(),
            key_bytes,
            tls,
            frames: FrameReader::new(),
            inbox: VecDeque::new(),
            next_id: 1,
            udp: None,
        }
    }

    /// The next MessageID of this edge.
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// The envelope header of a message of `subtype` from this edge.
    pub fn header(&mut self, subtype: Subtype, flags: Flags) -> EnvelopeHeader {
        EnvelopeHeader {
            source: self.node,
            subtype,
            flags,
            cluster_epoch: 0,
            projection_version: 0,
            node_session_id: self.session_id,
            message_id: self.next_id(),
            sent_at_ms: wall_ms(),
            hop_count: 0,
            key_epoch: 1,
        }
    }

    /// Sends `payload` as a `type0` control envelope of `subtype`; its
    /// MessageID.
    pub async fn send(&mut self, subtype: Subtype, payload: &[u8]) -> u64 {
        let h = self.header(subtype, Flags::CONTROL.with(Flags::ACK));
        self.send_sealed(&h, payload).await;
        h.message_id
    }

    /// Seals `payload` under `h` and sends it as a `type0` frame.
    pub async fn send_sealed(&mut self, h: &EnvelopeHeader, payload: &[u8]) {
        let sealed = seal(h, payload, &self.key, Channel::Control).unwrap();
        self.send_frame(&ControlMessage::type0(&sealed, h.message_id))
            .await;
    }

    /// Sends one control frame.
    pub async fn send_frame(&mut self, msg: &ControlMessage) {
        let frame = encode_frame(msg, MAX_CONTROL_FRAME).unwrap();
        self.tls.write_all(&frame).await.unwrap();
    }

    /// Sends `payload` as JSON of `subtype`.
    pub async fn send_json<T: serde::Serialize>(&mut self, subtype: Subtype, payload: &T) -> u64 {
        self.send(subtype, &serde_json::to_vec(payload).unwrap())
            .await
    }

    /// Reads frames for at most `within`, acknowledging route deltas and
    /// commits, and queues every envelope; false when the connection
    /// closed.
    async fn pump(&mut self, within: Duration) -> bool {
        let mut buf = [0u8; 16_384];
        let n = match tokio::time::timeout(within, self.tls.read(&mut buf)).await {
            Err(_) => return true,
            Ok(Ok(0) | Err(_)) => return false,
            Ok(Ok(n)) => n,
        };
        for msg in self.frames.feed(&buf[..n]).unwrap() {
            if msg.kind != "type0" {
                continue;
            }
            let env = msg.type0_envelope().unwrap();
            let opened = open(&env, &self.key, Channel::Control).unwrap();
            let r = Received {
                header: opened.header,
                payload: opened.payload.to_vec(),
            };
            if matches!(
                r.header.subtype,
                Subtype::ROUTE_DELTA | Subtype::ROUTE_SNAPSHOT_COMMIT
            ) {
                let ack = RouteAck {
                    cluster_epoch: r.header.cluster_epoch,
                    projection_version: r.header.projection_version,
                    ack_for_message_id: r.header.message_id,
                    error: String::new(),
                };
                self.send_json(Subtype::ROUTE_ACK, &ack).await;
            }
            self.inbox.push_back(r);
        }
        true
    }

    /// The next envelope of `subtype` within `within` (earlier envelopes
    /// of other subtypes stay queued).
    pub async fn recv(&mut self, subtype: Subtype, within: Duration) -> Option<Received> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(i) = self.inbox.iter().position(|r| r.header.subtype == subtype) {
                return self.inbox.remove(i);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.pump(left).await {
                return None;
            }
        }
    }

    /// The next envelope of `subtype` decoded as `T`.
    pub async fn recv_json<T: serde::de::DeserializeOwned>(
        &mut self,
        subtype: Subtype,
        within: Duration,
    ) -> Option<(EnvelopeHeader, T)> {
        let r = self.recv(subtype, within).await?;
        Some((r.header, serde_json::from_slice(&r.payload).unwrap()))
    }

    /// Drops every queued envelope and reads for `within`: what arrived
    /// of `subtype`.
    pub async fn drain(&mut self, subtype: Subtype, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if !self
                .pump(deadline.saturating_duration_since(Instant::now()))
                .await
            {
                break;
            }
        }
        let (hit, keep): (Vec<_>, Vec<_>) = self
            .inbox
            .drain(..)
            .partition(|r| r.header.subtype == subtype);
        self.inbox = keep.into();
        hit
    }

    /// Binds a UDP socket on `ip` and its address at the centre (§4.5): a
    /// DataBind request over TLS, the challenge back, the proof over UDP
    /// to `centre_udp`; waits until `bound` says the centre took it.
    pub async fn bind_udp(&mut self, ip: IpAddr, centre_udp: SocketAddr) {
        let sock = UdpSocket::bind(SocketAddr::new(ip, 0)).await.unwrap();
        self.send(Subtype::DATA_BIND, &DataBind::Request.to_vec())
            .await;
        let challenge = self
            .recv(Subtype::DATA_BIND, Duration::from_secs(5))
            .await
            .expect("a challenge");
        let DataBind::Challenge(c) = DataBind::parse(&challenge.payload).unwrap() else {
            panic!("not a challenge");
        };
        let h = self.header(Subtype::DATA_BIND, Flags::default());
        let proof = seal(
            &h,
            &DataBind::Proof(Some(c)).to_vec(),
            &self.key,
            Channel::Udp,
        )
        .unwrap();
        sock.send_to(&proof, centre_udp).await.unwrap();
        self.udp = Some(sock);
    }

    /// Proxies the login `packet` of a device at `ip` (0x20) and returns
    /// the centre's answer (within 5 s).
    pub async fn device_auth(&mut self, ip: &str, packet: Vec<u8>) -> DeviceAuthResponse {
        let request_id = self.next_id();
        let req = DeviceAuthRequest {
            request_id,
            source_ip: ip.to_owned(),
            packet,
        };
        self.send_json(Subtype::DEVICE_AUTH, &req).await;
        let (_, resp): (_, DeviceAuthResponse) = self
            .recv_json(Subtype::DEVICE_AUTH, Duration::from_secs(5))
            .await
            .expect("a DeviceAuth answer");
        assert_eq!(resp.request_id, request_id);
        resp
    }

    /// Claims the speaker lease of `domain` for the device session
    /// (`session_id`, `session_epoch`) (0x28) and returns the answer.
    pub async fn claim_lease(
        &mut self,
        session_id: u64,
        session_epoch: u64,
        domain: u64,
    ) -> SpeakerLease {
        let request_id = self.next_id();
        let claim = SpeakerLease {
            action: "claim".into(),
            request_id,
            session_id,
            session_epoch,
            domain_id: domain,
            ..SpeakerLease::default()
        };
        self.send_json(Subtype::SPEAKER_LEASE, &claim).await;
        let (_, answer): (_, SpeakerLease) = self
            .recv_json(Subtype::SPEAKER_LEASE, Duration::from_secs(5))
            .await
            .expect("a lease answer");
        assert_eq!(answer.request_id, request_id);
        answer
    }

    /// A RelayUpstream (§4.6) of `inner` with `relay`'s header, sealed for
    /// UDP under this session (a fresh MessageID, sent now, hop 0).
    pub fn upstream(&mut self, relay: RelayHeader, inner: &[u8]) -> Vec<u8> {
        let h = self.header(Subtype::RELAY_UPSTREAM, Flags::default());
        self.upstream_with(&h, relay, inner, &self.key.clone())
    }

    /// [`RawEdge::upstream`] under envelope header `h`, sealed with `key`.
    pub fn upstream_with(
        &self,
        h: &EnvelopeHeader,
        relay: RelayHeader,
        inner: &[u8],
        key: &NodeKey,
    ) -> Vec<u8> {
        let payload = RelayFrame {
            header: relay,
            inner,
        }
        .to_vec()
        .unwrap();
        seal(h, &payload, key, Channel::Udp).unwrap()
    }

    /// Sends `datagram` from the bound UDP socket to `to`.
    pub async fn send_udp(&self, datagram: &[u8], to: SocketAddr) {
        self.udp
            .as_ref()
            .unwrap()
            .send_to(datagram, to)
            .await
            .unwrap();
    }

    /// The next datagram on the UDP socket within `within`.
    pub async fn recv_udp(&self, within: Duration) -> Option<Vec<u8>> {
        let mut buf = [0u8; 2048];
        let sock = self.udp.as_ref()?;
        match tokio::time::timeout(within, sock.recv_from(&mut buf)).await {
            Ok(Ok((n, _))) => Some(buf[..n].to_vec()),
            _ => None,
        }
    }
}
