//! The fresh store a stage runs on: one bench account per
//! [`DEVICES_PER_USER`] devices, one group per speaker, every device in its
//! group, written through the store's public API; with app receivers, the
//! app accounts with their web passwords (draarl-apps §1.3).

use petrel_reflector::runtime::store::{NewUser, Store, StoreOptions};

use super::apps::{AppKind, APP_PASSWORD};
use super::device::{ssid_of, user_of, DEVICES_PER_USER, PASSWORD};
use super::{LoadConfig, LoadError};

/// Creates the accounts, groups and device groups of `cfg` in the store at
/// `db`; returns the groups' store ids, by group index.
pub(super) async fn populate(cfg: &LoadConfig, db: &str) -> Result<Vec<i64>, LoadError> {
    let store = Store::open(db, StoreOptions::default()).await?;
    let users = cfg.devices.div_ceil(DEVICES_PER_USER);
    for u in 0..users {
        store
            .add_user(&NewUser {
                name: format!("bench{u:04}"),
                callsign: format!("BT{u:05}"),
                dmrid: 9_000_000 + u as u32,
                device_password: PASSWORD.into(),
                default_group_id: None,
            })
            .await?;
    }
    let mut group_ids = Vec::with_capacity(cfg.groups);
    for g in 0..cfg.groups {
        group_ids.push(
            store
                .add_group(&format!("bench-{g:04}"), false, None)
                .await?,
        );
    }
    for i in 0..cfg.devices {
        store
            .set_device_group(&user_of(i), ssid_of(i), group_ids[i % cfg.groups])
            .await?;
    }
    for (kind, receivers) in [(AppKind::Ghost, cfg.ghosts), (AppKind::WebSocket, cfg.ws)] {
        for k in 0..AppKind::accounts(receivers) {
            let name = kind.account(k);
            let n = users + k + if kind == AppKind::Ghost { 0 } else { 5000 };
            store
                .add_user(&NewUser {
                    name: name.clone(),
                    callsign: format!("BA{n:05}"),
                    dmrid: 9_000_000 + n as u32,
                    device_password: PASSWORD.into(),
                    default_group_id: None,
                })
                .await?;
            store.set_web_password(&name, APP_PASSWORD).await?;
        }
    }
    store.close().await;
    Ok(group_ids)
}
