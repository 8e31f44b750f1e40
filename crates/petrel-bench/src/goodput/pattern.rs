//! The deterministic payload: byte `i` of a transfer depends on `i` alone, so the
//! receiver checks every byte without a copy of the data, and a lost, duplicated,
//! reordered or corrupted chunk shows up as a mismatch at its offset.

/// Words in [`TABLE`]; a power of two, at most 2^12 (its index fills a word's low
/// 12 bits).
const TABLE_WORDS: u64 = 4096;

/// splitmix64 of each index below [`TABLE_WORDS`], its low 12 bits replaced by the
/// index (32 KiB, built once).
static TABLE: std::sync::LazyLock<Vec<u64>> = std::sync::LazyLock::new(|| {
    (0..TABLE_WORDS)
        .map(|k| {
            let mut z = k.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) & !(TABLE_WORDS - 1) | k
        })
        .collect()
});

/// The 8 bytes of aligned word `index` of the stream, little-endian: the table word
/// of `index mod 4096` with `index / 4096` xored in above its low 12 bits. Unique
/// by construction for the first 2^64 bytes (the low 12 bits give `index mod 4096`,
/// the rest then gives `index / 4096`), and one load and one xor per word, so the
/// harness costs far less per byte than the transports it measures.
fn word(index: u64) -> [u8; 8] {
    word_of(&TABLE, index)
}

/// [`word`] with the table already at hand (the word-wise loops fetch it once).
#[inline(always)]
fn word_of(table: &[u64], index: u64) -> [u8; 8] {
    (table[(index % TABLE_WORDS) as usize] ^ ((index / TABLE_WORDS) << 12)).to_le_bytes()
}

/// Byte `at` of the stream.
fn byte(at: u64) -> u8 {
    word(at / 8)[(at % 8) as usize]
}

/// The stream's bytes `offset..offset + len` as a new buffer: byte-wise up to the
/// first word boundary and after the last, a table period at a time in between
/// ([`periods`]).
pub(crate) fn chunk(offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    let end = offset + len as u64;
    let head = (offset.next_multiple_of(8).min(end) - offset) as usize;
    let (first, rest) = buf.split_at_mut(head);
    for (at, b) in (offset..).zip(first) {
        *b = byte(at);
    }
    let table = &*TABLE;
    let mut words = rest.chunks_exact_mut(8);
    let count = words.len() as u64;
    for (index, run) in periods((offset + head as u64) / 8, count) {
        // The run first: a zip pulls from its left side before its right.
        for (word, out) in run_of(table, index, run).zip(&mut words) {
            out.copy_from_slice(&word.to_le_bytes());
        }
    }
    let tail_at = offset + head as u64 + count * 8;
    for (at, b) in (tail_at..).zip(words.into_remainder()) {
        *b = byte(at);
    }
    buf
}

/// Splits `words` words from word `first` at table-period boundaries: each item
/// is a run's first word and its length, within one period, so that its words
/// are consecutive table entries xored with one constant.
fn periods(first: u64, words: u64) -> impl Iterator<Item = (u64, usize)> {
    let end = first + words;
    std::iter::successors(Some(first), move |&at| {
        let next = (at / TABLE_WORDS + 1) * TABLE_WORDS;
        (next < end).then_some(next)
    })
    .filter(move |&at| at < end)
    .map(move |at| {
        let period_end = ((at / TABLE_WORDS + 1) * TABLE_WORDS).min(end);
        (at, (period_end - at) as usize)
    })
}

/// The words `index..index + run` (one table period at most) as integers.
fn run_of(table: &[u64], index: u64, run: usize) -> impl Iterator<Item = u64> + '_ {
    let start = (index % TABLE_WORDS) as usize;
    let high = (index / TABLE_WORDS) << 12;
    table[start..start + run].iter().map(move |t| t ^ high)
}

/// Checks received bytes against the pattern as they arrive, in order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verifier {
    /// Bytes checked so far (the offset of the next byte).
    pub received: u64,
    /// Bytes that differed from the pattern.
    pub mismatched: u64,
}

