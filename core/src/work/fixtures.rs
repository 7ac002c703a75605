//! Test fixtures shared by the work and workflow tests: an intent and a history builder
//! that keeps one inspection per attempt.

use super::events::{validate_history, EventKind, Trigger, WorkEvent, EVENT_VERSION};
use super::intent::{WorkIntent, WorkflowRef, INTENT_VERSION};
use super::projection::{project, AttemptStatus, Inputs, Prerequisite};
use crate::ids::Id;
use crate::time::WallTime;
use std::collections::BTreeMap;

pub(crate) fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

pub(crate) fn intent() -> WorkIntent {
    WorkIntent {
        schema_version: INTENT_VERSION,
        id: id("w1"),
        title: "Add a parser".into(),
        objective: "Parse the config file.".into(),
        acceptance: vec!["tests pass".into()],
        dependencies: Vec::new(),
        workflow: WorkflowRef { path: "/repo/wf.sh".into(), sha256: "a".repeat(64) },
        max_attempts: 3,
        max_uncharged_attempts: 2,
        created_at: WallTime(0),
        sha256: None,
        strict_acceptance: false,
        source: None,
    }
    .sealed()
}

/// A history builder: events and one inspection per attempt.
pub(crate) struct History {
    pub(crate) events: Vec<WorkEvent>,
    pub(crate) attempts: Vec<AttemptStatus>,
}

impl History {
    pub(crate) fn new() -> History {
        let mut h = History { events: Vec::new(), attempts: Vec::new() };
        h.push(EventKind::created(&intent()));
        h
    }

    pub(crate) fn push(&mut self, kind: EventKind) -> &mut History {
        let seq = self.events.len() as u64 + 1;
        let e = WorkEvent {
            schema_version: EVENT_VERSION,
            work_id: id("w1"),
            seq,
            ts: WallTime(seq as i64),
            actor: "op".into(),
            reason: None,
            kind,
        };
        self.events.push(e);
        self
    }

    pub(crate) fn attempt(&mut self, status: AttemptStatus) -> &mut History {
        let n = self.attempts.len() as u32 + 1;
        let trigger = if n == 1 { Trigger::Initial } else { Trigger::Retry };
        self.push(EventKind::AttemptStarted {
            run_id: id(&format!("wf-{n}")),
            attempt: n,
            trigger,
            prerequisites: BTreeMap::new(),
        });
        self.attempts.push(status);
        self
    }

    pub(crate) fn project(&self) -> super::Projection {
        self.project_with(&BTreeMap::new(), false)
    }

    pub(crate) fn project_with(
        &self,
        prerequisites: &BTreeMap<Id, Option<Prerequisite>>,
        lease: bool,
    ) -> super::Projection {
        let intent = intent();
        validate_history(&intent.id, &self.events).unwrap();
        project(&Inputs {
            intent: &intent,
            events: &self.events,
            attempts: &self.attempts,
            prerequisites,
            lease_held_elsewhere: lease,
        })
    }
}
