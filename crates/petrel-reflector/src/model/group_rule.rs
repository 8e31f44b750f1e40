//! The group rule and routing sanitising of the app sessions
//! (`specs/draarl-apps.md` §3.4 "Group rule", §2.3 "Initial routing").
//!
//! A group is usable (receivable, transmittable, viewable) by a user when it
//! has `status = 1`, is not virtual, has type 1 (public) or 2 (private),
//! **and** the user is an admin, or the group is public, or the user owns
//! it, or the user is a verified member.

use super::app_login::Routing;

/// Group type of a public group (`talkgroups.type`).
pub const GROUP_PUBLIC: i64 = 1;
/// Group type of a private group (membership needed).
pub const GROUP_PRIVATE: i64 = 2;

/// What the group rule reads of one group, for one user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupFacts {
    /// `talkgroups.status` (1 = enabled).
    pub status: i64,
    /// A virtual (link) group.
    pub is_virtual: bool,
    /// `talkgroups.type`: [`GROUP_PUBLIC`], [`GROUP_PRIVATE`], or 0 (legacy).
    pub group_type: i64,
    /// Whether the user owns the group.
    pub is_owner: bool,
    /// Whether the user is a verified member.
    pub is_verified_member: bool,
}

impl GroupFacts {
    /// The group rule for a user who is an admin or not.
    pub fn usable_by(&self, is_admin: bool) -> bool {
        self.status == 1
            && !self.is_virtual
            && matches!(self.group_type, GROUP_PUBLIC | GROUP_PRIVATE)
            && (is_admin
                || self.group_type == GROUP_PUBLIC
                || self.is_owner
                || self.is_verified_member)
    }
}

/// A stored routing with more groups than the subscription limit (§2.2
/// step 6: `client_preference_unavailable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimit;

/// Sanitises a stored routing (§2.3): an unusable TX becomes `fallback_tx`
/// (which always counts as usable), unusable RX groups are dropped, and TX
/// is added back into RX. `usable` is the group rule for this user. A
/// stored routing over `max_groups` groups is [`OverLimit`]. Returns the
/// routing and whether it differs from `stored`.
pub fn sanitise(
    stored: &Routing,
    fallback_tx: i64,
    max_groups: usize,
    usable: impl Fn(i64) -> bool,
) -> Result<(Routing, bool), OverLimit> {
    if stored.rx_group_ids.len() > max_groups {
        return Err(OverLimit);
    }
    let ok = |g: i64| g > 0 && (g == fallback_tx || usable(g));
    let tx = if ok(stored.tx_group_id) {
        stored.tx_group_id
    } else {
        fallback_tx
    };
    let rx = stored
        .rx_group_ids
        .iter()
        .copied()
        .filter(|g| ok(*g))
        .collect();
    let out = Routing::new(tx, rx);
    let changed = out != *stored;
    Ok((out, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(status: i64, is_virtual: bool, group_type: i64) -> GroupFacts {
        GroupFacts {
            status,
            is_virtual,
            group_type,
            is_owner: false,
            is_verified_member: false,
        }
    }

    #[test]
    fn the_group_rule() {
        assert!(facts(1, false, GROUP_PUBLIC).usable_by(false));
        assert!(!facts(0, false, GROUP_PUBLIC).usable_by(true));
        assert!(!facts(1, true, GROUP_PUBLIC).usable_by(true));
        assert!(!facts(1, false, 0).usable_by(true));
        let private = facts(1, false, GROUP_PRIVATE);
        assert!(!private.usable_by(false));
        assert!(private.usable_by(true));
        assert!(GroupFacts {
            is_owner: true,
            ..private
        }
        .usable_by(false));
        assert!(GroupFacts {
            is_verified_member: true,
            ..private
        }
        .usable_by(false));
    }

    #[test]
    fn sanitising_replaces_tx_drops_rx_and_adds_tx_back() {
        let usable = |g: i64| g != 5 && g != 6;
        let stored = Routing::new(5, vec![1, 6, 7]);
        let (r, changed) = sanitise(&stored, 999, 16, usable).unwrap();
        assert!(changed);
        assert_eq!(r, Routing::new(999, vec![1, 7]));
        assert_eq!(r.rx_group_ids, vec![1, 7, 999]);
        let fine = Routing::new(1, vec![7]);
        assert_eq!(sanitise(&fine, 999, 16, usable), Ok((fine.clone(), false)));
        // The fallback counts as usable even if the rule says otherwise.
        let (r, _) = sanitise(&Routing::new(6, vec![]), 6, 16, usable).unwrap();
        assert_eq!(r, Routing::new(6, vec![]));
        let big = Routing::new(1, (1..=17).collect());
        assert_eq!(sanitise(&big, 999, 16, |_| true), Err(OverLimit));
    }
}
