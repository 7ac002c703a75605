//! Hashes: a small, stable, non-keyed one (FNV-1a 64) for state hashes in traces,
//! deterministic across runs unlike std's randomly keyed `DefaultHasher`; and the SHA-256
//! digests every frozen record is named by.

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// FNV-1a, 64-bit.
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv64 {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// FNV-1a of a byte string.
pub fn fnv64(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = Fnv64::default();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_published_test_vectors() {
        assert_eq!(super::fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
