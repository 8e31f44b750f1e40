use crate::codec::interconnect::{open, Channel, DataBind, RelayFrame, Subtype};

use super::*;

const CENTRE_UDP: &str = "10.0.0.1:60050";

fn edge(id: &str, session: u64, seed: u8) -> (DataPlane, Instant) {
    let now = crate::test_clock::origin();
    let mut e = DataPlane::edge(node(id), DataPlaneConfig::default());
    e.attach(now, params("center", session, seed));
    (e, now)
}

#[test]
fn message_ids_start_at_one_and_never_yield_zero() {
    let mut ids = MessageIds::new();
    assert_eq!((ids.next_id(), ids.next_id()), (1, 2));
}

#[test]
fn upstream_then_downstream_end_to_end() {
    let mut edge_ids = MessageIds::new();
    let mut centre_ids = MessageIds::new();
    let (mut a, now) = edge("edge-a", SESSION_A, 1);
    let (mut centre, _) = super::centre(DataPlaneConfig::default());
    centre.attach(now, params("edge-b", SESSION_B, 2));
    centre.attach(now, params("edge-c", 3, 3));

    // Edge-a binds its data address: request over TLS, proof over UDP.
    assert!(a.set_centre_address(Some(addr(CENTRE_UDP))));
    let DataBind::Challenge(ch) = centre
        .handle_bind_request(
            now,
            node("edge-a"),
            SESSION_A,
            &DataBind::Request,
            Challenge([4; 32]),
        )
        .unwrap()
    else {
        panic!()
    };
    a.send_proof(&mut edge_ids, WALL, ch).unwrap();
    let proof = a.poll_transmit().unwrap();
    assert_eq!(proof.path, Path::Udp(addr(CENTRE_UDP)));
    let a_addr = addr("10.0.0.2:60050");
    assert_eq!(
        centre.handle_datagram(now, WALL, a_addr, &proof.datagram),
        Verdict::Bound(a_addr)
    );

    // One upstream: PV = the edge's version, epoch 0, hop 0.
    let inner = inner(200);
    let relay = RelayFrame {
        header: relay_header(7),
        inner: &inner,
    };
    a.relay_upstream(&mut edge_ids, WALL, 5, &relay).unwrap();
    let up = a.poll_transmit().unwrap();
    assert_eq!(a.poll_transmit(), None);
    assert_eq!((up.node_id, up.session_id), (NodeId::CENTRE, SESSION_A));
    let env = open(&up.datagram, &key_of(1), Channel::Udp).unwrap();
    assert_eq!(env.header.source, node("edge-a"));
    assert_eq!(env.header.subtype, Subtype::RELAY_UPSTREAM);
    assert_eq!(
        (
            env.header.cluster_epoch,
            env.header.projection_version,
            env.header.hop_count
        ),
        (0, 5, 0)
    );
    assert_eq!(env.header.message_id, 2);
    assert_eq!(
        centre.handle_datagram(now, WALL, a_addr, &up.datagram),
        Verdict::Queued
    );
    let got = centre.poll_accepted(now).unwrap();
    let relay_in = got.relay().unwrap();
    assert_eq!(relay_in.header.required_projection_version, 5);
    assert_eq!(relay_in.inner, &inner[..]);

    // Downstream: b is bound (UDP), c is not (control path); a is the
    // source; center and repeats are skipped.
    bind(
        &mut centre,
        now,
        "edge-b",
        SESSION_B,
        2,
        1,
        addr("10.0.0.3:60050"),
    );
    let targets = [
        DownstreamTarget {
            node_id: node("edge-a"),
            projection_version: 9,
        },
        DownstreamTarget {
            node_id: node("edge-b"),
            projection_version: 2,
        },
        DownstreamTarget {
            node_id: NodeId::CENTRE,
            projection_version: 0,
        },
        DownstreamTarget {
            node_id: node("edge-b"),
            projection_version: 2,
        },
        DownstreamTarget {
            node_id: node("edge-c"),
            projection_version: 4,
        },
        DownstreamTarget {
            node_id: node("edge-z"),
            projection_version: 1,
        },
    ];
    let report = centre
        .relay_downstream(
            &mut centre_ids,
            WALL,
            77,
            got.node_id,
            got.header.hop_count,
            &relay_in,
            targets,
        )
        .unwrap();
    assert_eq!(
        report,
        FanoutReport {
            sent: 2,
            skipped_source: 1,
            skipped_centre: 1,
            skipped_duplicate: 1,
            skipped_no_session: 1
        }
    );
    let to_b = centre.poll_transmit().unwrap();
    let to_c = centre.poll_transmit().unwrap();
    assert_eq!(centre.poll_transmit(), None);
    assert_eq!(
        (to_b.node_id, to_b.path),
        (node("edge-b"), Path::Udp(addr("10.0.0.3:60050")))
    );
    assert_eq!((to_c.node_id, to_c.path), (node("edge-c"), Path::Control));
    for (o, seed, session, pv) in [(&to_b, 2, SESSION_B, 2), (&to_c, 3, 3, 4)] {
        let env = open(&o.datagram, &key_of(seed), Channel::Control).unwrap();
        let h = env.header;
        assert_eq!(
            (h.source, h.subtype, h.hop_count),
            (NodeId::CENTRE, Subtype::RELAY_DOWNSTREAM, 1)
        );
        assert_eq!(
            (h.cluster_epoch, h.projection_version, h.node_session_id),
            (77, pv, session)
        );
        let r = RelayFrame::parse(env.payload).unwrap();
        assert_eq!(r.header.required_projection_version, pv);
        assert_eq!(r.header.domain_id, 7);
        assert_eq!(r.inner, &inner[..]);
    }
    assert_eq!(centre.traffic(node("edge-b")).unwrap().out_packets, 1);
    assert_eq!(centre.traffic(node("edge-a")).unwrap().out_packets, 0);

    // Edge-b accepts its copy from the centre.
    let (mut b, _) = edge("edge-b", SESSION_B, 2);
    assert_eq!(
        b.handle_datagram(now, WALL, addr(CENTRE_UDP), &to_b.datagram),
        Verdict::Queued
    );
    let at_b = b.poll_accepted(now).unwrap();
    assert_eq!(at_b.relay().unwrap().header.required_projection_version, 2);
}

