//! FNV-1a, 64-bit: a small, stable, non-cryptographic hash for sharding keys.
//!
//! Used where a key must map to the same shard or partition in every run and in
//! every process (the reflector's shard key follows the reference implementation's
//! FNV-1a-64, draarl-v1). Not for anything an attacker can exploit by choosing
//! inputs: it is neither keyed nor collision resistant.
//!
//! Constants are the published ones (<http://www.isthe.com/chongo/tech/comp/fnv/>).

/// FNV-1a-64 offset basis: the hash of no bytes.
pub const FNV1A64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a-64 prime.
pub const FNV1A64_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a-64 of `bytes`.
///
/// ```
/// assert_eq!(petrel_sys::hash::fnv1a64(*b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
pub fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    fnv1a64_from(FNV1A64_OFFSET, bytes)
}

/// Continues the FNV-1a-64 hash `h` over `bytes`, so a key made of several parts
/// hashes without being copied into one buffer: `fnv1a64_from(fnv1a64(a), b)` equals
/// `fnv1a64(a ++ b)`.
pub fn fnv1a64_from(h: u64, bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes
        .into_iter()
        .fold(h, |h, b| (h ^ u64::from(b)).wrapping_mul(FNV1A64_PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        assert_eq!(fnv1a64([]), FNV1A64_OFFSET);
        assert_eq!(fnv1a64(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(*b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn continuing_equals_hashing_the_concatenation() {
        let whole = fnv1a64([127, 0, 0, 1, 0x1f, 0x90]);
        let parts = fnv1a64_from(fnv1a64([127, 0, 0, 1]), 8080u16.to_be_bytes());
        assert_eq!(whole, parts);
    }
}
