//! The filesystem conformance suite: one test body run against the simulated and the real
//! filesystem, so the simulator cannot drift from the kernel on the cases both can express,
//! plus the crash cases only the simulator can stage (docs/SIMULATION.md, the fault model).

use harn::os::fs::RealFs;
use harn_core::atomic::atomic_replace;
use harn_core::env::{Fs, FsErrorKind};
use harn_core::journal::{self, JournalWriter};
use harn_core::time::WallTime;
use harn_sim::entropy::SeededEntropy;
use harn_sim::fs::SimFs;
use serde_json::json;

const DIR: &str = ".harnery/g";
const NONE: [&str; 0] = [];

fn conformance<F: Fs>(fs: &mut F) {
    basic_calls(fs);
    replace_by_rename(fs);
    listing_removal_and_locks(fs);
    journal_on_top(fs);
    atomic_replace_on_top(fs);
}

fn basic_calls<F: Fs>(fs: &mut F) {
    fs.create_dir_all(DIR).unwrap();
    fs.create_dir_all(DIR).unwrap();
    assert_eq!(fs.list(".harnery").unwrap(), ["g"]);
    assert_eq!(fs.list(".harnery/none").unwrap(), NONE);
    assert_eq!(fs.read(".harnery/g/missing").unwrap(), None);
    assert_eq!(fs.read(".harnery/none/missing").unwrap(), None);
    let kind = |r: Result<(), harn_core::env::FsError>| r.unwrap_err().kind;
    assert_eq!(kind(fs.append(".harnery/g/missing", b"x")), FsErrorKind::NotFound);
    assert_eq!(kind(fs.truncate(".harnery/g/missing", 0)), FsErrorKind::NotFound);
    assert_eq!(kind(fs.create_new(".harnery/none/f", b"x")), FsErrorKind::NotFound);

    fs.create_new(".harnery/g/b", b"bee").unwrap();
    assert_eq!(kind(fs.create_new(".harnery/g/b", b"again")), FsErrorKind::AlreadyExists);
    assert_eq!(fs.read(".harnery/g/b").unwrap().unwrap(), b"bee");
    fs.append(".harnery/g/b", b"-1").unwrap();
    fs.append(".harnery/g/b", b"-2").unwrap();
    assert_eq!(fs.read(".harnery/g/b").unwrap().unwrap(), b"bee-1-2");
    fs.truncate(".harnery/g/b", 5).unwrap();
    fs.sync_file(".harnery/g/b").unwrap();
    assert_eq!(fs.read(".harnery/g/b").unwrap().unwrap(), b"bee-1");
    fs.sync_dir(DIR).unwrap();
    fs.sync_dir("").unwrap();
}

fn replace_by_rename<F: Fs>(fs: &mut F) {
    fs.create_new(".harnery/g/a", b"old").unwrap();
    fs.write_temp(".harnery/g/a.tmp", b"a longer draft").unwrap();
    fs.write_temp(".harnery/g/a.tmp", b"new").unwrap(); // Truncates what was there.
    fs.sync_file(".harnery/g/a.tmp").unwrap();
    fs.rename(".harnery/g/a.tmp", ".harnery/g/a").unwrap();
    fs.sync_dir(DIR).unwrap();
    assert_eq!(fs.read(".harnery/g/a").unwrap().unwrap(), b"new");
    assert_eq!(fs.read(".harnery/g/a.tmp").unwrap(), None);
    let err = fs.rename(".harnery/g/a.tmp", ".harnery/g/a").unwrap_err();
    assert_eq!(err.kind, FsErrorKind::NotFound);
}

