//! A windowed maximum over a monotone "time" (rounds or ProbeBW cycles), kept as the
//! best, second-best and third-best samples of the window (Kathleen Nichols'
//! algorithm, as Linux `lib/win_minmax.c` uses for BBR). Constant memory.

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sample {
    t: u64,
    v: u64,
}

/// Windowed max filter: [`WindowedMax::update`] returns the max over the last `window`
/// time units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct WindowedMax {
    s: [Sample; 3],
}

impl WindowedMax {
    pub(super) fn reset(&mut self, t: u64, v: u64) {
        self.s = [Sample { t, v }; 3];
    }

    /// Adds measurement `v` at time `t` (not before the previous one) and returns the
    /// windowed max.
    pub(super) fn update(&mut self, window: u64, t: u64, v: u64) -> u64 {
        let val = Sample { t, v };
        if v >= self.s[0].v || t.saturating_sub(self.s[2].t) > window {
            self.reset(t, v);
            return v;
        }
        if v >= self.s[1].v {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].v {
            self.s[2] = val;
        }
        let dt = t.saturating_sub(self.s[0].t);
        if dt > window {
            // The best sample aged out: promote the others.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if t.saturating_sub(self.s[0].t) > window {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].t == self.s[0].t && dt > window / 4 {
            // A quarter of the window passed without a second choice: take this one.
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > window / 2 {
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_expires_after_the_window() {
        let mut f = WindowedMax::default();
        assert_eq!(f.update(10, 0, 100), 100);
        for t in 1..=10 {
            assert_eq!(f.update(10, t, 50), 100);
        }
        assert_eq!(f.update(10, 11, 50), 50);
        assert_eq!(f.update(10, 12, 70), 70);
        assert_eq!(f.update(10, 13, 60), 70);
    }

    #[test]
    fn two_cycle_window_keeps_only_the_previous_cycle() {
        // Window 1: the current and the previous cycle (BBR's MaxBwFilterLen = 2).
        let mut f = WindowedMax::default();
        f.update(1, 0, 80);
        assert_eq!(f.update(1, 1, 60), 80);
        assert_eq!(f.update(1, 2, 60), 60);
    }
}
