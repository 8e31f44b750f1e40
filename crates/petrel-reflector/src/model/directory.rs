//! The in-memory view of users, talkgroups, links and device records that the
//! session core reads on every packet. Loaded from the store; the core never
//! queries the database on the hot path.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::codec::Mac;

/// Group id meaning "ungrouped": the device is online but forwards nothing.
pub const UNGROUPED: i64 = 0;

/// An account. One device password per user, stored as an Argon2 PHC string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// Primary key.
    pub id: i64,
    /// Account name; the username on the wire.
    pub name: String,
    /// Callsign written into replies and forwarded headers.
    pub callsign: String,
    /// DMR ID used for new devices (24 bits).
    pub dmrid: u32,
    /// `users.status = 1`.
    pub enabled: bool,
    /// `users.approval_status = 1`.
    pub approved: bool,
    /// Argon2id PHC string of the device password, `None` if never set.
    pub device_password_hash: Option<String>,
    /// Group a new device joins on first login (0 = ungrouped).
    pub default_group_id: i64,
}

/// A talkgroup. Virtual groups join their link targets into one domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// Primary key (the reference's public group is 999).
    pub id: i64,
    /// Display name.
    pub name: String,
    /// `status = 1`: only enabled groups forward.
    pub enabled: bool,
    /// A virtual interconnect group whose links join other groups.
    pub is_virtual: bool,
}

/// A physical device, identified by (owner, SSID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRecord {
    /// Owning user id.
    pub owner_id: i64,
    /// SSID (1–99, 106–254).
    pub ssid: u8,
    /// Device model last reported (spec §2.5).
    pub dev_model: u8,
    /// DMR ID written into forwarded headers.
    pub dmrid: u32,
    /// Current talkgroup, [`UNGROUPED`] for none.
    pub group_id: i64,
    /// Send ban: Types 4/5 from the device are dropped.
    pub disable_send: bool,
    /// Receive ban: the device is left out of receiver snapshots.
    pub disable_recv: bool,
    /// Last valid MAC reported in a heartbeat.
    pub mac: Option<Mac>,
}

/// Connected groups that share one floor and one receiver snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// Smallest group id in the domain; its stable key.
    pub id: i64,
    /// Every group in the domain, sorted.
    pub groups: Arc<[i64]>,
}

/// Users, groups, links and devices, with forwarding domains precomputed.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    users: HashMap<i64, UserRecord>,
    user_ids: HashMap<String, i64>,
    groups: HashMap<i64, GroupRecord>,
    links: Vec<(i64, i64)>,
    devices: HashMap<(i64, u8), DeviceRecord>,
    domains: HashMap<i64, Domain>,
}

impl Directory {
    /// Builds a directory and computes domains. `links` are
    /// `(link_group_id, target_group_id)` pairs.
    pub fn new(
        users: Vec<UserRecord>,
        groups: Vec<GroupRecord>,
        links: Vec<(i64, i64)>,
        devices: Vec<DeviceRecord>,
    ) -> Self {
        let mut d = Self {
            user_ids: users.iter().map(|u| (u.name.clone(), u.id)).collect(),
            users: users.into_iter().map(|u| (u.id, u)).collect(),
            groups: groups.into_iter().map(|g| (g.id, g)).collect(),
            links,
            devices: devices
                .into_iter()
                .map(|r| ((r.owner_id, r.ssid), r))
                .collect(),
            domains: HashMap::new(),
        };
        d.compute_domains();
        d
    }

