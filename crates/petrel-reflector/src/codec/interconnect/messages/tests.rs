use super::*;

fn route() -> DeviceRoute {
    DeviceRoute {
        session_id: 11,
        device_id: 42,
        username: "alice".into(),
        callsign: "BG5ABC".into(),
        nickname: "A".into(),
        ssid: 7,
        dev_model: 1,
        group_id: 3,
        domain_id: 9,
        session_epoch: 1,
        ..DeviceRoute::default()
    }
}

#[test]
fn route_json_in_wire_order_with_omitted_empties() {
    let json = serde_json::to_string(&route()).unwrap();
    assert_eq!(
        json,
        r#"{"session_id":11,"device_id":42,"username":"alice","callsign":"BG5ABC","nickname":"A","ssid":7,"dev_model":1,"group_id":3,"domain_id":9,"session_epoch":1,"disable_send":false,"disable_recv":false}"#
    );
    assert_eq!(route().receive_domains(), &[9]);
    let ghost = DeviceRoute {
        rx_domain_ids: vec![9, 10],
        ..route()
    };
    assert_eq!(ghost.receive_domains(), &[9, 10]);
}

#[test]
fn delta_operations_are_tagged_by_kind() {
    let d = RouteDelta {
        cluster_epoch: 1_764_547_200_123_456_789,
        base_version: 0,
        new_version: 1,
        operations: vec![
            RouteOperation::Upsert {
                route: Box::new(route()),
            },
            RouteOperation::Remove { session_id: 12 },
        ],
        checksum: String::new(),
    };
    let json = serde_json::to_string(&d).unwrap();
    assert!(
        json.contains(r#"{"kind":"upsert","route":{"session_id":11"#),
        "{json}"
    );
    assert!(
        json.contains(r#"{"kind":"remove","session_id":12}"#),
        "{json}"
    );
    assert!(json.ends_with(r#""checksum":""}"#));
    assert_eq!(serde_json::from_str::<RouteDelta>(&json).unwrap(), d);
}

#[test]
fn byte_fields_are_padded_base64() {
    let chunk = RouteSnapshotChunk {
        snapshot_id: 5,
        index: 0,
        data: vec![1, 2, 3, 4],
    };
    let json = serde_json::to_string(&chunk).unwrap();
    assert_eq!(json, r#"{"snapshot_id":5,"index":0,"data":"AQIDBA=="}"#);
    assert_eq!(
        serde_json::from_str::<RouteSnapshotChunk>(&json).unwrap(),
        chunk
    );
    assert!(serde_json::from_str::<RouteSnapshotChunk>(
        r#"{"snapshot_id":5,"index":0,"data":"AQIDBA"}"#
    )
    .is_err());
    let null =
        serde_json::from_str::<RouteSnapshotChunk>(r#"{"snapshot_id":5,"index":0,"data":null}"#)
            .unwrap();
    assert!(null.data.is_empty());
    let req = DeviceAuthRequest {
        request_id: 3,
        source_ip: "198.51.100.7".into(),
        packet: b"DraA-secret".to_vec(),
    };
    assert!(!format!("{req:?}").contains("secret"));
    let back: DeviceAuthRequest =
        serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
    assert_eq!(back, req);
}

#[test]
fn grants_flatten_the_route() {
    let resp = DeviceAuthResponse {
        request_id: 3,
        success: true,
        grant: Some(DeviceGrant {
            route: route(),
            owner_id: 8,
            dmrid: 4_600_001,
            recovery_ticket: String::new(),
            expires_at_ms: 1_700_000_120_000,
        }),
        response_packet: vec![9; 4],
        ..DeviceAuthResponse::default()
    };
    let json = serde_json::to_string(&resp).unwrap();
    assert!(json.contains(r#""grant":{"session_id":11,"#), "{json}");
    assert!(
        json.contains(r#""owner_id":8,"dmrid":4600001,"expires_at_ms":1700000120000}"#),
        "{json}"
    );
    assert_eq!(
        serde_json::from_str::<DeviceAuthResponse>(&json).unwrap(),
        resp
    );
    let failed: DeviceAuthResponse =
        serde_json::from_str(r#"{"request_id":3,"success":false,"error":"bad password"}"#).unwrap();
    assert_eq!(
        (failed.success, failed.grant, failed.error.as_str()),
        (false, None, "bad password")
    );
}

#[test]
fn small_messages_round_trip() {
    let lease = SpeakerLease {
        action: "claim".into(),
        request_id: 1,
        session_id: 2,
        session_epoch: 3,
        domain_id: 7,
        ..SpeakerLease::default()
    };
    let json = serde_json::to_string(&lease).unwrap();
    assert_eq!(
        json,
        r#"{"action":"claim","request_id":1,"session_id":2,"session_epoch":3,"domain_id":7}"#
    );
    assert_eq!(serde_json::from_str::<SpeakerLease>(&json).unwrap(), lease);
    let ack = RouteAck {
        cluster_epoch: 7,
        projection_version: 3,
        ack_for_message_id: 11,
        error: String::new(),
    };
    assert_eq!(
        serde_json::to_string(&ack).unwrap(),
        r#"{"cluster_epoch":7,"projection_version":3,"ack_for_message_id":11}"#
    );
    let report = DeviceSessionReport {
        session_id: 1,
        session_epoch: 1,
        online: false,
        reason: "device_timeout".into(),
        reported_at_ms: 5,
        ..DeviceSessionReport::default()
    };
    assert_eq!(
        serde_json::from_str::<DeviceSessionReport>(&serde_json::to_string(&report).unwrap())
            .unwrap(),
        report
    );
    let hb: Heartbeat = serde_json::from_str(
        r#"{"instance_id":"edge-a-1","sent_at_ms":5,"protection":{"replay_drops":2}}"#,
    )
    .unwrap();
    assert_eq!(hb.protection.unwrap()["replay_drops"], 2);
    for j in [
        serde_json::to_string(&RouteSnapshotBegin {
            snapshot_id: 1,
            cluster_epoch: 2,
            projection_version: 3,
            chunks: 1,
            total_bytes: 10,
            checksum: "0".repeat(64),
        })
        .unwrap(),
        serde_json::to_string(&RouteSnapshotCommit { snapshot_id: 1 }).unwrap(),
        serde_json::to_string(&RouteResyncRequest {
            cluster_epoch: 1,
            projection_version: 0,
            reason: "base_mismatch".into(),
        })
        .unwrap(),
        serde_json::to_string(&DeviceSessionRevoke {
            session_id: 1,
            session_epoch: 2,
            device_id: 0,
            reason: "session_migrated".into(),
        })
        .unwrap(),
        serde_json::to_string(&DeviceSessionRenew {
            request_id: 1,
            session_id: 2,
            session_epoch: 3,
            ..DeviceSessionRenew::default()
        })
        .unwrap(),
    ] {
        assert!(!j.contains(":\"\"") && !j.contains("null"), "{j}");
    }
}
