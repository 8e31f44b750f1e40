//! Versioned schema migrations, applied in order inside one transaction each.
//! Version numbers never change once released; add new entries at the end of
//! both lists, with the same number.
//!
//! One list per backend because the DDL differs (SQLite `INTEGER PRIMARY KEY`
//! rowids and `BLOB`; PostgreSQL `BIGINT` identities and `BYTEA`); the
//! tables, columns and constraints are the same, so the data-access code is
//! shared. `talkgroups.id` is a plain key on both: the store assigns it
//! (`MAX(id) + 1`, as SQLite's rowid does), so explicit ids such as 999
//! never collide with a PostgreSQL sequence.
//!
//! Version 4 indexes messages and recordings by time alone, for pruning the
//! oldest first (the text byte cap, the recording quota).
//!
//! Version 5 serves the app clients (`specs/draarl-apps.md` §1, §3.4): the
//! web/app login fields of `users` (bcrypt `password_hash`, `email`,
//! `roles`, profile and last-login columns; existing rows get no web
//! password, role `user`), the group rule's `talkgroups.type` (1 public,
//! 2 private; existing groups stay public), `owner_id` and `note`,
//! `group_members`, `settings` (the generated JWT secret), the SHA-256
//! digests of refresh tokens, and the app routing preferences with each
//! user's last TX group per device model.
//!
//! Version 6 holds the centre's edge nodes (draarl-interconnect §3.3):
//! node id, the SHA-256 hex of the long-term credential (never the
//! credential itself), a disabled flag and the creation time.
//!
//! Version 7 keeps the centre's device-session entries
//! (draarl-interconnect §1, §3.9, §6.2): per physical device (owner +
//! SSID) the entry node, its control session id at activation and since
//! when that session is gone, so an edge can reconfirm its sessions after
//! a centre restart.

use crate::model::Backend;

/// The bookkeeping table, then (version, SQL) for `backend`.
pub(super) fn for_backend(backend: Backend) -> (&'static str, &'static [(i64, &'static str)]) {
    match backend {
        Backend::Sqlite => (
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)",
            SQLITE,
        ),
        // Not `IF NOT EXISTS`, whose "already exists" notice would be
        // logged at every start.
        Backend::Postgres => (
            "DO $$ BEGIN
               IF to_regclass('schema_migrations') IS NULL THEN
                 CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY);
               END IF;
             END $$",
            POSTGRES,
        ),
    }
}

const SQLITE: &[(i64, &str)] = &[
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
    (
        4,
        "CREATE INDEX messages_time ON messages (sent_at_ms, id);
    CREATE INDEX recordings_time ON recordings (started_at_ms, id);",
    ),
    (
        5,
        "ALTER TABLE users ADD COLUMN password_hash TEXT;
    ALTER TABLE users ADD COLUMN email TEXT;
    ALTER TABLE users ADD COLUMN roles TEXT NOT NULL DEFAULT 'user';
    ALTER TABLE users ADD COLUMN nickname TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN review_note TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN login_err_times INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE users ADD COLUMN last_login_ms INTEGER;
    ALTER TABLE users ADD COLUMN last_login_ip TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN created_at_ms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE users ADD COLUMN updated_at_ms INTEGER NOT NULL DEFAULT 0;
    CREATE UNIQUE INDEX users_email ON users (email);
    ALTER TABLE talkgroups ADD COLUMN type INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE talkgroups ADD COLUMN owner_id INTEGER;
    ALTER TABLE talkgroups ADD COLUMN note TEXT NOT NULL DEFAULT '';
    CREATE TABLE group_members (
        group_id INTEGER NOT NULL REFERENCES talkgroups(id) ON DELETE CASCADE,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        is_verified INTEGER NOT NULL DEFAULT 0,
        joined_at_ms INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (group_id, user_id)
    );
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        revoked_at_ms INTEGER,
        replaced_by TEXT,
        ip TEXT NOT NULL,
        user_agent TEXT NOT NULL
    );
    CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id, created_at_ms);
    CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at_ms);
    CREATE TABLE app_preferences (
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        dev_model INTEGER NOT NULL,
        client_instance_id TEXT NOT NULL,
        tx_group_id INTEGER NOT NULL,
        rx_group_ids TEXT NOT NULL,
        last_used_ms INTEGER NOT NULL,
        PRIMARY KEY (user_id, dev_model, client_instance_id)
    );
    CREATE TABLE app_last_groups (
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        dev_model INTEGER NOT NULL,
        group_id INTEGER NOT NULL,
        PRIMARY KEY (user_id, dev_model)
    );",
    ),
    (
        6,
        "CREATE TABLE interconnect_nodes (
        node_id TEXT PRIMARY KEY,
        credential_hash TEXT NOT NULL,
        disabled INTEGER NOT NULL DEFAULT 0,
        created_at_ms INTEGER NOT NULL
    );",
    ),
    (
        7,
        "CREATE TABLE device_session_entries (
        owner_id INTEGER NOT NULL,
        ssid INTEGER NOT NULL,
        device_id INTEGER NOT NULL,
        node_id TEXT NOT NULL,
        control_session_id INTEGER NOT NULL,
        offline_since_ms INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (owner_id, ssid)
    );",
    ),
];

