//! Protocol versions and feature bits of a node session, and their
//! negotiation (draarl-interconnect §3.2 steps 3 and 6).
//!
//! Zero or missing values mean versions 1..=1, features "all supported"
//! (0x3FF) and required 0x7. The chosen version is the highest common one,
//! the features are the intersection, and each side's required bits must be
//! in it.

use thiserror::Error;

/// A set of feature bits (§3.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Features(pub u64);

impl Features {
    /// Bit 0, route sync (required).
    pub const ROUTE_SYNC: Features = Features(1 << 0);
    /// Bit 1, UDP relay (required).
    pub const UDP_RELAY: Features = Features(1 << 1);
    /// Bit 2, device sessions (required).
    pub const DEVICE_SESSIONS: Features = Features(1 << 2);
    /// Bit 3, Type 3 configuration via the control plane.
    pub const DEVICE_CONFIG: Features = Features(1 << 3);
    /// Bit 4, speaker lease.
    pub const SPEAKER_LEASE: Features = Features(1 << 4);
    /// Bit 5, runtime metrics.
    pub const RUNTIME_METRICS: Features = Features(1 << 5);
    /// Bit 6, online credential rotation.
    pub const CREDENTIAL_ROTATION: Features = Features(1 << 6);
    /// Bit 7, session reconfirmation after a restart.
    pub const SESSION_RECONFIRM: Features = Features(1 << 7);
    /// Bit 8, ghost multi-session (and source-group tagging in Reserved).
    pub const GHOST_MULTI_SESSION: Features = Features(1 << 8);
    /// Bit 9, ghost recovery tickets.
    pub const GHOST_RECOVERY_TICKETS: Features = Features(1 << 9);
    /// Every bit the protocol defines (0x3FF).
    pub const ALL: Features = Features(0x3ff);
    /// The bits every session needs (0x7).
    pub const REQUIRED: Features = Features(0x7);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Features) -> bool {
        self.0 & other.0 == other.0
    }

    /// Bits in both.
    pub fn intersection(self, other: Features) -> Features {
        Features(self.0 & other.0)
    }
}

/// One side's offer: its version range and features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// Lowest protocol version (0 = 1).
    pub min_protocol: u8,
    /// Highest protocol version (0 = 1).
    pub max_protocol: u8,
    /// Supported features (0 = all, 0x3FF).
    pub features: Features,
    /// Features it cannot work without (0 = 0x7).
    pub required: Features,
}

impl Offer {
    /// What this implementation offers: version 1, route sync, UDP relay,
    /// device sessions and speaker lease (0x017, the minimum of §10 item 1),
    /// requiring the first three.
    pub const MINIMUM: Offer = Offer {
        min_protocol: 1,
        max_protocol: 1,
        features: Features(0x017),
        required: Features::REQUIRED,
    };

    /// What Petrel's centre and edges offer: [`Offer::MINIMUM`] plus
    /// session reconfirmation (bit 7, §3.9), 0x097.
    pub const CURRENT: Offer = Offer {
        min_protocol: 1,
        max_protocol: 1,
        features: Features(0x097),
        required: Features::REQUIRED,
    };

    /// The offer with §3.2's defaults in place of zeros.
    pub fn with_defaults(self) -> Offer {
        let or = |v: u8| if v == 0 { 1 } else { v };
        Offer {
            min_protocol: or(self.min_protocol),
            max_protocol: or(self.max_protocol),
            features: if self.features.0 == 0 {
                Features::ALL
            } else {
                self.features
            },
            required: if self.required.0 == 0 {
                Features::REQUIRED
            } else {
                self.required
            },
        }
    }
}

/// The outcome of a negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The chosen protocol version.
    pub protocol: u8,
    /// The features of the session.
    pub features: Features,
}

/// Why two offers do not agree (answered with `node_protocol_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum NegotiationError {
    /// The version ranges do not overlap.
    #[error("no common protocol version")]
    NoCommonVersion,
    /// A side's required features are not in the intersection.
    #[error("required features not supported")]
    MissingRequired,
}

/// Negotiates `ours` with `theirs` (§3.2 step 3).
///
/// # Errors
/// [`NegotiationError`].
pub fn negotiate(ours: &Offer, theirs: &Offer) -> Result<Negotiated, NegotiationError> {
    let (a, b) = (ours.with_defaults(), theirs.with_defaults());
    let low = a.min_protocol.max(b.min_protocol);
    let high = a.max_protocol.min(b.max_protocol);
    if low > high {
        return Err(NegotiationError::NoCommonVersion);
    }
    let features = a.features.intersection(b.features);
    if !features.contains(a.required) || !features.contains(b.required) {
        return Err(NegotiationError::MissingRequired);
    }
    Ok(Negotiated {
        protocol: high,
        features,
    })
}
