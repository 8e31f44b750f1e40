use crate::codec::interconnect::{open, Channel, RelayFrame};

use super::*;

#[test]
fn disable_recv_edges_are_not_targets() {
    let mut r = EdgeRoutes::new(100, 8);
    r.upsert(node("a"), 1, 5, &[], false).unwrap();
    r.upsert(node("b"), 2, 5, &[], true).unwrap();
    r.upsert(node("c"), 3, 5, &[], false).unwrap();
    assert_eq!(r.targets(5, node("a")), vec![node("c")]);
    // b starts receiving, then its route goes.
    r.upsert(node("b"), 2, 5, &[], false).unwrap();
    assert_eq!(r.targets(5, node("a")), vec![node("b"), node("c")]);
    assert!(r.remove(node("b"), 2));
    assert_eq!(r.targets(5, node("a")), vec![node("c")]);
}

#[test]
fn centre_routes_never_make_the_centre_a_target() {
    let mut r = EdgeRoutes::new(100, 8);
    r.upsert(NodeId::CENTRE, 1, 5, &[], false).unwrap();
    r.upsert(node("edge-a"), 2, 5, &[], false).unwrap();
    assert_eq!(r.targets(5, node("edge-a")), Vec::<NodeId>::new());
    assert_eq!(r.targets(5, NodeId::CENTRE), vec![node("edge-a")]);
}

#[test]
fn receive_domains_and_limits() {
    let mut r = EdgeRoutes::new(2, 3);
    // rx_domain_ids replace domain_id for receiving.
    r.upsert(node("a"), 1, 5, &[6, 7, 7], false).unwrap();
    assert!(r.targets(5, node("x")).is_empty());
    assert_eq!(r.targets(7, node("x")), vec![node("a")]);
    assert_eq!(
        r.upsert(node("a"), 2, 5, &[1, 2, 3, 4], false),
        Err(RouteLimitError::TooManyDomains)
    );
    r.upsert(node("a"), 2, 5, &[], false).unwrap();
    assert_eq!(
        r.upsert(node("a"), 3, 5, &[], false),
        Err(RouteLimitError::NodeFull)
    );
    assert_eq!(r.session_limit_rejects(), 1);
    // Replacing an existing route is not a new one.
    r.upsert(node("a"), 2, 6, &[], false).unwrap();
    assert!(r.targets(5, node("x")).is_empty());
    assert_eq!(r.remove_node(node("a")), 2);
    assert!(r.is_empty());
    assert!(r.targets(6, node("x")).is_empty());
}

/// §11: text from alice on edge-a to bob-1 + bob-2 (edge-b), carol
/// (edge-c), dave (edge-d), and an edge-e without receivers in the domain:
/// exactly one downstream each to b, c, d; none to a or e.
#[test]
fn one_downstream_per_receiving_edge_never_the_source() {
    let now = crate::test_clock::origin();
    let mut c = DataPlane::centre(DataPlaneConfig::default());
    let mut routes = EdgeRoutes::new(100, 8);
    for (i, (edge, session, domain)) in [
        ("edge-a", 1, 9),
        ("edge-b", 2, 9),
        ("edge-b", 3, 9),
        ("edge-c", 4, 9),
        ("edge-d", 5, 9),
        ("edge-e", 6, 10),
    ]
    .into_iter()
    .enumerate()
    {
        routes
            .upsert(node(edge), session, domain, &[], false)
            .unwrap();
        c.attach(now, params(edge, 100 + i as u64, i as u8 + 1));
    }
    let targets = routes.targets(9, node("edge-a"));
    assert_eq!(
        targets,
        vec![node("edge-b"), node("edge-c"), node("edge-d")]
    );
    let mut text = inner(100);
    text[48] = 4;
    let relay = RelayFrame {
        header: relay_header(9),
        inner: &text,
    };
    let report = c
        .relay_downstream(
            &mut MessageIds::new(),
            WALL,
            1,
            node("edge-a"),
            0,
            &relay,
            targets.iter().map(|n| DownstreamTarget {
                node_id: *n,
                projection_version: 1,
            }),
        )
        .unwrap();
    assert_eq!(report.sent, 3);
    let mut to = Vec::new();
    while let Some(o) = c.poll_transmit() {
        to.push(o.node_id);
    }
    assert_eq!(to, vec![node("edge-b"), node("edge-c"), node("edge-d")]);
}

/// §11: edge-a holds route 101, edge-b routes 201 and 202 in domain 7,
/// edge-b's projection is at version 2: a relay from edge-a targets only
/// edge-b, with required version 2.
#[test]
fn relay_from_a_targets_b_with_its_version() {
    let now = crate::test_clock::origin();
    let mut c = DataPlane::centre(DataPlaneConfig::default());
    c.attach(now, params("edge-a", 1, 1));
    c.attach(now, params("edge-b", 2, 2));
    let mut routes = EdgeRoutes::new(100, 8);
    routes.upsert(node("edge-a"), 101, 7, &[], false).unwrap();
    routes.upsert(node("edge-b"), 201, 7, &[], false).unwrap();
    routes.upsert(node("edge-b"), 202, 7, &[], false).unwrap();
    let versions = |n: NodeId| if n == node("edge-b") { 2 } else { 0 };
    let targets: Vec<DownstreamTarget> = routes
        .targets(7, node("edge-a"))
        .into_iter()
        .map(|n| DownstreamTarget {
            node_id: n,
            projection_version: versions(n),
        })
        .collect();
    let inner = inner(120);
    let relay = RelayFrame {
        header: relay_header(7),
        inner: &inner,
    };
    c.relay_downstream(
        &mut MessageIds::new(),
        WALL,
        3,
        node("edge-a"),
        0,
        &relay,
        targets,
    )
    .unwrap();
    let o = c.poll_transmit().unwrap();
    assert_eq!(c.poll_transmit(), None);
    assert_eq!(o.node_id, node("edge-b"));
    let env = open(&o.datagram, &key_of(2), Channel::Control).unwrap();
    assert_eq!(env.header.projection_version, 2);
    assert_eq!(
        RelayFrame::parse(env.payload)
            .unwrap()
            .header
            .required_projection_version,
        2
    );
}