const POSTGRES: &[(i64, &str)] = &[
    (
        1,
        "CREATE TABLE users (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        callsign TEXT NOT NULL UNIQUE,
        dmrid BIGINT NOT NULL DEFAULT 0,
        status BIGINT NOT NULL DEFAULT 1,
        approval_status BIGINT NOT NULL DEFAULT 1,
        device_password_hash TEXT,
        default_group_id BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE talkgroups (
        id BIGINT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        status BIGINT NOT NULL DEFAULT 1,
        is_virtual BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE group_links (
        link_group_id BIGINT NOT NULL REFERENCES talkgroups(id) ON DELETE CASCADE,
        target_group_id BIGINT NOT NULL REFERENCES talkgroups(id) ON DELETE CASCADE,
        PRIMARY KEY (link_group_id, target_group_id)
    );
    CREATE TABLE devices (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        owner_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        ssid BIGINT NOT NULL,
        dev_model BIGINT NOT NULL DEFAULT 0,
        dmrid BIGINT NOT NULL DEFAULT 0,
        group_id BIGINT NOT NULL DEFAULT 0,
        disable_send BIGINT NOT NULL DEFAULT 0,
        disable_recv BIGINT NOT NULL DEFAULT 0,
        mac TEXT,
        UNIQUE (owner_id, ssid)
    );
    CREATE TABLE device_configs (
        owner_id BIGINT NOT NULL,
        ssid BIGINT NOT NULL,
        tag BIGINT NOT NULL,
        value BYTEA NOT NULL,
        PRIMARY KEY (owner_id, ssid, tag)
    );",
    ),
    (
        2,
        "CREATE TABLE messages (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        sent_at_ms BIGINT NOT NULL,
        owner_id BIGINT NOT NULL,
        ssid BIGINT NOT NULL,
        group_id BIGINT NOT NULL,
        text BYTEA NOT NULL
    );
    CREATE INDEX messages_group_time ON messages (group_id, sent_at_ms);",
    ),
    (
        3,
        "CREATE TABLE recordings (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        owner_id BIGINT NOT NULL,
        ssid BIGINT NOT NULL,
        group_id BIGINT NOT NULL,
        started_at_ms BIGINT NOT NULL,
        duration_ms BIGINT NOT NULL,
        path TEXT NOT NULL,
        bytes BIGINT NOT NULL
    );
    CREATE INDEX recordings_group_time ON recordings (group_id, started_at_ms);",
    ),
    (
        4,
        "CREATE INDEX messages_time ON messages (sent_at_ms, id);
    CREATE INDEX recordings_time ON recordings (started_at_ms, id);",
    ),
    (
        5,
        "ALTER TABLE users ADD COLUMN password_hash TEXT;
    ALTER TABLE users ADD COLUMN email TEXT;
    ALTER TABLE users ADD COLUMN roles TEXT NOT NULL DEFAULT 'user';
    ALTER TABLE users ADD COLUMN nickname TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN review_note TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN login_err_times BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE users ADD COLUMN last_login_ms BIGINT;
    ALTER TABLE users ADD COLUMN last_login_ip TEXT NOT NULL DEFAULT '';
    ALTER TABLE users ADD COLUMN created_at_ms BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE users ADD COLUMN updated_at_ms BIGINT NOT NULL DEFAULT 0;
    CREATE UNIQUE INDEX users_email ON users (email);
    ALTER TABLE talkgroups ADD COLUMN type BIGINT NOT NULL DEFAULT 1;
    ALTER TABLE talkgroups ADD COLUMN owner_id BIGINT;
    ALTER TABLE talkgroups ADD COLUMN note TEXT NOT NULL DEFAULT '';
    CREATE TABLE group_members (
        group_id BIGINT NOT NULL REFERENCES talkgroups(id) ON DELETE CASCADE,
        user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        is_verified BIGINT NOT NULL DEFAULT 0,
        joined_at_ms BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (group_id, user_id)
    );
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        created_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        revoked_at_ms BIGINT,
        replaced_by TEXT,
        ip TEXT NOT NULL,
        user_agent TEXT NOT NULL
    );
    CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id, created_at_ms);
    CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at_ms);
    CREATE TABLE app_preferences (
        user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        dev_model BIGINT NOT NULL,
        client_instance_id TEXT NOT NULL,
        tx_group_id BIGINT NOT NULL,
        rx_group_ids TEXT NOT NULL,
        last_used_ms BIGINT NOT NULL,
        PRIMARY KEY (user_id, dev_model, client_instance_id)
    );
    CREATE TABLE app_last_groups (
        user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        dev_model BIGINT NOT NULL,
        group_id BIGINT NOT NULL,
        PRIMARY KEY (user_id, dev_model)
    );",
    ),
    (
        6,
        "CREATE TABLE interconnect_nodes (
        node_id TEXT PRIMARY KEY,
        credential_hash TEXT NOT NULL,
        disabled BIGINT NOT NULL DEFAULT 0,
        created_at_ms BIGINT NOT NULL
    );",
    ),
    (
        7,
        "CREATE TABLE device_session_entries (
        owner_id BIGINT NOT NULL,
        ssid BIGINT NOT NULL,
        device_id BIGINT NOT NULL,
        node_id TEXT NOT NULL,
        control_session_id BIGINT NOT NULL,
        offline_since_ms BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (owner_id, ssid)
    );",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_have_the_same_versions_in_order() {
        let versions = |b| for_backend(b).1.iter().map(|(v, _)| *v).collect::<Vec<_>>();
        let sqlite = versions(Backend::Sqlite);
        assert_eq!(sqlite, versions(Backend::Postgres));
        assert!(sqlite.windows(2).all(|w| w[0] < w[1]));
    }
}
