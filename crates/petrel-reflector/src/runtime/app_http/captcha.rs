//! Login captchas (`specs/draarl-apps.md` §1.2): a 180×64 PNG of 5
//! characters, returned as a `data:image/png;base64,` URL with an opaque
//! 20-character id; each answer is single use (consumed by any attempt)
//! and expires after 300 s.
//!
//! Images come from the `captcha` crate rather than `captcha-rs` because,
//! measured on this machine, it took 1 min 8 s of CPU to build against
//! 10 min 19 s for `captcha-rs` (which brings `imageproc` and a wider image
//! stack), and its 16 ms per 180×64 PNG (`captcha-rs`: 2.4 ms per JPEG)
//! is small beside the per-prefix captcha budget.
//!
//! Pending answers are kept in a bounded table ([`CaptchaBook`]): when
//! full, the oldest is dropped (counted), expired ones are swept from the
//! front on every use, and answers are compared in constant time.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hashlink::LinkedHashMap;
use rand::Rng;
use subtle::ConstantTimeEq;

/// Lifetime of a captcha (§1.2 `expire`).
pub(crate) const CAPTCHA_TTL: Duration = Duration::from_secs(300);
/// Characters of a captcha id.
const ID_CHARS: usize = 20;
/// Characters of an answer.
const ANSWER_CHARS: u32 = 5;

/// A drawn captcha: the answer and the image as a data URL.
pub(crate) struct Drawn {
    pub(crate) answer: String,
    pub(crate) data_url: String,
}

/// Draws a 180×64 PNG captcha of 5 characters (CPU-bound: about 16 ms;
/// run it on a blocking thread). `None` if the PNG encoder failed.
pub(crate) fn draw() -> Option<Drawn> {
    let mut c = captcha::Captcha::new();
    c.add_chars(ANSWER_CHARS)
        .apply_filter(captcha::filters::Noise::new(0.2))
        .apply_filter(captcha::filters::Wave::new(2.0, 8.0))
        .view(180, 64);
    let png = c.as_png()?;
    Some(Drawn {
        answer: c.chars_as_string(),
        data_url: format!("data:image/png;base64,{}", STANDARD.encode(png)),
    })
}

/// A new opaque captcha id: 20 characters of `[0-9A-Za-z]` from the
/// thread-local CSPRNG.
pub(crate) fn new_id() -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::thread_rng();
    (0..ID_CHARS)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect()
}

/// Pending captcha answers by id, in issue order, at most `max`.
#[derive(Debug)]
pub(crate) struct CaptchaBook {
    pending: LinkedHashMap<String, (String, Instant)>,
    max: usize,
    evicted: u64,
}

impl CaptchaBook {
    /// An empty book of at most `max` (≥ 1) pending answers.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            pending: LinkedHashMap::new(),
            max: max.max(1),
            evicted: 0,
        }
    }

    /// Keeps `answer` under `id`, valid until `now + CAPTCHA_TTL`; drops the
    /// oldest pending answer if full.
    pub(crate) fn insert(&mut self, id: String, answer: String, now: Instant) {
        self.sweep(now);
        while self.pending.len() >= self.max {
            self.pending.pop_front();
            self.evicted += 1;
        }
        self.pending.insert(id, (answer, now + CAPTCHA_TTL));
    }

    /// Consumes the answer of `id` (right or wrong) and whether `code`
    /// matches it exactly (case-sensitive) before its expiry.
    pub(crate) fn verify(&mut self, id: &str, code: &str, now: Instant) -> bool {
        self.sweep(now);
        match self.pending.remove(id) {
            Some((answer, expires)) => {
                now < expires && bool::from(answer.as_bytes().ct_eq(code.as_bytes()))
            }
            None => false,
        }
    }

    /// Pending answers dropped unsolved to make room so far.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The pending answer of `id`, without consuming it (tests read what
    /// the image shows).
    #[cfg(test)]
    pub(crate) fn peek(&self, id: &str) -> Option<&str> {
        self.pending.get(id).map(|(a, _)| a.as_str())
    }

    /// Pending answers.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending.len()
    }

    /// Forgets expired answers (all share one lifetime, so they are at the
    /// front).
    fn sweep(&mut self, now: Instant) {
        while self
            .pending
            .front()
            .is_some_and(|(_, (_, expires))| *expires <= now)
        {
            self.pending.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_single_use_exact_and_expire() {
        let t0 = crate::test_clock::origin();
        let mut b = CaptchaBook::new(16);
        b.insert("a".into(), "Xy7Qz".into(), t0);
        assert!(!b.verify("a", "xy7qz", t0));
        assert!(!b.verify("a", "Xy7Qz", t0), "consumed by the wrong attempt");
        b.insert("b".into(), "Xy7Qz".into(), t0);
        assert!(b.verify("b", "Xy7Qz", t0));
        assert!(!b.verify("b", "Xy7Qz", t0));
        b.insert("c".into(), "12345".into(), t0);
        assert!(!b.verify("c", "12345", t0 + CAPTCHA_TTL));
        b.insert("d".into(), "12345".into(), t0);
        assert!(b.verify("d", "12345", t0 + CAPTCHA_TTL - Duration::from_millis(1)));
    }

    #[test]
    fn a_full_book_drops_the_oldest() {
        let t0 = crate::test_clock::origin();
        let mut b = CaptchaBook::new(16);
        for i in 0..20 {
            b.insert(format!("id{i}"), "ans".into(), t0);
        }
        assert_eq!((b.len(), b.evicted()), (16, 4));
        assert!(!b.verify("id0", "ans", t0));
        assert!(b.verify("id19", "ans", t0));
        // Expired answers are swept, not counted as evictions.
        b.insert("late".into(), "ans".into(), t0 + CAPTCHA_TTL);
        assert_eq!((b.len(), b.evicted()), (1, 4));
    }

    #[test]
    fn images_are_png_data_urls_with_5_character_answers() {
        let d = draw().unwrap();
        assert_eq!(d.answer.chars().count(), 5);
        let b64 = d.data_url.strip_prefix("data:image/png;base64,").unwrap();
        let png = STANDARD.decode(b64).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let id = new_id();
        assert_eq!(id.len(), 20);
        assert!(id.bytes().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(id, new_id());
    }
}
