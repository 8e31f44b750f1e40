//! Session reconfirmation (§3.9, §6.2, §6.3): the batch rules, the
//! centre's entry table and per-item checks, and the edge's batches,
//! swaps, removals and failures.

use std::time::Duration;

use crate::codec::interconnect::messages::{
    ConfirmError, ConfirmItem, ConfirmRequest, ConfirmResponse, ConfirmResult, DeviceGrant,
};
use crate::codec::interconnect::Subtype;
use crate::model::{DeviceRecord, SessionEntryRecord, SessionEntryWrite, UserRecord};

use super::edge_devices::{a, ms, route, Edge};
use super::*;

const WINDOW: Duration = Duration::from_secs(120);

fn item(session_id: u64, owner_id: i64, ssid: u8) -> ConfirmItem {
    ConfirmItem {
        session_id,
        session_epoch: 1,
        control_session_id: 500,
        device_id: owner_id * 256 + i64::from(ssid),
        owner_id,
        ssid,
        ..ConfirmItem::default()
    }
}

#[test]
fn batch_rules() {
    let ok = ConfirmRequest {
        request_id: 1,
        sessions: vec![item(1, 40, 1), item(2, 40, 2)],
    };
    assert_eq!(ok.validate(), Ok(()));
    let empty = ConfirmRequest::default();
    assert_eq!(empty.validate(), Err(ConfirmError::BatchSize(0)));
    let big = ConfirmRequest {
        request_id: 1,
        sessions: (1..=129).map(|i| item(i, i as i64, 1)).collect(),
    };
    assert_eq!(big.validate(), Err(ConfirmError::BatchSize(129)));
    let full = ConfirmRequest {
        request_id: 1,
        sessions: (1..=128).map(|i| item(i, i as i64, 1)).collect(),
    };
    assert_eq!(full.validate(), Ok(()));
    let mut zero = ok.clone();
    zero.sessions[1].control_session_id = 0;
    assert_eq!(zero.validate(), Err(ConfirmError::ZeroId));
    let mut same_session = ok.clone();
    same_session.sessions[1].session_id = 1;
    assert_eq!(same_session.validate(), Err(ConfirmError::Duplicate));
    let mut same_identity = ok.clone();
    same_identity.sessions[1].ssid = 1;
    assert_eq!(same_identity.validate(), Err(ConfirmError::Duplicate));
    let mut ghost_fields = ok.clone();
    ghost_fields.sessions[0].recovery_ticket = "t".into();
    assert_eq!(
        ghost_fields.validate(),
        Err(ConfirmError::PhysicalWithGhostFields)
    );
    let mut ghost = ok;
    ghost.sessions[0].device_id = 0;
    assert_eq!(ghost.validate(), Err(ConfirmError::GhostTicket));
}

fn ctl(n: &str, s: u64) -> ControlRef {
    ControlRef {
        node: node(n),
        control_session: s,
    }
}

fn device(owner_id: i64, ssid: u8) -> DeviceRecord {
    DeviceRecord {
        owner_id,
        ssid,
        dev_model: 2,
        dmrid: 4_600_001,
        group_id: 999,
        disable_send: false,
        disable_recv: false,
        mac: None,
    }
}

fn user(id: i64, enabled: bool, approved: bool) -> UserRecord {
    UserRecord {
        id,
        name: format!("u{id}"),
        callsign: format!("BG{id}"),
        dmrid: 4_600_001,
        enabled,
        approved,
        device_password_hash: None,
        default_group_id: 999,
    }
}

fn check(
    t: &SessionEntries,
    n: &str,
    it: &ConfirmItem,
    d: Option<&DeviceRecord>,
    u: Option<&UserRecord>,
) -> Result<DeviceIdentity, ReconfirmReject> {
    t.check_item(node(n), it, d, u)
}

fn identity(owner_id: i64, ssid: u8) -> DeviceIdentity {
    DeviceIdentity { owner_id, ssid }
}

