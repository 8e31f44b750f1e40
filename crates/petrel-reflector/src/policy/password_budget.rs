//! The Argon2 budget: who may spend a password verification, per source
//! prefix, per source prefix and user, and over all sources.
//!
//! The global per-second budget (`password_checks_per_s`) keeps Argon2 from
//! eating the machine, but on its own it is first come, first served: wrong
//! passwords from many addresses, each under the packet rate limits, take
//! every token as it refills and every first login gets `server_busy`. In
//! front of it, two levels of token buckets share the budget out by
//! network:
//!
//! - per **source prefix** (/24 for IPv4, /64 for IPv6: what one site, one
//!   carrier NAT pool or one IPv6 customer holds): one network cannot take
//!   more than its share of the global budget, however many addresses it
//!   uses;
//! - per **source prefix and user**: guesses for one user from a network
//!   cannot spend what the same network's other users need for their own
//!   first login (a guesser inside a shared carrier NAT or office prefix
//!   starves only the accounts it targets, and only from that prefix).
//!
//! A check is admitted only when all three have a token, and then takes one
//! from each; a refusal takes none. Logins whose password is already
//! verified (cached) never reach the budget. The two tables are bounded and
//! evict their least-recently-used entry (see `bucket_table.rs`); an
//! evicted network comes back with a full bucket, which gives back at most
//! one burst.
//!
//! Prefixes together can still ask for more than the global budget (with
//! the defaults, five /24s guessing at their full rate ask for all 10
//! checks/s). A check the global budget (or the checks in flight) cannot
//! take at once therefore waits in a line with one queue per prefix served
//! round-robin ([`FairQueue`]), instead of going to whoever sends fastest:
//! a first login from a prefix that is not flooding waits about one round
//! of the prefixes in line (`P / password_checks_per_s` seconds for `P`
//! waiting prefixes), and is refused (`server_busy`) only when its own
//! prefix's queue is full. Users with a verified password, and the ladder
//! itself, are unaffected.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use super::bucket_table::{BucketTable, TokenBucket};
use super::password_queue::{FairQueue, TicketState};

/// A source network: the /24 of an IPv4 address, the /64 of an IPv6 one
/// (an IPv4-mapped IPv6 address counts as IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourcePrefix(IpAddr);

impl SourcePrefix {
    /// The prefix `ip` belongs to.
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Self(IpAddr::V4(Ipv4Addr::from(u32::from(v4) & 0xffff_ff00))),
            IpAddr::V6(v6) => Self(IpAddr::V6(Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            ))),
        }
    }

    /// The prefix's network address (host bits zero).
    pub fn network(&self) -> IpAddr {
        self.0
    }
}

/// Rates and bounds of a [`PasswordBudget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordBudgetConfig {
    /// Verifications per second over all sources.
    pub global_per_s: u32,
    /// Verifications per minute per source prefix.
    pub prefix_per_min: u32,
    /// Verifications a source prefix may spend at once.
    pub prefix_burst: u32,
    /// Verifications per minute per source prefix and user.
    pub prefix_user_per_min: u32,
    /// Verifications a source prefix may spend on one user at once.
    pub prefix_user_burst: u32,
    /// Entries in each of the two per-prefix tables.
    pub table_max: usize,
    /// Checks one prefix may have waiting for the global budget.
    pub queue_per_prefix: usize,
    /// Checks waiting for the global budget over all prefixes.
    pub queue_max: usize,
}

/// Outcome of [`PasswordBudget::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetDecision {
    /// A token was taken at every level: run the check.
    Allow,
    /// The prefix budgets were taken and the check waits in line for the
    /// global budget under this ticket ([`PasswordBudget::claim`]).
    Queued(u64),
    /// The source prefix spent its budget for this user.
    PrefixUserSpent,
    /// The source prefix spent its budget.
    PrefixSpent,
    /// The global budget is spent and the prefix has no room in line.
    GlobalSpent,
}

