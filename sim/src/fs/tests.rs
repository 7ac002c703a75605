//! Tests of `fs`.

use super::*;
use crate::entropy::{ByteEntropy, SeededEntropy};
use proptest::prelude::*;

impl SimFs {
    /// Recomputes everything the fast paths keep incrementally and compares.
    fn check_invariants(&self) {
        let mut links: BTreeMap<Ino, u32> = BTreeMap::new();
        for (path, dir) in &self.dirs {
            let pending = dir.entries.values().filter(|e| e.is_pending()).filter_map(|e| e.current);
            let durable = dir.entries.values().filter_map(|e| e.durable);
            for node in durable.chain(pending) {
                match node {
                    Node::File(ino) => *links.entry(ino).or_default() += 1,
                    Node::Dir => {}
                }
            }
            assert_eq!(dir.pending, dir.entries.values().filter(|e| e.is_pending()).count());
            for (name, e) in &dir.entries {
                assert!(e.durable.is_some() || e.current.is_some(), "{name} names nothing");
                let Some(node) = e.durable else { continue };
                let child = if path.is_empty() { name.clone() } else { format!("{path}/{name}") };
                assert_eq!(node == Node::Dir, self.dirs.contains_key(&child), "{child}");
            }
        }
        assert_eq!(links.len(), self.inodes.len(), "every inode is named, no name dangles");
        for (ino, inode) in &self.inodes {
            assert_eq!(links[ino], inode.links);
            assert!(inode.common <= inode.data.len());
            assert!(inode.durable_bytes().len() == inode.durable_len());
        }
    }
}

/// Entropy that keeps nothing of an unsynced append.
fn keep_nothing() -> ByteEntropy<'static> {
    ByteEntropy::new(&[])
}

fn synced_file(fs: &mut SimFs, path: &str, bytes: &[u8]) {
    fs.create_new(path, bytes).unwrap();
    fs.sync_file(path).unwrap();
    fs.sync_dir(parent_dir(path)).unwrap();
}

#[test]
fn a_damaged_last_line_keeps_its_newline_and_survives_a_crash() {
    let mut fs = SimFs::new();
    let mut e = crate::entropy::SeededEntropy::new(3);
    fs.create_new("j", b"one\ntwo\n").unwrap();
    fs.sync_file("j").unwrap();
    fs.sync_dir("").unwrap();
    for _ in 0..50 {
        let damaged = fs.damage_last_line("j", &mut e).unwrap();
        assert_eq!(&damaged[..4], b"one\n");
        assert_eq!(damaged.len(), 8);
        assert_eq!(damaged.iter().filter(|&&b| b == b'\n').count(), 2);
        assert_ne!(&damaged[4..], b"two\n");
        fs.crash(&mut e);
        assert_eq!(fs.read("j").unwrap().unwrap(), damaged, "the damage is durable");
        fs.foreign_write("j", 4, b"two");
    }
    assert!(fs.damage_last_line("missing", &mut e).is_none());
}

#[test]
fn synced_bytes_survive_and_unsynced_appends_are_dropped() {
    let mut fs = SimFs::new();
    fs.create_dir_all("d").unwrap();
    synced_file(&mut fs, "d/j", b"one\n");
    fs.append("d/j", b"two\n").unwrap();
    assert_eq!(fs.read("d/j").unwrap().unwrap(), b"one\ntwo\n");
    assert_eq!(fs.durable_read("d/j").unwrap(), b"one\n");
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("d/j").unwrap().unwrap(), b"one\n");
    fs.check_invariants();
}

#[test]
fn a_crash_may_keep_any_prefix_of_an_unsynced_append() {
    for keep in 0..=4u8 {
        let mut fs = SimFs::new();
        synced_file(&mut fs, "j", b"ab");
        fs.append("j", b"cd").unwrap();
        fs.append("j", b"ef").unwrap();
        // Draw 2 selects a torn prefix; the next byte picks its length out of 0..=4.
        fs.crash(&mut ByteEntropy::new(&[2, keep]));
        assert_eq!(fs.read("j").unwrap().unwrap(), &b"abcdef"[..2 + keep as usize]);
        fs.check_invariants();
    }
    let mut fs = SimFs::new();
    synced_file(&mut fs, "j", b"ab");
    fs.append("j", b"cd").unwrap();
    fs.crash(&mut ByteEntropy::new(&[1])); // Draw 1 keeps the whole tail.
    assert_eq!(fs.read("j").unwrap().unwrap(), b"abcd");
    assert_eq!(fs.durable_read("j").unwrap(), b"abcd", "what a crash kept is durable");
}