#[test]
fn per_item_checks_name_their_cause() {
    let mut t = SessionEntries::new(WINDOW, 100);
    t.record(identity(40, 1), 40 * 256 + 1, ctl("edge-a", 500));
    let it = item(9, 40, 1);
    let dev = device(40, 1);
    let u = user(40, true, true);
    assert_eq!(
        check(&t, "edge-a", &it, Some(&dev), Some(&u)),
        Ok(identity(40, 1))
    );
    assert_eq!(
        check(&t, "edge-b", &it, Some(&dev), Some(&u)),
        Err(ReconfirmReject::OtherNode)
    );
    let mut other_control = it.clone();
    other_control.control_session_id = 501;
    assert_eq!(
        check(&t, "edge-a", &other_control, Some(&dev), Some(&u)),
        Err(ReconfirmReject::OtherControlSession)
    );
    assert_eq!(
        check(&t, "edge-a", &it, Some(&dev), Some(&user(40, false, true))),
        Err(ReconfirmReject::AccountDisabled)
    );
    assert_eq!(
        check(&t, "edge-a", &it, Some(&dev), Some(&user(40, true, false))),
        Err(ReconfirmReject::AccountDisabled)
    );
    // The device row must exist and carry the item's owner, SSID and id.
    assert_eq!(
        check(&t, "edge-a", &it, None, Some(&u)),
        Err(ReconfirmReject::IdentityMismatch)
    );
    assert_eq!(
        check(&t, "edge-a", &it, Some(&device(41, 1)), Some(&u)),
        Err(ReconfirmReject::IdentityMismatch)
    );
    let mut wrong_id = it.clone();
    wrong_id.device_id += 1;
    assert_eq!(
        check(&t, "edge-a", &wrong_id, Some(&dev), Some(&u)),
        Err(ReconfirmReject::IdentityMismatch)
    );
    assert_eq!(
        check(&t, "edge-a", &it, Some(&dev), Some(&user(41, true, true))),
        Err(ReconfirmReject::IdentityMismatch)
    );
    assert_eq!(
        check(
            &t,
            "edge-a",
            &item(9, 40, 2),
            Some(&device(40, 2)),
            Some(&u)
        ),
        Err(ReconfirmReject::NoEntry)
    );
    let mut ghost = it;
    ghost.device_id = 0;
    assert_eq!(
        check(&t, "edge-a", &ghost, Some(&dev), Some(&u)),
        Err(ReconfirmReject::Ghost)
    );
    // Counting by cause.
    t.count(Ok(()));
    t.count(Err(ReconfirmReject::AccountDisabled));
    t.count(Err(ReconfirmReject::AccountDisabled));
    let list = t.counters().list();
    let get = |n| list.iter().find(|(k, _)| *k == n).unwrap().1;
    assert_eq!(get("accepted"), 1);
    assert_eq!(get("rejected_account_disabled"), 2);
    assert_eq!(get("rejected_no_entry"), 0);
}

#[test]
fn entries_go_offline_expire_after_the_window_and_are_persisted() {
    let mut t = SessionEntries::new(WINDOW, 100);
    let (a1, b1) = (ctl("edge-a", 1), ctl("edge-b", 2));
    t.record(identity(1, 1), 257, a1);
    t.record(identity(2, 1), 513, a1);
    t.record(identity(3, 1), 769, b1);
    // A report through another control session leaves the entry alone.
    t.clear(identity(1, 1), b1);
    assert_eq!(t.len(), 3);
    t.clear(identity(1, 1), a1);
    assert_eq!(t.len(), 2);
    t.node_offline(a1, WALL);
    assert_eq!(t.get(identity(2, 1)).unwrap().offline_since_ms, Some(WALL));
    assert_eq!(t.get(identity(3, 1)).unwrap().offline_since_ms, None);
    assert_eq!(t.sweep(WALL + 119_999), 0);
    assert_eq!(t.sweep(WALL + 120_000), 1);
    assert!(t.get(identity(2, 1)).is_none());
    assert!(
        t.get(identity(3, 1)).is_some(),
        "online entries never expire"
    );
    assert_eq!(t.counters().entries_expired, 1);
    let mut writes = Vec::new();
    t.take_writes(&mut writes);
    assert_eq!(writes.len(), 6);
    assert!(
        matches!(&writes[0], SessionEntryWrite::Put(r) if r.node_id == "edge-a" && r.control_session == 1 && r.device_id == 257)
    );
    assert!(matches!(
        &writes[3],
        SessionEntryWrite::Clear {
            owner_id: 1,
            ssid: 1,
            control_session: 1,
            ..
        }
    ));
    assert!(matches!(&writes[4], SessionEntryWrite::Offline { at_ms, .. } if *at_ms == WALL));
    assert!(matches!(
        &writes[5],
        SessionEntryWrite::Clear { owner_id: 2, .. }
    ));
    t.take_writes(&mut writes);
    assert_eq!(writes.len(), 6, "drained once");
}

