//! The output side of [`Kcp`]: building datagrams, timers and the next deadline
//! (reference `ikcp_flush` / `ikcp_check`, driven by events instead of a fixed tick).

use std::time::Instant;

use crate::cc::{LossEvent, LossKind, SentEvent};

use super::config::MAX_RTO;
use super::connection::{Kcp, TimeoutCheck};
use super::error::KcpError;
use super::rtt::backoff;
use super::segment::{encode_segment, Command, Header, HEADER_LEN};

impl Kcp {
    fn control_header(&self, cmd: Command, ts: u32, sn: u32) -> Header {
        Header {
            conv: self.conv,
            cmd,
            frg: 0,
            wnd: self.rcv.free_window(),
            ts,
            sn,
            una: self.rcv.rcv_nxt(),
            len: 0,
        }
    }

    /// Writes the next datagram into `out` (cleared first, at most `mtu` bytes) and
    /// returns true, or returns false when there is nothing to send.
    ///
    /// A datagram packs, in order: pending acks (held until the next interval tick
    /// when `ack_nodelay` is off, unless data goes out anyway), a window probe or
    /// window tell, then data segments: retransmissions first, then new segments while
    /// fewer than `min(snd_wnd, rmt_wnd)` segments and fewer than `cwnd` bytes are in
    /// flight. When the controller paces, data segments wait for the [`Pacer`]
    /// (`crate::cc::Pacer`) and [`Kcp::poll_timeout`] includes the release time. Call
    /// it until it returns false after every `send`, `input`, `recv` and
    /// `handle_timeout`.
    ///
    /// [`Pacer`]: crate::cc::Pacer
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        out.clear();
        if self.error.is_some() {
            return false;
        }
        let window = usize::from(self.config.snd_wnd.min(self.rmt_wnd));
        self.update_probe(now);
        let mtu = self.config.mtu;
        if out.capacity() < mtu {
            out.reserve(mtu);
        }

        let data_waiting =
            !self.snd.due.is_empty() || self.snd.next_new_len(window, self.cc.cwnd()).is_some();
        if self.config.ack_nodelay || self.acks_released || data_waiting {
            while out.len() + HEADER_LEN <= mtu {
                let Some((sn, ts)) = self.acks.pop_front() else {
                    break;
                };
                encode_segment(&self.control_header(Command::Ack, ts, sn), &[], out);
                self.stats.acks_sent += 1;
                self.stats.segments_sent += 1;
            }
            if self.acks.is_empty() {
                self.acks_released = false;
                self.ack_deadline = None;
            }
        }

        let ts = self.ts_ms(now);
        if self.ask_pending && out.len() + HEADER_LEN <= mtu {
            encode_segment(&self.control_header(Command::WindowAsk, ts, 0), &[], out);
            self.ask_pending = false;
            self.stats.window_probes_sent += 1;
            self.stats.segments_sent += 1;
        }
        if self.tell_pending && out.len() + HEADER_LEN <= mtu {
            encode_segment(&self.control_header(Command::WindowTell, ts, 0), &[], out);
            self.tell_pending = false;
            self.stats.window_tells_sent += 1;
            self.stats.segments_sent += 1;
        }

        self.write_data(now, ts, window, out);

