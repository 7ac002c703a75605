//! Tests of `journal`.

use super::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn journal(n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for seq in 1..=n {
        encode_line_into(
            &mut out,
            seq,
            WallTime(1_700_000_000_000 + seq as i64),
            &json!({"n": seq}),
        );
    }
    out
}

/// A line with a correct checksum around arbitrary content, e.g. `{"v":2,...,`.
fn checksummed(covered: &str) -> Vec<u8> {
    format!("{covered}\"crc\":\"{:08x}\"}}\n", crc32fast::hash(covered.as_bytes())).into_bytes()
}

fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i + 1));
    starts.pop();
    starts
}

#[test]
fn encodes_the_documented_layout() {
    // The exact line of the module documentation, checksum included (zlib's CRC-32).
    let line = encode_line(7, WallTime(1_767_225_600_000), &json!({"kind": "started"}));
    let doc = "{\"v\":1,\"seq\":7,\"ts\":1767225600000,\"body\":{\"kind\":\"started\"},\"crc\":\"9d9be5d8\"}\n";
    assert_eq!(std::str::from_utf8(&line).unwrap(), doc);
    let negative = encode_line(1, WallTime(-5), &json!(null));
    assert_eq!(negative, checksummed(r#"{"v":1,"seq":1,"ts":-5,"body":null,"#));
}

#[test]
fn round_trips_records() {
    let bytes = journal(3);
    let read = parse("events.jsonl", &bytes).unwrap();
    assert_eq!(read.valid_len, bytes.len() as u64);
    assert_eq!(read.torn_tail_bytes, 0);
    assert_eq!(read.next_seq(), 4);
    for (i, r) in read.records.iter().enumerate() {
        assert_eq!((r.v, r.seq), (1, i as u64 + 1));
        assert_eq!(r.ts, WallTime(1_700_000_000_000 + i as i64 + 1));
        assert_eq!(r.body, json!({"n": i + 1}));
    }
}

#[test]
fn typed_bodies_decode_directly() {
    #[derive(Deserialize, Debug, PartialEq)]
    struct N {
        n: u64,
    }
    let read = parse_as::<N>("events.jsonl", &journal(2)).unwrap();
    assert_eq!(read.records[1].body, N { n: 2 });
}

#[test]
fn empty_file_is_an_empty_journal() {
    let read = parse("events.jsonl", b"").unwrap();
    assert!(read.records.is_empty());
    assert_eq!((read.valid_len, read.torn_tail_bytes, read.next_seq()), (0, 0, 1));
}

#[test]
fn a_final_line_cut_at_any_byte_is_a_torn_tail() {
    let bytes = journal(3);
    let last = *line_starts(&bytes).last().unwrap();
    for cut in last..bytes.len() {
        let read = parse("events.jsonl", &bytes[..cut]).unwrap();
        assert_eq!(read.records.len(), 2, "cut at {cut}");
        assert_eq!(read.valid_len, last as u64);
        assert_eq!(read.torn_tail_bytes, (cut - last) as u64);
    }
}

#[test]
fn a_complete_final_line_that_fails_is_corruption_not_a_torn_tail() {
    let mut bytes = journal(3);
    let last = *line_starts(&bytes).last().unwrap();
    for at in last..bytes.len() - 1 {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        let err = parse("events.jsonl", &damaged).unwrap_err();
        assert_eq!(err.line, 3, "flipped byte {at}: {err}");
        let scan = scan_tail("events.jsonl", &damaged).unwrap_err();
        assert_eq!(scan.line, 3, "the writer's scan refuses it too: {scan}");
    }
    // A zero-filled final block without a newline, as some filesystems leave where an
    // append was cut by a crash, is a torn tail.
    bytes.extend_from_slice(&[0; 40]);
    let read = parse("events.jsonl", &bytes).unwrap();
    assert_eq!((read.records.len(), read.torn_tail_bytes), (3, 40));
}

#[test]
fn corruption_in_a_middle_line_names_file_and_line() {
    let bytes = journal(4);
    let starts = line_starts(&bytes);
    for line in 0..3 {
        let mut damaged = bytes.clone();
        damaged[starts[line] + 12] ^= 0x04;
        let err = parse("events.jsonl", &damaged).unwrap_err();
        assert_eq!(err.line, line as u64 + 1);
        assert_eq!(err.reason, JournalErrorReason::ChecksumMismatch);
        assert_eq!(err.to_string(), format!("events.jsonl:{}: checksum mismatch", line + 1));
    }
    let mut cut = bytes.clone();
    cut.drain(starts[1] + 3..starts[2] - 1); // Line 2 loses its middle but keeps its newline.
    let err = parse("g/events.jsonl", &cut).unwrap_err();
    assert_eq!(err.to_string(), "g/events.jsonl:2: missing checksum");
}

#[test]
fn a_seq_gap_or_repeat_is_corruption_even_on_the_last_line() {
    let ts = WallTime(0);
    let mut bytes = encode_line(1, ts, &json!(1));
    bytes.extend(encode_line(2, ts, &json!(2)));
    let mut gap = bytes.clone();
    gap.extend(encode_line(4, ts, &json!(4)));
    let err = parse("events.jsonl", &gap).unwrap_err();
    assert_eq!((err.line, err.reason), (3, JournalErrorReason::BadSeq { expected: 3, found: 4 }));
    let mut repeat = bytes.clone();
    repeat.extend(encode_line(2, ts, &json!(2)));
    assert_eq!(
        parse("events.jsonl", &repeat).unwrap_err().to_string(),
        "events.jsonl:3: seq 2 where 3 was expected"
    );
    let err = parse("events.jsonl", &encode_line(2, ts, &json!(0))).unwrap_err();
    assert_eq!(err.line, 1);
}

#[test]
fn checksummed_lines_that_are_not_records_are_corruption() {
    let cases = [
        (r#"{"v":2,"seq":1,"ts":0,"body":{},"#, "schema version 2"),
        (r#"{"v":0,"seq":1,"ts":0,"body":{},"#, "schema version 0"),
        (r#"{"v":1,"seq":1,"body":{},"#, "missing field `ts`"),
        (r#"{"v":1,"seq":"1","ts":0,"body":{},"#, "bad record"),
        (r#"{"v":1,"seq":1,"ts":0,"body":{}],"#, "bad record"),
        (r#"{"v":1,"seq":1,"seq":1,"ts":0,"body":{},"#, "duplicate field"),
    ];
    for (covered, needle) in cases {
        let mut bytes = checksummed(covered);
        bytes.extend(encode_line(2, WallTime(0), &json!(null))); // Not the final line.
        let err = parse("events.jsonl", &bytes).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
    }
}

#[test]
fn a_newer_version_with_an_unknown_body_says_so() {
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct N {
        n: u64,
    }
    let bytes = checksummed(r#"{"v":9,"seq":1,"ts":0,"body":{"renamed":1},"#);
    let err = parse_as::<N>("events.jsonl", &bytes).unwrap_err();
    assert_eq!(err.reason, JournalErrorReason::UnsupportedVersion(9));
}

#[test]
fn the_fuzz_body_accepts_known_shapes() {
    let bytes = journal(5);
    for cut in 0..=bytes.len() {
        fuzz_reader(&bytes[..cut]);
    }
    fuzz_reader(b"\n\n\n");
    fuzz_reader(&checksummed(r#"{"v":1,"seq":1,"ts":0,"body":{},"#));
}

/// An in-memory `Fs` that logs every call, for checking the writer's call sequence.
#[derive(Default)]
struct LogFs {
    files: BTreeMap<String, Vec<u8>>,
    calls: Vec<String>,
    full: bool,
}

impl Fs for LogFs {
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        self.calls.push(format!("read {path}"));
        Ok(self.files.get(path).cloned())
    }
    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError> {
        self.calls.push(format!("list {dir}"));
        let prefix = format!("{dir}/");
        let names = self.files.keys().filter_map(|p| p.strip_prefix(&prefix));
        Ok(names.map(str::to_owned).collect())
    }
    fn create_dir_all(&mut self, _: &str) -> Result<(), FsError> {
        unreachable!("the journal never creates directories")
    }
    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.calls.push(format!("create_new {path}"));
        assert!(self.files.insert(path.to_owned(), bytes.to_vec()).is_none());
        Ok(())
    }
    fn write_temp(&mut self, _: &str, _: &[u8]) -> Result<(), FsError> {
        unreachable!("the journal never writes temporary files")
    }
    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.calls.push(format!("append {path}"));
        if self.full {
            return Err(FsError::new(FsErrorKind::NoSpace, path, ""));
        }
        self.files.get_mut(path).unwrap().extend_from_slice(bytes);
        Ok(())
    }
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError> {
        self.calls.push(format!("truncate {path} {len}"));
        self.files.get_mut(path).unwrap().truncate(len as usize);
        Ok(())
    }
    fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
        self.calls.push(format!("sync_file {path}"));
        Ok(())
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        self.calls.push(format!("rename {from} {to}"));
        let bytes = self.files.remove(from).unwrap();
        self.files.insert(to.to_owned(), bytes);
        Ok(())
    }
    fn sync_dir(&mut self, dir: &str) -> Result<(), FsError> {
        self.calls.push(format!("sync_dir {dir}"));
        Ok(())
    }
    fn remove(&mut self, path: &str) -> Result<(), FsError> {
        self.calls.push(format!("remove {path}"));
        self.files.remove(path).unwrap();
        Ok(())
    }
    fn try_lock(&mut self, _: &str) -> Result<bool, FsError> {
        unreachable!("the journal never locks")
    }
}

#[test]
fn writer_creates_then_appends_with_one_call_and_one_sync_each() {
    let mut fs = LogFs::default();
    let path = "g/events.jsonl";
    let (mut w, read) = JournalWriter::open(&mut fs, path).unwrap();
    assert!(read.records.is_empty());
    assert_eq!(w.append(&mut fs, WallTime(1), &[json!(1), json!(2)]).unwrap(), 1..=2);
    assert_eq!(w.append::<serde_json::Value>(&mut fs, WallTime(2), &[]).unwrap().count(), 0);
    assert_eq!(w.append(&mut fs, WallTime(3), &[json!(3)]).unwrap(), 3..=3);
    assert_eq!(w.next_seq(), 4);
    let calls = ["read", "create_new", "sync_file", "sync_dir g", "append", "sync_file"];
    let logged: Vec<&str> =
        fs.calls.iter().map(|c| c.strip_suffix(" g/events.jsonl").unwrap_or(c)).collect();
    assert_eq!(logged, calls);
    let read = parse(path, &fs.files[path]).unwrap();
    assert_eq!(
        read.records.iter().map(|r| r.body.clone()).collect::<Vec<Value>>(),
        [json!(1), json!(2), json!(3)]
    );
    assert_eq!(w.len(), fs.files[path].len() as u64);
}

#[test]
fn opening_truncates_a_torn_tail_and_continues_the_seqs() {
    let mut fs = LogFs::default();
    let mut bytes = journal(2);
    bytes.extend_from_slice(br#"{"v":1,"seq":3,"ts"#);
    fs.files.insert("events.jsonl".into(), bytes);
    let (mut w, read) = JournalWriter::open(&mut fs, "events.jsonl").unwrap();
    assert_eq!(read.records.len(), 2);
    assert_eq!(
        fs.calls[1..],
        [format!("truncate events.jsonl {}", read.valid_len), "sync_file events.jsonl".into()]
    );
    assert_eq!(w.append(&mut fs, WallTime(9), &[json!("x")]).unwrap(), 3..=3);
    assert_eq!(parse("events.jsonl", &fs.files["events.jsonl"]).unwrap().records.len(), 3);
}

#[test]
fn a_full_journal_rotates_keeping_whole_files_and_dropping_the_oldest() {
    let mut fs = LogFs::default();
    let path = "g/events.jsonl";
    let cap = Retention { max_file_bytes: 1, kept: 2 };
    let (mut w, _) = JournalWriter::open(&mut fs, path).unwrap();
    for round in 0..4 {
        assert!(!w.rotate_if_full(&mut fs, Retention::default()).unwrap() || round > 0);
        w.append(&mut fs, WallTime(round), &[json!(round)]).unwrap();
        fs.calls.clear();
        assert!(w.rotate_if_full(&mut fs, cap).unwrap());
        // The renames are synced before the next line may be written.
        assert_eq!(fs.calls.last().unwrap(), "sync_dir g");
        assert_eq!(w.next_seq(), 1, "a new file starts at line 1");
        assert!(!w.rotate_if_full(&mut fs, cap).unwrap(), "an empty file never rotates");
    }
    let names: Vec<&String> = fs.files.keys().collect();
    assert_eq!(names, ["g/events.jsonl.1", "g/events.jsonl.2"], "the oldest two were dropped");
    for (file, body) in [("g/events.jsonl.1", 3), ("g/events.jsonl.2", 2)] {
        let read = parse(file, &fs.files[file]).unwrap();
        assert_eq!(read.records[0].body, json!(body), "{file}");
        assert_eq!(read.records[0].seq, 1, "{file} is a whole journal");
    }
}

#[test]
fn opening_a_corrupt_journal_fails_and_touches_nothing() {
    let mut fs = LogFs::default();
    let mut bytes = journal(3);
    bytes[5] = b'x';
    fs.files.insert("events.jsonl".into(), bytes.clone());
    let err = JournalWriter::open(&mut fs, "events.jsonl").unwrap_err();
    assert_eq!(err.to_string(), "events.jsonl:1: checksum mismatch");
    assert_eq!(fs.calls, ["read events.jsonl"]);
    assert_eq!(fs.files["events.jsonl"], bytes);
}

#[test]
fn a_failed_append_poisons_the_writer() {
    let mut fs = LogFs::default();
    fs.files.insert("events.jsonl".into(), Vec::new());
    let (mut w, _) = JournalWriter::open(&mut fs, "events.jsonl").unwrap();
    fs.full = true;
    assert_eq!(w.append(&mut fs, WallTime(0), &[json!(1)]).unwrap_err().kind, FsErrorKind::NoSpace);
    fs.full = false;
    let err = w.append(&mut fs, WallTime(0), &[json!(1)]).unwrap_err();
    assert_eq!(err.kind, FsErrorKind::NoSpace);
    assert_eq!(fs.calls.iter().filter(|c| c.starts_with("append")).count(), 1);
    assert_eq!(w.next_seq(), 1);
}

#[test]
fn a_writer_recovered_after_a_full_disk_cuts_the_torn_part_and_appends_again() {
    let mut fs = LogFs::default();
    fs.files.insert("events.jsonl".into(), Vec::new());
    let (mut w, _) = JournalWriter::open(&mut fs, "events.jsonl").unwrap();
    w.append(&mut fs, WallTime(0), &[json!(1)]).unwrap();
    let whole = fs.files["events.jsonl"].clone();
    // Part of a line reached the file before the disk was full.
    fs.files.get_mut("events.jsonl").unwrap().extend_from_slice(b"{\"seq\":2,");
    fs.full = true;
    assert!(w.append(&mut fs, WallTime(0), &[json!(2)]).is_err());
    fs.full = false;
    w.recover(&mut fs).unwrap();
    assert_eq!(fs.files["events.jsonl"], whole, "cut back to its last whole record");
    assert_eq!(w.append(&mut fs, WallTime(0), &[json!(3)]).unwrap(), 2..=2);
    let read = parse("events.jsonl", &fs.files["events.jsonl"]).unwrap();
    assert_eq!(read.records.len(), 2);
}

fn body_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".*".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".*", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_bodies_round_trip(bodies in prop::collection::vec((body_strategy(), any::<i64>()), 0..8)) {
        let mut bytes = Vec::new();
        for (i, (body, ts)) in bodies.iter().enumerate() {
            encode_line_into(&mut bytes, i as u64 + 1, WallTime(*ts), body);
        }
        let read = parse("events.jsonl", &bytes).unwrap();
        prop_assert_eq!(read.valid_len, bytes.len() as u64);
        prop_assert_eq!(read.records.len(), bodies.len());
        for (r, (body, ts)) in read.records.iter().zip(&bodies) {
            prop_assert_eq!(&r.body, body);
            prop_assert_eq!(r.ts, WallTime(*ts));
        }
        fuzz_reader(&bytes);
    }

    #[test]
    fn damaged_journals_never_fool_the_reader(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4), cut in any::<prop::sample::Index>()) {
        let mut bytes = journal(4);
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        let keep = cut.index(bytes.len() + 1);
        fuzz_reader(&bytes[..keep]);
    }

    #[test]
    fn a_streaming_read_and_a_tail_scan_agree_with_the_whole_read(
        n in 0u64..12,
        flip in prop::option::of((any::<prop::sample::Index>(), 1u8..255)),
        cut in any::<prop::sample::Index>(),
        chunk in 1usize..80,
    ) {
        let mut bytes = journal(n);
        if let Some((at, x)) = flip {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
        }
        let bytes = bytes[..cut.index(bytes.len() + 1)].to_vec();
        let whole = parse("j", &bytes);
        let mut fs = LogFs::default();
        fs.files.insert("j".into(), bytes.clone());
        let mut seen = Vec::new();
        let streamed = read_each_in::<serde_json::Value, ()>(&mut fs, "j", "j", chunk, |r| {
            seen.push(r);
            Ok(())
        });
        match (&whole, &streamed) {
            (Ok(read), Ok(Some((valid, torn)))) => {
                prop_assert_eq!(&read.records, &seen);
                prop_assert_eq!((read.valid_len, read.torn_tail_bytes), (*valid, *torn));
            }
            (Err(e), Err(EachError::Corrupt(s))) => prop_assert_eq!(e, s),
            (w, s) => prop_assert!(false, "whole {:?}, streamed {:?}", w, s.as_ref().err()),
        }
        let tail = scan_file_tail_in(&mut fs, "j", chunk as u64).map_err(|e| e.to_string());
        let direct = scan_tail("j", &bytes).map(Some).map_err(|e| e.to_string());
        prop_assert_eq!(tail, direct);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzz_reader(&bytes);
    }
}

mod tail_tests {
    use super::super::*;
    use serde_json::json;

    fn journal(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for seq in 1..=n {
            encode_line_into(&mut out, seq, WallTime(seq as i64), &json!({"n": seq}));
        }
        out
    }

    #[test]
    fn scan_tail_agrees_with_parse_at_every_cut() {
        let full = journal(4);
        for cut in 0..=full.len() {
            let bytes = &full[..cut];
            let read = parse("j", bytes).unwrap();
            let tail = scan_tail("j", bytes).unwrap();
            assert_eq!(
                (tail.valid_len, tail.next_seq),
                (read.valid_len, read.next_seq()),
                "cut {cut}"
            );
            assert_eq!(tail.torn_tail_bytes, read.torn_tail_bytes);
        }
    }

    #[test]
    fn scan_tail_cuts_only_an_unfinished_line_and_refuses_a_bad_complete_one() {
        let mut bytes = journal(3);
        bytes.extend_from_slice(b"{\"v\":1,\"se");
        let tail = scan_tail("j", &bytes).unwrap();
        assert_eq!((tail.next_seq, tail.torn_tail_bytes), (4, 10));
        let last = bytes.len() - 10 - 3;
        bytes[last] ^= 1; // Damage the last complete line's checksum digits.
        let err = scan_tail("j", &bytes).unwrap_err();
        assert_eq!(err.line, 3);
    }

    #[test]
    fn scan_tail_refuses_a_final_line_whose_seq_is_not_its_line_number() {
        let mut bytes = journal(2);
        encode_line_into(&mut bytes, 7, WallTime(0), &json!({}));
        let err = scan_tail("events.jsonl", &bytes).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.to_string().starts_with("events.jsonl:3:"), "{err}");
    }

    #[test]
    fn continuing_parse_verifies_only_the_appended_part() {
        let full = journal(5);
        let head = parse("j", &full).unwrap();
        let cut = {
            let first_two = journal(2);
            first_two.len()
        };
        let rest = parse_continuing_as::<serde_json::Value>("j", &full[cut..], 3).unwrap();
        assert_eq!(rest.records.len(), 3);
        assert_eq!(rest.next_seq(), head.next_seq());
        assert!(parse_continuing_as::<serde_json::Value>("j", &full[cut..], 4).is_err());
    }
}

mod overflow_tests {
    use super::super::*;

    #[test]
    fn a_final_seq_at_the_maximum_is_refused_not_wrapped() {
        // The tail scan checks only the last two lines, so these pass its sequence check.
        let mut bytes = Vec::new();
        encode_line_into(&mut bytes, u64::MAX - 1, WallTime(0), &serde_json::json!({}));
        encode_line_into(&mut bytes, u64::MAX, WallTime(0), &serde_json::json!({}));
        let err = scan_tail("j", &bytes).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.to_string().contains("maximum"), "{err}");
    }
}

/// The fields of a line as the fast path read them, for comparison with serde's.
fn fast(line: &[u8]) -> Option<(u64, u64, i64, Value)> {
    canonical_line::<Value>(line).map(|l| (l.v, l.seq, l.ts.0, l.body))
}

fn general(line: &[u8]) -> Option<(u64, u64, i64, Value)> {
    general_line::<Value>(line).ok().map(|l| (l.v, l.seq, l.ts.0, l.body))
}

#[test]
fn the_fast_path_reads_what_harn_writes_and_leaves_the_rest_to_serde() {
    let least = encode_line(1, WallTime(i64::MIN), &json!(null));
    assert_eq!(fast(&least[..least.len() - 1]), Some((1, 1, i64::MIN, json!(null))));
    let written = encode_line(7, WallTime(-12), &json!({"a": [1, "x,\"crc\":"]}));
    let line = &written[..written.len() - 1];
    assert_eq!(fast(line), Some((1, 7, -12, json!({"a": [1, "x,\"crc\":"]}))));
    assert_eq!(fast(line), general(line));
    let odd = [
        r#"{"v":01,"seq":1,"ts":0,"body":1,"crc":"00000000"}"#,
        r#"{"v":1,"seq":1,"ts":-0,"body":1,"crc":"00000000"}"#,
        r#"{"v":1, "seq":1,"ts":0,"body":1,"crc":"00000000"}"#,
        r#"{"v":1,"seq":1,"ts":0,"body": 1 ,"crc":"00000000"}"#,
        r#"{"v":1,"seq":1,"ts":0,"body":1,"crc":"0000000g"}"#,
        r#"{"v":1,"seq":1,"ts":0,"body":1,"x":2,"crc":"00000000"}"#,
        r#"{"v":1,"seq":1,"ts":0,"body":1,"seq":2,"crc":"00000000"}"#,
        r#"{"v":1,"seq":18446744073709551616,"ts":0,"body":1,"crc":"00000000"}"#,
        r#"{"v":1,"seq":1,"ts":9223372036854775808,"body":1,"crc":"00000000"}"#,
        r#"{"v":1,"seq":1.0,"ts":0,"body":1,"crc":"00000000"}"#,
        r#"{"seq":1,"v":1,"ts":0,"body":1,"crc":"00000000"}"#,
    ];
    for line in odd {
        let fast = fast(line.as_bytes());
        assert!(fast.is_none() || fast == general(line.as_bytes()), "{line}");
    }
    // Readable by serde, though not as harn writes it: read the same as ever.
    let spaced = r#"{"v":1, "seq":1,"ts":0,"body":1,"crc":"00000000"}"#;
    assert_eq!(general(spaced.as_bytes()), Some((1, 1, 0, json!(1))));
}

proptest! {
    /// Whatever the fast path reads, serde reads the same; what harn writes, it reads.
    #[test]
    fn the_fast_path_never_disagrees_with_serde(
        seq in 1u64..u64::MAX,
        ts in any::<i64>(),
        body in prop_oneof![
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,12}".prop_map(|s| json!({"s": s})),
            prop::collection::vec(any::<bool>(), 0..4).prop_map(|b| json!(b)),
        ],
        cut in any::<prop::sample::Index>(),
        insert in prop::sample::select(vec![" ", "0", "-", ",", "\"", "}", "1", ".", "e"]),
    ) {
        let written = encode_line(seq, WallTime(ts), &body);
        let line = &written[..written.len() - 1];
        prop_assert_eq!(fast(line), Some((u64::from(JOURNAL_VERSION), seq, ts, body)));
        let mut changed = line.to_vec();
        let at = cut.index(changed.len() + 1);
        changed.splice(at..at, insert.bytes());
        let read = fast(&changed);
        prop_assert!(read.is_none() || read == general(&changed), "{}", String::from_utf8_lossy(&changed));
    }
}

proptest! {
    #[test]
    fn decimals_are_written_as_rust_writes_them(n in any::<u64>(), small in 0u64..1000) {
        for n in [n, small] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            prop_assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
        }
    }
}

#[test]
fn a_damaged_history_journal_is_set_aside_whole_and_begun_anew() {
    let mut fs = LogFs::default();
    let mut bytes = journal(3);
    let damaged = bytes.clone();
    bytes.extend_from_slice(b"not a record\n");
    let damaged = [&damaged[..], b"not a record\n"].concat();
    fs.files.insert("h/ledger.jsonl".into(), bytes);
    let (mut w, aside) =
        JournalWriter::open_setting_aside(&mut fs, "h/ledger.jsonl", WallTime(77)).unwrap();
    let aside = aside.expect("the damage is reported");
    assert_eq!(aside.moved_to, "h/ledger.jsonl.damaged-77");
    assert!(aside.damage.contains("h/ledger.jsonl:4"), "{}", aside.damage);
    assert_eq!(fs.files["h/ledger.jsonl.damaged-77"], damaged, "kept byte for byte");
    let renamed = fs.calls.iter().position(|c| c.starts_with("rename")).unwrap();
    assert_eq!(fs.calls[renamed + 1], "sync_dir h", "the rename is durable before the new file");
    assert_eq!(w.append(&mut fs, WallTime(78), &[json!("x")]).unwrap(), 1..=1);
    // A whole journal is opened as it is.
    let (_, none) =
        JournalWriter::open_setting_aside(&mut fs, "h/ledger.jsonl", WallTime(79)).unwrap();
    assert_eq!(none, None);
}

#[test]
fn a_salvage_keeps_every_line_that_stands_on_its_own_and_names_the_rest() {
    let mut bytes = Vec::new();
    for n in 1..=4u64 {
        encode_line_into(&mut bytes, n, WallTime(0), &serde_json::json!({ "n": n }));
    }
    // The second line is garbage, the third is cut out, and a torn tail follows.
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let mut damaged = lines[0].to_vec();
    damaged.extend_from_slice(b"garbage\n");
    damaged.extend_from_slice(lines[3]);
    damaged.extend_from_slice(b"{\"v\":1,\"se");
    let s = salvage_as::<serde_json::Value>("o", &damaged);
    let kept: Vec<u64> = s.kept.iter().map(|b| b["n"].as_u64().unwrap()).collect();
    assert_eq!(kept, [1, 4]);
    assert_eq!(s.damaged.len(), 1);
    assert_eq!(s.damaged[0].line, 2);
    assert!(parse_as::<serde_json::Value>("o", &damaged).is_err());
}
