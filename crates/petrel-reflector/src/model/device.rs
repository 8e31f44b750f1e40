//! Device identity (draarl-v1 §2.1, §2.6).

/// Device identity: (owner user id, SSID).
pub type DeviceKey = (i64, u8);

/// SSIDs outside the normal device ranges 1–99 and 106–254 (spec §2.6).
/// SSID 0 is not a normal device SSID either, so it is refused the same way.
pub fn is_reserved_ssid(ssid: u8) -> bool {
    matches!(ssid, 0 | 100..=105 | 255)
}