/// Argon2 verification budget; see the module docs.
#[derive(Debug)]
pub struct PasswordBudget {
    global: TokenBucket,
    per_prefix: BucketTable<SourcePrefix>,
    per_prefix_user: BucketTable<(SourcePrefix, i64)>,
    line: FairQueue<SourcePrefix>,
}

impl PasswordBudget {
    /// Full buckets at `now` for `cfg`.
    pub fn new(cfg: &PasswordBudgetConfig, now: Instant) -> Self {
        Self {
            global: TokenBucket::new(cfg.global_per_s, now),
            per_prefix: BucketTable::per_min(cfg.prefix_per_min, cfg.prefix_burst, cfg.table_max),
            per_prefix_user: BucketTable::per_min(
                cfg.prefix_user_per_min,
                cfg.prefix_user_burst,
                cfg.table_max,
            ),
            line: FairQueue::new(cfg.queue_per_prefix, cfg.queue_max),
        }
    }

    /// Takes one verification for user `user_id` from source `ip` at `now`,
    /// with `free_slots` more checks allowed to run: at once if both
    /// per-prefix levels and the global budget have a token, nobody is in
    /// line and a slot is free; else in line if both per-prefix levels have
    /// a token and the prefix has room. Otherwise takes nothing and says
    /// which level refused (the narrowest first).
    pub fn take(
        &mut self,
        ip: IpAddr,
        user_id: i64,
        now: Instant,
        free_slots: usize,
    ) -> BudgetDecision {
        self.schedule(now, free_slots);
        let prefix = SourcePrefix::of(ip);
        if !self.per_prefix_user.has_token(&(prefix, user_id), now) {
            return BudgetDecision::PrefixUserSpent;
        }
        if !self.per_prefix.has_token(&prefix, now) {
            return BudgetDecision::PrefixSpent;
        }
        let free = free_slots.saturating_sub(self.line.granted());
        let decision = if self.line.waiting() == 0 && free > 0 && self.global.take(now) {
            BudgetDecision::Allow
        } else {
            match self.line.enqueue(prefix) {
                Some(ticket) => BudgetDecision::Queued(ticket),
                None => return BudgetDecision::GlobalSpent,
            }
        };
        self.per_prefix.take(prefix, now);
        self.per_prefix_user.take((prefix, user_id), now);
        decision
    }

    /// Grants tickets in line, round-robin over prefixes, while the global
    /// budget has a token at `now` and fewer than `free_slots` granted
    /// tickets are unclaimed.
    pub fn schedule(&mut self, now: Instant, free_slots: usize) {
        let mut free = free_slots.saturating_sub(self.line.granted());
        while free > 0 && self.line.waiting() > 0 && self.global.take(now) {
            self.line.grant_next();
            free -= 1;
        }
    }

    /// Where `ticket` stands; a granted ticket is handed over once
    /// ([`FairQueue::claim`]).
    pub fn claim(&mut self, ticket: u64) -> TicketState {
        self.line.claim(ticket)
    }

    /// Gives up `ticket` (its login was abandoned).
    pub fn cancel(&mut self, ticket: u64) {
        self.line.cancel(ticket);
    }

    /// Checks in line for the global budget.
    pub fn waiting(&self) -> usize {
        self.line.waiting()
    }

    /// Tickets evicted from a full line so far.
    pub fn line_evictions(&self) -> u64 {
        self.line.evictions()
    }

    /// Forgets per-prefix buckets idle long enough to be full again.
    pub fn sweep(&mut self, now: Instant) {
        self.per_prefix.sweep(now);
        self.per_prefix_user.sweep(now);
    }

    /// Entries tracked: (prefixes, prefix-user pairs).
    pub fn tracked(&self) -> (usize, usize) {
        (self.per_prefix.len(), self.per_prefix_user.len())
    }

