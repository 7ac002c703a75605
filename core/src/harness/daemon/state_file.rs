//! `state.json`: the daemon's durable intent and counters, written atomically, versioned.

use crate::env::ExitStatus;
use crate::harness::lifecycle::harness::Durable;
use crate::ids::Id;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema version written today. Readers accept it and every older one.
pub(crate) const STATE_VERSION: u32 = 1;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedState {
    /// Schema version.
    pub v: u32,
    /// Increases with every write.
    pub generation: u64,
    /// The profile last made active by an operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_profile: Option<Id>,
    /// Intent and counters per harness.
    pub harnesses: BTreeMap<Id, Durable>,
    /// The last run number of harnesses removed from the configuration, so a harness added
    /// back under the same name continues its numbering instead of reusing run numbers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub retired: BTreeMap<Id, u64>,
}

/// Why `state.json` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateFileError {
    /// What is wrong, with line and column when the JSON itself is bad.
    pub reason: String,
}

impl std::fmt::Display for StateFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "state.json: {}", self.reason)
    }
}

impl PersistedState {
    /// Parses the file's bytes.
    pub fn decode(bytes: &[u8]) -> Result<PersistedState, StateFileError> {
        // The file is written into space kept for it, padded with spaces to its length.
        let bytes = bytes.trim_ascii_end();
        let state = match canonical::decode(bytes) {
            Some(state) => state,
            None => serde_json::from_slice(bytes).map_err(|e| StateFileError {
                reason: format!("line {} column {}: {e}", e.line(), e.column()),
            })?,
        };
        if state.v == 0 || state.v > STATE_VERSION {
            return Err(StateFileError {
                reason: format!("field v: version {} is not one this harn reads", state.v),
            });
        }
        Ok(state)
    }

    /// The file's bytes: serde's compact JSON of the state and a newline, written field by
    /// field (the daemon writes the file after every change a run makes, and serde's general
    /// path spent most of its time escaping key names that need no escape). A test holds the
    /// two byte for byte equal.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 192 * self.harnesses.len());
        out.extend_from_slice(b"{\"v\":");
        push_u64(&mut out, u64::from(self.v));
        out.extend_from_slice(b",\"generation\":");
        push_u64(&mut out, self.generation);
        if let Some(profile) = &self.active_profile {
            out.extend_from_slice(b",\"active_profile\":");
            push_id(&mut out, profile);
        }
        out.extend_from_slice(b",\"harnesses\":{");
        for (i, (name, h)) in self.harnesses.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_id(&mut out, name);
            out.push(b':');
            push_harness(&mut out, h);
        }
        out.push(b'}');
        if !self.retired.is_empty() {
            out.extend_from_slice(b",\"retired\":{");
            for (i, (name, last)) in self.retired.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_id(&mut out, name);
                out.push(b':');
                push_u64(&mut out, *last);
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
        out
    }
}

/// The file as [`PersistedState::encode`] writes it, read by matching it field by field. A
/// file in any other shape (spaces, another field order, a field this harn does not know, a
/// repeated name) is `None`, and serde reads it or refuses it with its own message: the two
/// paths accept the same files and agree on what they say, which a test holds.
mod canonical {
    use super::{Durable, PersistedState};
    use crate::env::ExitStatus;
    use crate::harness::lifecycle::harness::LastExit;
    use crate::ids::Id;
    use std::collections::BTreeMap;

    pub(super) fn decode(bytes: &[u8]) -> Option<PersistedState> {
        let mut c = Cursor(bytes);
        c.tag(b"{\"v\":")?;
        let v = u32::try_from(c.u64()?).ok()?;
        c.tag(b",\"generation\":")?;
        let generation = c.u64()?;
        let active_profile = match c.tag(b",\"active_profile\":") {
            Some(()) => Some(c.id()?),
            None => None,
        };
        c.tag(b",\"harnesses\":")?;
        let harnesses = c.map(Cursor::harness)?;
        let retired = match c.tag(b",\"retired\":") {
            Some(()) => c.map(Cursor::u64)?,
            None => BTreeMap::new(),
        };
        c.tag(b"}")?;
        matches!(c.0, b"" | b"\n").then_some(PersistedState {
            v,
            generation,
            active_profile,
            harnesses,
            retired,
        })
    }

