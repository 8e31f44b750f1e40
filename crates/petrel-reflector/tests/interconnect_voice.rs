//! Voice between a real centre and real edges, end to end over loopback
//! (draarl-interconnect §3.6, §3.8, §3.10, §4.5, §5, §6.1, §6.4): a
//! `ServerHandle` centre with `[interconnect]` over a SQLite store with
//! accounts, `EdgeServer` edges enrolled in it, and devices on their own
//! 127.0.0.x addresses. Devices log in through edges (a wrong password
//! gets the ordinary reject); voice from an edge reaches the devices of
//! both edges and the centre's own once and in order, never its sender,
//! and nothing comes back to its edge; two edges hold a floor against each other through the
//! centre's speaker lease; without the centre each edge keeps its local
//! voice, and after the centre is back voice crosses again, once; an edge
//! restart has its devices log in again while the other edge's keep
//! working.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

use std::time::Duration;

use petrel_reflector::codec::PacketType;
use petrel_reflector::core::interconnect::LinkState;
use petrel_reflector::runtime::server::ServerHandle;

use support::cluster::{
    bound_edge, centre, centre_config, edge_cfg, frames, on_sqlite, talk, FLOOR_IDLE, PW, QUIET,
    RECONNECT, SETTLE,
};
use support::edge_devices::{bound, ready_edge, until, Device};

