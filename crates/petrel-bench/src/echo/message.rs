//! The echo message (`specs/benchmarks.md` §A): a 16-byte header and a body
//! every byte of which the client can recompute and verify.
//!
//! Header, big-endian:
//!
//! | offset | size | field                                  |
//! |--------|------|----------------------------------------|
//! | 0      | 2    | magic `0x5045` (`"PE"`)                |
//! | 2      | 1    | phase: 0 warm-up, 1 measured           |
//! | 3      | 1    | reserved, must be 0                    |
//! | 4      | 4    | client id (u32)                        |
//! | 8      | 8    | sequence (u64)                         |
//!
//! Body byte `i` (0-based, after the header) is byte `i % 8` (little-endian)
//! of `splitmix64(key ^ (i / 8))` with `key = seq * φ64 ^ (id << 32 | id)`, so
//! it depends on (seq, i, id): a swapped, shifted or misrouted body fails.
//! The phase is not part of the body; the harness compares it with the
//! phase it submitted.

use bytes::{Bytes, BytesMut};

/// Header length (bytes).
pub const HEADER_LEN: usize = 16;
/// Magic at offset 0.
pub const MAGIC: u16 = 0x5045;

/// Which part of the run a message was submitted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the measured interval; echoes are verified but not timed.
    WarmUp,
    /// Inside the measured interval; echoes count and are timed.
    Measured,
}

/// The decoded header of an echo message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Submission phase.
    pub phase: Phase,
    /// Sending client.
    pub client_id: u32,
    /// Per-client sequence number, from 0.
    pub seq: u64,
}

/// Why a received message failed verification (all count as content errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Length differs from the configured payload.
    #[error("length {got} bytes, expected {expected}")]
    Length {
        /// Received length (bytes).
        got: usize,
        /// Configured payload (bytes).
        expected: usize,
    },
    /// Bytes 0..2 are not [`MAGIC`].
    #[error("bad magic {0:#06x}")]
    Magic(u16),
    /// Phase byte is neither 0 nor 1, or the reserved byte is not 0.
    #[error("bad phase/reserved bytes {0:#04x} {1:#04x}")]
    Phase(u8, u8),
    /// The body differs from the one derived from (seq, i, id).
    #[error("body mismatch at byte {offset}")]
    Body {
        /// Offset within the whole message (bytes).
        offset: usize,
    },
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn body_key(client_id: u32, seq: u64) -> u64 {
    let id = u64::from(client_id);
    seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (id << 32 | id)
}

/// Iterates the body's 8-byte words: (word index, word bytes).
fn body_words(client_id: u32, seq: u64) -> impl Iterator<Item = [u8; 8]> {
    let key = body_key(client_id, seq);
    (0u64..).map(move |k| splitmix64(key ^ k).to_le_bytes())
}