    struct Cursor<'a>(&'a [u8]);

    impl Cursor<'_> {
        fn tag(&mut self, tag: &[u8]) -> Option<()> {
            self.0 = self.0.strip_prefix(tag)?;
            Some(())
        }

        /// A decimal without sign or leading zero that fits.
        fn u64(&mut self) -> Option<u64> {
            let (n, rest) = crate::journal::canonical_u64(self.0)?;
            self.0 = rest;
            Some(n)
        }

        fn i32(&mut self) -> Option<i32> {
            match self.tag(b"-") {
                Some(()) => match self.u64()? {
                    0 => None,
                    n => 0i32.checked_sub_unsigned(u32::try_from(n).ok()?),
                },
                None => i32::try_from(self.u64()?).ok(),
            }
        }

        fn bool(&mut self) -> Option<bool> {
            match self.tag(b"true") {
                Some(()) => Some(true),
                None => self.tag(b"false").map(|()| false),
            }
        }

        /// A string of id characters only (so nothing in it is escaped) that is a valid id.
        fn id(&mut self) -> Option<Id> {
            self.tag(b"\"")?;
            let len = self.0.iter().position(|&b| b == b'"')?;
            let (text, rest) = self.0.split_at(len);
            if !text.iter().all(|b| b.is_ascii_alphanumeric() || b".-_".contains(b)) {
                return None;
            }
            let id = Id::new(std::str::from_utf8(text).ok()?).ok()?;
            self.0 = &rest[1..];
            Some(id)
        }

        /// `{"name":value,...}` with each name once.
        fn map<V>(&mut self, value: fn(&mut Self) -> Option<V>) -> Option<BTreeMap<Id, V>> {
            self.tag(b"{")?;
            let mut map = BTreeMap::new();
            if self.tag(b"}").is_some() {
                return Some(map);
            }
            loop {
                let name = self.id()?;
                self.tag(b":")?;
                if map.insert(name, value(self)?).is_some() {
                    return None;
                }
                if self.tag(b"}").is_some() {
                    return Some(map);
                }
                self.tag(b",")?;
            }
        }

        fn harness(&mut self) -> Option<Durable> {
            self.tag(b"{\"enabled\":")?;
            let enabled = self.bool()?;
            self.tag(b",\"pinned\":")?;
            let pinned = self.bool()?;
            self.tag(b",\"failed\":")?;
            let failed = self.bool()?;
            self.tag(b",\"restarts\":")?;
            let restarts = self.u64()?;
            self.tag(b",\"consecutive_failures\":")?;
            let consecutive_failures = u32::try_from(self.u64()?).ok()?;
            self.tag(b",\"runs\":")?;
            let runs = self.u64()?;
            self.tag(b",\"reserved_runs\":")?;
            let reserved_runs = self.u64()?;
            self.tag(b",\"last_exit\":")?;
            let last_exit = match self.tag(b"null") {
                Some(()) => None,
                None => Some(self.last_exit()?),
            };
            self.tag(b"}")?;
            Some(Durable {
                enabled,
                pinned,
                failed,
                restarts,
                consecutive_failures,
                runs,
                reserved_runs,
                last_exit,
            })
        }

        fn last_exit(&mut self) -> Option<LastExit> {
            self.tag(b"{\"status\":")?;
            let status = if self.tag(b"null").is_some() {
                None
            } else if self.tag(b"{\"code\":").is_some() {
                Some(ExitStatus::Code(self.i32()?))
            } else {
                self.tag(b"{\"signal\":")?;
                Some(ExitStatus::Signal(self.i32()?))
            };
            if status.is_some() {
                self.tag(b"}")?;
            }
            self.tag(b",\"forced\":")?;
            let forced = self.bool()?;
            self.tag(b"}")?;
            Some(LastExit { status, forced })
        }
    }
}

fn push_harness(out: &mut Vec<u8>, h: &Durable) {
    out.extend_from_slice(b"{\"enabled\":");
    push_bool(out, h.enabled);
    out.extend_from_slice(b",\"pinned\":");
    push_bool(out, h.pinned);
    out.extend_from_slice(b",\"failed\":");
    push_bool(out, h.failed);
    out.extend_from_slice(b",\"restarts\":");
    push_u64(out, h.restarts);
    out.extend_from_slice(b",\"consecutive_failures\":");
    push_u64(out, u64::from(h.consecutive_failures));
    out.extend_from_slice(b",\"runs\":");
    push_u64(out, h.runs);
    out.extend_from_slice(b",\"reserved_runs\":");
    push_u64(out, h.reserved_runs);
    out.extend_from_slice(b",\"last_exit\":");
    match h.last_exit {
        None => out.extend_from_slice(b"null"),
        Some(exit) => {
            out.extend_from_slice(b"{\"status\":");
            match exit.status {
                None => out.extend_from_slice(b"null"),
                Some(ExitStatus::Code(code)) => {
                    out.extend_from_slice(b"{\"code\":");
                    crate::journal::push_signed(out, i64::from(code));
                    out.push(b'}');
                }
                Some(ExitStatus::Signal(signal)) => {
                    out.extend_from_slice(b"{\"signal\":");
                    crate::journal::push_signed(out, i64::from(signal));
                    out.push(b'}');
                }
            }
            out.extend_from_slice(b",\"forced\":");
            push_bool(out, exit.forced);
            out.push(b'}');
        }
    }
    out.push(b'}');
}

/// An id as a JSON string: its characters (letters, digits, `.`, `_`, `-`) need no escape.
fn push_id(out: &mut Vec<u8>, id: &Id) {
    debug_assert!(id.as_str().bytes().all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b)));
    out.push(b'"');
    out.extend_from_slice(id.as_str().as_bytes());
    out.push(b'"');
}

fn push_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

