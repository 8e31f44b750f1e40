//! Delivery-rate bookkeeping the sender keeps for its controller
//! (draft-ietf-ccwg-bbr "Delivery Rate Samples", draft-cheng-iccrg-delivery-rate-estimation).
//!
//! The connection-wide [`DeliveryState`] stamps every transmission with a
//! [`SendStamp`] (`P.delivered`, `P.delivered_time`, `P.first_send_time`,
//! `P.is_app_limited`, `P.tx_in_flight`, `P.lost`); when that transmission is acked or
//! declared lost, the stamp fills the event's sample fields. Counters are `u64` bytes
//! and saturate instead of wrapping.

use std::time::Instant;

use super::{AckEvent, LossEvent};

/// Connection-wide delivery state (`C.delivered`, `C.delivered_time`,
/// `C.first_send_time`, `C.lost`, `C.app_limited`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryState {
    delivered: u64,
    delivered_time: Option<Instant>,
    first_sent_time: Option<Instant>,
    lost: u64,
    /// `C.app_limited`: the `delivered` value that ends the app-limited period; 0 when
    /// the connection is not app-limited.
    app_limited_until: u64,
}

/// What a transmission is stamped with (`P.*` in the draft).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendStamp {
    /// `C.delivered` at send, bytes.
    pub delivered: u64,
    /// `C.delivered_time` at send.
    pub delivered_time: Instant,
    /// `C.first_send_time` at send.
    pub first_sent_time: Instant,
    /// Whether the connection was app-limited at send.
    pub app_limited: bool,
    /// Bytes in flight just after this transmission.
    pub tx_in_flight: u64,
    /// `C.lost` at send, bytes.
    pub lost: u64,
}

impl DeliveryState {
    /// Total bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Total bytes declared lost so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Whether the connection is in an app-limited period.
    pub fn is_app_limited(&self) -> bool {
        self.app_limited_until != 0
    }

    /// The sender ran out of data while below its windows with `in_flight` bytes
    /// outstanding: rate samples of what is sent until that data is delivered are
    /// app-limited (the draft's `MarkConnectionAppLimited`).
    pub fn set_app_limited(&mut self, in_flight: u64) {
        self.app_limited_until = self.delivered.saturating_add(in_flight).max(1);
    }

    /// A transmission at `now`; `prior_in_flight` bytes were in flight before it and
    /// `in_flight` after. A send into an empty pipe starts a new sampling flight.
    pub fn on_sent(&mut self, now: Instant, prior_in_flight: u64, in_flight: u64) -> SendStamp {
        if prior_in_flight == 0 || self.first_sent_time.is_none() {
            self.first_sent_time = Some(now);
            self.delivered_time = Some(now);
        }
        SendStamp {
            delivered: self.delivered,
            delivered_time: self.delivered_time.unwrap_or(now),
            first_sent_time: self.first_sent_time.unwrap_or(now),
            app_limited: self.is_app_limited(),
            tx_in_flight: in_flight,
            lost: self.lost,
        }
    }

    /// The transmission stamped `stamp` was acknowledged: counts its bytes as
    /// delivered and fills `event`'s sample fields (`delivered`, `prior_*`,
    /// `first_sent_time`, `app_limited`, `tx_in_flight`, `lost`).
    pub fn on_acked(&mut self, event: &mut AckEvent, stamp: &SendStamp) {
        self.delivered = self.delivered.saturating_add(event.acked_bytes);
        self.delivered_time = Some(event.now);
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        // The newest acked transmission starts the next send interval.
        if self.first_sent_time.is_none_or(|t| event.sent_time > t) {
            self.first_sent_time = Some(event.sent_time);
        }
        event.delivered = self.delivered;
        event.prior_delivered = stamp.delivered;
        event.prior_delivered_time = stamp.delivered_time;
        event.first_sent_time = stamp.first_sent_time;
        event.app_limited = stamp.app_limited;
        event.tx_in_flight = stamp.tx_in_flight;
        event.prior_lost = stamp.lost;
        event.lost = self.lost;
    }

    /// The transmission stamped `stamp` was declared lost: counts its bytes as lost and
    /// fills `event`'s sample fields.
    pub fn on_lost(&mut self, event: &mut LossEvent, stamp: &SendStamp) {
        self.lost = self.lost.saturating_add(event.lost_bytes);
        event.tx_in_flight = stamp.tx_in_flight;
        event.prior_lost = stamp.lost;
        event.lost = self.lost;
        event.app_limited = stamp.app_limited;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_flight_samples_the_delivery_rate() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut st = DeliveryState::default();
        // Ten 1000-byte segments, 1 ms apart, acked 10 ms after each was sent.
        let stamps: Vec<_> = (0..10u64)
            .map(|i| st.on_sent(t0 + ms * i as u32, i * 1000, (i + 1) * 1000))
            .collect();
        let mut last = None;
        for (i, stamp) in stamps.iter().enumerate() {
            let sent = t0 + ms * i as u32;
            let mut ev = AckEvent::new(sent + 10 * ms, 1000, sent);
            st.on_acked(&mut ev, stamp);
            last = ev.rate_sample();
        }
        // The last sample: all 10 000 bytes, over the 19 ms from the flight's start to
        // the last ack (longer than the 9 ms the sends took).
        let s = last.unwrap();
        assert_eq!(s.delivered, 10_000);
        assert_eq!(s.interval, 19 * ms);
        assert_eq!(st.delivered(), 10_000);
    }

    #[test]
    fn app_limited_period_ends_once_its_data_is_delivered() {
        let t0 = Instant::now();
        let mut st = DeliveryState::default();
        st.set_app_limited(2000);
        let stamp = st.on_sent(t0, 0, 1000);
        assert!(stamp.app_limited);
        let mut ev = AckEvent::new(t0, 1000, t0);
        st.on_acked(&mut ev, &stamp);
        assert!(ev.app_limited && st.is_app_limited());
        let mut ev = AckEvent::new(t0, 1001, t0);
        st.on_acked(&mut ev, &stamp);
        assert!(!st.is_app_limited());
    }

    #[test]
    fn losses_are_counted_and_stamped() {
        let t0 = Instant::now();
        let mut st = DeliveryState::default();
        let a = st.on_sent(t0, 0, 1000);
        let b = st.on_sent(t0, 1000, 2000);
        let mut ev = LossEvent::new(t0, super::super::LossKind::Timeout, 1000, t0);
        st.on_lost(&mut ev, &a);
        assert_eq!((ev.lost, ev.prior_lost, ev.tx_in_flight), (1000, 0, 1000));
        let c = st.on_sent(t0, 1000, 2000);
        assert_eq!((b.lost, c.lost), (0, 1000));
    }
}
