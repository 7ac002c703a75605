//! A read of a work item while another process appends to its history, interleaved between
//! the reader's reads of the history and of its witness (`events.reach`).

use crate::fs::SimFs;
use harn_core::env::{Fs, FsError};
use harn_core::ids::Id;
use harn_core::time::WallTime;
use harn_core::work::events::EventKind;
use harn_core::work::intent::INTENT_VERSION;
use harn_core::work::ledger::{Known, Ledger};
use harn_core::work::{WorkIntent, WorkflowRef};
use std::cell::RefCell;
use std::rc::Rc;

/// A filesystem shared by two ledgers; `other` runs once, right after the first read of a
/// file named `after` returns, as another process would between two reads (chunked reads
/// come through `read`, the trait's own `read_at`, and a history here is one chunk).
struct Interleaved {
    fs: Rc<RefCell<SimFs>>,
    after: &'static str,
    other: Option<Box<dyn FnOnce()>>,
}

impl Interleaved {
    fn then(&mut self, path: &str) {
        if path.ends_with(self.after) {
            if let Some(other) = self.other.take() {
                other();
            }
        }
    }
}

impl Fs for Interleaved {
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        let read = self.fs.borrow_mut().read(path);
        self.then(path);
        read
    }
    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError> {
        self.fs.borrow_mut().list(dir)
    }
    fn create_dir_all(&mut self, dir: &str) -> Result<(), FsError> {
        self.fs.borrow_mut().create_dir_all(dir)
    }
    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.fs.borrow_mut().create_new(path, bytes)
    }
    fn write_temp(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.fs.borrow_mut().write_temp(path, bytes)
    }
    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.fs.borrow_mut().append(path, bytes)
    }
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError> {
        self.fs.borrow_mut().truncate(path, len)
    }
    fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
        self.fs.borrow_mut().sync_file(path)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        self.fs.borrow_mut().rename(from, to)
    }
    fn sync_dir(&mut self, dir: &str) -> Result<(), FsError> {
        self.fs.borrow_mut().sync_dir(dir)
    }
    fn remove(&mut self, path: &str) -> Result<(), FsError> {
        self.fs.borrow_mut().remove(path)
    }
    fn try_lock(&mut self, path: &str) -> Result<bool, FsError> {
        self.fs.borrow_mut().try_lock(path)
    }
}

#[test]
fn a_read_while_another_process_appends_sees_a_whole_history_never_a_cut() {
    // Between its reads of the history and of the witness, whichever it takes first.
    for (after, events) in [("events.jsonl", 1), ("events.reach", 2)] {
        read_beside_an_append(after, events);
    }
}

fn read_beside_an_append(after: &'static str, events: usize) {
    let id = Id::new("w").unwrap();
    let shared = Rc::new(RefCell::new(SimFs::new()));
    let writer = Rc::new(RefCell::new(Ledger::new(
        Interleaved { fs: shared.clone(), after: "", other: None },
        "/sim",
    )));
    let intent = WorkIntent {
        schema_version: INTENT_VERSION,
        id: id.clone(),
        title: "w".into(),
        objective: "do w".into(),
        acceptance: vec![],
        dependencies: vec![],
        workflow: WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) },
        max_attempts: 3,
        max_uncharged_attempts: 2,
        created_at: WallTime(1),
        sha256: None,
        strict_acceptance: false,
        source: None,
    }
    .sealed();
    writer.borrow_mut().create_item(&intent, "sim", None).unwrap();
    // Between the reader's read of the history and of its witness, another process cancels
    // the item: its event is appended, then the witness says the history reached it.
    let other = writer.clone();
    let appended = Rc::new(std::cell::Cell::new(false));
    let seen = appended.clone();
    let cancel = move || {
        let event = other.borrow_mut().append(&id, EventKind::Cancelled, "ana", None, WallTime(2));
        event.expect("the other process appends");
        seen.set(true);
    };
    let mut reader = Ledger::new(
        Interleaved { fs: shared.clone(), after, other: Some(Box::new(cancel)) },
        "/sim",
    );
    let read = reader.read(&Id::new("w").unwrap(), &mut Known::default(), &mut |_| false);
    let item = read.expect("a history another process is appending to is whole, not cut");
    assert!(appended.get(), "the append came between the reads ({after})");
    assert_eq!(item.events.len(), events, "after {after}: {:?}", item.events);
}
