//! Deterministic data: offsets for random I/O, and the (seed, offset) stamp that `--verify` writes
//! and checks. A block's content depends only on the seed and its absolute byte offset, so a
//! read-back run with the same seed knows what every block must hold.

/// splitmix64: a fast, well-mixed 64-bit generator (one multiply-xorshift chain per value).
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` without a division (Lemire's multiply-high).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline]
fn word(seed: u64, abs_offset: u64) -> u64 {
    mix(seed.wrapping_mul(0xD605_0E3F_5CB1_5C37) ^ abs_offset)
}

/// Fills `buf` with the stamp of the bytes at `offset` (a multiple of 8).
pub fn fill(buf: &mut [u8], seed: u64, offset: u64) {
    for (i, chunk) in buf.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&word(seed, offset + 8 * i as u64).to_le_bytes());
    }
}

/// The first byte offset in `buf` (read from `offset`) that differs from the stamp, if any.
pub fn check(buf: &[u8], seed: u64, offset: u64) -> Option<u64> {
    buf.chunks_exact(8).enumerate().find_map(|(i, chunk)| {
        let at = offset + 8 * i as u64;
        (chunk != word(seed, at).to_le_bytes()).then_some(at)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips_and_catches_changes() {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 7, 8192);
        assert_eq!(check(&b, 7, 8192), None);
        assert_eq!(check(&b, 8, 8192), Some(8192), "another seed is another pattern");
        assert_eq!(check(&b, 7, 4096), Some(4096), "another offset is another pattern");
        b[100] ^= 1;
        assert_eq!(check(&b, 7, 8192), Some(8192 + 96));
    }

    #[test]
    fn below_stays_in_range_and_spreads() {
        let mut r = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..100_000 {
            seen[r.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (9_000..11_000).contains(&c)), "{seen:?}");
    }
}
