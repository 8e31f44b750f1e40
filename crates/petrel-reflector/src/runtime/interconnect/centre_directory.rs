//! The centre's own copy of the directory for its edge logic
//! (draarl-interconnect §3.8, §5.2): the proxied device logins read users,
//! groups and device records from it, the relay maps groups to domains
//! with it. The server's reload task replaces it with every directory it
//! hands the shards; device records created here since (first logins
//! through an edge, persisted by the store writer) are kept until a reload
//! contains them, as a shard keeps its own.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::model::{DeviceRecord, Directory};

/// The directory behind one lock; see the module docs.
#[derive(Debug, Default)]
pub struct CentreDirectory {
    dir: Mutex<Directory>,
}

impl CentreDirectory {
    /// Starts with `dir` (the directory loaded at start-up).
    pub fn new(dir: Directory) -> Self {
        Self {
            dir: Mutex::new(dir),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Directory> {
        self.dir.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the directory (under its lock: keep `f` short, and take
    /// no lock in it that a holder of the shared login or domain tables
    /// may wait for this one under).
    pub fn with<R>(&self, f: impl FnOnce(&Directory) -> R) -> R {
        f(&self.lock())
    }

    /// Replaces the directory with a reloaded one, keeping the device
    /// records created here that it does not hold yet.
    pub fn replace(&self, mut fresh: Directory) {
        let mut dir = self.lock();
        let pending: Vec<DeviceRecord> = dir.devices_missing_from(&fresh).cloned().collect();
        for rec in pending {
            fresh.put_device(rec);
        }
        *dir = fresh;
    }

    /// Records a device record created or changed by a proxied login.
    pub fn put_device(&self, rec: DeviceRecord) {
        self.lock().put_device(rec);
    }
}
