//! How many device sockets one load-generator process may hold, and how a
//! stage's devices are split over generator processes (issue 15: the
//! 20 000-device level of draarl-interconnect §9 needs one UDP socket per
//! device, more than one process's open-files limit allows on many hosts).
//!
//! The soft `RLIMIT_NOFILE` is raised to the hard one (capped at
//! `MAX_NOFILE` (2^20) when the hard limit is unlimited); a generator may hold
//! that many descriptors less [`HEADROOM`] (standard streams, epoll
//! instances, the parent's pipes). Devices are split into contiguous ranges
//! of equal size (the last one shorter), as few as the budget allows.

use std::ops::Range;

use super::LoadError;

/// Descriptors a generator keeps free for everything but device sockets.
pub const HEADROOM: usize = 256;
/// The open-files limit aimed at when the hard limit is unlimited.
const MAX_NOFILE: u64 = 1 << 20;

/// Raises this process's soft open-files limit to its hard limit and
/// returns the soft limit in force afterwards (the old one if raising
/// failed).
///
/// # Errors
/// [`LoadError::Io`] when the limit cannot be read.
pub fn raise_nofile() -> Result<u64, LoadError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the plain struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let target = if lim.rlim_max == libc::RLIM_INFINITY {
        MAX_NOFILE
    } else {
        lim.rlim_max
    };
    if lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < target {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct; raising the soft limit up to
        // the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(target);
        }
    }
    Ok(if lim.rlim_cur == libc::RLIM_INFINITY {
        MAX_NOFILE
    } else {
        lim.rlim_cur
    })
}

/// Device sockets one generator may hold under an open-files limit of
/// `nofile`, further capped by `per_process` (e.g. `--devices-per-process`).
///
/// # Errors
/// [`LoadError::Invalid`] when the limit leaves no room for a device.
pub fn devices_per_generator(nofile: u64, per_process: Option<usize>) -> Result<usize, LoadError> {
    let budget = usize::try_from(nofile)
        .unwrap_or(usize::MAX)
        .saturating_sub(HEADROOM);
    if budget == 0 {
        return Err(LoadError::Invalid(format!(
            "the open-files limit ({nofile}) leaves no room for device sockets after {HEADROOM} for the generator itself"
        )));
    }
    Ok(per_process.map_or(budget, |n| n.min(budget)).max(1))
}

/// Splits devices `0..devices` into as few contiguous ranges of at most
/// `per_generator` devices as possible, of sizes differing by at most one
/// range's remainder (every range but the last has the same size).
pub fn split(devices: usize, per_generator: usize) -> Vec<Range<usize>> {
    let per = per_generator.max(1);
    let n = devices.div_ceil(per).max(1);
    let size = devices.div_ceil(n).max(1);
    (0..n)
        .map(|k| (k * size).min(devices)..((k + 1) * size).min(devices))
        .filter(|r| !r.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_thousand_devices_under_a_20000_limit_need_two_generators() {
        let per = devices_per_generator(20_000, None).unwrap();
        assert_eq!(per, 20_000 - HEADROOM);
        assert_eq!(split(20_000, per), vec![0..10_000, 10_000..20_000]);
        assert_eq!(split(5_000, per), vec![0..5_000]);
    }

    #[test]
    fn an_explicit_cap_forces_more_generators() {
        let per = devices_per_generator(20_000, Some(25)).unwrap();
        assert_eq!(per, 25);
        assert_eq!(split(60, per), vec![0..20, 20..40, 40..60]);
        assert_eq!(split(61, 30), vec![0..21, 21..42, 42..61]);
        // Every device once, in order.
        let ranges = split(19_999, 7_000);
        assert_eq!(ranges.first().unwrap().start, 0);
        assert_eq!(ranges.last().unwrap().end, 19_999);
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        assert!(ranges.iter().all(|r| r.len() <= 7_000));
    }

    #[test]
    fn a_limit_below_the_headroom_is_refused() {
        let e = devices_per_generator(HEADROOM as u64, None).unwrap_err();
        assert!(e.to_string().contains("open-files limit"), "{e}");
    }

    #[test]
    fn raising_keeps_at_least_the_current_limit() {
        let n = raise_nofile().unwrap();
        assert!(n >= 3, "{n}");
    }
}