#[test]
fn a_new_entry_needs_its_parent_synced() {
    let mut fs = SimFs::new();
    fs.create_dir_all("a/b").unwrap();
    fs.create_new("a/b/f", b"x").unwrap();
    fs.sync_file("a/b/f").unwrap();
    assert_eq!(fs.durable_read("a/b/f"), None);
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("a/b/f").unwrap(), None);
    assert_eq!(fs.list("a").unwrap(), ["b"], "directories are durable at once");
    synced_file(&mut fs, "a/b/f", b"x");
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("a/b/f").unwrap().unwrap(), b"x");
    fs.check_invariants();
}

#[test]
fn a_new_file_synced_only_by_its_directory_may_be_empty_or_torn() {
    let mut fs = SimFs::new();
    fs.create_new("f", b"hello").unwrap();
    fs.sync_dir("").unwrap();
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("f").unwrap().unwrap(), b"");
    fs.check_invariants();
}

#[test]
fn an_unsynced_rename_is_undone_by_a_crash() {
    let mut fs = SimFs::new();
    synced_file(&mut fs, "s", b"old");
    fs.write_temp("s.tmp", b"new").unwrap();
    fs.sync_file("s.tmp").unwrap();
    fs.rename("s.tmp", "s").unwrap();
    assert_eq!(fs.read("s").unwrap().unwrap(), b"new");
    assert_eq!(fs.list("").unwrap(), ["s"]);
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("s").unwrap().unwrap(), b"old");
    assert_eq!(fs.read("s.tmp").unwrap(), None);
    fs.check_invariants();

    fs.write_temp("s.tmp", b"new").unwrap();
    fs.sync_file("s.tmp").unwrap();
    fs.rename("s.tmp", "s").unwrap();
    fs.sync_dir("").unwrap();
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("s").unwrap().unwrap(), b"new");
    assert_eq!(fs.list("").unwrap(), ["s"]);
    fs.check_invariants();
}

#[test]
fn unsynced_removal_and_rewrites_come_back() {
    let mut fs = SimFs::new();
    synced_file(&mut fs, "a", b"alpha");
    synced_file(&mut fs, "b", b"beta");
    fs.remove("a").unwrap();
    fs.remove("a").unwrap(); // Missing is fine.
    fs.write_temp("b", b"B").unwrap();
    fs.append("b", b"!").unwrap();
    assert_eq!(fs.list("").unwrap(), ["b"]);
    fs.crash(&mut SeededEntropy::new(3));
    assert_eq!(fs.read("a").unwrap().unwrap(), b"alpha");
    assert_eq!(fs.read("b").unwrap().unwrap(), b"beta", "a rewrite is no append, so no tear");
    fs.check_invariants();
}

#[test]
fn an_unsynced_truncate_is_undone_and_a_synced_one_kept() {
    let mut fs = SimFs::new();
    synced_file(&mut fs, "j", b"line\ntorn");
    fs.truncate("j", 5).unwrap();
    assert_eq!(fs.durable_read("j").unwrap(), b"line\ntorn");
    fs.crash(&mut keep_nothing());
    assert_eq!(fs.read("j").unwrap().unwrap(), b"line\ntorn");
    fs.truncate("j", 5).unwrap();
    fs.sync_file("j").unwrap();
    fs.append("j", b"next\n").unwrap();
    fs.crash(&mut ByteEntropy::new(&[1]));
    assert_eq!(fs.read("j").unwrap().unwrap(), b"line\nnext\n");
    fs.check_invariants();
}

