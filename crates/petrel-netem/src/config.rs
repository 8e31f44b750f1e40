//! Link and route configuration: the impairment conditions of `specs/netem.md`.
//!
//! Probabilities are fractions in `0.0..=1.0` (the CLI takes percent and converts).
//! Every struct's `Default` is "no impairment"; the named profiles live in
//! [`crate::profile`].

use std::time::Duration;

use petrel_sys::range::{check_range, RangeError};
use serde::Serialize;

/// The longest delay, jitter or reorder extra delay accepted (60 s): packets held
/// longer than this are a configuration mistake, and the bound keeps `Instant`
/// arithmetic far from overflow.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// A configuration value outside its allowed range or rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid {field} = {value}: must be {range}")]
pub struct ConfigError {
    /// The field's name, as spelled in the struct (and, with `-` for `_`, the CLI flag).
    pub field: &'static str,
    /// The rejected value, rendered.
    pub value: String,
    /// The allowed range (rendered from the checked range, `in 0.0..=1.0`) or rule
    /// (`at least 1 packet`), in words.
    pub range: String,
}

impl ConfigError {
    pub(crate) fn new(
        field: &'static str,
        value: impl std::fmt::Display,
        rule: impl Into<String>,
    ) -> Self {
        Self {
            field,
            value: value.to_string(),
            range: rule.into(),
        }
    }
}

impl From<RangeError> for ConfigError {
    fn from(e: RangeError) -> Self {
        Self {
            field: e.field,
            value: e.value,
            range: format!("in {}", e.range),
        }
    }
}

/// Periodic burst loss: drop `k` consecutive packets of every `n`.
///
/// The dropped packets are the *last* `k` of each cycle of `n` (positions `n-k .. n`,
/// counting from the first packet of the direction as position 0), so a flow's first
/// packets pass and the pattern is exact, not random.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BurstLoss {
    /// Packets dropped per cycle.
    pub k: u32,
    /// Cycle length in packets.
    pub n: u32,
}

/// Gilbert–Elliott two-state loss (the "gemodel" of Linux netem and RFC 3611 §4.7.2
/// terms): a Markov chain stepped once per packet, then a loss draw in the new state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GilbertElliott {
    /// Probability per packet of moving from the good to the bad state (`p`).
    pub p_good_to_bad: f64,
    /// Probability per packet of moving from the bad to the good state (`r`).
    pub p_bad_to_good: f64,
    /// Loss probability in the good state (`1 - k`).
    pub loss_good: f64,
    /// Loss probability in the bad state (`1 - h`).
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// Long-run loss ratio: `π_bad·loss_bad + π_good·loss_good`, with the stationary
    /// `π_bad = p / (p + r)` (0 when both transition probabilities are 0).
    pub fn stationary_loss(&self) -> f64 {
        let sum = self.p_good_to_bad + self.p_bad_to_good;
        let pi_bad = if sum > 0.0 {
            self.p_good_to_bad / sum
        } else {
            0.0
        };
        pi_bad * self.loss_bad + (1.0 - pi_bad) * self.loss_good
    }
}

/// One direction of a route: the conditions a packet meets, in this order — loss
/// (burst, then Gilbert–Elliott, then random: the first that hits names the cause),
/// duplication, drop-tail queue and serialization at `rate_bps`, route capacity, then
/// `delay` ± `jitter` (+ `reorder_delay` for a `reorder` share of packets).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkConfig {
    /// Independent loss probability per packet.
    pub random_loss: f64,
    /// Periodic burst loss, if any.
    pub burst: Option<BurstLoss>,
    /// Gilbert–Elliott loss, if any.
    pub gilbert: Option<GilbertElliott>,
    /// Fixed one-way delay.
    #[serde(serialize_with = "ser_ms")]
    pub delay: Duration,
    /// Jitter: each packet's delay is `delay + U(-jitter, +jitter)`, floored at 0. As in
    /// Linux netem, jitter larger than the packet spacing reorders packets.
    #[serde(serialize_with = "ser_ms")]
    pub jitter: Duration,
    /// Probability per packet that a second copy is sent (each copy then meets the
    /// queue, capacity and delay on its own).
    pub duplicate: f64,
    /// Probability per packet of getting `reorder_delay` on top of its delay, so later
    /// packets overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    #[serde(serialize_with = "ser_ms")]
    pub reorder_delay: Duration,
    /// Serialization rate in bit/s (`None`: unlimited, packets never queue).
    pub rate_bps: Option<u64>,
    /// Drop-tail queue limit in packets waiting for or in serialization (`None`:
    /// only the route capacity limits it). Needs `rate_bps` to have any effect.
    pub queue_packets: Option<usize>,
    /// Drop-tail queue limit in bytes, as `queue_packets`.
    pub queue_bytes: Option<usize>,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            random_loss: 0.0,
            burst: None,
            gilbert: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(15),
            rate_bps: None,
            queue_packets: None,
            queue_bytes: None,
        }
    }
}

