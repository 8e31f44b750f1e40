//! Stateless cookies (QUIC Retry / DTLS HelloVerifyRequest style), the conv
//! allocator and the key of the server's conv/token generator. All are keyed
//! with HMAC-SHA256 (RFC 2104, `hmac` + `sha2`).

use std::net::{IpAddr, SocketAddr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::wire::{Cookie, COOKIE_LEN, VERSION};

type HmacSha256 = Hmac<Sha256>;

/// Length of the truncated tag inside a cookie, bytes (128 bits, as RFC 2104
/// §5 allows truncation to at least half the hash output).
const TAG_LEN: usize = COOKIE_LEN - 4;

fn keyed(secret: &[u8; 32]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail; the fallback keeps
    // the function total without an unwrap.
    HmacSha256::new_from_slice(secret).unwrap_or_else(|_| HmacSha256::new(&Default::default()))
}

/// The ChaCha20 key of a server's conv and token generator:
/// HMAC-SHA256(`secret`, `"petrel conv/token rng" ‖ seed u64 LE`). The 256-bit
/// cookie secret makes it unpredictable; the seed only separates instances.
pub(crate) fn rng_key(secret: &[u8; 32], seed: u64) -> [u8; 32] {
    let mut mac = keyed(secret);
    mac.update(b"petrel conv/token rng");
    mac.update(&seed.to_le_bytes());
    mac.finalize().into_bytes().into()
}

/// Why an echoed cookie was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CookieRejection {
    /// The tag does not verify under the current or previous secret: forged,
    /// minted for another address or nonce, or minted before the last two rotations.
    Invalid,
    /// The tag verifies but the cookie is older than the lifetime.
    Expired,
}

/// Mints and verifies cookies over (client addr, client nonce, timestamp
/// bucket) with the current secret, accepting also the previous one.
pub(crate) struct CookieKeys {
    current: HmacSha256,
    previous: Option<HmacSha256>,
    lifetime_s: u32,
}

impl std::fmt::Debug for CookieKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieKeys")
            .field("secrets", &"<redacted>")
            .field("has_previous", &self.previous.is_some())
            .field("lifetime_s", &self.lifetime_s)
            .finish()
    }
}

impl CookieKeys {
    pub(crate) fn new(secret: &[u8; 32], lifetime_s: u32) -> Self {
        Self {
            current: keyed(secret),
            previous: None,
            lifetime_s,
        }
    }

    /// The current secret becomes the previous one; the old previous is forgotten.
    pub(crate) fn rotate(&mut self, secret: &[u8; 32]) {
        self.previous = Some(std::mem::replace(&mut self.current, keyed(secret)));
    }

    fn mac(key: &HmacSha256, peer: SocketAddr, nonce: u64, ts: u32) -> HmacSha256 {
        let mut mac = key.clone();
        let ip = match peer.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        mac.update(&[VERSION]);
        mac.update(&ip.octets());
        mac.update(&peer.port().to_le_bytes());
        mac.update(&nonce.to_le_bytes());
        mac.update(&ts.to_le_bytes());
        mac
    }

    /// Cookie = `timestamp_s u32 LE` ‖ first 16 bytes of
    /// HMAC-SHA256(secret, version ‖ ipv6-mapped addr ‖ port ‖ nonce ‖ timestamp_s).
    pub(crate) fn mint(&self, peer: SocketAddr, nonce: u64, now_s: u32) -> Cookie {
        let tag = Self::mac(&self.current, peer, nonce, now_s)
            .finalize()
            .into_bytes();
        let mut cookie = [0u8; COOKIE_LEN];
        cookie[..4].copy_from_slice(&now_s.to_le_bytes());
        cookie[4..].copy_from_slice(&tag[..TAG_LEN]);
        cookie
    }

    /// Verifies the tag in constant time under the current, then the previous
    /// secret, then checks `0 ≤ now_s − timestamp ≤ lifetime`.
    pub(crate) fn verify(
        &self,
        cookie: &Cookie,
        peer: SocketAddr,
        nonce: u64,
        now_s: u32,
    ) -> Result<(), CookieRejection> {
        let mut ts_bytes = [0u8; 4];
        ts_bytes.copy_from_slice(&cookie[..4]);
        let ts = u32::from_le_bytes(ts_bytes);
        let tag = &cookie[4..];
        let valid = std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .any(|key| {
                Self::mac(key, peer, nonce, ts)
                    .verify_truncated_left(tag)
                    .is_ok()
            });
        if !valid || ts > now_s {
            return Err(CookieRejection::Invalid);
        }
        if now_s - ts > self.lifetime_s {
            return Err(CookieRejection::Expired);
        }
        Ok(())
    }
}

