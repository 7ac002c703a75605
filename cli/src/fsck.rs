//! `harn fsck`: checks every record of a root (work items and their attempts, workflow runs,
//! goals, the harness daemon's state and journals) and reports each damage with its file,
//! line and what to do; `--repair` makes the one safe repair, setting a damaged history
//! journal of the harness daemon aside, as its boot would.

use crate::exit::{fail, Exit, EXIT_FAILED};
use crate::os::store::Store;
use harn_core::env::Fs;
use harn_core::journal::EachError;
use serde::Serialize;
use std::path::PathBuf;

/// `harn fsck`'s arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  harn fsck\n  harn fsck --json | jq '.damage[].file'\n  harn fsck --repair    # set damaged daemon journals (the daemon must be down) and a damaged notify outbox aside"
)]
pub struct FsckArgs {
    /// The coordination root (default: found from the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Set a damaged harness events or ledger journal aside and begin a new one (only while
    /// no harness daemon runs), set a damaged notify outbox aside keeping every record that
    /// verifies, and remove empty run directories; nothing else is ever changed.
    #[arg(long)]
    pub repair: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// One damage found.
#[derive(Debug, Serialize)]
struct Damage {
    /// The file, as a person opens it.
    file: String,
    /// What is wrong (with the line, where the reader knows it).
    what: String,
    /// What to do.
    fix: String,
    /// Set when `--repair` dealt with it: where the damaged file went.
    #[serde(skip_serializing_if = "Option::is_none")]
    repaired: Option<String>,
}

#[derive(Debug, Default, Serialize)]
struct Checked {
    items: usize,
    runs: usize,
    goals: usize,
    journals: usize,
}

/// Runs the check.
pub fn run(args: FsckArgs) -> Exit {
    let mut store = crate::os::store::open_root(args.root)?;
    let mut found = Vec::new();
    let mut checked = Checked::default();
    work(&mut store, &mut found, &mut checked);
    runs(&mut store, args.repair, &mut found, &mut checked);
    goals(&mut store, &mut found, &mut checked);
    harness(&mut store, args.repair, &mut found, &mut checked);
    outbox(&mut store, args.repair, &mut found, &mut checked);
    // One damage is said once, however many records led to it (a goal reads its items).
    let mut seen = std::collections::BTreeSet::new();
    found.retain(|d| seen.insert((d.file.clone(), d.what.clone())));
    let open = found.iter().filter(|d| d.repaired.is_none()).count();
    if args.json {
        let doc = serde_json::json!({ "checked": checked, "damage": found, "clean": open == 0 });
        outln!("{doc}");
    } else {
        for d in &found {
            match &d.repaired {
                Some(how) => outln!("repaired  {}: {}\n          {how}", d.file, d.what),
                None if d.fix.is_empty() => outln!("damage    {}: {}", d.file, d.what),
                None => outln!("damage    {}: {}\n          {}", d.file, d.what, d.fix),
            }
        }
        outln!(
            "checked {} work items, {} runs, {} goals, {} daemon files: {}",
            checked.items,
            checked.runs,
            checked.goals,
            checked.journals,
            match (found.len(), open) {
                (0, _) => "no damage".to_owned(),
                (n, 0) => format!("{n} damaged, all repaired"),
                (n, open) => format!("{n} damaged, {open} to deal with"),
            }
        );
    }
    if open > 0 {
        return fail(EXIT_FAILED, format!("{open} damaged record(s) found"));
    }
    Ok(0)
}

fn damage(file: impl Into<String>, what: impl Into<String>, fix: impl Into<String>) -> Damage {
    Damage { file: file.into(), what: what.into(), fix: fix.into(), repaired: None }
}

/// A record error as a damage: its file when it names one, the root otherwise.
fn of_error(store: &Store, e: &dyn std::fmt::Display, file: Option<&str>, fix: &str) -> Damage {
    let file = file.map_or_else(|| store.root().display().to_string(), str::to_owned);
    let what = e.to_string();
    let what = what.strip_prefix(&format!("{file}: ")).unwrap_or(&what).to_owned();
    damage(file, what, fix)
}

/// A store error as a damage, in the file it names.
fn of_record(store: &Store, e: &crate::os::store::StoreError, fix: &str) -> Damage {
    of_error(store, e, e.record().and_then(|r| r.file()), fix)
}

/// Every work item reads, and its history holds every attempt its runs name.
fn work(store: &mut Store, found: &mut Vec<Damage>, checked: &mut Checked) {
    let listing = match store.ids() {
        Ok(l) => l,
        Err(e) => {
            return found.push(of_error(store, &e, None, "check the directory's permissions"))
        }
    };
    for problem in listing.problems {
        found.push(damage(
            store.root().join(".harnery/work").display().to_string(),
            problem,
            "move the entry out of .harnery/work",
        ));
    }
    for id in listing.ids {
        checked.items += 1;
        let item = match store.read(&id, &mut Default::default()) {
            Ok(item) => item,
            // A creation a kill cut short is no item yet.
            Err(_) if store.creation_pending(&id) => continue,
            Err(_)
                if !store
                    .root()
                    .join(harn_core::layout::work_dir(&id))
                    .join("intent.json")
                    .exists() =>
            {
                let file = store.root().join(harn_core::layout::work_dir(&id)).join("intent.json");
                found.push(damage(
                    file.display().to_string(),
                    "missing: the item's intent was deleted, its history remains",
                    "restore the file from a backup; the item cannot be read without it",
                ));
                continue;
            }
            Err(e) => {
                let fix = "restore the file from a backup; the item cannot be read as it is";
                found.push(of_record(store, &e, fix));
                continue;
            }
        };
        match store.ledger().lost_attempt(&item) {
            Ok(None) => {}
            // The message says what to do.
            Ok(Some((file, what))) => found.push(damage(file, what, "")),
            Err(e) => found.push(of_error(store, &e, e.file(), "check the file")),
        }
        match store.ledger().claims_disagree(&item) {
            Ok(claims) => {
                found.extend(claims.into_iter().map(|(file, what)| damage(file, what, "")))
            }
            Err(e) => found.push(of_error(store, &e, e.file(), "check the file")),
        }
    }
}

/// Every run directory has its manifest and a transcript whose every line verifies.
fn runs(store: &mut Store, repair: bool, found: &mut Vec<Damage>, checked: &mut Checked) {
    let listing = match store.list_ids(harn_core::layout::WORKFLOWS) {
        Ok(l) => l,
        Err(e) => {
            return found.push(of_error(store, &e, None, "check the directory's permissions"))
        }
    };
    for run in listing.ids {
        checked.runs += 1;
        let dir = harn_core::layout::run_dir(&run);
        let shown_dir = store.root().join(&dir).display().to_string();
        match store.run_records(&run) {
            Ok((Some(_), _)) => {}
            Ok((None, _)) => {
                let mut d = damage(
                    &shown_dir,
                    "no run.json: a start cut short before its manifest (nothing ran)",
                    "`harn fsck --repair` removes it when it holds nothing; otherwise remove \
                     the directory",
                );
                // Nothing ran and nothing names it: an empty one is crash residue.
                let empty = std::fs::read_dir(store.root().join(&dir))
                    .is_ok_and(|mut entries| entries.next().is_none());
                if repair && empty && std::fs::remove_dir(store.root().join(&dir)).is_ok() {
                    d.repaired = Some("removed (it held nothing)".into());
                }
                found.push(d);
                continue;
            }
            Err(e) => {
                let fix = "restore the run's files, or move its directory out of .harnery/workflows to give the attempt up";
                found.push(of_record(store, &e, fix));
                continue;
            }
        }
        let path = format!("{dir}/transcript.jsonl");
        let shown = store.root().join(&path).display().to_string();
        if let Some(what) = verify(store, &path, &shown) {
            let fix = "restore the file from a backup; the run's record is not what was written";
            found.push(damage(&shown, what, fix));
        }
    }
}

/// Every goal reads.
fn goals(store: &mut Store, found: &mut Vec<Damage>, checked: &mut Checked) {
    let listing = match crate::goal::store::ids(store) {
        Ok(l) => l,
        Err(e) => {
            return found.push(of_error(store, &e, None, "check the directory's permissions"))
        }
    };
    for id in listing.ids {
        checked.goals += 1;
        if let Err(e) = crate::goal::store::read(store, &id) {
            found.push(of_record(store, &e, "restore the file from a backup"));
        }
    }
}

/// The harness daemon's `state.json` decodes, and its history journals (events and ledger,
/// with their rotated files) verify; `repair` sets a damaged current journal aside.
fn harness(store: &mut Store, repair: bool, found: &mut Vec<Damage>, checked: &mut Checked) {
    let dir = ".harnery/harness";
    let state = format!("{dir}/state.json");
    if let Ok(Some(bytes)) = store.fs().read(&state) {
        checked.journals += 1;
        if let Err(e) = harn_core::harness::daemon::PersistedState::decode(&bytes) {
            found.push(damage(
                store.root().join(&state).display().to_string(),
                e.reason,
                "the daemon refuses to boot on it: restore it from a backup, or move it aside \
                 to boot with the configuration's defaults (counters and run numbers start anew)",
            ));
        }
    }
    let daemon_down = crate::harness::detach::lock_is_free(
        &crate::harness::paths::Paths::new(store.root()).expect("a root has harness paths"),
    );
    let names = store.fs().list(dir).unwrap_or_default();
    let journals = names.iter().filter(|n| {
        ["events.jsonl", "ledger.jsonl"].iter().any(|j| {
            *n == j
                || n.strip_prefix(j)
                    .is_some_and(|r| r.starts_with('.') && r[1..].parse::<u32>().is_ok())
        })
    });
    for name in journals.cloned().collect::<Vec<String>>() {
        checked.journals += 1;
        let path = format!("{dir}/{name}");
        let shown = store.root().join(&path).display().to_string();
        let Some(what) = verify(store, &path, &shown) else { continue };
        let current = !name.contains(".jsonl.");
        let mut d = damage(
            &shown,
            what,
            match current {
                true => "history only: `harn fsck --repair` (with the daemon down) or the daemon's next boot sets it aside and begins a new one",
                false => "history only: move it aside; nothing reads it but `harness ledger` and `harness events`",
            },
        );
        if repair && current && daemon_down {
            let now = store.now();
            match harn_core::journal::JournalWriter::open_setting_aside(store.fs(), &path, now) {
                Ok((_, Some(aside))) => {
                    let to = store.root().join(aside.moved_to).display().to_string();
                    d.repaired = Some(format!("set aside as {to}"));
                }
                Ok((_, None)) => {}
                Err(e) => d.fix = format!("setting it aside failed: {e}"),
            }
        } else if repair && current {
            d.fix = "a harness daemon runs: stop it (`harn harness down`) and repair again".into();
        }
        found.push(d);
    }
}

/// The notify outbox verifies; `repair` sets a damaged one aside as every notifying command
/// would ([`crate::notify::set_aside_damaged`]).
fn outbox(store: &mut Store, repair: bool, found: &mut Vec<Damage>, checked: &mut Checked) {
    use harn_core::notify::outbox::OUTBOX;
    let shown = store.root().join(OUTBOX).display().to_string();
    if store.fs().read(OUTBOX).ok().flatten().is_none() {
        return;
    }
    checked.journals += 1;
    let Some(what) = verify(store, OUTBOX, &shown) else { return };
    let mut d = damage(
        &shown,
        what,
        "`harn fsck --repair`, or the next command that notifies, sets it aside and keeps every \
         record that verifies on its own",
    );
    if repair {
        match crate::notify::set_aside_damaged(store) {
            Ok(Some(aside)) => {
                let to = store.root().join(aside.moved_to).display().to_string();
                d.repaired = Some(format!("set aside as {to}, {} records kept", aside.kept));
            }
            Ok(None) => {}
            Err(e) => d.fix = format!("setting it aside failed: {e}"),
        }
    }
    found.push(d);
}

/// What is wrong with the journal at `path` (every line verified, a chunk at a time), if
/// anything: the line and why, or what the filesystem said.
fn verify(store: &mut Store, path: &str, shown: &str) -> Option<String> {
    let read = harn_core::journal::read_each::<serde::de::IgnoredAny, std::convert::Infallible>(
        store.fs(),
        path,
        shown,
        |_| Ok(()),
    );
    match read {
        Ok(_) => None,
        Err(EachError::Corrupt(e)) => Some(format!("line {}: {}", e.line, e.reason)),
        Err(EachError::Fs(e)) => Some(e.to_string()),
        Err(EachError::Refused(never)) => match never {},
    }
}
