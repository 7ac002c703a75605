//! What waits for a person, as the records say it now: items in review, runs parked on an
//! approval, runs a resource limit or a cluster ended, goals stopped for a person or at a
//! ceiling, harnesses the daemon gave up on (its `state.json`'s give-up latch). Derived from the durable records each time, so a notice a crash kept from being
//! recorded is found by the next sweep; the outbox's keys keep each one to one notice.

use crate::os::store::Store;
use harn_core::goal::GoalState;
use harn_core::notify::Waiting;
use harn_core::work::projection::WorkState;
use harn_core::work::FailureClass;

/// Everything that waits for a person in `store`'s root now. An unreadable record is left
/// out (its own verbs report it), never a reason to tell nothing of the rest.
pub fn waiting(store: &mut Store) -> Vec<Waiting> {
    let mut found = Vec::new();
    let Ok(listing) = store.ids() else { return found };
    store.use_index();
    let mut known = harn_core::work::ledger::Known::new();
    for id in listing.ids {
        let Ok(row) = store.summary(&id, &mut known) else { continue };
        let p = &row.projection;
        let Some(run) = p.latest_run_id.clone() else { continue };
        let item = id.to_string();
        match p.state {
            WorkState::InReview => found.push(Waiting::Review { item, run: run.to_string() }),
            WorkState::AwaitingApproval => {
                let Some(approval) = p.approval_id.clone() else { continue };
                let Ok(approval_id) = harn_core::ids::Id::new(&approval) else { continue };
                let to = match store.approval(&approval_id) {
                    Ok(Some((request, None))) => request.addressee,
                    _ => continue,
                };
                found.push(Waiting::Approval { item, approval, to });
            }
            WorkState::Blocked => {
                let Ok((_, Some(proof))) = store.ledger().run_records(&run) else { continue };
                let infrastructure = match proof.run.class {
                    Some(FailureClass::Infrastructure) => true,
                    Some(FailureClass::Resource) => false,
                    _ => continue,
                };
                let why = proof.run.error.clone().unwrap_or_else(|| p.reason.clone());
                found.push(Waiting::RunEnded { item, run: run.to_string(), infrastructure, why });
            }
            _ => {}
        }
    }
    store.save_index();
    found.extend(gave_up(store));
    let Ok(goals) = crate::goal::store::ids(store) else { return found };
    for id in goals.ids {
        let Ok(view) = crate::goal::store::read(store, &id) else { continue };
        let p = &view.projection;
        use harn_core::goal::GoalNext;
        let ceiling = match (p.state, p.next_action) {
            (GoalState::BudgetExhausted, _) => true,
            // An item's review or approval is its own notice.
            (GoalState::AwaitingAttention, GoalNext::Review | GoalNext::ResolveApproval) => {
                continue
            }
            (GoalState::AwaitingAttention | GoalState::Blocked, _) => false,
            _ => continue,
        };
        // The same stop for the same reason is one notice, however many ticks find it.
        let stop = format!("{:?}:{}", p.state, p.reason);
        let seq = u64::from_str_radix(&harn_core::hash::sha256_hex(stop.as_bytes())[..12], 16)
            .unwrap_or_default();
        let command = harn_core::goal::next::next_commands(&id, p, &view.items)
            .into_iter()
            .next()
            .unwrap_or_else(|| format!("harn supervisor show {id}"));
        found.push(Waiting::Goal {
            goal: id.to_string(),
            seq,
            ceiling,
            why: p.reason.clone(),
            command,
        });
    }
    found
}

/// The harnesses whose give-up latch is set in the daemon's `state.json`, each once per
/// give-up (its run count then).
fn gave_up(store: &mut Store) -> Vec<Waiting> {
    let path = format!("{}/state.json", harn_core::layout::HARNESS);
    let Ok(Some(bytes)) = store.read_bytes(&path) else { return Vec::new() };
    let Ok(state) = harn_core::harness::daemon::PersistedState::decode(&bytes) else {
        return Vec::new();
    };
    state
        .harnesses
        .iter()
        .filter(|(_, h)| h.failed)
        .map(|(name, h)| {
            use harn_core::env::ExitStatus;
            let how = match h.last_exit.map(|e| e.status) {
                Some(Some(ExitStatus::Code(c))) => format!(", the last exited with code {c}"),
                Some(Some(ExitStatus::Signal(s))) => format!(", the last killed by signal {s}"),
                Some(None) => ", the last could not be started".to_owned(),
                None => String::new(),
            };
            let why = format!("{} runs failed in a row{how}", h.consecutive_failures);
            Waiting::HarnessGaveUp { name: name.to_string(), seq: h.runs, why }
        })
        .collect()
}
