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

#[test]
fn credential_rules() {
    let rotate = CredentialMessage {
        kind: "rotate".into(),
        credential: format!("draarl-node.edge-a.{}", "A".repeat(43)),
        credential_epoch: 2,
        previous_valid_until_ms: 1_700_000_600_000,
        ..CredentialMessage::default()
    };
    assert_eq!(rotate.validate("edge-a"), Ok(()));
    assert!(!format!("{rotate:?}").contains("AAAA"));
    assert_eq!(
        rotate.validate("edge-b"),
        Err(CredentialError::NotForThisNode)
    );
    let no_grace = CredentialMessage {
        previous_valid_until_ms: 0,
        ..rotate.clone()
    };
    assert_eq!(
        no_grace.validate("edge-a"),
        Err(CredentialError::NoGraceDeadline)
    );
    let result = CredentialMessage {
        kind: "result".into(),
        credential_epoch: 2,
        ack_for_message_id: 17,
        success: true,
        ..CredentialMessage::default()
    };
    assert_eq!(result.validate("edge-a"), Ok(()));
    assert_eq!(
        serde_json::to_string(&result).unwrap(),
        r#"{"kind":"result","credential_epoch":2,"ack_for_message_id":17,"success":true}"#
    );
    let with_cred = CredentialMessage {
        credential: rotate.credential.clone(),
        ..result.clone()
    };
    assert_eq!(
        with_cred.validate("edge-a"),
        Err(CredentialError::ResultWithCredential)
    );
    let no_ack = CredentialMessage {
        ack_for_message_id: 0,
        ..result
    };
    assert_eq!(no_ack.validate("edge-a"), Err(CredentialError::NoAckId));
}

#[test]
fn device_config_rules() {
    let report = |n: usize| DeviceConfigMessage {
        kind: "report".into(),
        session_id: 1,
        session_epoch: 1,
        device_id: 40,
        data: vec![1; n],
        ..DeviceConfigMessage::default()
    };
    assert_eq!(report(710).validate(), Ok(()));
    assert_eq!(
        report(711).validate(),
        Err(DeviceConfigError::ReportSize(711))
    );
    assert_eq!(report(0).validate(), Err(DeviceConfigError::ReportSize(0)));
    let down = |n: usize| DeviceConfigMessage {
        kind: "down".into(),
        packet: vec![0; n],
        ..report(1)
    };
    assert_eq!(down(90).validate(), Ok(()));
    assert_eq!(down(89).validate(), Err(DeviceConfigError::DownSize(89)));
    let result = DeviceConfigMessage {
        kind: "result".into(),
        data: vec![],
        ..report(1)
    };
    assert_eq!(result.validate(), Err(DeviceConfigError::NoAckId));
    assert_eq!(
        DeviceConfigMessage {
            ack_for_message_id: 5,
            ..result
        }
        .validate(),
        Ok(())
    );
    let r = report(3);
    assert_eq!(
        serde_json::from_str::<DeviceConfigMessage>(&serde_json::to_string(&r).unwrap()).unwrap(),
        r
    );
}

#[test]
fn confirm_batch_rules() {
    let physical = |session: u64, device: i64, owner: i64| ConfirmItem {
        session_id: session,
        session_epoch: 1,
        control_session_id: 77,
        device_id: device,
        owner_id: owner,
        ssid: 1,
        ..ConfirmItem::default()
    };
    let ok = ConfirmRequest {
        request_id: 1,
        sessions: vec![physical(1, 40, 5), physical(2, 41, 6)],
    };
    assert_eq!(ok.validate(), Ok(()));
    // Two items for device 40 with different session ids: refused.
    let twice = ConfirmRequest {
        request_id: 1,
        sessions: vec![physical(1, 40, 5), physical(2, 40, 6)],
    };
    assert_eq!(twice.validate(), Err(ConfirmError::Duplicate));
    let ghost = ConfirmItem {
        device_id: 0,
        dev_model: 9,
        ghost_session_id: "g".into(),
        client_instance_id: "i".into(),
        ..physical(3, 0, 7)
    };
    let no_ticket = ConfirmRequest {
        request_id: 1,
        sessions: vec![ghost.clone()],
    };
    assert_eq!(no_ticket.validate(), Err(ConfirmError::GhostTicket));
    let with_ticket = ConfirmRequest {
        request_id: 1,
        sessions: vec![ConfirmItem {
            recovery_ticket: "t".into(),
            ..ghost.clone()
        }],
    };
    assert_eq!(with_ticket.validate(), Ok(()));
    let huge_ticket = ConfirmRequest {
        request_id: 1,
        sessions: vec![ConfirmItem {
            recovery_ticket: "t".repeat(1025),
            ..ghost
        }],
    };
    assert_eq!(huge_ticket.validate(), Err(ConfirmError::GhostTicket));
    let ghostly = ConfirmRequest {
        request_id: 1,
        sessions: vec![ConfirmItem {
            recovery_ticket: "t".into(),
            ..physical(1, 40, 5)
        }],
    };
    assert_eq!(
        ghostly.validate(),
        Err(ConfirmError::PhysicalWithGhostFields)
    );
    assert_eq!(
        ConfirmRequest::default().validate(),
        Err(ConfirmError::BatchSize(0))
    );
    let many = ConfirmRequest {
        request_id: 1,
        sessions: (1..=129).map(|i| physical(i, i as i64, i as i64)).collect(),
    };
    assert_eq!(many.validate(), Err(ConfirmError::BatchSize(129)));
    let bad = ConfirmResponse {
        request_id: 1,
        results: vec![ConfirmResult {
            session_id: 1,
            session_epoch: 1,
            success: true,
            ..ConfirmResult::default()
        }],
    };
    assert_eq!(bad.validate(), Err(ConfirmError::SuccessWithoutGrant));
}