#[test]
fn a_centre_start_loads_entries_offline_from_the_start() {
    let row = |owner_id, node_id: &str, offline_since_ms| SessionEntryRecord {
        owner_id,
        ssid: 1,
        device_id: owner_id * 256 + 1,
        node_id: node_id.into(),
        control_session: 9,
        offline_since_ms,
    };
    let mut t = SessionEntries::new(WINDOW, 2);
    t.load(
        WALL,
        &[
            row(1, "edge-a", 0),
            row(2, "edge-a", WALL - 60_000),
            row(3, "", 0),
        ],
    );
    assert_eq!(t.len(), 2, "an invalid node id is skipped");
    assert_eq!(t.get(identity(1, 1)).unwrap().offline_since_ms, Some(WALL));
    assert_eq!(t.get(identity(2, 1)).unwrap().offline_since_ms, Some(WALL));
    let mut writes = Vec::new();
    t.take_writes(&mut writes);
    assert!(writes.is_empty());
    // Reconfirmed in time: online again, never expires.
    t.record(identity(1, 1), 257, ctl("edge-a", 77));
    assert_eq!(t.sweep(WALL + 120_000), 1);
    assert_eq!(t.len(), 1);
    // Bounded: a newcomer evicts the oldest.
    t.record(identity(5, 1), 1281, ctl("edge-a", 77));
    t.record(identity(6, 1), 1537, ctl("edge-a", 77));
    assert_eq!(t.len(), 2);
    assert!(t.get(identity(1, 1)).is_none());
    assert_eq!(t.counters().entries_evicted, 1);
}

/// An edge with sessions 11.. for `n` users, granted through control
/// session 500.
fn edge_with(n: u8) -> Edge {
    let mut e = Edge::ready();
    e.d.sessions.set_control_session(500);
    for i in 0..n {
        e.login(a(i + 1), &format!("u{i}"), 1, 11 + u64::from(i), 7);
    }
    e.actions();
    e
}

/// The user name of `e`'s session `id`.
fn user_of(e: &Edge, id: u64) -> String {
    e.d.sessions()
        .by_session_id(id)
        .unwrap()
        .grant
        .route
        .username
        .clone()
}

fn batch(step: &ConfirmStep) -> ConfirmRequest {
    let ConfirmStep::Send(send) = step else {
        panic!("{step:?}")
    };
    assert_eq!(send.subtype, Subtype::DEVICE_SESSION_CONFIRM);
    send.decode().unwrap()
}

fn confirmed(it: &ConfirmItem, new_id: u64, user: &str) -> ConfirmResult {
    let mut r = route(new_id, user, it.ssid, 7);
    r.session_epoch = 2;
    ConfirmResult {
        session_id: it.session_id,
        session_epoch: it.session_epoch,
        success: true,
        error: String::new(),
        grant: Some(DeviceGrant {
            route: r,
            owner_id: 40,
            expires_at_ms: WALL + 240_000,
            ..DeviceGrant::default()
        }),
    }
}

fn refused(it: &ConfirmItem) -> ConfirmResult {
    ConfirmResult {
        session_id: it.session_id,
        session_epoch: it.session_epoch,
        success: false,
        error: "account_disabled".into(),
        grant: None,
    }
}