        if out.is_empty() {
            return false;
        }
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += out.len() as u64;
        true
    }

    /// The next retransmission waiting in the due list (stale entries dropped): its
    /// index in the send buffer.
    fn next_due(&mut self) -> Option<usize> {
        while let Some(&sn) = self.snd.due.front() {
            match self.snd.index(sn) {
                Some(index) if self.snd.buf[index].due && !self.snd.buf[index].acked => {
                    return Some(index);
                }
                _ => {
                    self.snd.due.pop_front();
                }
            }
        }
        None
    }

    fn write_data(&mut self, now: Instant, ts: u32, window: usize, out: &mut Vec<u8>) {
        let mtu = self.config.mtu as u64;
        let pacing_rate = self.cc.pacing_rate();
        self.pacing_deadline = None;
        let mut header = self.control_header(Command::Push, ts, 0);
        loop {
            let due = self.next_due();
            let wire_len = match due {
                Some(index) => self.snd.buf[index].wire_len,
                None => match self.snd.next_new_len(window, self.cc.cwnd()) {
                    Some(len) => len,
                    None => break,
                },
            };
            if !out.is_empty() && out.len() as u64 + wire_len > mtu {
                break;
            }
            if let Some(rate) = pacing_rate {
                let quantum = self.cc.send_quantum();
                if let Err(release) = self.pacer.try_send(now, wire_len, rate, quantum) {
                    self.pacing_deadline = Some(release);
                    self.stats.pacing_waits += 1;
                    break;
                }
            }
            let index = match due {
                Some(index) => {
                    self.snd.due.pop_front();
                    index
                }
                None => match self.snd.promote_one() {
                    Some(index) => index,
                    None => break,
                },
            };
            let sn = self.snd.snd_una.wrapping_add(index as u32);
            let prior_in_flight = self.snd.in_flight_bytes;
            let seg = &mut self.snd.buf[index];
            header.sn = sn;
            header.frg = seg.frg;
            encode_segment(&header, &seg.payload, out);
            seg.xmit += 1;
            seg.due = false;
            if !seg.counted {
                seg.counted = true;
                self.snd.in_flight_bytes += seg.wire_len;
            }
            seg.fastack = 0;
            seg.timed_out = false;
            seg.ts = ts;
            seg.last_sent = Some(now);
            let app_limited = self.rate.is_app_limited();
            seg.stamp = Some(
                self.rate
                    .on_sent(now, prior_in_flight, self.snd.in_flight_bytes),
            );
            let resend_at;
            if seg.xmit == 1 {
                seg.rto = self.rtt.rto();
                // Outside nodelay mode the reference adds rto/8 to the first timer.
                let slack = if self.config.nodelay {
                    std::time::Duration::ZERO
                } else {
                    seg.rto / 8
                };
                resend_at = now + seg.rto + slack;
                self.stats.data_segments_sent += 1;
            } else {
                resend_at = now + seg.rto;
                if let Some(check) = self.timeout_check.as_mut() {
                    if check.sn == sn && check.retransmit_ts.is_none() {
                        check.retransmit_ts = Some(ts);
                    }
                }
            }
            seg.resend_at = Some(resend_at);
            self.stats.segments_sent += 1;
            let mut event =
                SentEvent::new(now, seg.wire_len, self.snd.in_flight_bytes, seg.xmit > 1);
            event.app_limited = app_limited;
            self.cc.on_sent(&event);
            self.snd.lower_resend_floor(resend_at);
        }
        // Out of data below the windows: what goes out until this is delivered cannot
        // measure the path's bandwidth (draft-ietf-ccwg-bbr, "app-limited").
        if self.snd.queue.is_empty()
            && self.snd.due.is_empty()
            && self.snd.in_flight_bytes < self.cc.cwnd()
        {
            self.rate.set_app_limited(self.snd.in_flight_bytes);
        }
    }

    /// Runs the timers due at `now`: held acks, the zero-window probe, and
    /// retransmission timeouts (with backoff and dead-link detection). Harmless when
    /// nothing is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.error.is_some() {
            return;
        }
        // The pacer's release is not work here: the `poll_transmit` that follows sends.
        if self.pacing_deadline.is_some_and(|d| d <= now) {
            self.pacing_deadline = None;
        }
        if self.ack_deadline.is_some_and(|d| d <= now) {
            self.acks_released = true;
            self.ack_deadline = None;
        }
        if self.probe_at.is_some_and(|p| p <= now) {
            self.ask_pending = true;
            self.probe_wait = (self.probe_wait * 2).min(MAX_RTO);
            self.probe_at = Some(now + self.probe_wait);
        }
        // The scan also finds the earliest timer left running.
        let mut floor: Option<Instant> = None;
        for index in 0..self.snd.buf.len() {
            let seg = &mut self.snd.buf[index];
            if seg.acked || seg.due || seg.resend_at.is_none_or(|at| at > now) {
                if let (false, false, Some(at)) = (seg.acked, seg.due, seg.resend_at) {
                    floor = Some(floor.map_or(at, |f| f.min(at)));
                }
                continue;
            }
            let retransmissions = seg.xmit.saturating_sub(1);
            if retransmissions >= self.config.dead_link {
                let sn = self.snd.snd_una.wrapping_add(index as u32);
                tracing::debug!(conv = self.conv, sn, retransmissions, "kcp dead link");
                self.error = Some(KcpError::DeadLink {
                    sn,
                    retransmissions,
                });
                return;
            }
            seg.rto = backoff(seg.rto, self.rtt.rto(), self.config.nodelay);
            let mut event = LossEvent::new(
                now,
                LossKind::Timeout,
                seg.wire_len,
                seg.last_sent.unwrap_or(now),
            );
            event.in_flight = self.snd.in_flight_bytes;
            if let Some(stamp) = seg.stamp {
                self.rate.on_lost(&mut event, &stamp);
            }
            let sn = self.snd.snd_una.wrapping_add(index as u32);
            seg.timed_out = true;
            self.snd.mark_lost(index);
            self.stats.retransmissions_timeout += 1;
            let decided = self
                .timeout_check
                .is_none_or(|c| self.snd.index(c.sn).is_none_or(|i| self.snd.buf[i].acked));
            if decided {
                self.timeout_check = Some(TimeoutCheck {
                    sn,
                    retransmit_ts: None,
                });
            }
            self.cc.on_loss(&event);
        }
        self.snd.set_resend_floor(floor);
    }

    /// Earliest instant at which [`Kcp::handle_timeout`] has work: a retransmission
    /// timeout, a zero-window probe, held acks (`ack_nodelay` off), or the pacer's
    /// release of data waiting for it. `None` when idle (nothing unacked or queued, no
    /// held ack, no probe) or dead, so an idle connection costs no wake-ups. Work that
    /// `poll_transmit` can do at once is not a timeout.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.error.is_some() {
            return None;
        }
        [
            self.snd.earliest_resend(),
            self.ack_deadline,
            self.probe_at,
            self.pacing_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}