    /// Entries evicted from both tables to make room for new keys.
    pub fn evictions(&self) -> u64 {
        self.per_prefix.evictions() + self.per_prefix_user.evictions()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const CFG: PasswordBudgetConfig = PasswordBudgetConfig {
        global_per_s: 10,
        prefix_per_min: 120,
        prefix_burst: 20,
        prefix_user_per_min: 6,
        prefix_user_burst: 5,
        table_max: 65_536,
        queue_per_prefix: 8,
        queue_max: 4096,
    };

    const FREE: usize = usize::MAX;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_are_slash_24_and_slash_64() {
        assert_eq!(
            SourcePrefix::of(ip("192.0.2.77")).network(),
            ip("192.0.2.0")
        );
        assert_eq!(
            SourcePrefix::of(ip("::ffff:192.0.2.77")),
            SourcePrefix::of(ip("192.0.2.1"))
        );
        assert_eq!(
            SourcePrefix::of(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")).network(),
            ip("2001:db8:1:2::")
        );
        assert_ne!(
            SourcePrefix::of(ip("2001:db8:1:2::1")),
            SourcePrefix::of(ip("2001:db8:1:3::1"))
        );
    }

    /// 100 addresses of one /24 guessing for 4 users as fast as the budget
    /// lets them: they spend 5 checks per user and then 1 per 10 s each;
    /// another user of the same /24 and a user elsewhere still get checks.
    #[test]
    fn guessers_in_a_prefix_cannot_spend_other_users_checks() {
        let t0 = Instant::now();
        let mut b = PasswordBudget::new(&CFG, t0);
        let mut allowed = 0;
        for ms in 0..5_000u64 {
            let now = t0 + Duration::from_millis(ms);
            let k = ms % 100;
            let src = IpAddr::from([198, 51, 100, k as u8 + 1]);
            allowed += usize::from(b.take(src, (k % 4) as i64, now, FREE) == BudgetDecision::Allow);
        }
        // 4 users × (5 banked + 1 per 10 s over 5 s, at most).
        assert!(allowed <= 4 * 6, "{allowed}");
        let now = t0 + Duration::from_secs(5);
        assert_eq!(
            b.take(ip("198.51.100.200"), 9, now, FREE),
            BudgetDecision::Allow
        );
        assert_eq!(
            b.take(ip("203.0.113.5"), 9, now, FREE),
            BudgetDecision::Allow
        );
        // The guessed user from that prefix waits; from elsewhere it does not.
        assert_eq!(
            b.take(ip("198.51.100.201"), 0, now, FREE),
            BudgetDecision::PrefixUserSpent
        );
        assert_eq!(
            b.take(ip("203.0.113.5"), 0, now, FREE),
            BudgetDecision::Allow
        );
    }

    #[test]
    fn a_prefix_guessing_many_users_is_capped_and_refusals_take_nothing() {
        let t0 = Instant::now();
        let mut b = PasswordBudget::new(&CFG, t0);
        let decisions: Vec<_> = (0..40)
            .map(|u| {
                let now = t0 + Duration::from_millis(u as u64 * 100);
                b.take(ip("198.51.100.1"), u, now, FREE)
            })
            .collect();
        // 20 banked, plus 2/s refill over 4 s.
        let allowed = decisions
            .iter()
            .filter(|d| **d == BudgetDecision::Allow)
            .count();
        assert!((20..=28).contains(&allowed), "{allowed}");
        assert!(decisions.contains(&BudgetDecision::PrefixSpent));
        // Other prefixes are not affected, and the global bucket only
        // lost what was allowed.
        let now = t0 + Duration::from_secs(4);
        assert_eq!(
            b.take(ip("203.0.113.5"), 1, now, FREE),
            BudgetDecision::Allow
        );
    }

    #[test]
    fn the_global_budget_still_bounds_every_prefix_together() {
        let t0 = Instant::now();
        let mut b = PasswordBudget::new(&CFG, t0);
        let allowed = (0..50u8)
            .filter(|i| b.take(IpAddr::from([10, *i, 0, 1]), 1, t0, FREE) == BudgetDecision::Allow)
            .count();
        assert_eq!(allowed, 10);
        assert_eq!(b.waiting(), 40);
        assert_eq!(
            b.take(ip("10.200.0.1"), 1, t0, FREE),
            BudgetDecision::Queued(40)
        );
        // A second later the line gets the next 10 checks, one per prefix
        // in the order they came.
        b.schedule(t0 + Duration::from_secs(1), FREE);
        assert_eq!(b.waiting(), 31);
        assert_eq!(
            (b.claim(0), b.claim(9), b.claim(10)),
            (
                TicketState::Granted,
                TicketState::Granted,
                TicketState::Waiting
            )
        );
    }

    /// The attack of issue 14 at 450 wrong passwords/s: ten /24s each keep
    /// their queue full; a first login from an eleventh /24 every 3 s is
    /// granted within about one round (ten grants at 10/s).
    #[test]
    fn a_first_login_from_a_quiet_prefix_waits_one_round_of_the_flooders() {
        let t0 = Instant::now();
        let mut b = PasswordBudget::new(&CFG, t0);
        let mut waits = Vec::new();
        let mut honest: Option<(u64, u64)> = None;
        for ms in 0..45_000u64 {
            let now = t0 + Duration::from_millis(ms);
            for p in 0..10u8 {
                let src = IpAddr::from([10, p, 0, (ms % 60) as u8 + 1]);
                b.take(src, (ms % 20) as i64, now, FREE);
            }
            if ms % 3_000 == 0 && honest.is_none() {
                let src = IpAddr::from([192, 0, 2, 1]);
                match b.take(src, 100 + (ms / 3_000) as i64, now, FREE) {
                    BudgetDecision::Allow => waits.push(0),
                    BudgetDecision::Queued(t) => honest = Some((t, ms)),
                    other => panic!("{other:?}"),
                }
            }
            b.schedule(now, FREE);
            if let Some((t, since)) = honest {
                if b.claim(t) == TicketState::Granted {
                    waits.push(ms - since);
                    honest = None;
                }
            }
        }
        assert_eq!(waits.len(), 15, "{waits:?}");
        assert!(waits.iter().all(|w| *w <= 1_100), "{waits:?}");
    }

    /// 100,000 requests from rotating ports of 5 addresses (one /24) for one
    /// user: a handful of checks; a fresh address elsewhere is admitted.
    #[test]
    fn a_flood_from_five_addresses_spends_only_its_own_prefix() {
        let t0 = Instant::now();
        let mut b = PasswordBudget::new(&CFG, t0);
        let allowed = (0..100_000u32)
            .filter(|i| {
                let at = t0 + Duration::from_micros(u64::from(*i) * 10);
                let src = IpAddr::from([10, 0, 0, (i % 5) as u8 + 1]);
                b.take(src, 1, at, FREE) == BudgetDecision::Allow
            })
            .count();
        assert_eq!(allowed, 5);
        assert_eq!(b.tracked(), (1, 1));
        let now = t0 + Duration::from_secs(1);
        assert_eq!(b.take(ip("192.0.2.7"), 1, now, FREE), BudgetDecision::Allow);
    }

    /// 65,536 prefixes fill each table; a fresh one is admitted by evicting
    /// the least recent.
    #[test]
    fn filled_tables_evict_instead_of_refusing() {
        let t0 = Instant::now();
        let cfg = PasswordBudgetConfig {
            global_per_s: 10_000,
            ..CFG
        };
        let mut b = PasswordBudget::new(&cfg, t0);
        let mut now = t0;
        for i in 0..65_536u32 {
            now = t0 + Duration::from_micros(u64::from(i) * 100);
            let src = IpAddr::from((0x0a00_0000 | (i << 8)).to_be_bytes());
            assert_eq!(b.take(src, 1, now, FREE), BudgetDecision::Allow, "{i}");
        }
        assert_eq!((b.tracked(), b.evictions()), ((65_536, 65_536), 0));
        assert_eq!(b.take(ip("192.0.2.7"), 1, now, FREE), BudgetDecision::Allow);
        assert_eq!((b.tracked(), b.evictions()), ((65_536, 65_536), 2));
    }
}
