//! Goals on disk: `.harnery/supervisors/<id>/intent.json` (written once, refused if the id
//! exists, checked against its digest and the digest its `events.jsonl` recorded on every
//! read), the goal lease (`lease.lock`, held by
//! a `tick` or `run`), and the active graph read through the work ledger with every item
//! read and projected once.

use crate::exit::{Failure, EXIT_USAGE};
use crate::os::store::{Store, StoreError};
use harn_core::error::RecordError;
use harn_core::goal::intent::{check_created, GoalCreated};
use harn_core::goal::{GoalIntent, GraphItem};
use harn_core::ids::Id;

pub use harn_core::goal::plan::goal_dir;

use harn_core::goal::engine::GoalView;
pub use harn_core::layout::goal_lease;

/// Writes a new goal's intent once, under its lease, so two creators of one id never both
/// write; refused if the id is taken.
pub fn create(store: &mut Store, intent: &GoalIntent) -> Result<(), StoreError> {
    sweep_residue(store);
    let dir = goal_dir(&intent.id);
    let _lease = store.lock_file(&goal_lease(&intent.id))?;
    if store.read_bytes(&format!("{dir}/intent.json"))?.is_some() {
        return Err(StoreError::refused(format!("goal {} already exists", intent.id)));
    }
    // The journal first: a kill between the two leaves a journal and no intent, which is no
    // goal; the next create clears it, so a journal holds one creation record.
    let journal = format!("{dir}/events.jsonl");
    store.ledger().note(&journal)?;
    harn_core::env::Fs::create_dir_all(&mut store.ledger().fs, &dir)?;
    harn_core::env::Fs::remove(&mut store.ledger().fs, &journal)?;
    let mut writer = store.open_journal(&journal)?;
    store.append_journal(&mut writer, &GoalCreated::of(intent))?;
    store.write_once(&dir, "intent.json", intent).map(drop).map_err(|e| {
        let id = &intent.id;
        StoreError::refused(format!("goal {id} could not be created (does it exist already?): {e}"))
    })
}

/// Every goal's id, sorted.
pub fn ids(store: &mut Store) -> Result<crate::os::store::Listing, StoreError> {
    store.list_ids(harn_core::layout::GOALS)
}

/// The checked intent of goal `id`.
pub fn intent(store: &mut Store, id: &Id) -> Result<GoalIntent, StoreError> {
    let path = format!("{}/intent.json", goal_dir(id));
    let shown = store.root().join(&path).display().to_string();
    let intent: GoalIntent =
        store.read_record(&path)?.ok_or_else(|| StoreError::refused(format!("no goal {id}")))?;
    intent.validate().map_err(|e| RecordError::invalid(&shown, e))?;
    if intent.id != *id {
        return Err(RecordError::invalid(shown, format!("id is {}, not {id}", intent.id)).into());
    }
    let journal = format!("{}/events.jsonl", goal_dir(id));
    let created = match store.read_bytes(&journal)? {
        None => None,
        Some(bytes) => {
            let shown = store.root().join(&journal).display().to_string();
            let read = harn_core::journal::parse_as::<GoalCreated>(&shown, &bytes)
                .map_err(RecordError::from)?;
            Some(read.records.into_iter().map(|r| r.body).collect::<Vec<_>>())
        }
    };
    check_created(&intent, &shown, created.as_deref())?;
    Ok(intent)
}

/// Reads goal `id`: its intent, plans, active graph and projection (see
/// [`harn_core::goal::plan::goal_view`]).
pub fn read(store: &mut Store, id: &Id) -> Result<GoalView, StoreError> {
    let intent = intent(store, id)?;
    let lease_elsewhere = store.held_elsewhere(&goal_lease(id));
    store.goal_view(&intent, lease_elsewhere)
}

/// Reads goal `id` as a listing does: `None` when its directory holds no intent (a creation
/// a kill cut short, which is not a goal), the error of a goal that exists but cannot be read.
pub fn read_listed(store: &mut Store, id: &Id) -> Result<Option<GoalView>, StoreError> {
    match read(store, id) {
        Ok(g) => Ok(Some(g)),
        Err(e) => match store.read_bytes(&format!("{}/intent.json", goal_dir(id))) {
            Ok(None) => Ok(None),
            _ => Err(e),
        },
    }
}

/// Sweeps `.harnery/supervisors/`: goal directories a killed `create` left holding nothing
/// but its temporary file. The next `create` calls it, as the next writer of the directory.
pub fn sweep_residue(store: &Store) {
    let Ok(dir) = crate::os::private::Dir::open(store.root(), harn_core::layout::GOALS, false)
    else {
        return;
    };
    for (name, is_dir) in dir.entries().unwrap_or_default() {
        let residue = is_dir && dir.child(&name, false).is_ok_and(|d| d.only_residue());
        if residue {
            let _ = dir.remove_tree(&name);
        }
    }
}

/// The dependency closure of `root`, prerequisites first; each item read once.
pub fn graph(store: &mut Store, root: &Id) -> Result<Vec<GraphItem>, StoreError> {
    store.graph(root)
}

/// Of `goals`, those whose active graph holds `work`, each with whether it resumes approved
/// runs. A goal that cannot be read is left out: it would not resume anything either.
pub fn governing(store: &mut Store, goals: &[Id], work: &Id) -> Vec<(Id, bool)> {
    let mut found = Vec::new();
    for goal in goals {
        if let Ok(g) = read(store, goal) {
            if g.projection.work_ids.contains(work) {
                found.push((goal.clone(), g.intent.automation.resume_approved));
            }
        }
    }
    found
}

/// An id an operator typed, checked; bad input is a usage error.
pub fn parse_id(s: &str) -> Result<Id, Failure> {
    Id::new(s).map_err(|e| Failure::new(EXIT_USAGE, format!("{s:?}: {e}")))
}

/// The goal an operator named: its id, or a unique prefix of one goal's id.
pub fn goal_id(store: &mut Store, s: &str) -> Result<Id, Failure> {
    parse_id(s)?;
    let listing = store.list_ids(harn_core::layout::GOALS)?;
    let full = crate::os::store::complete(s, listing.ids.iter().map(Id::as_str), "goal")?;
    parse_id(&full)
}