#[test]
fn injected_errors_change_nothing() {
    for kind in [FsErrorKind::Io, FsErrorKind::NoSpace] {
        let mut fs = SimFs::new();
        synced_file(&mut fs, "j", b"a");
        let before = fs.state_hash();
        fs.fail_next(kind);
        assert_eq!(fs.append("j", b"b").unwrap_err().kind, kind);
        assert_eq!(fs.state_hash(), before);
        fs.append("j", b"b").unwrap();
        assert_eq!(fs.read("j").unwrap().unwrap(), b"ab");
        assert_eq!(fs.stats().injected_errors, 1);
    }
}

#[test]
fn crash_after_counts_calls_then_refuses_everything() {
    let mut fs = SimFs::new();
    fs.crash_after(2);
    fs.create_new("f", b"x").unwrap();
    fs.sync_file("f").unwrap();
    let before = fs.state_hash();
    assert_eq!(fs.sync_dir("").unwrap_err().kind, FsErrorKind::Crashed);
    assert!(fs.is_crashed());
    assert_eq!(fs.read("f").unwrap_err().kind, FsErrorKind::Crashed);
    assert_ne!(fs.state_hash(), before, "the crashed flag is part of the state");
    fs.crash(&mut keep_nothing());
    assert!(!fs.is_crashed());
    assert_eq!(fs.read("f").unwrap(), None, "the directory sync never happened");
    assert_eq!(fs.stats().refused_crashed, 2);
    let mut fs = SimFs::new();
    fs.crash_after(0);
    assert_eq!(fs.list("").unwrap_err().kind, FsErrorKind::Crashed);
}

#[test]
fn locks_are_exclusive_until_released_or_crashed() {
    let mut fs = SimFs::new();
    fs.create_dir_all("d").unwrap();
    assert!(fs.try_lock("d/lock").unwrap());
    assert!(!fs.try_lock("d/lock").unwrap());
    assert!(fs.try_lock("d/other").unwrap());
    assert_eq!(fs.list("d").unwrap(), ["lock", "other"]);
    fs.release_locks();
    assert!(fs.try_lock("d/lock").unwrap());
    fs.crash(&mut keep_nothing());
    assert!(fs.try_lock("d/lock").unwrap());
    assert_eq!(fs.try_lock("missing/lock").unwrap_err().kind, FsErrorKind::NotFound);
}

#[test]
fn errors_match_the_kernel_for_the_plain_cases() {
    let mut fs = SimFs::new();
    assert_eq!(fs.read("nope").unwrap(), None);
    assert_eq!(fs.list("nope").unwrap(), Vec::<String>::new());
    assert_eq!(fs.append("nope", b"x").unwrap_err().kind, FsErrorKind::NotFound);
    assert_eq!(fs.create_new("no/f", b"x").unwrap_err().kind, FsErrorKind::NotFound);
    fs.create_new("f", b"x").unwrap();
    assert_eq!(fs.create_new("f", b"y").unwrap_err().kind, FsErrorKind::AlreadyExists);
    assert_eq!(fs.create_dir_all("f/g").unwrap_err().kind, FsErrorKind::Other);
    assert_eq!(fs.rename("nope", "g").unwrap_err().kind, FsErrorKind::NotFound);
    assert_eq!(fs.read("../f").unwrap_err().kind, FsErrorKind::Other);
}

#[test]
fn equal_states_hash_equal_however_they_were_reached() {
    let mut a = SimFs::new();
    synced_file(&mut a, "f", b"xy");
    let mut b = SimFs::new();
    b.create_new("f", b"x").unwrap();
    b.append("f", b"y").unwrap();
    b.sync_file("f").unwrap();
    b.sync_dir("").unwrap();
    assert_eq!(a.state_hash(), b.state_hash());
    b.append("f", b"z").unwrap();
    assert_ne!(a.state_hash(), b.state_hash());
    b.truncate("f", 2).unwrap();
    assert_eq!(a.state_hash(), b.state_hash());
}