impl Verifier {
    /// Checks `data` as the next bytes of the stream: byte-wise up to the first
    /// word boundary and after the last, a table period at a time in between, as
    /// one OR over the xor of each received word with its expected one (a loop the
    /// compiler vectorises); a period that differs is then counted byte by byte.
    pub(crate) fn check(&mut self, data: &[u8]) {
        let head = data.len().min(((8 - self.received % 8) % 8) as usize);
        let (first, rest) = data.split_at(head);
        self.check_bytes(first);
        let table = &*TABLE;
        let words = (rest.len() / 8) as u64;
        let mut at = 0;
        for (index, run) in periods(self.received / 8, words) {
            let got = &rest[at..at + run * 8];
            let differs =
                got.chunks_exact(8)
                    .zip(run_of(table, index, run))
                    .fold(0, |acc, (g, expected)| {
                        acc | (u64::from_le_bytes(g.try_into().expect("8 bytes")) ^ expected)
                    });
            if differs == 0 {
                self.received += got.len() as u64;
            } else {
                self.check_bytes(got);
            }
            at += run * 8;
        }
        self.check_bytes(&rest[at..]);
    }

    /// [`Verifier::check`] one byte at a time.
    fn check_bytes(&mut self, data: &[u8]) {
        for g in data {
            let at = self.received;
            if byte(at) != *g {
                self.mismatched += 1;
            }
            self.received += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_split_of_the_pattern_verifies(offset in 0u64..1 << 40, cuts in proptest::collection::vec(0usize..300, 1..8)) {
            let total: usize = cuts.iter().sum();
            let data = chunk(offset, total);
            let mut v = Verifier { received: offset, mismatched: 0 };
            let mut at = 0;
            for c in cuts {
                v.check(&data[at..at + c]);
                at += c;
            }
            prop_assert_eq!(v, Verifier { received: offset + total as u64, mismatched: 0 });
        }

        #[test]
        fn word_wise_fill_and_check_match_the_byte_wise_ones(offset in 0u64..1 << 40, len in 0usize..200, flips in proptest::collection::btree_set(0usize..200, 0..12)) {
            let mut bytes: Vec<u8> = (offset..offset + len as u64).map(byte).collect();
            prop_assert_eq!(&chunk(offset, len), &bytes);
            let flips: Vec<usize> = flips.into_iter().filter(|f| *f < len).collect();
            for f in &flips {
                bytes[*f] ^= 0x5a;
            }
            let mut v = Verifier { received: offset, mismatched: 0 };
            v.check(&bytes);
            prop_assert_eq!(v, Verifier { received: offset + len as u64, mismatched: flips.len() as u64 });
        }
    }

    #[test]
    fn a_flipped_byte_and_a_swapped_chunk_are_caught() {
        let mut data = chunk(0, 4096);
        data[1000] ^= 1;
        let mut v = Verifier::default();
        v.check(&data);
        assert_eq!(v.mismatched, 1);

        let mut v = Verifier::default();
        v.check(&chunk(100, 100));
        v.check(&chunk(0, 100));
        assert!(v.mismatched > 150);
    }

    #[test]
    fn a_check_across_table_periods_counts_each_flipped_byte() {
        let period = TABLE_WORDS * 8;
        // Starts mid-word, spans three period boundaries, ends mid-word.
        let offset = 5 * period - 1_003;
        let mut data = chunk(offset, 3 * period as usize + 2_011);
        let flips = [0, 1_002, 1_003, 1_004, 40_000, data.len() - 1];
        for f in flips {
            data[f] ^= 0x80;
        }
        let mut v = Verifier {
            received: offset,
            mismatched: 0,
        };
        for piece in data.chunks(20_000) {
            v.check(piece);
        }
        assert_eq!(v.received, offset + data.len() as u64);
        assert_eq!(v.mismatched, flips.len() as u64);
    }

    #[test]
    fn words_are_unique_even_a_whole_table_apart() {
        let table_bytes = TABLE_WORDS * 8;
        let mut seen = std::collections::HashSet::new();
        for index in (0..3 * TABLE_WORDS).chain([u64::MAX / 8 - 1, 1 << 50]) {
            assert!(seen.insert(word(index)), "word {index} repeats");
        }
        // A chunk displaced by exactly one table (32 KiB) is caught in every word.
        let mut v = Verifier::default();
        v.check(&chunk(table_bytes, 800));
        assert!(v.mismatched >= 100, "{v:?}");
    }
}
