//! Deterministic tests of the interconnect data plane: the §11 data-plane
//! vectors of draarl-interconnect, every drop cause with its counter, loop
//! prevention, the wait rule, and property tests.

mod acceptance;
mod device_auth_centre;
mod device_sessions;
mod edge_devices;
mod edge_endpoint_rules;
mod edge_link;
mod edge_routes;
mod handshake;
mod outbound;
mod projection_wait;
mod properties;
mod relay_centre;
mod replay_window;
mod route_refresh;
mod route_sync;
mod session_reconfirm;
mod speaker_lease;

use std::net::SocketAddr;
use std::time::Instant;

use crate::codec::interconnect::{
    seal, Challenge, Channel, DataBind, EnvelopeHeader, Flags, NodeId, NodeKey, RelayFrame,
    RelayHeader, Subtype,
};
use crate::codec::{encode, Header, PacketType};

use super::*;

/// The wall clock of the tests (Unix ms).
pub(super) const WALL: i64 = 1_700_000_000_000;
pub(super) const SESSION_A: u64 = 0xa11ce;
pub(super) const SESSION_B: u64 = 0xb0b;

pub(super) fn key_of(seed: u8) -> NodeKey {
    NodeKey::new(&[seed; 32]).unwrap()
}

pub(super) fn node(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

pub(super) fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub(super) fn params(id: &str, session_id: u64, seed: u8) -> NodeSessionParams {
    NodeSessionParams {
        node_id: node(id),
        session_id,
        key: key_of(seed),
        key_epoch: 1,
    }
}

/// A Type 5 inner packet of `len` bytes from alice/7/BG5ABC.
pub(super) fn inner(len: usize) -> Vec<u8> {
    let mut h = Header::new(PacketType::Voice);
    h.set_username("alice");
    h.ssid = 7;
    h.set_callsign("BG5ABC");
    encode(&h, &vec![0x42; len - 90]).unwrap()
}

pub(super) fn relay_header(domain: u64) -> RelayHeader {
    RelayHeader {
        session_id: 101,
        session_epoch: 1,
        domain_id: domain,
        required_projection_version: 0,
        speaker_lease_id: 9,
    }
}

pub(super) fn relay_payload(domain: u64) -> Vec<u8> {
    let inner = inner(120);
    RelayFrame {
        header: relay_header(domain),
        inner: &inner,
    }
    .to_vec()
    .unwrap()
}

/// An envelope header from `source` in `session` with message `id`, sent
/// at the test wall clock.
pub(super) fn header(source: &str, session: u64, id: u64, subtype: Subtype) -> EnvelopeHeader {
    EnvelopeHeader {
        source: node(source),
        subtype,
        flags: Flags::default(),
        cluster_epoch: 0,
        projection_version: 0,
        node_session_id: session,
        message_id: id,
        sent_at_ms: WALL,
        hop_count: 0,
        key_epoch: 1,
    }
}

/// A RelayUpstream from edge-a (key seed 1) with message `id`.
pub(super) fn upstream(id: u64) -> Vec<u8> {
    seal(
        &header("edge-a", SESSION_A, id, Subtype::RELAY_UPSTREAM),
        &relay_payload(7),
        &key_of(1),
        Channel::Udp,
    )
    .unwrap()
}

/// A centre with edge-a (key seed 1) attached.
pub(super) fn centre(cfg: DataPlaneConfig) -> (DataPlane, Instant) {
    let now = crate::test_clock::origin();
    let mut c = DataPlane::centre(cfg);
    c.attach(now, params("edge-a", SESSION_A, 1));
    (c, now)
}

/// Binds `edge`'s data address to `from` by request, challenge and proof.
pub(super) fn bind(
    c: &mut DataPlane,
    now: Instant,
    edge: &str,
    session: u64,
    seed: u8,
    id: u64,
    from: SocketAddr,
) -> Verdict {
    let fresh = Challenge([seed ^ 0x5a; 32]);
    let reply = c
        .handle_bind_request(now, node(edge), session, &DataBind::Request, fresh)
        .unwrap();
    let DataBind::Challenge(ch) = reply else {
        panic!("{reply:?}");
    };
    let proof = seal(
        &header(edge, session, id, Subtype::DATA_BIND),
        &DataBind::Proof(Some(ch)).to_vec(),
        &key_of(seed),
        Channel::Udp,
    )
    .unwrap();
    c.handle_datagram(now, WALL, from, &proof)
}