/// Convs [`ConvAllocator::next_conv_where`] draws before it gives up: a wish met
/// by one conv in 64 (the most socket shards) fails this often with probability
/// (63/64)^1024 ≈ 1e-7, and then only costs the connection its shard choice.
const WANTED_TRIES: usize = 1024;

/// Hands out conv values that are unpredictable to peers, never 0, and
/// distinct for 2^32 − 1 consecutive allocations: conv = E(counter) where E is
/// a 4-round Feistel permutation of 32-bit values with HMAC-SHA256 round
/// functions (Luby–Rackoff), skipping the one counter that maps to 0.
pub(crate) struct ConvAllocator {
    key: HmacSha256,
    counter: u32,
    /// Convs computed so far (each one 4 HMAC-SHA256 rounds).
    draws: u64,
}

impl std::fmt::Debug for ConvAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConvAllocator")
            .field("key", &"<redacted>")
            .finish()
    }
}

impl ConvAllocator {
    pub(crate) fn new(key: &[u8; 32], start: u32) -> Self {
        Self {
            key: keyed(key),
            counter: start,
            draws: 0,
        }
    }

    fn round(&self, round: u8, half: u16) -> u16 {
        let mut mac = self.key.clone();
        mac.update(&[round]);
        mac.update(&half.to_le_bytes());
        let out = mac.finalize().into_bytes();
        u16::from_le_bytes([out[0], out[1]])
    }

    fn permute(&self, x: u32) -> u32 {
        let (mut l, mut r) = ((x >> 16) as u16, x as u16);
        for i in 0..4 {
            (l, r) = (r, l ^ self.round(i, r));
        }
        (u32::from(l) << 16) | u32::from(r)
    }

    /// The next conv that `wanted` accepts; skipping values keeps the convs
    /// distinct. Convs are a keyed permutation of a counter, so a lane of n
    /// (`ConvLane`) takes about n draws of 4 HMAC-SHA256 rounds each (an
    /// `io_threads` of 64 costs a legacy SYN some 64 draws); after
    /// [`WANTED_TRIES`] misses
    /// (a wish that cannot be met, such as a lane beyond the lanes) the next conv
    /// is taken whatever it is, so a handshake never loops.
    pub(crate) fn next_conv_where(&mut self, wanted: impl Fn(u32) -> bool) -> u32 {
        for _ in 0..WANTED_TRIES {
            let conv = self.next_conv();
            if wanted(conv) {
                return conv;
            }
        }
        self.next_conv()
    }

    /// Convs computed so far, wanted or not.
    pub(crate) fn draws(&self) -> u64 {
        self.draws
    }

    pub(crate) fn next_conv(&mut self) -> u32 {
        loop {
            let conv = self.permute(self.counter);
            self.counter = self.counter.wrapping_add(1);
            self.draws += 1;
            if conv != 0 {
                return conv;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conv/token generator's key depends on the 256-bit secret, not only
    /// on the 64-bit seed.
    #[test]
    fn rng_key_is_keyed_by_the_secret() {
        assert_eq!(rng_key(&[1; 32], 5), rng_key(&[1; 32], 5));
        assert_ne!(rng_key(&[1; 32], 5), rng_key(&[2; 32], 5));
        assert_ne!(rng_key(&[1; 32], 5), rng_key(&[1; 32], 6));
    }

    #[test]
    fn conv_allocator_is_a_permutation_without_zero() {
        let mut alloc = ConvAllocator::new(&[7; 32], u32::MAX - 500);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            let conv = alloc.next_conv();
            assert_ne!(conv, 0);
            assert!(seen.insert(conv), "conv {conv} repeated");
        }
    }

    #[test]
    fn cookie_binds_address_nonce_and_time() {
        let keys = CookieKeys::new(&[1; 32], 10);
        let peer: SocketAddr = "192.0.2.1:4000".parse().unwrap();
        let other: SocketAddr = "192.0.2.1:4001".parse().unwrap();
        let cookie = keys.mint(peer, 42, 100);
        assert_eq!(keys.verify(&cookie, peer, 42, 100), Ok(()));
        assert_eq!(keys.verify(&cookie, peer, 42, 110), Ok(()));
        assert_eq!(
            keys.verify(&cookie, peer, 42, 111),
            Err(CookieRejection::Expired)
        );
        assert_eq!(
            keys.verify(&cookie, other, 42, 100),
            Err(CookieRejection::Invalid)
        );
        assert_eq!(
            keys.verify(&cookie, peer, 43, 100),
            Err(CookieRejection::Invalid)
        );
        assert_eq!(
            keys.verify(&cookie, peer, 42, 99),
            Err(CookieRejection::Invalid)
        );
        let mut tampered = cookie;
        tampered[0] ^= 1;
        assert_eq!(
            keys.verify(&tampered, peer, 42, 105),
            Err(CookieRejection::Invalid)
        );
    }
}
