//! Ends the app sessions of accounts that lost their rights
//! (`specs/draarl-apps.md` §2.4 "Other removals": permission revocation,
//! e.g. the user disabled), checked at every directory reload: the ghost
//! and WebSocket sessions of a user who is disabled or deleted, or whose
//! web password changed since the last reload, leave the registry (their
//! UDP tags stop resolving; their WebSocket connections are closed without
//! a close frame, §4.5). The refresh tokens end in the store: a refresh
//! for a disabled or deleted user is refused with all its tokens revoked
//! (§1.4 `user_invalid`), and setting a web password revokes them at once
//! (`Store::set_web_password`). Access tokens stay valid until they expire
//! (3 h, §1.4), as in the reference, but a new login of a disabled user is
//! refused (§1.3, §2.2, §4.2).

use std::collections::HashMap;

use super::shared_tables::SharedTables;
use crate::model::Directory;

/// The web password fingerprints seen at the last reload
/// (`Store::web_password_stamps`), one per account.
#[derive(Debug, Default)]
pub(crate) struct SessionRevocation {
    stamps: HashMap<i64, u64>,
}

impl SessionRevocation {
    /// Starts from the fingerprints read when the server starts.
    pub(crate) fn new(stamps: HashMap<i64, u64>) -> Self {
        Self { stamps }
    }

    /// Removes the sessions of every owner who is missing from `dir`,
    /// disabled in it, or whose stamp in `stamps` differs from the last
    /// one seen; keeps `stamps` for the next reload and returns how many
    /// sessions ended. `stamps` is `None` when the store could not read
    /// them: then passwords are not compared and the last ones are kept.
    pub(crate) fn apply(
        &mut self,
        dir: &Directory,
        stamps: Option<HashMap<i64, u64>>,
        shared: &SharedTables,
    ) -> usize {
        let changed = |id: i64| {
            stamps.as_ref().is_some_and(|now| {
                self.stamps
                    .get(&id)
                    .is_some_and(|before| now.get(&id) != Some(before))
            })
        };
        let gone = shared
            .ghosts()
            .remove_owners(|id| dir.user(id).is_none_or(|u| !u.enabled) || changed(id));
        if let Some(now) = stamps {
            self.stamps = now;
        }
        if !gone.is_empty() {
            shared.invalidate_every_domain();
        }
        gone.len()
    }
}
