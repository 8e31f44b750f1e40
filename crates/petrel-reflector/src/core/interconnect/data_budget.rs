//! The per-node data budget (draarl-interconnect §4.3 step 7, §7): UDP
//! Type 0 packets and bytes per node session in windows aligned to whole
//! Unix seconds; over the soft packet rate counts one event per window,
//! over the hard packet rate or the byte rate drops.

/// The limits of one node session (§7 `Interconnect.Resources`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataLimits {
    /// `DataSoftPPSPerNode`: packets per second above which one soft event
    /// is counted per window (default 50 000).
    pub soft_pps: u32,
    /// `DataHardPPSPerNode`: packets per second above which packets drop
    /// (default 100 000).
    pub hard_pps: u32,
    /// `DataHardMbpsPerNode` × 125 000: bytes per second above which
    /// packets drop (default 1000 Mb/s).
    pub hard_bytes_per_s: u64,
}

impl Default for DataLimits {
    fn default() -> Self {
        Self {
            soft_pps: 50_000,
            hard_pps: 100_000,
            hard_bytes_per_s: 1000 * 125_000,
        }
    }
}

/// What [`DataBudget::charge`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// Whether the datagram is within the hard limits.
    pub allowed: bool,
    /// Whether this datagram was the first over the soft rate in its window.
    pub soft_event: bool,
}

/// One node session's counts in the current one-second window.
#[derive(Debug, Clone, Default)]
pub struct DataBudget {
    window: i64,
    packets: u32,
    bytes: u64,
    soft_reported: bool,
}

impl DataBudget {
    /// Charges one datagram of `len` bytes received at the wall clock
    /// `wall_ms` (Unix ms). Every datagram counts toward the packet rate;
    /// only allowed ones count toward the byte rate.
    pub fn charge(&mut self, limits: &DataLimits, wall_ms: i64, len: usize) -> Charge {
        let window = wall_ms.div_euclid(1000);
        if window != self.window {
            *self = Self {
                window,
                ..Self::default()
            };
        }
        self.packets = self.packets.saturating_add(1);
        let soft_event = self.packets > limits.soft_pps && !self.soft_reported;
        self.soft_reported |= soft_event;
        let bytes = self.bytes.saturating_add(len as u64);
        let allowed = self.packets <= limits.hard_pps && bytes <= limits.hard_bytes_per_s;
        if allowed {
            self.bytes = bytes;
        }
        Charge {
            allowed,
            soft_event,
        }
    }
}
