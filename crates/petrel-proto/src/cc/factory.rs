//! [`ControllerFactory`]: how a connection gets its controller, built-in or
//! user-supplied (quinn's `ControllerFactory` pattern), and [`ControllerVisitor`],
//! which hands a built-in controller over as its concrete type.

use std::fmt::Debug;
use std::time::Instant;

use super::CongestionController;

/// What a factory is told when it builds one connection's controller.
///
/// `#[non_exhaustive]` so later transports can pass more; build it with
/// [`ControllerParams::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ControllerParams {
    /// Largest datagram the connection sends, bytes: KCP's `mtu`, quinn's current
    /// MTU (1200 at the start of a QUIC connection).
    pub max_datagram_size: u64,
    /// Seed of the controller's randomised parts (BBR's probe timing): KCP passes the
    /// conversation id so that flows of one host desynchronise while a simulation
    /// stays reproducible.
    pub seed: u64,
}

impl ControllerParams {
    /// Parameters for datagrams of at most `max_datagram_size` bytes and `seed`.
    pub fn new(max_datagram_size: u64, seed: u64) -> Self {
        Self {
            max_datagram_size,
            seed,
        }
    }
}

/// Builds a congestion controller for each new connection.
///
/// Put one in [`KcpConfig::controller`](crate::kcp::KcpConfig::controller) to run a
/// controller this crate does not ship; every built-in [`CongestionKind`] is one too
/// (`&CongestionKind::Cubic`).
///
/// [`CongestionKind`]: super::CongestionKind
pub trait ControllerFactory: Send + Sync + Debug {
    /// A fresh controller for a connection created at `now`.
    fn build(&self, now: Instant, params: &ControllerParams) -> Box<dyn CongestionController>;

    /// The name of the controllers it builds, for stats and logs (the built-ins use
    /// their `--cc` names: `reno`, `cubic`, `bbrv1`, ...).
    fn name(&self) -> &str;
}

/// Receives a freshly built built-in controller as its concrete type
/// ([`CongestionKind::visit`](super::CongestionKind::visit)), so a caller can wrap it
/// without a box — the quinn adapter's `PetrelController<C>` does — or box it.
///
/// The bounds are what the adapters need: every built-in controller is `Clone` and
/// `Sync`.
pub trait ControllerVisitor {
    /// What the visitor makes of the controller.
    type Output;

    /// Takes the controller.
    fn visit<C>(self, controller: C) -> Self::Output
    where
        C: CongestionController + Clone + Sync + 'static;
}

/// The visitor that boxes the controller (what KCP runs).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Boxed;

impl ControllerVisitor for Boxed {
    type Output = Box<dyn CongestionController>;

    fn visit<C>(self, controller: C) -> Self::Output
    where
        C: CongestionController + Clone + Sync + 'static,
    {
        Box::new(controller)
    }
}
