//! Who resumes a run parked on an approval once it is ruled on: the run itself, already
//! resuming; the running service, for a goal of its that resumes approved runs; or a person.
//! Decided from facts read once, so `approval approve` tells the truth about what happens next.

use super::records::Liveness;
use crate::ids::Id;

/// What is known when a ruling is recorded.
#[derive(Clone, Debug)]
pub struct ResumeFacts<'a> {
    /// The parked item.
    pub work_id: &'a Id,
    /// Its parked run.
    pub run_id: &'a Id,
    /// Whether another process holds the item's run lease now (a runner resuming it).
    pub run_held: bool,
    /// The service's liveness.
    pub liveness: Liveness,
    /// The goals the service ticks (its enrollment).
    pub enrolled: &'a [Id],
    /// The goals whose graph holds the item, each with whether it resumes approved runs.
    pub governing: &'a [(Id, bool)],
}

/// Who resumes the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resumer {
    /// A process holds the run lease: it is resuming already.
    Resuming,
    /// The running service, ticking this goal, which resumes approved runs.
    Service(Id),
    /// A person: nothing running will. `idle` names a goal that would resume it, enrolled in
    /// a service that is not running.
    Person {
        /// The enrolled goal that would, were the service running.
        idle: Option<Id>,
    },
}

/// Who resumes the run `f` describes.
pub fn resumer(f: &ResumeFacts<'_>) -> Resumer {
    if f.run_held {
        return Resumer::Resuming;
    }
    let automated = f.governing.iter().find(|(g, resumes)| *resumes && f.enrolled.contains(g));
    match (automated, f.liveness) {
        (Some((goal, _)), Liveness::Running) => Resumer::Service(goal.clone()),
        (goal, _) => Resumer::Person { idle: goal.map(|(g, _)| g.clone()) },
    }
}

/// The lines `approval approve|deny` prints after its ruling: who resumes the run, what a
/// person may type, and what the run then does (`approved`: it goes on; else it fails).
pub fn lines(f: &ResumeFacts<'_>, approved: bool) -> Vec<String> {
    let then = if approved { "goes on" } else { "fails there" };
    let (work, run) = (f.work_id, f.run_id);
    match resumer(f) {
        Resumer::Resuming => vec![format!("run {run} is being resumed now; it {then}")],
        Resumer::Service(goal) => vec![
            format!(
                "the running service resumes run {run} at its next sweep (goal {goal}); it {then}"
            ),
            format!("or now:    harn work run {work}"),
        ],
        Resumer::Person { idle } => {
            let mut said =
                vec![format!("next       harn work run {work} resumes run {run}, which {then}")];
            if let Some(goal) = idle {
                said.push(format!(
                    "or         harn supervisor service start (it would resume it for goal {goal}; it is not running)"
                ));
            }
            said
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resumer_is_the_run_the_service_or_a_person() {
        let (w, r, g) = (Id::new("w").unwrap(), Id::new("run-1").unwrap(), Id::new("g").unwrap());
        let enrolled = [g.clone()];
        let resumes = [(g.clone(), true)];
        let manual = [(g.clone(), false)];
        let facts = |run_held, liveness, governing| ResumeFacts {
            work_id: &w,
            run_id: &r,
            run_held,
            liveness,
            enrolled: &enrolled,
            governing,
        };
        assert_eq!(resumer(&facts(true, Liveness::Running, &resumes)), Resumer::Resuming);
        assert_eq!(
            resumer(&facts(false, Liveness::Running, &resumes)),
            Resumer::Service(g.clone())
        );
        assert_eq!(
            resumer(&facts(false, Liveness::Running, &manual)),
            Resumer::Person { idle: None },
            "a goal that does not resume approved runs leaves it to a person"
        );
        assert_eq!(
            resumer(&facts(false, Liveness::Stopped, &resumes)),
            Resumer::Person { idle: Some(g.clone()) }
        );
        assert_eq!(resumer(&facts(false, Liveness::Running, &[])), Resumer::Person { idle: None });
        let said = lines(&facts(false, Liveness::Running, &resumes), true);
        assert!(said[0].starts_with("the running service resumes run run-1"), "{said:?}");
        let said = lines(&facts(false, Liveness::Stale, &resumes), false);
        assert_eq!(said[0], "next       harn work run w resumes run run-1, which fails there");
        assert!(said[1].contains("harn supervisor service start"), "{said:?}");
    }
}