#[test]
fn the_edge_confirms_in_batches_swaps_ids_and_removes_refused_sessions() {
    let mut e = edge_with(130);
    let mut c = EdgeConfirmCounters::default();
    let now = e.t0 + ms(1000);
    let (attempt, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, now, WALL, 600, &mut c);
    let mut attempt = attempt.unwrap();
    let first = batch(&step);
    assert_eq!(first.sessions.len(), 128);
    assert!(first.sessions.iter().all(|i| i.control_session_id == 500));
    assert_eq!(first.request_id, {
        let ConfirmStep::Send(s) = &step else {
            panic!()
        };
        s.message_id
    });
    // An answer to another request is ignored.
    let other = ConfirmResponse {
        request_id: first.request_id + 1,
        results: vec![],
    };
    assert!(attempt
        .handle_response(&mut e.d, &mut e.ids, now, other, &mut c)
        .is_none());
    // First batch: every item but the first confirmed with id + 1000.
    let results: Vec<ConfirmResult> = first
        .sessions
        .iter()
        .enumerate()
        .map(|(n, it)| {
            if n == 0 {
                refused(it)
            } else {
                confirmed(it, it.session_id + 1000, &user_of(&e, it.session_id))
            }
        })
        .collect();
    let resp = ConfirmResponse {
        request_id: first.request_id,
        results,
    };
    let step = attempt
        .handle_response(&mut e.d, &mut e.ids, now, resp, &mut c)
        .unwrap();
    let second = batch(&step);
    assert_eq!(second.sessions.len(), 2);
    assert_eq!(e.d.sessions().len(), 129);
    let refused_id = first.sessions[0].session_id;
    assert!(e.d.sessions().by_session_id(refused_id).is_none());
    let moved = first.sessions[1].session_id;
    assert!(e.d.sessions().by_session_id(moved).is_none());
    let s = e.d.sessions().by_session_id(moved + 1000).unwrap();
    assert_eq!((s.session_epoch(), s.control_session()), (2, 600));
    assert_eq!(s.grant.expires_at_ms, WALL + 240_000);
    // The refusal is not reported (the centre does not own it).
    assert!(e.actions().is_empty());
    let results = second
        .sessions
        .iter()
        .map(|it| confirmed(it, it.session_id + 1000, &user_of(&e, it.session_id)))
        .collect();
    let step = attempt
        .handle_response(
            &mut e.d,
            &mut e.ids,
            now,
            ConfirmResponse {
                request_id: second.request_id,
                results,
            },
            &mut c,
        )
        .unwrap();
    assert_eq!(step, ConfirmStep::Done);
    assert_eq!(
        (
            c.attempts,
            c.batches_sent,
            c.confirmed,
            c.session_reconfirm_rejected
        ),
        (1, 2, 129, 1)
    );
    // The next attempt uses the new control session.
    let (_, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, now, WALL, 700, &mut c);
    assert!(batch(&step)
        .sessions
        .iter()
        .all(|i| i.control_session_id == 600));
}

#[test]
fn nothing_to_confirm_is_done_at_once_and_stale_sessions_are_not_sent() {
    let mut e = edge_with(2);
    let mut c = EdgeConfirmCounters::default();
    // 20 s silent: not fresh any more.
    let late = e.t0 + Duration::from_secs(20);
    let (attempt, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, late, WALL, 600, &mut c);
    assert!(attempt.is_none());
    assert_eq!(step, ConfirmStep::Done);
    // Grant expired.
    let mut e = edge_with(2);
    let (attempt, step) =
        EdgeReconfirm::start(&mut e.d, &mut e.ids, e.t0, WALL + 120_000, 600, &mut c);
    assert!(attempt.is_none());
    assert_eq!(step, ConfirmStep::Done);
    assert_eq!(c.attempts, 0);
}

#[test]
fn a_bad_answer_or_silence_fails_the_attempt() {
    let start = |e: &mut Edge, c: &mut EdgeConfirmCounters| {
        let (a, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, e.t0, WALL, 600, c);
        (a.unwrap(), batch(&step))
    };
    let mut c = EdgeConfirmCounters::default();
    // A missing result.
    let mut e = edge_with(2);
    let (mut at, req) = start(&mut e, &mut c);
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: vec![refused(&req.sessions[0])],
    };
    assert!(matches!(
        at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c),
        Some(ConfirmStep::Failed(_))
    ));
    // A success without a grant.
    let mut e = edge_with(1);
    let (mut at, req) = start(&mut e, &mut c);
    let mut res = refused(&req.sessions[0]);
    res.success = true;
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: vec![res],
    };
    assert!(matches!(
        at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c),
        Some(ConfirmStep::Failed(_))
    ));
    // A grant that changes the identity.
    let mut e = edge_with(1);
    let (mut at, req) = start(&mut e, &mut c);
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: vec![confirmed(&req.sessions[0], 99, "mallory")],
    };
    assert!(matches!(
        at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c),
        Some(ConfirmStep::Failed(_))
    ));
    // Two grants with one new id.
    let mut e = edge_with(2);
    let (mut at, req) = start(&mut e, &mut c);
    let (x, y) = (&req.sessions[0], &req.sessions[1]);
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: vec![
            confirmed(x, 77, &user_of(&e, x.session_id)),
            confirmed(y, 77, &user_of(&e, y.session_id)),
        ],
    };
    assert!(matches!(
        at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c),
        Some(ConfirmStep::Failed(_))
    ));
    // A grant reusing the id of a live session outside the batch (the
    // 129th, in the next batch): nothing of the answer is applied.
    let mut e = edge_with(129);
    let (mut at, req) = start(&mut e, &mut c);
    let outside = (11..=139)
        .find(|id| req.sessions.iter().all(|i| i.session_id != *id))
        .unwrap();
    let results = req
        .sessions
        .iter()
        .enumerate()
        .map(|(n, it)| {
            let new_id = if n == 0 {
                outside
            } else {
                it.session_id + 1000
            };
            confirmed(it, new_id, &user_of(&e, it.session_id))
        })
        .collect();
    let r = ConfirmResponse {
        request_id: req.request_id,
        results,
    };
    assert!(matches!(
        at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c),
        Some(ConfirmStep::Failed(_))
    ));
    assert!(req
        .sessions
        .iter()
        .all(|i| e.d.sessions().by_session_id(i.session_id).is_some()));
    // No answer within 5 s.
    let mut e = edge_with(1);
    let (at, _) = start(&mut e, &mut c);
    assert!(!at.timed_out(e.t0 + ms(4999), &mut c));
    assert!(at.timed_out(e.t0 + ms(5000), &mut c));
    assert_eq!(c.failed, 6);
}

