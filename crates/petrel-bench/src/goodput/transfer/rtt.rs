//! RTT under load: the sender's own smoothed RTT (srtt), read every
//! [`SAMPLE_INTERVAL`] while the transfer runs, into a bounded histogram.
//!
//! Why the transport's srtt and not a separate ping flow: the emulator keeps one
//! route, with its own queue, per client address, so a ping from another socket
//! would wait in a queue of its own and never see the transfer's queue. The srtt
//! of the sending connection is measured through exactly that queue. It is smoothed
//! (RFC 6298 / RFC 9002: 7/8 old + 1/8 new sample), so its p99 understates single
//! outliers but follows a standing queue within a few round trips.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::measure::LatencyHistogram;

/// How often the srtt is read.
pub(crate) const SAMPLE_INTERVAL: Duration = Duration::from_millis(10);

/// What [`RttSampler`] records, in the result's words.
pub(crate) const SOURCE: &str =
    "the sender's smoothed RTT (srtt), read every 10 ms during the transfer";

/// A task reading the srtt until [`finish`](Self::finish).
pub(crate) struct RttSampler {
    stop: oneshot::Sender<()>,
    task: JoinHandle<LatencyHistogram>,
}

impl RttSampler {
    /// Starts reading `srtt` (which returns `None` while the connection has no
    /// estimate) every [`SAMPLE_INTERVAL`]. Must be called inside a tokio runtime.
    pub(crate) fn start(srtt: impl Fn() -> Option<Duration> + Send + 'static) -> Self {
        let (stop, mut stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let mut histogram = LatencyHistogram::new();
            let mut tick = tokio::time::interval(SAMPLE_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stopped => return histogram,
                    _ = tick.tick() => {
                        if let Some(rtt) = srtt() {
                            histogram.record(rtt);
                        }
                    }
                }
            }
        });
        Self { stop, task }
    }

    /// Stops sampling; the samples taken (empty if the task failed).
    pub(crate) async fn finish(self) -> LatencyHistogram {
        // The task may already have ended (runtime shutting down): then the send
        // fails and the join reports it.
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}
