//! [`PetrelControllerFactory`]: one Petrel controller per quinn connection.

use std::sync::Arc;
use std::time::Instant;

use petrel_proto::cc::{Bbr, BbrVersion, CongestionKind, Cubic, NewReno, NoCongestionControl};
use quinn::congestion::{Controller, ControllerFactory};

use crate::PetrelController;

/// Builds a [`PetrelController`] of `kind` for each connection, sized for quinn's
/// current MTU (1200 bytes at the start of a connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PetrelControllerFactory {
    kind: CongestionKind,
    seed: u64,
}

impl PetrelControllerFactory {
    /// A factory of `kind` controllers, with seed 0 for BBR's probe timing.
    pub fn new(kind: CongestionKind) -> Self {
        Self { kind, seed: 0 }
    }

    /// The same, seeding BBR's probe timing with `seed`.
    pub fn with_seed(kind: CongestionKind, seed: u64) -> Self {
        Self { kind, seed }
    }

    /// Which controller it builds.
    pub fn kind(&self) -> CongestionKind {
        self.kind
    }
}

impl ControllerFactory for PetrelControllerFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        let mds = u64::from(current_mtu);
        let bbr = |version| Box::new(PetrelController::new(Bbr::new(version, mds, self.seed)));
        match self.kind {
            CongestionKind::None => Box::new(PetrelController::new(NoCongestionControl)),
            CongestionKind::NewReno => Box::new(PetrelController::new(NewReno::new(mds))),
            CongestionKind::Cubic => Box::new(PetrelController::new(Cubic::new(mds))),
            CongestionKind::BbrV1 => bbr(BbrVersion::V1),
            CongestionKind::BbrV2 => bbr(BbrVersion::V2),
            CongestionKind::BbrV3 => bbr(BbrVersion::V3),
        }
    }
}