/// A restarted centre may mint, as a new id, the old id of a session the
/// same answer refuses or moves (the flake of CI run 26: alice's new id was
/// erin's old one, erin refused): the refusals go first and the swaps
/// happen together.
#[test]
fn a_new_id_may_be_one_the_same_answer_frees() {
    let mut e = edge_with(3);
    let mut c = EdgeConfirmCounters::default();
    let (at, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, e.t0, WALL, 600, &mut c);
    let mut at = at.unwrap();
    let req = batch(&step);
    let mut items = req.sessions.clone();
    items.sort_by_key(|i| i.session_id);
    let [x, y, z] = [&items[0], &items[1], &items[2]];
    let (ux, uy) = (user_of(&e, x.session_id), user_of(&e, y.session_id));
    // x takes z's id (z refused, listed after x), y takes x's old id.
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: vec![
            confirmed(x, z.session_id, &ux),
            confirmed(y, x.session_id, &uy),
            refused(z),
        ],
    };
    let step = at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c);
    assert_eq!(step, Some(ConfirmStep::Done));
    assert_eq!(e.d.sessions().len(), 2);
    assert_eq!(user_of(&e, z.session_id), ux);
    assert_eq!(user_of(&e, x.session_id), uy);
    assert!(e.d.sessions().by_session_id(y.session_id).is_none());
    assert_eq!(
        (c.confirmed, c.session_reconfirm_rejected, c.failed),
        (2, 1, 0)
    );
}

/// A centre's counter starts above every id an earlier start of it issued
/// (`MessageIds::after_start`), so its device session ids never meet the
/// previous process's on the edges.
#[test]
fn a_later_centre_start_counts_above_an_earlier_one() {
    let mut first = MessageIds::after_start(1_800_000_000_000);
    let minted: Vec<u64> = (0..1000).map(|_| first.next_id()).collect();
    let mut second = MessageIds::after_start(1_800_000_000_001);
    assert!(second.next_id() > *minted.last().unwrap());
    assert_eq!(MessageIds::after_start(0).next_id(), 1);
}

#[test]
fn without_bit_7_every_session_is_dropped_and_reported() {
    let mut e = edge_with(3);
    let mut c = EdgeConfirmCounters::default();
    drop_unconfirmable(&mut e.d, &mut e.ids, WALL, 600, &mut c);
    assert!(e.d.sessions().is_empty());
    assert_eq!(c.unsupported_drops, 3);
    let reports = e
        .actions()
        .into_iter()
        .filter(
            |a| matches!(a, EdgeAction::Control(s) if s.subtype == Subtype::DEVICE_SESSION_REPORT),
        )
        .count();
    assert_eq!(reports, 3);
}

// ---- atk29: adversarial batches for `EdgeSessions::swap_confirmed` and
// `EdgeReconfirm::handle_response` (the centre's answer is authenticated,
// but its content is checked, not trusted).

/// Every session as (identity, session id, epoch), sorted.
fn snapshot(e: &Edge) -> Vec<(String, u64, u64)> {
    let mut v: Vec<_> =
        e.d.sessions()
            .iter()
            .map(|s| (s.identity.clone(), s.session_id(), s.session_epoch()))
            .collect();
    v.sort();
    v
}

/// by_id and sessions agree: every session is found by its id, and every
/// id in `0..=probe` that finds a session finds one holding that id.
fn assert_consistent(e: &Edge, probe: u64) {
    let s = e.d.sessions();
    for x in s.iter() {
        let found = s
            .by_session_id(x.session_id())
            .expect("session not in by_id");
        assert_eq!(found.identity, x.identity);
    }
    let mut hits = 0;
    for id in 0..=probe {
        if let Some(x) = s.by_session_id(id) {
            assert_eq!(x.session_id(), id, "stale by_id entry {id}");
            hits += 1;
        }
    }
    assert_eq!(hits, s.len(), "by_id entries vs sessions");
}

