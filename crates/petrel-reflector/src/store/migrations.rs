//! Versioned schema migrations, applied in order inside one transaction each.
//! Version numbers never change once released; add new entries at the end.

/// (version, SQL).
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "CREATE TABLE users (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        callsign TEXT NOT NULL UNIQUE,
        dmrid INTEGER NOT NULL DEFAULT 0,
        status INTEGER NOT NULL DEFAULT 1,
        approval_status INTEGER NOT NULL DEFAULT 1,
        device_password_hash TEXT,
        default_group_id INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE talkgroups (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        status INTEGER NOT NULL DEFAULT 1,
        is_virtual INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE group_links (
        link_group_id INTEGER NOT NULL REFERENCES talkgroups(id) ON DELETE CASCADE,
        target_group_id INTEGER NOT NULL REFERENCES talkgroups(id) ON DELETE CASCADE,
        PRIMARY KEY (link_group_id, target_group_id)
    );
    CREATE TABLE devices (
        id INTEGER PRIMARY KEY,
        owner_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        ssid INTEGER NOT NULL,
        dev_model INTEGER NOT NULL DEFAULT 0,
        dmrid INTEGER NOT NULL DEFAULT 0,
        group_id INTEGER NOT NULL DEFAULT 0,
        disable_send INTEGER NOT NULL DEFAULT 0,
        disable_recv INTEGER NOT NULL DEFAULT 0,
        mac TEXT,
        UNIQUE (owner_id, ssid)
    );
    CREATE TABLE device_configs (
        owner_id INTEGER NOT NULL,
        ssid INTEGER NOT NULL,
        tag INTEGER NOT NULL,
        value BLOB NOT NULL,
        PRIMARY KEY (owner_id, ssid, tag)
    );",
    ),
    (
        2,
        "CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        sent_at_ms INTEGER NOT NULL,
        owner_id INTEGER NOT NULL,
        ssid INTEGER NOT NULL,
        group_id INTEGER NOT NULL,
        text BLOB NOT NULL
    );
    CREATE INDEX messages_group_time ON messages (group_id, sent_at_ms);",
    ),
    (
        3,
        "CREATE TABLE recordings (
        id INTEGER PRIMARY KEY,
        owner_id INTEGER NOT NULL,
        ssid INTEGER NOT NULL,
        group_id INTEGER NOT NULL,
        started_at_ms INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        path TEXT NOT NULL,
        bytes INTEGER NOT NULL
    );
    CREATE INDEX recordings_group_time ON recordings (group_id, started_at_ms);",
    ),
];
