//! Where every simulated choice comes from: a seeded ChaCha8 stream, or fuzz bytes.
//!
//! Both sources sit behind one trait so the same simulation can be driven by a seed (sweeps,
//! replay) or by cargo-fuzz input. The fuzz source returns "no" and "zero" once its bytes run
//! out, which turns the tail of every fuzz run into a fault-free liveness phase.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A source of simulated decisions.
pub trait Entropy {
    /// A number in `0..n`; `0` when `n == 0`.
    fn below(&mut self, n: u64) -> u64;

    /// True with probability `num / den`; never true when `num == 0`.
    fn chance(&mut self, num: u32, den: u32) -> bool {
        debug_assert!(den > 0 && num <= den);
        num > 0 && self.below(u64::from(den)) < u64::from(num)
    }

    /// A number in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi, "empty range {lo}..={hi}");
        lo + self.below((hi - lo).saturating_add(1))
    }
}

/// The seeded source used for sweeps and replay. Portable across platforms and releases.
pub struct SeededEntropy {
    rng: ChaCha8Rng,
}

impl SeededEntropy {
    /// A stream determined entirely by `seed`.
    pub fn new(seed: u64) -> SeededEntropy {
        SeededEntropy { rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// The next raw 64 bits (exposed for the golden test that pins the stream).
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
}

impl Entropy for SeededEntropy {
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift with rejection: unbiased and needs no floats.
        let threshold = n.wrapping_neg() % n;
        loop {
            let x = self.rng.next_u64();
            let wide = u128::from(x) * u128::from(n);
            if (wide as u64) >= threshold {
                return (wide >> 64) as u64;
            }
        }
    }
}

/// The fuzz-driven source: decisions come from the input bytes until they run out, then every
/// answer is the quietest one (zero, "no").
pub struct ByteEntropy<'a> {
    bytes: &'a [u8],
}

impl<'a> ByteEntropy<'a> {
    /// Decisions drawn from `bytes`.
    pub fn new(bytes: &'a [u8]) -> ByteEntropy<'a> {
        ByteEntropy { bytes }
    }

    /// True once every byte has been used.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl Entropy for ByteEntropy<'_> {
    fn below(&mut self, n: u64) -> u64 {
        if n <= 1 || self.bytes.is_empty() {
            return 0;
        }
        let needed = (64 - (n - 1).leading_zeros()).div_ceil(8) as usize;
        let take = needed.min(self.bytes.len());
        let mut x: u64 = 0;
        for &b in &self.bytes[..take] {
            x = (x << 8) | u64::from(b);
        }
        self.bytes = &self.bytes[take..];
        x % n
    }

    fn chance(&mut self, num: u32, den: u32) -> bool {
        // Checked explicitly: an exhausted source must answer "no", never "yes".
        !self.bytes.is_empty() && num > 0 && self.below(u64::from(den)) < u64::from(num)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chacha_stream_is_pinned() {
        // If this fails, the rand_chacha stream changed and every recorded seed replays
        // differently: pin the old version or re-record the traces on purpose.
        let mut e = SeededEntropy::new(42);
        let first: Vec<u64> = (0..4).map(|_| e.next_u64()).collect();
        assert_eq!(first, GOLDEN_SEED_42);
    }

    const GOLDEN_SEED_42: [u64; 4] =
        [12578764544318200737, 17529487244874322312, 7886285670807131020, 11572758976476374866];

    #[test]
    fn below_stays_in_range() {
        let mut e = SeededEntropy::new(7);
        for n in [1u64, 2, 3, 10, 1 << 40, u64::MAX] {
            for _ in 0..100 {
                assert!(e.below(n) < n);
            }
        }
        assert_eq!(e.below(0), 0);
    }

    #[test]
    fn exhausted_bytes_answer_no() {
        let mut e = ByteEntropy::new(&[]);
        assert!(!e.chance(99, 100));
        assert_eq!(e.below(10), 0);
        let mut e = ByteEntropy::new(&[5]);
        assert_eq!(e.below(3), 2);
        assert!(e.is_empty());
        assert!(!e.chance(1, 1));
    }
}