#[test]
fn hop_count_and_roles_are_enforced() {
    let mut ids = MessageIds::new();
    let (mut c, _) = centre(DataPlaneConfig::default());
    let inner = inner(120);
    let relay = RelayFrame {
        header: relay_header(7),
        inner: &inner,
    };
    let t = [DownstreamTarget {
        node_id: node("edge-a"),
        projection_version: 0,
    }];
    assert_eq!(
        c.relay_downstream(&mut ids, WALL, 1, NodeId::CENTRE, 2, &relay, t),
        Err(BuildError::HopLimit(3))
    );
    // A centre-originated relay goes to every target edge, hop 1.
    let r = c
        .relay_downstream(&mut ids, WALL, 1, NodeId::CENTRE, 0, &relay, t)
        .unwrap();
    assert_eq!(r.sent, 1);
    let sent = c.poll_transmit().unwrap();
    let env = open(&sent.datagram, &key_of(1), Channel::Control).unwrap();
    assert_eq!(env.header.hop_count, 1);
    assert_eq!(
        c.relay_upstream(&mut ids, WALL, 0, &relay),
        Err(BuildError::WrongRole)
    );
    let mut bad = relay;
    bad.header.domain_id = 0;
    assert!(matches!(
        c.relay_downstream(&mut ids, WALL, 1, NodeId::CENTRE, 0, &bad, t),
        Err(BuildError::Relay(_))
    ));
    assert_eq!(c.poll_transmit(), None);

    let (mut e, _) = edge("edge-a", SESSION_A, 1);
    assert_eq!(
        e.relay_downstream(&mut ids, WALL, 1, NodeId::CENTRE, 0, &relay, t),
        Err(BuildError::WrongRole)
    );
    assert_eq!(
        e.send_proof(&mut ids, WALL, Challenge([0; 32])),
        Err(BuildError::NoDataAddress)
    );
    // Without CenterUDP the upstream takes the control path.
    e.relay_upstream(&mut ids, WALL, 0, &relay).unwrap();
    assert_eq!(e.poll_transmit().unwrap().path, Path::Control);
    let mut lonely = DataPlane::edge(node("edge-q"), DataPlaneConfig::default());
    assert_eq!(
        lonely.relay_upstream(&mut ids, WALL, 0, &relay),
        Err(BuildError::NoSession)
    );
}

#[test]
fn outbound_queue_is_bounded() {
    let mut ids = MessageIds::new();
    let cfg = DataPlaneConfig {
        outbound_capacity: 2,
        ..DataPlaneConfig::default()
    };
    let now = crate::test_clock::origin();
    let mut e = DataPlane::edge(node("edge-a"), cfg);
    e.attach(now, params("center", 1, 1));
    let inner = inner(120);
    let relay = RelayFrame {
        header: relay_header(7),
        inner: &inner,
    };
    for _ in 0..3 {
        e.relay_upstream(&mut ids, WALL, 0, &relay).unwrap();
    }
    assert_eq!(e.bridge().outbound_evictions, 1);
    let sent = e.poll_transmit().unwrap();
    let first = open(&sent.datagram, &key_of(1), Channel::Control).unwrap();
    assert_eq!(first.header.message_id, 2);
}