#[test]
fn devices_log_in_through_an_edge_and_its_heartbeats_are_answered_there() {
    on_sqlite("voice_logins", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a"]).await;
            // Every heartbeat renews (the grant lasts 2 min), and a device
            // silent for 3 s is dropped.
            let mut cfg = edge_cfg(&server, &tokens[0], Duration::from_secs(15));
            cfg.node.devices.sessions.renew_before = Duration::from_secs(150);
            cfg.node.devices.sessions.device_timeout = Duration::from_secs(3);
            let ea = ready_edge(cfg).await;
            let at = ea.local_addr();
            let alice = Device::new(41, "alice", 1, PW).await;
            let bob = Device::new(42, "bob", 1, PW).await;
            let mallory = Device::new(43, "mallory", 1, "Wrong123").await;
            let a = alice.login(at).await;
            assert_eq!(a.callsign_str(), Some("BA1AA"));
            assert!(a.password_bytes().is_empty());
            assert_eq!(bob.login(at).await.callsign_str(), Some("BA1BB"));
            // A wrong password gets the ordinary reject.
            let m = mallory.login(at).await;
            assert_eq!(m.callsign_str(), Some(""));
            let requests = ea.stats().session.auth_requests;
            assert_eq!(requests, 3);
            // Later heartbeats are answered by the edge.
            assert_eq!(alice.login(at).await.callsign_str(), Some("BA1AA"));
            assert_eq!(ea.stats().session.auth_requests, requests);
            // Local text: bob once, rewritten with alice's identity.
            alice.send(at, PacketType::Text, b"hi bob").await;
            let got = bob.packets(PacketType::Text, SETTLE).await;
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].0.callsign_str(), Some("BA1AA"));
            assert_eq!(got[0].0.dmrid, 4_600_001);
            assert!(got[0].0.password_bytes().is_empty());
            assert_eq!(got[0].1, b"hi bob");
            assert!(alice.received(PacketType::Text, QUIET).await.is_empty());
            let s = ea.stats();
            assert_eq!((s.session.installed, s.session.auth_failed), (2, 1));
            // The centre renewed the grant on the local heartbeat.
            assert!(s.session.renews_sent >= 1, "{:?}", s.session);
            until("a renewal", || ea.stats().session.renews_ok >= 1).await;
            assert_eq!(ea.stats().session.renews_failed, 0);
            // Silent devices are dropped and reported; the centre lets them
            // log in again.
            until("the silent sessions dropped", || ea.stats().sessions == 0).await;
            assert_eq!(alice.login(at).await.callsign_str(), Some("BA1AA"));
            assert_eq!(ea.stats().session.auth_requests, requests + 1);
            ea.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn voice_from_one_edge_reaches_both_edges_once_and_in_order() {
    on_sqlite("voice_cross", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let eb = bound_edge(&server, &tokens[1]).await;
            let alice = Device::new(51, "alice", 1, PW).await;
            let bob = Device::new(52, "bob", 1, PW).await;
            let carol = Device::new(53, "carol", 1, PW).await;
            let dave = Device::new(54, "dave", 1, PW).await;
            alice.login(ea.local_addr()).await;
            bob.login(ea.local_addr()).await;
            carol.login(eb.local_addr()).await;
            dave.login(eb.local_addr()).await;
            // Erin is logged in at the centre directly.
            let erin = Device::new(55, "erin", 1, PW).await;
            assert_eq!(
                erin.login(server.local_addr()).await.callsign_str(),
                Some("BA1EE")
            );
            talk(&alice, ea.local_addr(), 1..=6).await;
            let want = frames(1..=6);
            assert_eq!(bob.received(PacketType::Voice, SETTLE).await, want);
            assert_eq!(carol.received(PacketType::Voice, QUIET).await, want);
            assert_eq!(erin.received(PacketType::Voice, QUIET).await, want);
            let at_dave = dave.packets(PacketType::Voice, QUIET).await;
            assert_eq!(
                at_dave.iter().map(|(_, d)| d.clone()).collect::<Vec<_>>(),
                want
            );
            // Rewritten with alice's identity, Reserved cleared.
            assert_eq!(at_dave[0].0.callsign_str(), Some("BA1AA"));
            assert_eq!(at_dave[0].0.reserved, 0);
            assert!(at_dave[0].0.password_bytes().is_empty());
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            // Text crosses too.
            carol
                .send(eb.local_addr(), PacketType::Text, b"hello a")
                .await;
            assert_eq!(
                alice.received(PacketType::Text, SETTLE).await,
                vec![b"hello a".to_vec()]
            );
            assert_eq!(bob.received(PacketType::Text, QUIET).await.len(), 1);
            assert_eq!(dave.received(PacketType::Text, QUIET).await.len(), 1);
            assert!(carol.received(PacketType::Text, QUIET).await.is_empty());
            // One upstream per frame; edge a got only carol's text back,
            // edge b only alice's voice.
            let (sa, sb) = (ea.stats(), eb.stats());
            assert_eq!(sa.device.upstream_frames, 6);
            assert_eq!(sb.device.upstream_frames, 1);
            assert_eq!(sa.device.downstream_frames, 1);
            assert_eq!(sb.device.downstream_frames, 6);
            ea.shutdown().await;
            eb.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn two_edges_hold_a_floor_against_each_other() {
    on_sqlite("voice_floor", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let eb = bound_edge(&server, &tokens[1]).await;
            let alice = Device::new(61, "alice", 1, PW).await;
            let bob = Device::new(62, "bob", 1, PW).await;
            let carol = Device::new(63, "carol", 1, PW).await;
            alice.login(ea.local_addr()).await;
            bob.login(eb.local_addr()).await;
            carol.login(eb.local_addr()).await;
            // Alice talks; bob, on the other edge, tries to talk meanwhile.
            let (a_at, b_at) = (ea.local_addr(), eb.local_addr());
            let alice_talks = talk(&alice, a_at, 1..=10);
            let bob_tries = async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                talk(&bob, b_at, 101..=105).await;
            };
            tokio::join!(alice_talks, bob_tries);
            // Carol (on bob's edge) heard alice only, bob never got through.
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(1..=10)
            );
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            let lease = eb.stats().lease;
            assert!(lease.denies >= 1, "{lease:?}");
            assert_eq!(lease.released, 0);
            // Once alice is quiet past the idle timeout, bob takes the floor.
            tokio::time::sleep(FLOOR_IDLE).await;
            talk(&bob, b_at, 111..=113).await;
            assert_eq!(
                alice.received(PacketType::Voice, SETTLE).await,
                frames(111..=113)
            );
            assert_eq!(
                carol.received(PacketType::Voice, QUIET).await,
                frames(111..=113)
            );
            ea.shutdown().await;
            eb.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn without_the_centre_voice_stays_local_and_crosses_again_once_it_is_back() {
    on_sqlite("voice_outage", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
            let (udp, control) = (server.local_addr(), server.control_addr().unwrap());
            let ea = bound_edge(&server, &tokens[0]).await;
            let eb = bound_edge(&server, &tokens[1]).await;
            let (a_at, b_at) = (ea.local_addr(), eb.local_addr());
            let alice = Device::new(71, "alice", 1, PW).await;
            let bob = Device::new(72, "bob", 1, PW).await;
            let carol = Device::new(73, "carol", 1, PW).await;
            let dave = Device::new(74, "dave", 1, PW).await;
            alice.login(a_at).await;
            bob.login(a_at).await;
            carol.login(b_at).await;
            dave.login(b_at).await;
            talk(&alice, a_at, 1..=3).await;
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(1..=3)
            );
            let _ = bob.received(PacketType::Voice, QUIET).await;
            let _ = dave.received(PacketType::Voice, QUIET).await;
            // The centre goes away for 5 s.
            server.shutdown().await;
            for e in [&ea, &eb] {
                e.wait_for_state(RECONNECT, |s| matches!(s, LinkState::Disconnected(_)))
                    .await
                    .expect("in grace");
            }
            // Each edge keeps its own voice local; nothing crosses.
            talk(&alice, a_at, 11..=13).await;
            talk(&carol, b_at, 21..=23).await;
            assert_eq!(
                bob.received(PacketType::Voice, SETTLE).await,
                frames(11..=13)
            );
            assert_eq!(
                dave.received(PacketType::Voice, QUIET).await,
                frames(21..=23)
            );
            assert!(carol.received(PacketType::Voice, QUIET).await.is_empty());
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            tokio::time::sleep(Duration::from_secs(4)).await;
            // Back on the same addresses (a new cluster epoch).
            let server = ServerHandle::start(centre_config(env, udp, control))
                .await
                .unwrap();
            for e in [&ea, &eb] {
                e.wait_for_state(RECONNECT, |s| s == LinkState::Ready)
                    .await
                    .expect("ready again");
            }
            let data = server.control_server().unwrap().data_plane();
            bound(&data, "edge-a").await;
            bound(&data, "edge-b").await;
            // Their sessions were reconfirmed (§3.9): each heartbeat is
            // answered with the callsign, by the edge.
            for (d, at) in [(&alice, a_at), (&bob, a_at), (&carol, b_at), (&dave, b_at)] {
                assert!(d
                    .login(at)
                    .await
                    .callsign_str()
                    .is_some_and(|c| !c.is_empty()));
            }
            talk(&alice, a_at, 31..=34).await;
            let want = frames(31..=34);
            assert_eq!(bob.received(PacketType::Voice, SETTLE).await, want);
            assert_eq!(carol.received(PacketType::Voice, QUIET).await, want);
            assert_eq!(dave.received(PacketType::Voice, QUIET).await, want);
            assert!(alice.received(PacketType::Voice, QUIET).await.is_empty());
            ea.shutdown().await;
            eb.shutdown().await;
            server.shutdown().await;
        });
    });
}

