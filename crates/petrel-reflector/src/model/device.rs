//! Device identity (draarl-v1 §2.1, §2.6).

/// Device identity: (owner user id, SSID).
pub type DeviceKey = (i64, u8);

/// SSIDs outside the normal device ranges 1–99 and 106–254 (spec §2.6).
/// SSID 0 is not a normal device SSID either, so it is refused the same way.
pub fn is_reserved_ssid(ssid: u8) -> bool {
    matches!(ssid, 0 | 100..=105 | 255)
}

/// Whether `ssid` belongs to an app ("ghost") session: 101–104 for UDP
/// apps, 105 for the web client, SSID = DevModel (draarl-v1 §2.6). A
/// talker or text sender keyed `(user id, ssid)` with such an SSID is an
/// app session, not a physical device.
pub fn is_app_ssid(ssid: u8) -> bool {
    (100..=105).contains(&ssid)
}
