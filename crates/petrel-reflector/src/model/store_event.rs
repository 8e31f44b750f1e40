//! Changes the core asks the runtime to persist (draarl-v1 §2.5, §2.8, §5.3).

use super::device::DeviceKey;
use super::directory::DeviceRecord;
use super::session_entry::SessionEntryWrite;
use crate::codec;

/// A change the runtime should persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreEvent {
    /// Insert a device row (first login), or update its model and MAC. The
    /// group and bans of an existing row are left alone: the store owns them.
    DeviceUpsert(DeviceRecord),
    /// An admin moved a device to another group (0 = ungrouped).
    DeviceGroup {
        /// Device identity.
        device: DeviceKey,
        /// New group id.
        group_id: i64,
    },
    /// A device reported its Type 3 configuration.
    DeviceConfig {
        /// Device identity.
        device: DeviceKey,
        /// Items as reported.
        items: Vec<codec::Tlv>,
    },
    /// A text message was forwarded; kept as channel history (spec §5.3:
    /// text is stored whether or not voice recording is on).
    Text {
        /// Sender.
        device: DeviceKey,
        /// Sender's group when it was sent.
        group_id: i64,
        /// Wall-clock time, Unix ms (0 if the core has no wall clock).
        unix_ms: i64,
        /// DATA as received (UTF-8 by convention, stored unchanged).
        text: Vec<u8>,
    },
    /// A centre's device-session entry changed (draarl-interconnect §3.9,
    /// §6.2).
    SessionEntry(SessionEntryWrite),
}