/// The items of `e`'s sessions, sorted by id.
fn items_of(e: &Edge) -> Vec<ConfirmItem> {
    let mut v = e.d.sessions().confirm_items(e.t0, WALL);
    v.sort_by_key(|i| i.session_id);
    v
}

/// A swap of `it` to `new_id` under `it`'s own user.
fn swap(e: &Edge, it: &ConfirmItem, new_id: u64) -> (u64, u64, DeviceGrant) {
    let grant = confirmed(it, new_id, &user_of(e, it.session_id)).grant;
    (it.session_id, it.session_epoch, grant.unwrap())
}

#[test]
fn atk29_swap_batches_apply_all_or_nothing() {
    let mut e = edge_with(5);
    let it = items_of(&e);
    let ids: Vec<u64> = it.iter().map(|i| i.session_id).collect();
    assert_eq!(ids, [11, 12, 13, 14, 15]);
    let before = snapshot(&e);
    let expect_err = |e: &mut Edge, swaps, err| {
        assert_eq!(e.d.sessions.swap_confirmed(swaps), Err(err));
        assert_eq!(snapshot(e), before);
        assert_consistent(e, 3000);
    };
    // Empty batch: nothing to do.
    assert_eq!(e.d.sessions.swap_confirmed(Vec::new()), Ok(()));
    assert_eq!(snapshot(&e), before);
    // Duplicate old ids (same and different new ids).
    let s = vec![swap(&e, &it[0], 1011), swap(&e, &it[0], 1011)];
    expect_err(&mut e, s, SwapError::Unknown);
    let s = vec![swap(&e, &it[0], 1011), swap(&e, &it[0], 1012)];
    expect_err(&mut e, s, SwapError::Unknown);
    // Two new ids alike.
    let s = vec![swap(&e, &it[0], 77), swap(&e, &it[1], 77)];
    expect_err(&mut e, s, SwapError::IdInUse);
    // A new id of a session outside the batch, last in the batch.
    let s = vec![
        swap(&e, &it[0], 1011),
        swap(&e, &it[1], 1012),
        swap(&e, &it[2], 15),
    ];
    expect_err(&mut e, s, SwapError::IdInUse);
    // A new id of zero in the middle.
    let s = vec![
        swap(&e, &it[0], 1011),
        swap(&e, &it[1], 0),
        swap(&e, &it[2], 1013),
    ];
    expect_err(&mut e, s, SwapError::IdInUse);
    // An unknown old id / a stale epoch in the middle.
    let mut g = swap(&e, &it[1], 1012);
    g.0 = 999;
    let s = vec![swap(&e, &it[0], 1011), g, swap(&e, &it[2], 1013)];
    expect_err(&mut e, s, SwapError::Unknown);
    let mut g = swap(&e, &it[1], 1012);
    g.1 += 1;
    let s = vec![swap(&e, &it[0], 1011), g, swap(&e, &it[2], 1013)];
    expect_err(&mut e, s, SwapError::Unknown);
    // A grant changing identity in the middle: another user's name, or the
    // same user with another ssid, or another session's identity.
    for (user, ssid) in [("mallory", 1), ("u1", 2), ("u0", 1)] {
        let mut g = swap(&e, &it[1], 1012);
        g.2.route.username = user.into();
        g.2.route.ssid = ssid;
        let s = vec![swap(&e, &it[0], 1011), g, swap(&e, &it[2], 1013)];
        expect_err(&mut e, s, SwapError::IdentityChanged);
    }
    // A chain whose last link lands on a session that keeps its id.
    let s = vec![
        swap(&e, &it[0], 12),
        swap(&e, &it[1], 13),
        swap(&e, &it[2], 14),
    ];
    expect_err(&mut e, s, SwapError::IdInUse);
    // Valid: a 2-cycle, a 3-cycle, and one keeping its id, together.
    let (u0, u1, u2, u3, u4) = (
        user_of(&e, 11),
        user_of(&e, 12),
        user_of(&e, 13),
        user_of(&e, 14),
        user_of(&e, 15),
    );
    let s = vec![
        swap(&e, &it[0], 12),
        swap(&e, &it[1], 11),
        swap(&e, &it[2], 14),
        swap(&e, &it[3], 15),
        swap(&e, &it[4], 13),
    ];
    assert_eq!(e.d.sessions.swap_confirmed(s), Ok(()));
    assert_consistent(&e, 3000);
    assert_eq!(e.d.sessions().len(), 5);
    assert_eq!(
        [11, 12, 13, 14, 15].map(|id| user_of(&e, id)),
        [u1, u0, u4, u2, u3]
    );
    // Its own id again: allowed, epoch moves on.
    let it = items_of(&e);
    let s = vec![swap(&e, &it[0], 11)];
    assert_eq!(e.d.sessions.swap_confirmed(s), Ok(()));
    assert_consistent(&e, 3000);
}