#[test]
fn an_edge_restart_has_its_devices_log_in_again_while_the_other_edge_keeps_working() {
    on_sqlite("voice_edge_restart", |env| {
        env.rt.block_on(async {
            let (server, tokens) = centre(env, &["edge-a", "edge-b"]).await;
            let ea = bound_edge(&server, &tokens[0]).await;
            let eb = bound_edge(&server, &tokens[1]).await;
            let b_at = eb.local_addr();
            let alice = Device::new(81, "alice", 1, PW).await;
            let carol = Device::new(83, "carol", 1, PW).await;
            let dave = Device::new(84, "dave", 1, PW).await;
            alice.login(ea.local_addr()).await;
            carol.login(b_at).await;
            dave.login(b_at).await;
            ea.shutdown().await;
            // Edge b's devices keep talking to each other.
            talk(&carol, b_at, 1..=3).await;
            assert_eq!(
                dave.received(PacketType::Voice, SETTLE).await,
                frames(1..=3)
            );
            // Edge a comes back (a new process: new port, no sessions).
            let ea = bound_edge(&server, &tokens[0]).await;
            let a_at = ea.local_addr();
            assert_eq!(ea.stats().sessions, 0);
            // Alice's voice is not taken before she logs in again.
            talk(&alice, a_at, 5..=5).await;
            assert!(carol.received(PacketType::Voice, SETTLE).await.is_empty());
            assert_eq!(alice.login(a_at).await.callsign_str(), Some("BA1AA"));
            talk(&alice, a_at, 11..=13).await;
            assert_eq!(
                carol.received(PacketType::Voice, SETTLE).await,
                frames(11..=13)
            );
            assert_eq!(
                dave.received(PacketType::Voice, QUIET).await,
                frames(11..=13)
            );
            // Dave answers once alice's floor is idle (900 ms, §3.10).
            tokio::time::sleep(FLOOR_IDLE).await;
            talk(&dave, b_at, 21..=22).await;
            assert_eq!(
                alice.received(PacketType::Voice, SETTLE).await,
                frames(21..=22)
            );
            ea.shutdown().await;
            eb.shutdown().await;
            server.shutdown().await;
        });
    });
}
