//! A centre's speaker leases over a real server with `[interconnect]`
//! and loopback TLS (draarl-interconnect §3.10, §3.8, §6.2): devices of
//! two edges in one domain claim the floor; one is granted, the other
//! denied until the holder releases it, goes idle (900 ms), reports its
//! session gone, or its edge disconnects. A claim for a session the edge
//! does not own is denied with retry 0. Every test runs on SQLite and
//! PostgreSQL.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::time::{Duration, Instant};

use petrel_reflector::codec::interconnect::messages::{
    DeviceGrant, DeviceSessionReport, SpeakerLease,
};
use petrel_reflector::codec::interconnect::Subtype;
use petrel_reflector::model::ServerConfig;
use petrel_reflector::runtime::interconnect::add_edge_node;
use petrel_reflector::runtime::server::ServerHandle;

use support::control_client::loopback_cfg;
use support::raw_edge::{wall_ms, RawEdge};
use support::Env;

on_every_backend!(one_talker_per_domain_across_edges_until_release_idle_or_gone);

const PW: &str = "Secret12";
const DOMAIN: u64 = 999;

async fn login(edge: &mut RawEdge, name: &str) -> DeviceGrant {
    let resp = edge
        .device_auth("192.0.2.1", support::heartbeat(name, 7, PW, &[0; 24]))
        .await;
    assert!(resp.success, "{resp:?}");
    resp.grant.unwrap()
}

async fn claim(edge: &mut RawEdge, g: &DeviceGrant) -> SpeakerLease {
    edge.claim_lease(g.route.session_id, g.route.session_epoch, DOMAIN)
        .await
}

fn granted(l: &SpeakerLease) -> u64 {
    assert_eq!((l.action.as_str(), l.ttl_ms), ("grant", 1200), "{l:?}");
    assert!(l.lease_id != 0);
    l.lease_id
}

fn denied(l: &SpeakerLease) -> u32 {
    assert_eq!(l.action, "deny", "{l:?}");
    l.retry_after_ms
}

fn one_talker_per_domain_across_edges_until_release_idle_or_gone(env: &Env) {
    env.rt.block_on(async {
        let store = support::open_cheap(&env.db).await;
        support::add_users(
            &store,
            [
                support::account("alice", "BA1AA".into(), 4_600_001, PW),
                support::account("bob", "BA1BB".into(), 4_600_002, PW),
            ],
        )
        .await;
        let ta = add_edge_node(&store, Some("edge-a"), &loopback_cfg())
            .await
            .unwrap();
        let tb = add_edge_node(&store, Some("edge-b"), &loopback_cfg())
            .await
            .unwrap();
        store.close().await;
        let cfg = ServerConfig {
            interconnect: loopback_cfg(),
            ..support::udp_config(&env.db)
        };
        let server = ServerHandle::start(cfg).await.unwrap();
        let control = server.control_addr().unwrap();
        let mut a = RawEdge::connect(control, ta.pin.unwrap(), &ta.credential).await;
        let mut b = RawEdge::connect(control, tb.pin.unwrap(), &tb.credential).await;
        let alice = login(&mut a, "alice").await;
        let bob = login(&mut b, "bob").await;

        // alice gets the floor; bob is denied with a retry within the
        // idle time; a claim for a session edge-b does not own: retry 0.
        let l1 = granted(&claim(&mut a, &alice).await);
        let retry = denied(&claim(&mut b, &bob).await);
        assert!((1..=900).contains(&retry), "{retry}");
        assert_eq!(denied(&claim(&mut b, &alice).await), 0);
        // A renewal keeps the id.
        assert_eq!(granted(&claim(&mut a, &alice).await), l1);

        // alice releases: bob gets a new lease at once.
        let release = SpeakerLease {
            action: "release".into(),
            session_id: alice.route.session_id,
            session_epoch: alice.route.session_epoch,
            domain_id: DOMAIN,
            lease_id: l1,
            ..SpeakerLease::default()
        };
        a.send_json(Subtype::SPEAKER_LEASE, &release).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let l2 = granted(&claim(&mut b, &bob).await);
        assert_ne!(l2, l1);
        denied(&claim(&mut a, &alice).await);

        // bob falls silent: after 900 ms his lease is dead, alice gets one.
        tokio::time::sleep(Duration::from_millis(950)).await;
        let l3 = granted(&claim(&mut a, &alice).await);
        assert!(l3 != l1 && l3 != l2);
        denied(&claim(&mut b, &bob).await);

        // edge-a reports alice gone: her lease goes with the session.
        let report = DeviceSessionReport {
            session_id: alice.route.session_id,
            session_epoch: alice.route.session_epoch,
            online: false,
            reason: "device_timeout".into(),
            reported_at_ms: wall_ms(),
            ..DeviceSessionReport::default()
        };
        a.send_json(Subtype::DEVICE_SESSION_REPORT, &report).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        granted(&claim(&mut b, &bob).await);
        let bob_granted = Instant::now();

        // bob's edge disconnects: every lease it held is released.
        let alice = login(&mut a, "alice").await;
        denied(&claim(&mut a, &alice).await);
        drop(b);
        // Granted before bob's lease could have gone idle.
        loop {
            let l = claim(&mut a, &alice).await;
            assert!(
                bob_granted.elapsed() < Duration::from_millis(850),
                "edge-b's lease outlived its session"
            );
            if l.action == "grant" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.shutdown().await;
    });
}