fn push_u64(out: &mut Vec<u8>, n: u64) {
    crate::journal::push_decimal(out, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::harness::lifecycle::harness::LastExit;
    use proptest::prelude::*;

    fn id() -> impl Strategy<Value = Id> {
        prop::sample::select(vec!["a", "h0", "web.api", "x_1-2", "Z"])
            .prop_map(|s| Id::new(s).unwrap())
    }

    fn durable() -> impl Strategy<Value = Durable> {
        let status = prop_oneof![
            Just(None),
            any::<i32>().prop_map(|c| Some(ExitStatus::Code(c))),
            any::<i32>().prop_map(|s| Some(ExitStatus::Signal(s))),
        ];
        let exit = prop::option::of(
            (status, any::<bool>()).prop_map(|(status, forced)| LastExit { status, forced }),
        );
        (any::<[bool; 3]>(), any::<(u64, u32, u64, u64)>(), exit).prop_map(
            |(flags, counts, last_exit)| {
                let mut d = Durable { last_exit, ..Durable::default() };
                [d.enabled, d.pinned, d.failed] = flags;
                (d.restarts, d.consecutive_failures, d.runs, d.reserved_runs) = counts;
                d
            },
        )
    }

    proptest! {
        /// The hand-written encoding is serde's, byte for byte.
        #[test]
        fn encodes_as_serde_does(
            v in any::<u32>(),
            generation in any::<u64>(),
            active_profile in prop::option::of(id()),
            harnesses in prop::collection::btree_map(id(), durable(), 0..4),
            retired in prop::collection::btree_map(id(), any::<u64>(), 0..3),
        ) {
            let s = PersistedState { v, generation, active_profile, harnesses, retired };
            let mut serde = serde_json::to_vec(&s).unwrap();
            serde.push(b'\n');
            prop_assert_eq!(String::from_utf8(s.encode()).unwrap(), String::from_utf8(serde).unwrap());
        }
    }

    fn state() -> impl Strategy<Value = PersistedState> {
        (
            any::<u32>(),
            any::<u64>(),
            prop::option::of(id()),
            prop::collection::btree_map(id(), durable(), 0..4),
            prop::collection::btree_map(id(), any::<u64>(), 0..3),
        )
            .prop_map(|(v, generation, active_profile, harnesses, retired)| {
                PersistedState { v, generation, active_profile, harnesses, retired }
            })
    }

    /// What serde alone makes of `bytes` (the version check aside).
    fn serde_read(bytes: &[u8]) -> Option<PersistedState> {
        serde_json::from_slice(bytes).ok()
    }

    proptest! {
        /// What the field-by-field reader reads, serde reads the same; what harn writes, it
        /// reads.
        #[test]
        fn the_canonical_reader_never_disagrees_with_serde(
            s in state(),
            cut in any::<prop::sample::Index>(),
            insert in prop::sample::select(vec![" ", "0", "-", ",", "\"", "}", "{", "1", "\\", "null", ",\"x\":1"]),
        ) {
            let bytes = s.encode();
            prop_assert_eq!(canonical::decode(&bytes), Some(s));
            let mut changed = bytes.clone();
            let at = cut.index(changed.len() + 1);
            changed.splice(at..at, insert.bytes());
            let read = canonical::decode(&changed);
            prop_assert!(
                read.is_none() || read == serde_read(&changed),
                "{}",
                String::from_utf8_lossy(&changed)
            );
        }
    }

    #[test]
    fn the_canonical_reader_leaves_other_shapes_to_serde() {
        let spaced = br#"{"v": 1, "generation": 2, "harnesses": {}}"#;
        assert_eq!(canonical::decode(spaced), None);
        assert_eq!(PersistedState::decode(spaced).unwrap().generation, 2);
        let twice = br#"{"v":1,"generation":2,"harnesses":{},"harnesses":{}}"#;
        assert_eq!(canonical::decode(twice), None);
        assert!(PersistedState::decode(twice).is_err());
        let least = br#"{"v":1,"generation":0,"harnesses":{"a":{"enabled":true,"pinned":false,"failed":false,"restarts":0,"consecutive_failures":0,"runs":0,"reserved_runs":0,"last_exit":{"status":{"code":-2147483648},"forced":true}}}}"#;
        assert_eq!(canonical::decode(least), serde_read(least));
        assert!(canonical::decode(least).is_some());
    }

    #[test]
    fn round_trips_and_refuses_newer_versions() {
        let mut s = PersistedState { v: STATE_VERSION, generation: 3, ..Default::default() };
        s.harnesses.insert(Id::new("a").unwrap(), Durable { enabled: true, ..Default::default() });
        assert_eq!(PersistedState::decode(&s.encode()).unwrap(), s);
        let newer = String::from_utf8(s.encode()).unwrap().replace("\"v\":1", "\"v\":9");
        assert!(PersistedState::decode(newer.as_bytes()).unwrap_err().reason.contains("field v"));
        assert!(PersistedState::decode(b"{\n  \"v\": 1,").unwrap_err().reason.contains("line 2"));
    }
}
