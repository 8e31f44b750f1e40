use std::collections::HashSet;

use proptest::prelude::*;

use crate::codec::interconnect::{seal, Channel, Subtype};

use super::*;

proptest! {
    /// The window agrees with a model that remembers every id.
    #[test]
    fn replay_window_matches_a_model(ids in proptest::collection::vec(prop_oneof![0u64..6000, 0u64..20, 4000u64..4200], 1..400)) {
        let mut w = ReplayWindow::new();
        let mut seen = HashSet::new();
        let mut max = 0u64;
        for id in ids {
            let expected = if id == 0 {
                Err(Replay::ZeroId)
            } else if max != 0 && id <= max && max - id >= REPLAY_WINDOW_BITS {
                Err(Replay::TooOld)
            } else if seen.contains(&id) {
                Err(Replay::Duplicate)
            } else {
                Ok(())
            };
            prop_assert_eq!(w.check_and_record(id), expected);
            if expected.is_ok() {
                seen.insert(id);
                max = max.max(id);
            }
        }
    }

    /// Arbitrary bytes never panic the pipeline and are never accepted.
    #[test]
    fn arbitrary_bytes_are_never_accepted(bytes in proptest::collection::vec(any::<u8>(), 0..1500), shaped in any::<bool>()) {
        let (mut c, now) = centre(DataPlaneConfig::default());
        bind(&mut c, now, "edge-a", SESSION_A, 1, 1, addr("10.0.0.2:1"));
        let mut bytes = bytes;
        if shaped && bytes.len() >= 175 {
            bytes[..4].copy_from_slice(b"DraA");
            bytes[6..12].copy_from_slice(b"edge-a");
            bytes[12] = 0;
            bytes[48] = 0;
            bytes[86..90].copy_from_slice(b"NOD0");
            bytes[110..118].copy_from_slice(&SESSION_A.to_be_bytes());
        }
        let v = c.handle_datagram(now, WALL, addr("10.0.0.2:1"), &bytes);
        prop_assert!(!matches!(v, Verdict::Queued | Verdict::Bound(_)));
        prop_assert_eq!(c.queued(), 0);
    }

    /// One flipped bit anywhere in a valid datagram: never accepted.
    #[test]
    fn a_flipped_bit_is_never_accepted(bit in any::<prop::sample::Index>()) {
        let (mut c, now) = centre(DataPlaneConfig::default());
        bind(&mut c, now, "edge-a", SESSION_A, 1, 1, addr("10.0.0.2:1"));
        let mut d = seal(&header("edge-a", SESSION_A, 2, Subtype::RELAY_UPSTREAM), &relay_payload(7), &key_of(1), Channel::Udp).unwrap();
        let i = bit.index(d.len() * 8);
        d[i / 8] ^= 1 << (i % 8);
        let v = c.handle_datagram(now, WALL, addr("10.0.0.2:1"), &d);
        prop_assert!(!matches!(v, Verdict::Queued | Verdict::Bound(_)), "{:?}", v);
    }
}
