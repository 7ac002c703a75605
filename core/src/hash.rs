//! Hashes: a small, stable, non-keyed one (FNV-1a 64) for state hashes in traces,
//! deterministic across runs unlike std's randomly keyed `DefaultHasher`; the SHA-256
//! digests every frozen record is named by; and the canonical JSON a digest of a value is
//! taken over.

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` as compact JSON with every object's keys sorted: the bytes a digest of a JSON
/// value is taken over. Sorted here, not by the map serde_json happens to be built with
/// (its `preserve_order` feature, which a dependency may turn on for the whole build, keeps
/// insertion order), so a digest never depends on how a value was built or which build
/// wrote it.
pub fn canonical_json(value: &impl serde::Serialize) -> String {
    fn sorted(v: serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                serde_json::Value::Object(
                    entries.into_iter().map(|(k, v)| (k, sorted(v))).collect(),
                )
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.into_iter().map(sorted).collect())
            }
            other => other,
        }
    }
    let value = serde_json::to_value(value).expect("values serialize to JSON");
    sorted(value).to_string()
}

/// FNV-1a, 64-bit.
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    /// A lane started from the usual offset basis mixed with `seed`, for a second digest
    /// independent of the first.
    pub fn seeded(seed: u64) -> Fnv64 {
        let mut lane = Fnv64::default();
        std::hash::Hasher::write(&mut lane, &seed.to_le_bytes());
        lane
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

/// A word-at-a-time hash for the per-step state hashes of a simulation: stable across runs
/// and machines (little-endian words, lengths as `u64`), several times cheaper than FNV-1a on
/// the integers and names a machine's state is made of, and not meant for anything an
/// adversary chooses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StateHasher(u64);

impl Default for StateHasher {
    fn default() -> StateHasher {
        StateHasher(0x243f_6a88_85a3_08d3)
    }
}

impl StateHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

impl std::hash::Hasher for StateHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.mix(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        // The length tells `ab` + `c` from `a` + `bc`.
        self.mix(u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56));
    }

    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.mix(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    fn write_i64(&mut self, n: i64) {
        self.mix(n as u64);
    }

    fn finish(&self) -> u64 {
        // One more round, so the last word written reaches every bit.
        (self.0 ^ (self.0 >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
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
    fn canonical_json_sorts_every_objects_keys_however_the_value_was_built() {
        let built =
            serde_json::json!({"z": 1, "a": [{"y": true, "b": null}], "m": {"k": "v", "c": 2}});
        let parsed: serde_json::Value =
            serde_json::from_str(r#"{"m":{"c":2,"k":"v"},"z":1,"a":[{"b":null,"y":true}]}"#)
                .unwrap();
        let want = r#"{"a":[{"b":null,"y":true}],"m":{"c":2,"k":"v"},"z":1}"#;
        assert_eq!(super::canonical_json(&built), want);
        assert_eq!(super::canonical_json(&parsed), want);
        // A struct's fields, in declaration order, are sorted too.
        #[derive(serde::Serialize)]
        struct Later {
            zeta: u8,
            alpha: u8,
        }
        assert_eq!(super::canonical_json(&Later { zeta: 1, alpha: 2 }), r#"{"alpha":2,"zeta":1}"#);
    }

    #[test]
    fn the_state_hash_tells_apart_what_fnv_does_and_is_pinned() {
        use std::hash::{Hash, Hasher};
        let of = |v: &dyn Fn(&mut super::StateHasher)| {
            let mut h = super::StateHasher::default();
            v(&mut h);
            h.finish()
        };
        let ab_c = of(&|h| {
            "ab".hash(h);
            "c".hash(h);
        });
        let a_bc = of(&|h| {
            "a".hash(h);
            "bc".hash(h);
        });
        assert_ne!(ab_c, a_bc);
        assert_ne!(of(&|h| 1u64.hash(h)), of(&|h| 2u64.hash(h)));
        assert_ne!(of(&|h| h.write(b"12345678")), of(&|h| h.write(b"12345679")));
        // Pinned: a trace's hashes must not change from one build to the next by accident.
        assert_eq!(of(&|h| 7u64.hash(h)), 0xde5d_f3c4_868b_3045);
    }

    #[test]
    fn matches_the_published_test_vectors() {
        assert_eq!(super::fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
