//! The missions a `harn work reopen` reopens with its item: every goal whose mission is
//! complete and which holds the item in any generation, found before anything is written and
//! held under its lease until the reopening is recorded.

use super::store::{self, goal_lease};
use crate::os::store::Store;
use crate::work::cmd::MissionReopen;
use harn_core::goal::plan::{check_reopen, generation_of, Generation};
use harn_core::ids::Id;

/// Finds the complete missions holding `work` and takes each one's goal lease; refused (with
/// nothing written) when another process ticks one of them or one cannot be read.
pub fn holding(store: &mut Store, work: &Id) -> Result<Vec<MissionReopen>, String> {
    let listing = store::ids(store).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    for goal in listing.ids {
        let Some(view) = store::read_listed(store, &goal).map_err(|e| e.to_string())? else {
            continue;
        };
        if view.intent.mission.is_none() || check_reopen(&view).is_err() {
            continue;
        }
        let Some(generation) = generation_of(&view, work) else { continue };
        if !store.hold(&goal_lease(&goal)).map_err(|e| e.to_string())? {
            return Err(format!(
                "{work} belongs to mission {goal}, which another process is ticking; nothing \
                 was reopened (try again when it is done)"
            ));
        }
        // Read again under the lease: the decision stands on what the lease protects.
        let view = store::read(store, &goal).map_err(|e| e.to_string())?;
        let warning = match generation {
            Generation::Active => None,
            Generation::Superseded(plan) => Some(format!(
                "{work} is from an earlier generation of mission {goal} ({}), outside its active \
                 graph: the goal will not run it (run it with `harn work run {work}`); the \
                 planner reassesses the mission",
                plan.map_or("its first root".to_owned(), |p| format!("plan {p}"))
            )),
        };
        found.push(MissionReopen { goal, view, warning });
    }
    Ok(found)
}