/// Random batches over a small id space against a model: on error nothing
/// changes, on success exactly the swaps are applied; no panic either way.
#[test]
fn atk29_random_swap_batches_match_the_model() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    let (mut oks, mut errs) = (0, 0);
    for round in 0..400 {
        let mut e = edge_with(6);
        for _step in 0..4 {
            let it = items_of(&e);
            let before = snapshot(&e);
            let n = rng.gen_range(0..=it.len() + 1);
            let mut swaps = Vec::new();
            for _ in 0..n {
                let src = &it[rng.gen_range(0..it.len())];
                // New ids from a small pool so they collide often.
                let new_id = match rng.gen_range(0..10) {
                    0 => 0,
                    1..=5 => it[rng.gen_range(0..it.len())].session_id,
                    _ => rng.gen_range(1..=20) + 1000,
                };
                let mut s = swap(&e, src, new_id);
                match rng.gen_range(0..20) {
                    0 => s.1 += 1,
                    1 => s.2.route.ssid = 9,
                    2 => s.0 = 5000,
                    _ => {}
                }
                swaps.push(s);
            }
            // The model.
            let live: std::collections::HashMap<u64, (String, u64)> = before
                .iter()
                .map(|(i, id, ep)| (*id, (i.clone(), *ep)))
                .collect();
            let olds: std::collections::HashSet<u64> = swaps.iter().map(|s| s.0).collect();
            let news: std::collections::HashSet<u64> =
                swaps.iter().map(|s| s.2.route.session_id).collect();
            let ok = olds.len() == swaps.len()
                && news.len() == swaps.len()
                && swaps.iter().all(|(old, ep, g)| {
                    let nid = g.route.session_id;
                    live.get(old).is_some_and(|(ident, e)| {
                        e == ep && *ident == identity_key(&g.route.username, g.route.ssid)
                    }) && nid != 0
                        && (!live.contains_key(&nid) || olds.contains(&nid))
                });
            let mut expected = before.clone();
            if ok {
                expected = before
                    .iter()
                    .map(|(ident, id, ep)| {
                        swaps
                            .iter()
                            .find(|s| s.0 == *id)
                            .map_or((ident.clone(), *id, *ep), |s| {
                                (ident.clone(), s.2.route.session_id, s.2.route.session_epoch)
                            })
                    })
                    .collect();
                expected.sort();
            }
            let got = e.d.sessions.swap_confirmed(swaps.clone());
            assert_eq!(got.is_ok(), ok, "round {round}: {swaps:?}");
            if ok {
                oks += 1;
            } else {
                errs += 1;
            }
            assert_eq!(snapshot(&e), if ok { expected } else { before });
            assert_consistent(&e, 3000);
        }
    }
    assert!(oks > 100 && errs > 100, "{oks} {errs}");
}