/// Encodes a message of `len` bytes in total (`len >= HEADER_LEN`; a shorter
/// `len` yields the header alone).
pub fn encode(header: Header, len: usize) -> Bytes {
    let len = len.max(HEADER_LEN);
    let mut buf = BytesMut::zeroed(len);
    let (head, body) = buf.split_at_mut(HEADER_LEN);
    head[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    head[2] = match header.phase {
        Phase::WarmUp => 0,
        Phase::Measured => 1,
    };
    head[4..8].copy_from_slice(&header.client_id.to_be_bytes());
    head[8..16].copy_from_slice(&header.seq.to_be_bytes());
    // Whole words as one 8-byte store each (a `put_slice` per word was a
    // `memcpy` call each: most of a 1-client echo's harness time).
    let mut words = body_words(header.client_id, header.seq);
    let mut chunks = body.chunks_exact_mut(8);
    for (out, word) in (&mut chunks).zip(&mut words) {
        out.copy_from_slice(&word);
    }
    let tail = chunks.into_remainder();
    if let Some(word) = words.next() {
        tail.copy_from_slice(&word[..tail.len()]);
    }
    buf.freeze()
}

/// Decodes the header and verifies length and every body byte.
///
/// # Errors
/// The first [`MessageError`] found.
pub fn verify(msg: &[u8], expected_len: usize) -> Result<Header, MessageError> {
    if msg.len() != expected_len || msg.len() < HEADER_LEN {
        return Err(MessageError::Length {
            got: msg.len(),
            expected: expected_len,
        });
    }
    let (head, body) = msg.split_at(HEADER_LEN);
    let magic = u16::from_be_bytes([head[0], head[1]]);
    if magic != MAGIC {
        return Err(MessageError::Magic(magic));
    }
    let phase = match (head[2], head[3]) {
        (0, 0) => Phase::WarmUp,
        (1, 0) => Phase::Measured,
        (p, r) => return Err(MessageError::Phase(p, r)),
    };
    let client_id = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    let mut seq_bytes = [0u8; 8];
    seq_bytes.copy_from_slice(&head[8..16]);
    let seq = u64::from_be_bytes(seq_bytes);
    for (k, (chunk, word)) in body.chunks(8).zip(body_words(client_id, seq)).enumerate() {
        // Whole words compare as integers: a slice comparison calls memcmp per
        // word, which was a tenth of a 1-client echo's CPU.
        let differs = match <[u8; 8]>::try_from(chunk) {
            Ok(whole) => u64::from_ne_bytes(whole) != u64::from_ne_bytes(word),
            Err(_) => chunk != &word[..chunk.len()],
        };
        if differs {
            let within = chunk
                .iter()
                .zip(word)
                .position(|(a, b)| *a != b)
                .unwrap_or(0);
            return Err(MessageError::Body {
                offset: HEADER_LEN + k * 8 + within,
            });
        }
    }
    Ok(Header {
        phase,
        client_id,
        seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(seq: u64) -> Header {
        Header {
            phase: Phase::Measured,
            client_id: 7,
            seq,
        }
    }

    #[test]
    fn header_layout_is_big_endian() {
        let m = encode(
            Header {
                phase: Phase::WarmUp,
                client_id: 0x0102_0304,
                seq: 0x0506_0708_090A_0B0C,
            },
            16,
        );
        assert_eq!(
            &m[..],
            &[0x50, 0x45, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        );
    }

    #[test]
    fn body_bytes_follow_the_spec_formula_to_the_last_partial_word() {
        let h = header(42);
        let m = encode(h, HEADER_LEN + 21);
        let key = 42u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (7 << 32 | 7);
        for (i, got) in m[HEADER_LEN..].iter().enumerate() {
            let word = splitmix64(key ^ (i as u64 / 8));
            assert_eq!(*got, (word >> (8 * (i % 8))) as u8, "body byte {i}");
        }
    }

    #[test]
    fn corrupted_body_byte_is_detected_at_its_offset() {
        let mut m = encode(header(3), 1024).to_vec();
        m[500] ^= 0x01;
        assert_eq!(verify(&m, 1024), Err(MessageError::Body { offset: 500 }));
    }

    #[test]
    fn wrong_length_magic_and_phase_are_detected() {
        let m = encode(header(1), 64).to_vec();
        assert!(matches!(
            verify(&m[..63], 64),
            Err(MessageError::Length { .. })
        ));
        assert!(matches!(verify(&m, 65), Err(MessageError::Length { .. })));
        let mut bad = m.clone();
        bad[0] = 0;
        assert!(matches!(verify(&bad, 64), Err(MessageError::Magic(_))));
        let mut bad = m.clone();
        bad[2] = 2;
        assert_eq!(verify(&bad, 64), Err(MessageError::Phase(2, 0)));
        let mut bad = m;
        bad[3] = 1;
        assert_eq!(verify(&bad, 64), Err(MessageError::Phase(1, 1)));
    }

    #[test]
    fn a_body_from_another_sequence_or_client_fails() {
        let a = encode(header(10), 256);
        let b = encode(header(11), 256);
        let mut spliced = a[..HEADER_LEN].to_vec();
        spliced.extend_from_slice(&b[HEADER_LEN..]);
        assert!(matches!(
            verify(&spliced, 256),
            Err(MessageError::Body { .. })
        ));
        let mut other_client = a.to_vec();
        other_client[7] ^= 1;
        assert!(matches!(
            verify(&other_client, 256),
            Err(MessageError::Body { .. })
        ));
    }

    proptest! {
        #[test]
        fn encode_then_verify_round_trips(
            id in any::<u32>(), seq in any::<u64>(), measured in any::<bool>(), len in 16usize..2048,
        ) {
            let h = Header {
                phase: if measured { Phase::Measured } else { Phase::WarmUp },
                client_id: id,
                seq,
            };
            let m = encode(h, len);
            prop_assert_eq!(m.len(), len);
            prop_assert_eq!(verify(&m, len), Ok(h));
        }

        #[test]
        fn any_single_flipped_bit_is_detected(
            seq in any::<u64>(), len in 16usize..512, pos in any::<prop::sample::Index>(), bit in 0u8..8,
        ) {
            let mut m = encode(header(seq), len).to_vec();
            let i = pos.index(len);
            m[i] ^= 1 << bit;
            // A flip in id/seq changes the expected body, which then
            // mismatches unless the body is too short to tell (fewer than 8
            // bytes can collide by chance). A flip of the phase bit yields
            // a valid message of the other phase. The harness catches both
            // by comparing with what it sent (unexpected / content errors).
            let undetectable = (len < HEADER_LEN + 8 && (4..HEADER_LEN).contains(&i))
                || (i == 2 && bit == 0);
            prop_assert!(undetectable || verify(&m, len).is_err());
        }
    }
}
