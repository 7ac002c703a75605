//! The index of work projections and its change log over the simulated filesystem, one rule
//! at a time: what a change noted shows, what a change that notes nothing shows and when, a
//! record read while its writer holds its lock, a new boot, and the log set aside.

use crate::fs::SimFs;
use harn_core::env::Fs;
use harn_core::ids::Id;
use harn_core::index::{Change, CHANGES};
use harn_core::journal::JournalWriter;
use harn_core::time::WallTime;
use harn_core::work::events::{EventKind, WorkEvent, EVENT_VERSION};
use harn_core::work::intent::INTENT_VERSION;
use harn_core::work::ledger::{work_dir, Known, Ledger};
use harn_core::work::projection::WorkState;
use harn_core::work::{WorkIntent, WorkflowRef};

const T0: i64 = 1_800_000_000_000;

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

/// `w1`, `w2`, and `w3` depending on `w1`, made through the ledger.
fn ledger() -> Ledger<SimFs> {
    let mut ledger = Ledger::new(SimFs::new(), "/sim");
    for (n, deps) in [("w1", vec![]), ("w2", vec![]), ("w3", vec![id("w1")])] {
        let intent = WorkIntent {
            schema_version: INTENT_VERSION,
            id: id(n),
            title: format!("item {n}"),
            objective: format!("do {n}"),
            acceptance: vec!["done".into()],
            dependencies: deps,
            workflow: WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) },
            max_attempts: 3,
            max_uncharged_attempts: 2,
            created_at: WallTime(T0),
            sha256: None,
            strict_acceptance: false,
            source: None,
        }
        .sealed();
        ledger.create_item(&intent, "sim", None).unwrap();
    }
    ledger
}

/// Each item's state as a listing reads it through the index at `now` in `boot`, with
/// `busy` saying which items another process is writing.
fn listed(
    ledger: &mut Ledger<SimFs>,
    now: i64,
    boot: &str,
    busy: &'static [&'static str],
) -> Vec<WorkState> {
    read_all(ledger, now, boot, busy, true)
        .into_iter()
        .map(|r| r.expect("every item reads").projection.state)
        .collect()
}

/// Each item's row as a read through the index makes it, verifying histories as a listing
/// does or not, as a `show` of one item does not.
fn read_all(
    ledger: &mut Ledger<SimFs>,
    now: i64,
    boot: &str,
    busy: &'static [&'static str],
    verify: bool,
) -> Vec<Result<std::sync::Arc<harn_core::work::index::Row>, String>> {
    let probe = move |c: &Change| matches!(c, Change::Work(w) if busy.contains(&w.as_str()));
    ledger.open_index(WallTime(now), boot, Box::new(probe));
    // Three items are fewer than a read takes from their files before it loads the index:
    // load it, as a bigger read would.
    ledger.load_index();
    if verify {
        ledger.verify_histories();
    }
    let mut known = Known::new();
    let rows = ["w1", "w2", "w3"]
        .iter()
        .map(|w| ledger.summary(&id(w), &mut known, &mut |_| false).map_err(|e| e.to_string()))
        .collect();
    ledger.save_index().unwrap();
    rows
}

/// The index file's rows, by id.
fn stored(ledger: &mut Ledger<SimFs>) -> Vec<String> {
    let bytes = ledger.fs.read(harn_core::work::index::WORK_INDEX).unwrap().unwrap_or_default();
    let file = harn_core::index::decode(bytes).expect("an intact index");
    file.rows.ids().iter().map(|k| k.to_string()).collect()
}

/// The state of `prerequisite` that the stored row of `item` was computed with.
fn recorded_view(ledger: &mut Ledger<SimFs>, item: &str, prerequisite: &str) -> WorkState {
    let bytes = ledger.fs.read(harn_core::work::index::WORK_INDEX).unwrap().unwrap();
    let file = harn_core::index::decode(bytes).unwrap();
    let row = harn_core::work::index::Row::of_line(file.rows.get(&id(item)).unwrap()).unwrap();
    let (_, view) = row.prerequisites.iter().find(|(d, _)| d.as_str() == prerequisite).unwrap();
    view.expect("a readable prerequisite").state
}

/// Appends `kind` to `item`'s history as a process outside harn would: nothing noted.
fn append_unnoted(ledger: &mut Ledger<SimFs>, item: &str, kind: EventKind, now: i64) {
    let path = format!("{}/events.jsonl", work_dir(&id(item)));
    let (mut writer, _) = JournalWriter::open_tail(&mut ledger.fs, &path).unwrap();
    let event = WorkEvent {
        schema_version: EVENT_VERSION,
        work_id: id(item),
        seq: writer.next_seq(),
        ts: WallTime(now),
        actor: "someone".into(),
        reason: None,
        kind,
    };
    writer.append(&mut ledger.fs, WallTime(now), &[event]).unwrap();
}

fn cancel() -> EventKind {
    EventKind::Cancelled
}

#[test]
fn a_change_made_through_the_ledger_shows_in_the_next_listing_and_its_dependents_follow() {
    use WorkState::*;
    let mut l = ledger();
    assert_eq!(listed(&mut l, T0 + 5_000, "b", &[]), [Ready, Ready, Waiting]);
    assert_eq!(stored(&mut l), ["w1", "w2", "w3"]);
    l.append(&id("w1"), cancel(), "sim", None, WallTime(T0 + 6_000)).unwrap();
    assert_eq!(listed(&mut l, T0 + 7_000, "b", &[]), [Cancelled, Ready, Waiting]);
    // The log names w1 once; after this listing nothing is left to read again.
    let log = l.fs.read(CHANGES).unwrap().unwrap();
    assert!(String::from_utf8(log).unwrap().ends_with("w w1\n"));
    assert_eq!(listed(&mut l, T0 + 8_000, "b", &[]), [Cancelled, Ready, Waiting]);
}

