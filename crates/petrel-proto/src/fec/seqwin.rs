//! Which recent shard `seq` values arrived: duplicate detection and the
//! expected/received counts of the loss report.

/// Duplicate-detection window, in shards (`seq` values) behind the highest seen.
pub const SEQ_WINDOW: u32 = 1024;

#[derive(Debug)]
pub(crate) enum Seen {
    /// First arrival; `advance` is how far it moved the highest `seq` (the
    /// shards this makes "expected" for loss accounting).
    New { advance: u32 },
    /// Already seen.
    Duplicate,
    /// Older than the window: cannot tell.
    Stale,
}

/// Which recent `seq` values arrived: duplicate detection and loss counting.
#[derive(Debug, Default)]
pub(crate) struct SeqWindow {
    highest: Option<u32>,
    bits: [u64; (SEQ_WINDOW / 64) as usize],
}

impl SeqWindow {
    fn bit(&mut self, seq: u32) -> (&mut u64, u64) {
        let i = (seq % SEQ_WINDOW) as usize;
        (&mut self.bits[i / 64], 1 << (i % 64))
    }

    pub fn insert(&mut self, seq: u32) -> Seen {
        let Some(h) = self.highest else {
            self.highest = Some(seq);
            let (w, m) = self.bit(seq);
            *w |= m;
            return Seen::New { advance: 1 };
        };
        let diff = seq.wrapping_sub(h) as i32;
        if diff > 0 {
            let d = diff as u32;
            let advance = if d >= SEQ_WINDOW {
                // A jump this long is a restart or garbage, not a loss burst of
                // that size: resynchronise instead of reporting it as loss.
                self.bits = [0; (SEQ_WINDOW / 64) as usize];
                1
            } else {
                for s in 1..=d {
                    let (w, m) = self.bit(h.wrapping_add(s));
                    *w &= !m;
                }
                d
            };
            self.highest = Some(seq);
            let (w, m) = self.bit(seq);
            *w |= m;
            return Seen::New { advance };
        }
        if diff.unsigned_abs() >= SEQ_WINDOW {
            return Seen::Stale;
        }
        let (w, m) = self.bit(seq);
        if *w & m != 0 {
            Seen::Duplicate
        } else {
            *w |= m;
            Seen::New { advance: 0 }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_advance_duplicates_and_stale() {
        let mut w = SeqWindow::default();
        assert!(matches!(w.insert(10), Seen::New { advance: 1 }));
        assert!(matches!(w.insert(13), Seen::New { advance: 3 }));
        assert!(matches!(w.insert(11), Seen::New { advance: 0 }));
        assert!(matches!(w.insert(11), Seen::Duplicate));
        assert!(matches!(w.insert(13 + SEQ_WINDOW - 1), Seen::New { .. }));
        assert!(matches!(w.insert(13), Seen::Duplicate));
        assert!(matches!(w.insert(12), Seen::Stale));
        // Wrap-around of the 32-bit seq is just another step forward.
        let mut w = SeqWindow::default();
        w.insert(u32::MAX);
        assert!(matches!(w.insert(1), Seen::New { advance: 2 }));
        // A jump beyond the window resynchronises instead of reporting loss.
        assert!(matches!(
            w.insert(1 + 5 * SEQ_WINDOW),
            Seen::New { advance: 1 }
        ));
    }
}
