//! The "no congestion control" controller: the reference KCP's `nc = 1` mode, where
//! only the send and remote windows limit what is in flight.

use super::{AckEvent, CongestionController, LossEvent, SentEvent};

/// Unlimited window, no pacing; ignores every event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoCongestionControl;

impl CongestionController for NoCongestionControl {
    fn on_sent(&mut self, _event: &SentEvent) {}
    fn on_ack(&mut self, _event: &AckEvent) {}
    fn on_loss(&mut self, _event: &LossEvent) {}
    fn cwnd(&self) -> u64 {
        u64::MAX
    }
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
    fn send_quantum(&self) -> u64 {
        u64::MAX
    }
    fn set_max_datagram_size(&mut self, _max_datagram_size: u64) {}
    fn name(&self) -> &'static str {
        "none"
    }
}