#[test]
fn a_history_changed_outside_harn_shows_in_the_next_listing_with_its_dependents() {
    use WorkState::*;
    let mut l = ledger();
    assert_eq!(listed(&mut l, T0 + 5_000, "b", &[]), [Ready, Ready, Waiting]);
    // Nothing noted, but a listing checks each row's history: w1 shows at once, and w3,
    // which follows it, is compared with what w1 is now.
    append_unnoted(&mut l, "w1", cancel(), T0 + 6_000);
    assert_eq!(listed(&mut l, T0 + 7_000, "b", &[]), [Cancelled, Ready, Waiting]);
    assert_eq!(recorded_view(&mut l, "w3", "w1"), Cancelled);
}

#[test]
fn any_other_file_changed_outside_harn_shows_within_a_minute() {
    let mut l = ledger();
    assert!(read_all(&mut l, T0 + 5_000, "b", &[], true).iter().all(Result::is_ok));
    // w2's intent rewritten in place: no note, and not its history.
    let path = format!("{}/intent.json", work_dir(&id("w2")));
    let bytes = l.fs.read(&path).unwrap().unwrap();
    let at = bytes.windows(7).position(|w| w == b"item w2").unwrap();
    assert!(l.fs.foreign_write(&path, at, b"item W2"));
    assert!(read_all(&mut l, T0 + 6_000, "b", &[], true)[1].is_ok(), "not seen yet");
    let checked = read_all(&mut l, T0 + 70_000, "b", &[], true);
    let error = checked[1].as_ref().unwrap_err();
    assert!(error.contains("intent.json"), "{error}");
}

#[test]
fn a_record_read_while_another_process_writes_it_is_not_stored() {
    use WorkState::*;
    let mut l = ledger();
    assert_eq!(listed(&mut l, T0 + 5_000, "b", &["w2"]), [Ready, Ready, Waiting]);
    assert_eq!(stored(&mut l), ["w1", "w3"], "w2's writer held its lock");
    assert_eq!(listed(&mut l, T0 + 6_000, "b", &[]), [Ready, Ready, Waiting]);
    assert_eq!(stored(&mut l), ["w1", "w2", "w3"]);
}

#[test]
fn a_dependent_read_over_a_prerequisite_being_written_is_stored_suspect() {
    use WorkState::*;
    let mut l = ledger();
    assert_eq!(listed(&mut l, T0 + 5_000, "b", &["w1"]), [Ready, Ready, Waiting]);
    let bytes = l.fs.read(harn_core::work::index::WORK_INDEX).unwrap().unwrap();
    let file = harn_core::index::decode(bytes).unwrap();
    assert!(file.rows.get(&id("w3")).unwrap().suspect, "w1 was not vouched for");
    // w1's writer finishes; its note was read by the listing above, so nothing more is
    // noted. w3, suspect, is compared with what w1 is now.
    append_unnoted(&mut l, "w1", cancel(), T0 + 6_000);
    assert_eq!(listed(&mut l, T0 + 7_000, "b", &[]), [Cancelled, Ready, Waiting]);
    assert_eq!(recorded_view(&mut l, "w3", "w1"), Cancelled);
}

#[test]
fn an_index_of_another_boot_is_rebuilt() {
    let state = |rows: &[Result<std::sync::Arc<harn_core::work::index::Row>, String>]| {
        rows[0].as_ref().unwrap().projection.state
    };
    let mut l = ledger();
    assert_eq!(state(&read_all(&mut l, T0 + 5_000, "b1", &[], false)), WorkState::Ready);
    // A change whose note was lost with the boot it was written in.
    let log = l.fs.read(CHANGES).unwrap().unwrap();
    l.append(&id("w1"), cancel(), "sim", None, WallTime(T0 + 6_000)).unwrap();
    l.fs.write_temp(CHANGES, &log).unwrap();
    let same_boot = read_all(&mut l, T0 + 7_000, "b1", &[], false);
    assert_eq!(state(&same_boot), WorkState::Ready, "in the same boot the log is trusted");
    let new_boot = read_all(&mut l, T0 + 8_000, "b2", &[], false);
    assert_eq!(state(&new_boot), WorkState::Cancelled, "rebuilt in a new boot");
}

#[test]
fn a_log_grown_past_its_cap_is_set_aside_and_every_index_rebuilt_once() {
    use WorkState::*;
    let mut l = ledger();
    assert_eq!(listed(&mut l, T0 + 5_000, "b", &[]), [Ready, Ready, Waiting]);
    let filler = "w w2\n".repeat((harn_core::index::ROTATE_AT as usize / 5) + 1);
    l.fs.append(CHANGES, filler.as_bytes()).unwrap();
    assert_eq!(listed(&mut l, T0 + 6_000, "b", &[]), [Ready, Ready, Waiting]);
    assert_eq!(l.fs.read(CHANGES).unwrap(), Some(Vec::new()), "a new, empty log");
    assert!(l.fs.read(&format!("{CHANGES}.1")).unwrap().is_some());
    assert_eq!(l.fs.read(harn_core::work::index::WORK_INDEX).unwrap(), None);
    assert_eq!(listed(&mut l, T0 + 7_000, "b", &[]), [Ready, Ready, Waiting]);
    assert_eq!(stored(&mut l), ["w1", "w2", "w3"]);
}