/// Through `handle_response`: answers that fail leave every swap undone
/// and the tables consistent; cycles and all-refused answers succeed.
#[test]
fn atk29_adversarial_answers_through_handle_response() {
    let start = |e: &mut Edge, c: &mut EdgeConfirmCounters| {
        let (a, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, e.t0, WALL, 600, c);
        let mut req = batch(&step);
        req.sessions.sort_by_key(|i| i.session_id);
        (a.unwrap(), req)
    };
    let mut c = EdgeConfirmCounters::default();

    // A cycle a→b, b→a, c→c.
    let mut e = edge_with(3);
    let (mut at, req) = start(&mut e, &mut c);
    let [x, y, z] = [&req.sessions[0], &req.sessions[1], &req.sessions[2]];
    let (ux, uy, uz) = (
        user_of(&e, x.session_id),
        user_of(&e, y.session_id),
        user_of(&e, z.session_id),
    );
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: vec![
            confirmed(x, y.session_id, &ux),
            confirmed(y, x.session_id, &uy),
            confirmed(z, z.session_id, &uz),
        ],
    };
    let step = at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c);
    assert_eq!(step, Some(ConfirmStep::Done));
    assert_eq!(user_of(&e, y.session_id), ux);
    assert_eq!(user_of(&e, x.session_id), uy);
    assert_eq!(user_of(&e, z.session_id), uz);
    assert_consistent(&e, 3000);

    // Every item refused: an empty list of swaps.
    let mut e = edge_with(3);
    let (mut at, req) = start(&mut e, &mut c);
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: req.sessions.iter().map(refused).collect(),
    };
    let step = at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c);
    assert_eq!(step, Some(ConfirmStep::Done));
    assert!(e.d.sessions().is_empty());
    assert_consistent(&e, 3000);

    // The same id refused and confirmed; the same id confirmed twice.
    for twice_confirmed in [false, true] {
        let mut e = edge_with(3);
        let failed = c.failed;
        let (mut at, req) = start(&mut e, &mut c);
        let before = snapshot(&e);
        let [x, y, _] = [&req.sessions[0], &req.sessions[1], &req.sessions[2]];
        let ux = user_of(&e, x.session_id);
        let uy = user_of(&e, y.session_id);
        let second = if twice_confirmed {
            confirmed(x, 2000, &ux)
        } else {
            refused(x)
        };
        let r = ConfirmResponse {
            request_id: req.request_id,
            results: vec![confirmed(x, 1000, &ux), confirmed(y, 1001, &uy), second],
        };
        assert!(matches!(
            at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c),
            Some(ConfirmStep::Failed(_))
        ));
        assert_eq!(c.failed, failed + 1);
        assert_eq!(snapshot(&e), before);
        assert_consistent(&e, 3000);
    }

    // A grant changing identity, a zero id, or an outside id after valid
    // swaps and a refusal: no swap applied. (The refusal is applied
    // before the swaps are checked, so the refused session is gone even
    // though the attempt fails: see the report.)
    for bad in 0..3 {
        let mut e = edge_with(5);
        let (mut at, req) = start(&mut e, &mut c);
        let it = &req.sessions;
        let before = snapshot(&e);
        let u: Vec<String> = it.iter().map(|i| user_of(&e, i.session_id)).collect();
        let last = match bad {
            0 => confirmed(&it[3], 1014, "mallory"),
            1 => confirmed(&it[3], 0, &u[3]),
            _ => confirmed(&it[3], it[4].session_id, &u[3]),
        };
        let r = ConfirmResponse {
            request_id: req.request_id,
            results: vec![
                confirmed(&it[0], it[1].session_id, &u[0]),
                confirmed(&it[1], it[2].session_id, &u[1]),
                refused(&it[2]),
                last,
                // it[4] keeps its id 15 (so it[3] → 15 collides).
                confirmed(&it[4], 1015, &u[4]),
            ],
        };
        let r = if bad == 2 {
            let mut r = r;
            r.results[4] = confirmed(&it[4], it[4].session_id, &u[4]);
            r
        } else {
            r
        };
        let step = at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c);
        assert!(
            matches!(step, Some(ConfirmStep::Failed(_))),
            "{bad}: {step:?}"
        );
        assert_consistent(&e, 3000);
        // No swap applied: every surviving session has its old id/epoch.
        let now = snapshot(&e);
        let mut kept = before.clone();
        kept.retain(|x| x.1 != it[2].session_id);
        assert_eq!(now, kept, "{bad}: the refusal alone was applied");
    }
}

/// A session that leaves the edge while its batch is outstanding (device
/// timeout, revocation) makes the centre's confirmation of it fail the
/// whole attempt (pre-existing; the edge reconnects and starts over).
#[test]
fn atk29_a_session_gone_mid_batch_fails_the_attempt() {
    let mut e = edge_with(3);
    let mut c = EdgeConfirmCounters::default();
    let (at, step) = EdgeReconfirm::start(&mut e.d, &mut e.ids, e.t0, WALL, 600, &mut c);
    let mut at = at.unwrap();
    let req = batch(&step);
    let users: Vec<String> = req
        .sessions
        .iter()
        .map(|i| user_of(&e, i.session_id))
        .collect();
    let gone = req.sessions[0].session_id;
    assert!(e.d.sessions.remove_unconfirmed(gone).is_some());
    let r = ConfirmResponse {
        request_id: req.request_id,
        results: req
            .sessions
            .iter()
            .zip(&users)
            .map(|(i, u)| confirmed(i, i.session_id + 1000, u))
            .collect(),
    };
    let step = at.handle_response(&mut e.d, &mut e.ids, e.t0, r, &mut c);
    assert!(matches!(step, Some(ConfirmStep::Failed(_))), "{step:?}");
    assert_eq!(e.d.sessions().len(), 2);
    assert_consistent(&e, 3000);
}
