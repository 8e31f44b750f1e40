//! The deterministic payload: byte `i` of a transfer depends on `i` alone, so the
//! receiver checks every byte without a copy of the data, and a lost, duplicated,
//! reordered or corrupted chunk shows up as a mismatch at its offset.

/// The 8 bytes of aligned word `index` of the stream: splitmix64 of the index,
/// little-endian, so no two words within 2^64 bytes are alike by construction.
fn word(index: u64) -> [u8; 8] {
    let mut z = index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).to_le_bytes()
}

/// Fills `buf` with the stream's bytes starting at `offset`.
pub(crate) fn fill(offset: u64, buf: &mut [u8]) {
    let mut at = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        let skip = (at % 8) as usize;
        let take = rest.len().min(8 - skip);
        let (head, tail) = rest.split_at_mut(take);
        head.copy_from_slice(&word(at / 8)[skip..skip + take]);
        at += take as u64;
        rest = tail;
    }
}

/// The stream's bytes `offset..offset + len` as a new buffer.
pub(crate) fn chunk(offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    fill(offset, &mut buf);
    buf
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
    /// Checks `data` as the next bytes of the stream.
    pub(crate) fn check(&mut self, data: &[u8]) {
        let mut at = self.received;
        let mut rest = data;
        while !rest.is_empty() {
            let expected = word(at / 8);
            let skip = (at % 8) as usize;
            let take = rest.len().min(8 - skip);
            let mismatched = expected[skip..skip + take]
                .iter()
                .zip(&rest[..take])
                .filter(|(e, g)| e != g)
                .count();
            self.mismatched += mismatched as u64;
            at += take as u64;
            rest = &rest[take..];
        }
        self.received = at;
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
}