#[derive(Clone, Debug)]
enum Op {
    CreateNew(u8, Vec<u8>),
    WriteTemp(u8, Vec<u8>),
    Append(u8, Vec<u8>),
    Truncate(u8, u8),
    SyncFile(u8),
    Rename(u8, u8),
    SyncDir,
    Remove(u8),
    Crash(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0u8..4;
    let bytes = prop::collection::vec(any::<u8>(), 0..6);
    prop_oneof![
        (name.clone(), bytes.clone()).prop_map(|(n, b)| Op::CreateNew(n, b)),
        (name.clone(), bytes.clone()).prop_map(|(n, b)| Op::WriteTemp(n, b)),
        (name.clone(), bytes).prop_map(|(n, b)| Op::Append(n, b)),
        (name.clone(), 0u8..8).prop_map(|(n, l)| Op::Truncate(n, l)),
        name.clone().prop_map(Op::SyncFile),
        (name.clone(), name.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        Just(Op::SyncDir),
        name.prop_map(Op::Remove),
        any::<u64>().prop_map(Op::Crash),
    ]
}

fn apply(fs: &mut SimFs, op: &Op) {
    let p = |n: &u8| format!("d/f{n}");
    // Errors (missing files, existing names) are part of the exercise.
    let _ = match op {
        Op::CreateNew(n, b) => fs.create_new(&p(n), b),
        Op::WriteTemp(n, b) => fs.write_temp(&p(n), b),
        Op::Append(n, b) => fs.append(&p(n), b),
        Op::Truncate(n, l) => fs.truncate(&p(n), u64::from(*l)),
        Op::SyncFile(n) => fs.sync_file(&p(n)),
        Op::Rename(a, b) => fs.rename(&p(a), &p(b)),
        Op::SyncDir => fs.sync_dir("d"),
        Op::Remove(n) => fs.remove(&p(n)),
        Op::Crash(seed) => {
            fs.crash(&mut SeededEntropy::new(*seed));
            Ok(())
        }
    };
}

proptest! {
    #[test]
    fn random_histories_keep_the_bookkeeping_exact(ops in prop::collection::vec(op(), 0..40)) {
        let mut fs = SimFs::new();
        fs.create_dir_all("d").unwrap();
        let mut twin = fs.clone();
        for op in &ops {
            apply(&mut fs, op);
            apply(&mut twin, op);
            fs.check_invariants();
            prop_assert_eq!(fs.state_hash(), twin.state_hash());
        }
        // Once everything is synced, a crash changes nothing.
        for name in fs.list("d").unwrap() {
            fs.sync_file(&format!("d/{name}")).unwrap();
        }
        fs.sync_dir("d").unwrap();
        let synced = fs.state_hash();
        let names = fs.list("d").unwrap();
        for name in &names {
            let path = format!("d/{name}");
            prop_assert_eq!(fs.durable_read(&path), fs.read(&path).unwrap());
        }
        fs.crash(&mut SeededEntropy::new(1));
        prop_assert_eq!(fs.state_hash(), synced);
        prop_assert_eq!(fs.list("d").unwrap(), names);
    }
}

proptest! {
    /// What readers skip on the strength of a stamp or an epoch really did not change.
    #[test]
    fn equal_stamps_and_epochs_mean_equal_durable_bytes(
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let mut fs = SimFs::new();
        fs.create_dir_all("d").unwrap();
        let paths: Vec<String> = (0..4).map(|n| format!("d/f{n}")).collect();
        let look = |fs: &SimFs| -> Vec<_> {
            paths.iter().map(|p| (fs.durable_stamp(p), fs.durable_read(p))).collect()
        };
        let mut before = (fs.durable_epoch(), look(&fs));
        for op in &ops {
            apply(&mut fs, op);
            let after = (fs.durable_epoch(), look(&fs));
            if after.0 == before.0 {
                prop_assert_eq!(&after.1, &before.1, "the epoch stood still over {:?}", op);
            }
            for ((stamp, bytes), (was_stamp, was)) in after.1.iter().zip(&before.1) {
                if stamp.is_some() && stamp == was_stamp {
                    prop_assert_eq!(bytes, was, "the stamp stood still over {:?}", op);
                }
            }
            before = after;
        }
    }
}
