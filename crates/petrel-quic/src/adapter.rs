//! [`PetrelController`]: quinn's `Controller` over a Petrel controller.

use std::any::Any;
use std::collections::VecDeque;
use std::time::Instant;

use petrel_proto::cc::{
    AckEvent, CongestionController, DeliveryState, LossEvent, LossKind, SendStamp, SentEvent,
};
use quinn::congestion::{Controller, ControllerMetrics};
use quinn_proto::RttEstimator;

/// Most send records kept for delivery-rate stamps; older ones are dropped (and
/// counted) so a peer that never acks cannot grow memory.
const MAX_SENT_RECORDS: usize = 1 << 16;

/// One `on_sent` call (a packet, or a GSO batch sent at one instant).
#[derive(Debug, Clone, Copy)]
struct SentRecord {
    time: Instant,
    stamp: SendStamp,
    /// Bytes of it neither acked nor lost yet.
    outstanding: u64,
}

/// A Petrel controller `C` driven by quinn.
///
/// quinn reports sends per datagram (or GSO batch) with a packet number, and acks and
/// losses per packet with only the send time; this keeps the sends in time order and
/// matches acks to them by send time to give `C` delivery-rate samples. The RTT sample
/// of an ack is `now − sent` (quinn's latest RTT is private in 0.11), so it includes
/// the peer's ack delay. MTU changes reach `C` through
/// [`CongestionController::set_max_datagram_size`], so its minimum window always
/// holds a full datagram (quinn never sends into a window smaller than one).
#[derive(Debug, Clone)]
pub struct PetrelController<C> {
    inner: C,
    state: DeliveryState,
    sent: VecDeque<SentRecord>,
    in_flight: u64,
    initial_window: u64,
    /// Send records dropped at the [`MAX_SENT_RECORDS`] bound.
    records_dropped: u64,
}

impl<C: CongestionController> PetrelController<C> {
    /// Wraps `inner`; its current window is quinn's initial window.
    pub fn new(inner: C) -> Self {
        let initial_window = inner.cwnd();
        Self {
            inner,
            state: DeliveryState::default(),
            sent: VecDeque::new(),
            in_flight: 0,
            initial_window,
            records_dropped: 0,
        }
    }

    /// The wrapped controller.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Send records dropped because more than 65 536 were outstanding.
    pub fn records_dropped(&self) -> u64 {
        self.records_dropped
    }

    /// The record of the packet sent at `sent`, if still kept.
    fn record(&mut self, sent: Instant) -> Option<&mut SentRecord> {
        let start = self.sent.partition_point(|r| r.time < sent);
        self.sent
            .range_mut(start..)
            .take_while(|r| r.time == sent)
            .find(|r| r.outstanding > 0)
    }

    fn prune(&mut self) {
        while self.sent.front().is_some_and(|r| r.outstanding == 0) {
            self.sent.pop_front();
        }
    }

    /// A stamp for a packet whose record is gone: app-limited, so its sample can
    /// only raise a bandwidth estimate, never lower it.
    fn fallback_stamp(&self, sent: Instant) -> SendStamp {
        SendStamp {
            delivered: self.state.delivered(),
            delivered_time: sent,
            first_sent_time: sent,
            app_limited: true,
            tx_in_flight: self.in_flight,
            lost: self.state.lost(),
        }
    }
}

impl<C> Controller for PetrelController<C>
where
    C: CongestionController + Clone + Sync + 'static,
{
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        let prior = self.in_flight;
        self.in_flight = self.in_flight.saturating_add(bytes);
        let stamp = self.state.on_sent(now, prior, self.in_flight);
        if self.sent.len() >= MAX_SENT_RECORDS {
            self.sent.pop_front();
            self.records_dropped += 1;
        }
        self.sent.push_back(SentRecord {
            time: now,
            stamp,
            outstanding: bytes,
        });
        let mut event = SentEvent::new(now, bytes, self.in_flight, false);
        event.app_limited = stamp.app_limited;
        self.inner.on_sent(&event);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
        let stamp = match self.record(sent) {
            Some(record) => {
                record.outstanding = record.outstanding.saturating_sub(bytes);
                record.stamp
            }
            None => self.fallback_stamp(sent),
        };
        self.prune();
        let mut event = AckEvent::new(now, bytes, sent);
        event.rtt = Some(now.saturating_duration_since(sent));
        event.srtt = Some(rtt.get());
        event.in_flight = self.in_flight;
        self.state.on_acked(&mut event, &stamp);
        event.app_limited |= app_limited;
        self.inner.on_ack(&event);
    }

    fn on_end_acks(
        &mut self,
        _now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.in_flight = in_flight;
        if app_limited {
            self.state.set_app_limited(in_flight);
        }
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        let stamp = self
            .record(sent)
            .map(|r| r.stamp)
            .unwrap_or_else(|| self.fallback_stamp(sent));
        // quinn declares packets lost oldest first: everything sent up to the newest
        // lost packet and still outstanding is part of this event.
        while self.sent.front().is_some_and(|r| r.time <= sent) {
            self.sent.pop_front();
        }
        let kind = if is_persistent_congestion {
            LossKind::Timeout
        } else {
            LossKind::FastRetransmit
        };
        let mut event = LossEvent::new(now, kind, lost_bytes, sent);
        event.in_flight = self.in_flight;
        self.state.on_lost(&mut event, &stamp);
        self.in_flight = self.in_flight.saturating_sub(lost_bytes);
        self.inner.on_loss(&event);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.inner.set_max_datagram_size(u64::from(new_mtu));
    }

    fn window(&self) -> u64 {
        self.inner.cwnd()
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.inner.cwnd();
        metrics.pacing_rate = self.inner.pacing_rate().map(|r| r.saturating_mul(8));
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
