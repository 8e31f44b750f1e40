//! What a caller of the stage driver ([`super::drive`]) adds to a stage:
//! where each device logs in (one node, or the edge its layout gives it),
//! the frame receipts the receive threads keep, and readings taken at the
//! instants the measurement starts and ends (the same instants the driver
//! samples CPU). The single-node stage adds nothing ([`NoProbe`]); the
//! cluster stages use [`super::node_probe::NodeProbe`].

use std::net::SocketAddr;

use super::receipts::FrameReceipts;
use super::LoadError;

/// Hooks into one stage; called from the driver's thread, except
/// [`StageProbe::receipts`], which the receive threads share.
pub(super) trait StageProbe: Sync {
    /// The UDP address device `i` logs in through and sends to; `None`:
    /// the stage target's.
    fn entry(&self, _device: usize) -> Option<SocketAddr> {
        None
    }

    /// The receipts to mark, if the stage keeps them.
    fn receipts(&self) -> Option<&FrameReceipts> {
        None
    }

    /// The receipt row of device `i` (see [`FrameReceipts::row`]).
    fn receipt_row(&self, _device: usize) -> usize {
        0
    }

    /// The measurement starts (after the warm-up): take the first readings.
    ///
    /// # Errors
    /// [`LoadError`] when a reading fails; the stage ends with it.
    fn begin(&self) -> Result<(), LoadError> {
        Ok(())
    }

    /// The measurement ends (the receive threads still run): take the last
    /// readings.
    ///
    /// # Errors
    /// [`LoadError`] when a reading fails; the stage ends with it.
    fn end(&self) -> Result<(), LoadError> {
        Ok(())
    }

    /// The error for `failed` devices that did not log in.
    fn login_failure(&self, failed: usize) -> LoadError {
        LoadError::Login(failed)
    }
}

/// A stage with nothing added.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct NoProbe;

impl StageProbe for NoProbe {}