fn check_probability(field: &'static str, v: f64) -> Result<(), ConfigError> {
    Ok(check_range(field, v, &(0.0..=1.0))?)
}

fn check_delay(field: &'static str, v: Duration) -> Result<(), ConfigError> {
    Ok(check_range(field, v, &(Duration::ZERO..=MAX_DELAY))?)
}

impl LinkConfig {
    /// Checks every field's range.
    ///
    /// # Errors
    /// The first field out of range, with the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_probability("random_loss", self.random_loss)?;
        if let Some(b) = self.burst {
            if b.n == 0 {
                return Err(ConfigError::new("burst.n", b.n, "at least 1 packet"));
            }
            if b.k > b.n {
                return Err(ConfigError::new("burst.k", b.k, "at most burst.n"));
            }
        }
        if let Some(g) = self.gilbert {
            check_probability("gilbert.p_good_to_bad", g.p_good_to_bad)?;
            check_probability("gilbert.p_bad_to_good", g.p_bad_to_good)?;
            check_probability("gilbert.loss_good", g.loss_good)?;
            check_probability("gilbert.loss_bad", g.loss_bad)?;
        }
        check_delay("delay", self.delay)?;
        check_delay("jitter", self.jitter)?;
        check_probability("duplicate", self.duplicate)?;
        check_probability("reorder", self.reorder)?;
        check_delay("reorder_delay", self.reorder_delay)?;
        if self.rate_bps == Some(0) {
            return Err(ConfigError::new("rate_bps", 0, "at least 1 bit/s"));
        }
        if self.queue_packets == Some(0) {
            return Err(ConfigError::new("queue_packets", 0, "at least 1 packet"));
        }
        if self.queue_bytes == Some(0) {
            return Err(ConfigError::new("queue_bytes", 0, "at least 1 byte"));
        }
        Ok(())
    }

    /// The loss ratio the loss conditions should produce over many packets (burst,
    /// Gilbert–Elliott and random combined as independent), excluding queue and
    /// capacity drops, which depend on the traffic.
    pub fn configured_loss(&self) -> f64 {
        let burst = self
            .burst
            .map_or(0.0, |b| f64::from(b.k) / f64::from(b.n.max(1)));
        let gilbert = self.gilbert.map_or(0.0, |g| g.stationary_loss());
        // Each condition applies to what the earlier ones let through; written as a
        // sum so that a single condition's rate comes back exactly.
        burst + (1.0 - burst) * (gilbert + (1.0 - gilbert) * self.random_loss)
    }
}

/// The most a route (both directions together) may hold at once, queued or delayed.
/// A packet that would exceed either bound is dropped and counted as `capacity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RouteCapacity {
    /// Bytes held (payload bytes). Default 8 MiB.
    pub bytes: usize,
    /// Packets held. Default 8192.
    pub packets: usize,
}

impl Default for RouteCapacity {
    fn default() -> Self {
        Self {
            bytes: 8 << 20,
            packets: 8192,
        }
    }
}

/// Both directions of one route plus its capacity.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RouteConfig {
    /// Client → server.
    pub upstream: LinkConfig,
    /// Server → client.
    pub downstream: LinkConfig,
    /// Bound on what the route holds.
    pub capacity: RouteCapacity,
}

impl RouteConfig {
    /// The same conditions in both directions.
    pub fn symmetric(link: LinkConfig) -> Self {
        Self {
            upstream: link.clone(),
            downstream: link,
            capacity: RouteCapacity::default(),
        }
    }

    /// Checks both directions and the capacity.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.upstream.validate()?;
        self.downstream.validate()?;
        if self.capacity.bytes == 0 {
            return Err(ConfigError::new("capacity.bytes", 0, "at least 1 byte"));
        }
        if self.capacity.packets == 0 {
            return Err(ConfigError::new("capacity.packets", 0, "at least 1 packet"));
        }
        Ok(())
    }
}