fn listing_removal_and_locks<F: Fs>(fs: &mut F) {
    for name in ["c", "B", "a-1", "_z"] {
        fs.create_new(&format!("{DIR}/{name}"), b"").unwrap();
    }
    assert_eq!(fs.list(DIR).unwrap(), ["B", "_z", "a", "a-1", "b", "c"], "sorted by bytes");
    fs.remove(".harnery/g/c").unwrap();
    fs.remove(".harnery/g/c").unwrap(); // Already gone is fine.
    assert_eq!(fs.read(".harnery/g/c").unwrap(), None);
    assert_eq!(fs.list(DIR).unwrap(), ["B", "_z", "a", "a-1", "b"]);

    fs.create_dir_all(".harnery/locks").unwrap();
    assert!(fs.try_lock(".harnery/locks/daemon").unwrap());
    assert!(!fs.try_lock(".harnery/locks/daemon").unwrap());
    assert!(fs.try_lock(".harnery/locks/other").unwrap());
    assert_eq!(fs.list(".harnery/locks").unwrap(), ["daemon", "other"]);
}

fn journal_on_top<F: Fs>(fs: &mut F) {
    let path = ".harnery/g/events.jsonl";
    let (mut writer, read) = JournalWriter::open(fs, path).unwrap();
    assert!(read.records.is_empty());
    let ts = WallTime(1_767_225_600_000);
    let first = writer.append(fs, ts, &[json!({"kind": "created"}), json!({"kind": "ticked"})]);
    assert_eq!(first.unwrap(), 1..=2);
    assert_eq!(writer.append(fs, ts, &[json!({"kind": "ticked"})]).unwrap(), 3..=3);

    // A crash mid-write leaves a partial line; the next writer cuts it and carries on.
    let partial = br#"{"v":1,"seq":4,"ts":17672"#;
    fs.append(path, partial).unwrap();
    let (mut writer, read) = JournalWriter::open(fs, path).unwrap();
    assert_eq!((read.records.len(), read.torn_tail_bytes), (3, partial.len() as u64));
    assert_eq!(fs.read(path).unwrap().unwrap().len() as u64, read.valid_len);
    assert_eq!(writer.append(fs, ts, &[json!({"kind": "done"})]).unwrap(), 4..=4);
    let read = journal::parse(path, &fs.read(path).unwrap().unwrap()).unwrap();
    let kinds: Vec<_> = read.records.iter().map(|r| r.body["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["created", "ticked", "ticked", "done"]);
}

fn atomic_replace_on_top<F: Fs>(fs: &mut F) {
    let path = ".harnery/g/status.json";
    atomic_replace(fs, path, br#"{"state":"starting"}"#).unwrap();
    atomic_replace(fs, path, br#"{"state":"up"}"#).unwrap();
    assert_eq!(fs.read(path).unwrap().unwrap(), br#"{"state":"up"}"#);
    assert!(!fs.list(DIR).unwrap().iter().any(|n| n.ends_with(".tmp")));
}

#[test]
fn the_simulated_filesystem_conforms() {
    conformance(&mut SimFs::new());
}

#[test]
fn the_real_filesystem_conforms() {
    let root = tempfile::TempDir::new().unwrap();
    conformance(&mut RealFs::new(root.path()));
}

/// A filesystem with `.harnery/g` and one fully synced file `a` holding `old`.
fn synced_sim() -> SimFs {
    let mut fs = SimFs::new();
    fs.create_dir_all(DIR).unwrap();
    fs.create_new(".harnery/g/a", b"old").unwrap();
    fs.sync_file(".harnery/g/a").unwrap();
    fs.sync_dir(DIR).unwrap();
    fs
}

#[test]
fn a_crash_keeps_synced_bytes_and_loses_or_tears_the_rest() {
    let mut torn = 0;
    for seed in 0..64 {
        let mut fs = synced_sim();
        fs.append(".harnery/g/a", b"+unsynced").unwrap();
        fs.write_temp(".harnery/g/b.tmp", b"new").unwrap();
        fs.sync_file(".harnery/g/b.tmp").unwrap();
        fs.rename(".harnery/g/b.tmp", ".harnery/g/a2").unwrap();
        fs.crash(&mut SeededEntropy::new(seed));

        let a = fs.read(".harnery/g/a").unwrap().unwrap();
        assert!(b"old+unsynced".starts_with(&a) && a.starts_with(b"old"), "{a:?}");
        torn += usize::from(a.len() > 3 && a.len() < 12);
        assert_eq!(fs.read(".harnery/g/a2").unwrap(), None, "the rename was never synced");
        assert_eq!(fs.list(DIR).unwrap(), ["a"]);
    }
    assert!(torn > 0, "some seed tears the append");
}

#[test]
fn atomic_replace_never_shows_a_partial_file_whatever_step_crashes() {
    for step in 0..=4 {
        for seed in 0..8 {
            let mut fs = synced_sim();
            fs.crash_after(step);
            let done = atomic_replace(&mut fs, ".harnery/g/a", b"replacement").is_ok();
            assert_eq!(done, step == 4);
            fs.crash(&mut SeededEntropy::new(seed));
            let a = fs.read(".harnery/g/a").unwrap().unwrap();
            assert!(a == b"old" || a == b"replacement", "step {step}: {a:?}");
            if done {
                assert_eq!(a, b"replacement");
            }
        }
    }
}

#[test]
fn a_journal_torn_by_a_crash_reopens_cleanly() {
    let path = ".harnery/g/events.jsonl";
    let mut outcomes = [0usize; 3]; // Lost, torn, kept whole.
    for seed in 0..200 {
        let mut fs = synced_sim();
        let (mut writer, _) = JournalWriter::open(&mut fs, path).unwrap();
        let bodies: Vec<_> = (1..=3).map(|n| json!({"kind": "step", "n": n})).collect();
        assert_eq!(writer.append(&mut fs, WallTime(1), &bodies).unwrap(), 1..=3);
        // The append goes through, its sync is the crash.
        fs.crash_after(1);
        let err = writer.append(&mut fs, WallTime(2), &bodies[..2]).unwrap_err();
        assert_eq!(err.kind, FsErrorKind::Crashed);
        fs.crash(&mut SeededEntropy::new(seed));

        let (mut writer, read) = JournalWriter::open(&mut fs, path).unwrap();
        assert!((3..=5).contains(&read.records.len()), "every synced record is intact");
        for (record, n) in read.records.iter().zip([1, 2, 3, 1, 2]) {
            assert_eq!(record.body["n"], n);
        }
        outcomes[if read.torn_tail_bytes > 0 {
            1
        } else if read.records.len() == 5 {
            2
        } else {
            0
        }] += 1;
        assert_eq!(fs.durable_read(path).unwrap().len() as u64, read.valid_len, "cut is synced");
        let next = writer.append(&mut fs, WallTime(3), &[json!({"kind": "after"})]).unwrap();
        assert_eq!(*next.start(), read.records.len() as u64 + 1);
        let bytes = fs.durable_read(path).unwrap();
        assert_eq!(journal::parse(path, &bytes).unwrap().torn_tail_bytes, 0);
    }
    assert!(outcomes.iter().all(|&n| n > 0), "lost, torn and whole all happen: {outcomes:?}");
}

/// The committed fuzz corpus holds what its file names promise, so it keeps exercising the
/// valid, torn and corrupt paths of the reader.
#[test]
fn the_journal_fuzz_corpus_is_what_its_names_say() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/journal_reader");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        let read = journal::parse(&name, &bytes);
        match name.split('-').next().unwrap() {
            "valid" => assert_eq!(read.unwrap().torn_tail_bytes, 0, "{name}"),
            "torn" => assert!(read.unwrap().torn_tail_bytes > 0, "{name}"),
            "corrupt" => assert!(read.is_err(), "{name}"),
            other => panic!("{name}: unknown corpus class {other}"),
        }
        journal::fuzz_reader(&bytes);
        seen += 1;
    }
    assert!(seen >= 5, "the corpus has only {seen} files");
}