    /// Connected components over enabled groups, where an edge joins an
    /// enabled virtual link group to an enabled target (draarl-v1 §3.7).
    fn compute_domains(&mut self) {
        let enabled = |id: &i64| self.groups.get(id).is_some_and(|g| g.enabled);
        let mut adj: HashMap<i64, Vec<i64>> = HashMap::new();
        for (l, t) in &self.links {
            let link_ok = self
                .groups
                .get(l)
                .is_some_and(|g| g.enabled && g.is_virtual);
            if link_ok && enabled(t) {
                adj.entry(*l).or_default().push(*t);
                adj.entry(*t).or_default().push(*l);
            }
        }
        let mut domains = HashMap::new();
        let mut ids: Vec<i64> = self
            .groups
            .keys()
            .copied()
            .filter(|id| enabled(id))
            .collect();
        ids.sort_unstable();
        for start in ids {
            if domains.contains_key(&start) {
                continue;
            }
            let mut seen = BTreeSet::from([start]);
            let mut queue = VecDeque::from([start]);
            while let Some(g) = queue.pop_front() {
                for n in adj.get(&g).into_iter().flatten() {
                    if seen.insert(*n) {
                        queue.push_back(*n);
                    }
                }
            }
            let groups: Arc<[i64]> = seen.into_iter().collect();
            let dom = Domain {
                id: groups[0],
                groups,
            };
            for g in dom.groups.iter() {
                domains.insert(*g, dom.clone());
            }
        }
        self.domains = domains;
    }

    /// User by account name.
    pub fn user_by_name(&self, name: &str) -> Option<&UserRecord> {
        self.user_ids.get(name).and_then(|id| self.users.get(id))
    }

    /// User by id.
    pub fn user(&self, id: i64) -> Option<&UserRecord> {
        self.users.get(&id)
    }

    /// Group by id.
    pub fn group(&self, id: i64) -> Option<&GroupRecord> {
        self.groups.get(&id)
    }

    /// Device record by (owner, SSID).
    pub fn device(&self, owner_id: i64, ssid: u8) -> Option<&DeviceRecord> {
        self.devices.get(&(owner_id, ssid))
    }

    /// Inserts or replaces a device record (first login, model or MAC change).
    pub fn put_device(&mut self, rec: DeviceRecord) {
        self.devices.insert((rec.owner_id, rec.ssid), rec);
    }

    /// The forwarding domain of an enabled group; `None` for ungrouped,
    /// unknown or disabled groups.
    pub fn domain_of(&self, group_id: i64) -> Option<&Domain> {
        self.domains.get(&group_id)
    }

    /// Device records in any of `groups`.
    pub fn devices_in<'a>(
        &'a self,
        groups: &'a [i64],
    ) -> impl Iterator<Item = &'a DeviceRecord> + 'a {
        self.devices
            .values()
            .filter(move |d| groups.contains(&d.group_id))
    }

    /// Number of device records.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Device records absent from `newer` (created in memory, not yet loaded
    /// back from the store).
    pub(crate) fn devices_missing_from<'a>(
        &'a self,
        newer: &'a Directory,
    ) -> impl Iterator<Item = &'a DeviceRecord> + 'a {
        self.devices
            .iter()
            .filter(|(k, _)| !newer.devices.contains_key(k))
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(id: i64, enabled: bool, is_virtual: bool) -> GroupRecord {
        GroupRecord {
            id,
            name: format!("g{id}"),
            enabled,
            is_virtual,
        }
    }

    #[test]
    fn virtual_links_form_domains_and_disabled_groups_break_them() {
        let d = Directory::new(
            vec![],
            vec![
                g(1, true, false),
                g(2, true, false),
                g(3, true, false),
                g(9, true, true),
                g(8, false, true),
                g(4, false, false),
            ],
            vec![(9, 1), (9, 2), (8, 3), (8, 1), (9, 4)],
            vec![],
        );
        assert_eq!(&*d.domain_of(1).unwrap().groups, &[1, 2, 9]);
        assert_eq!(d.domain_of(2).unwrap().id, 1);
        // Link group 8 is disabled: 3 stays alone.
        assert_eq!(&*d.domain_of(3).unwrap().groups, &[3]);
        assert!(d.domain_of(4).is_none());
        assert!(d.domain_of(UNGROUPED).is_none());
    }
}
