//! The acceptance roll-up of a proof: every criterion (the work item's statements, the
//! workflow's declarations, and ids evidence cited without declaring them) with the verdict
//! its evidence gives, and whether the proof passes.

use super::protocol::{Criterion, Evidence, EvidenceStatus};
use serde::{Deserialize, Serialize};

/// Where a criterion came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriterionSource {
    /// The work item's `--accept` statements (ids `accept-1`, `accept-2`, …).
    Work,
    /// The workflow's `meta`.
    Workflow,
    /// Cited by evidence but never declared: kept, and flagged, so a typo stays visible.
    Undeclared,
}

/// A criterion's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptanceVerdict {
    /// Some evidence passed and none failed.
    Satisfied,
    /// Some evidence failed.
    Unsatisfied,
    /// No evidence passed or failed.
    Unknown,
}

/// One criterion of the roll-up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionResult {
    /// Its id.
    pub id: String,
    /// What must hold (empty for an undeclared one).
    pub statement: String,
    /// Where it came from.
    pub source: CriterionSource,
    /// Its verdict.
    pub verdict: AcceptanceVerdict,
    /// How many pieces of evidence cite it.
    pub evidence: u32,
}

/// Counts over the criteria.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Satisfied criteria.
    pub satisfied: u32,
    /// Unsatisfied criteria.
    pub unsatisfied: u32,
    /// Criteria without a verdict.
    pub unknown: u32,
    /// Criteria evidence cited without anyone declaring them.
    pub undeclared: u32,
    /// The work item's statements no evidence cited: context, not counted as unknown (unless
    /// the item asks for strict acceptance).
    #[serde(default)]
    pub uncited: u32,
}

/// The acceptance part of a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acceptance {
    /// Every criterion, in order: the work's, the workflow's, then undeclared ones.
    pub criteria: Vec<CriterionResult>,
    /// The counts.
    pub summary: Summary,
}

impl Acceptance {
    /// True when no criterion was checked at all (`show` says so).
    pub fn none_checked(&self) -> bool {
        self.criteria.is_empty()
    }

    /// A proof passes when the run succeeded and no criterion is unsatisfied or unknown. A run
    /// with no criteria at all passes on success.
    pub fn passes(&self, run_succeeded: bool) -> bool {
        run_succeeded && self.summary.unsatisfied == 0 && self.summary.unknown == 0
    }
}

/// The id of the `n`-th (1-based) acceptance statement of a work item.
pub(crate) fn work_criterion_id(n: usize) -> String {
    format!("accept-{n}")
}

/// Rolls up the work item's statements, the workflow's declared criteria and the evidence.
/// A work statement that evidence cites takes its verdict like any criterion; one nobody cites
/// is context (counted `uncited`), and counts as unknown only under `strict`.
pub(crate) fn roll_up(
    work_statements: &[String],
    declared: &[Criterion],
    evidence: &[Evidence],
    cut: &Cut,
    strict: bool,
) -> Acceptance {
    let mut criteria: Vec<CriterionResult> = Vec::new();
    for (i, s) in work_statements.iter().enumerate() {
        declare(&mut criteria, &work_criterion_id(i + 1), s, CriterionSource::Work);
    }
    for c in declared {
        declare(&mut criteria, &c.id, &c.statement, CriterionSource::Workflow);
    }
    for id in evidence.iter().flat_map(|e| &e.acceptance_ids).chain(cut.cited.keys()) {
        declare(&mut criteria, id, "", CriterionSource::Undeclared);
    }
    let mut summary = Summary::default();
    for c in &mut criteria {
        let citing = evidence.iter().filter(|e| e.acceptance_ids.contains(&c.id));
        let (mut passed, mut failed) = (false, false);
        for e in citing {
            c.evidence += 1;
            passed |= e.status == EvidenceStatus::Passed;
            failed |= e.status == EvidenceStatus::Failed;
        }
        if let Some(t) = cut.cited.get(&c.id) {
            c.evidence = c.evidence.saturating_add(t.count);
            passed |= t.passed;
            failed |= t.failed;
        }
        c.verdict = match (failed, passed) {
            (true, _) => AcceptanceVerdict::Unsatisfied,
            (false, true) => AcceptanceVerdict::Satisfied,
            (false, false) => AcceptanceVerdict::Unknown,
        };
        match c.verdict {
            AcceptanceVerdict::Satisfied => summary.satisfied += 1,
            AcceptanceVerdict::Unsatisfied => summary.unsatisfied += 1,
            AcceptanceVerdict::Unknown if c.source == CriterionSource::Work && !strict => {
                summary.uncited += 1
            }
            AcceptanceVerdict::Unknown => summary.unknown += 1,
        }
        summary.undeclared += u32::from(c.source == CriterionSource::Undeclared);
    }
    Acceptance { criteria, summary }
}

/// Most evidence records a proof keeps whole; later ones count toward the verdicts (a
/// [`Cut`]) and are said to be cut, so a workflow that floods evidence leaves a bounded
/// proof whose acceptance is still decided by everything it said.
pub(crate) const EVIDENCE_KEPT: usize = 500;
/// Most bytes of each text field of a kept evidence record (label, summary, ref); the rest
/// is cut with a marker.
pub(crate) const EVIDENCE_TEXT: usize = 2048;
/// Most distinct criterion ids the evidence past [`EVIDENCE_KEPT`] is counted for.
const CUT_IDS: usize = 1000;

/// The evidence past [`EVIDENCE_KEPT`]: how much, and what it said of each criterion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    /// Records cut.
    pub records: u64,
    /// Their size as the workflow wrote them (JSON), in bytes.
    pub bytes: u64,
    /// What they said of each criterion they cited (at most 1,000 ids).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cited: std::collections::BTreeMap<String, Cited>,
}

/// What cut evidence said of one criterion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cited {
    /// How many records cited it.
    pub count: u32,
    /// True when one of them passed.
    pub passed: bool,
    /// True when one of them failed.
    pub failed: bool,
}

impl Cut {
    /// Counts `e`, which is not kept.
    pub fn add(&mut self, e: &Evidence, bytes: u64) {
        self.records += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        for id in &e.acceptance_ids {
            if !self.cited.contains_key(id) && self.cited.len() >= CUT_IDS {
                continue;
            }
            let t = self.cited.entry(id.clone()).or_default();
            t.count = t.count.saturating_add(1);
            t.passed |= e.status == EvidenceStatus::Passed;
            t.failed |= e.status == EvidenceStatus::Failed;
        }
    }

    /// True when nothing was cut.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }
}

/// `e` with each text field at most [`EVIDENCE_TEXT`] bytes, a marker saying how much of
/// each was cut.
pub fn bounded(mut e: Evidence) -> Evidence {
    let cut = |s: &mut String| {
        if s.len() > EVIDENCE_TEXT {
            let mut end = EVIDENCE_TEXT;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let dropped = s.len() - end;
            s.truncate(end);
            s.push_str(&format!(" […{dropped} bytes cut]"));
        }
    };
    cut(&mut e.label);
    cut(&mut e.kind);
    e.summary.iter_mut().for_each(cut);
    e.reference.iter_mut().for_each(cut);
    e
}

/// Adds a criterion unless one with that id exists (the first declaration wins).
fn declare(
    criteria: &mut Vec<CriterionResult>,
    id: &str,
    statement: &str,
    source: CriterionSource,
) {
    if criteria.iter().all(|c| c.id != id) {
        let (id, statement) = (id.to_owned(), statement.to_owned());
        criteria.push(CriterionResult {
            id,
            statement,
            source,
            verdict: AcceptanceVerdict::Unknown,
            evidence: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(status: EvidenceStatus, ids: &[&str]) -> Evidence {
        Evidence {
            kind: "test".into(),
            status,
            label: "l".into(),
            summary: None,
            reference: None,
            acceptance_ids: ids.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn failed_beats_passed_and_nothing_is_unknown() {
        let declared = vec![
            Criterion { id: "tests".into(), statement: "tests pass".into() },
            Criterion { id: "docs".into(), statement: "docs updated".into() },
            Criterion { id: "lint".into(), statement: "lint clean".into() },
        ];
        let evidence = vec![
            ev(EvidenceStatus::Passed, &["tests", "lint"]),
            ev(EvidenceStatus::Failed, &["lint"]),
            ev(EvidenceStatus::Observed, &["docs"]),
        ];
        let a = roll_up(&[], &declared, &evidence, &Cut::default(), false);
        let verdicts: Vec<AcceptanceVerdict> = a.criteria.iter().map(|c| c.verdict).collect();
        assert_eq!(
            verdicts,
            [
                AcceptanceVerdict::Satisfied,
                AcceptanceVerdict::Unknown,
                AcceptanceVerdict::Unsatisfied
            ]
        );
        assert_eq!((a.summary.satisfied, a.summary.unsatisfied, a.summary.unknown), (1, 1, 1));
        assert!(!a.passes(true));
    }

    #[test]
    fn work_statements_are_criteria_evidence_can_cite() {
        let a = roll_up(
            &["it builds".into()],
            &[],
            &[ev(EvidenceStatus::Passed, &["accept-1"])],
            &Cut::default(),
            false,
        );
        assert_eq!(a.criteria[0].source, CriterionSource::Work);
        assert_eq!(a.criteria[0].verdict, AcceptanceVerdict::Satisfied);
        assert!(a.passes(true));
        assert!(!a.passes(false), "a failed run never passes");
    }

    #[test]
    fn an_undeclared_citation_declares_it_and_stays_visible() {
        let declared = vec![Criterion { id: "review".into(), statement: "reviewed".into() }];
        let a = roll_up(
            &[],
            &declared,
            &[ev(EvidenceStatus::Passed, &["review", "reveiw"])],
            &Cut::default(),
            false,
        );
        assert_eq!(a.summary.undeclared, 1);
        let typo = a.criteria.iter().find(|c| c.id == "reveiw").unwrap();
        assert_eq!(
            (typo.source, typo.verdict),
            (CriterionSource::Undeclared, AcceptanceVerdict::Satisfied)
        );
        assert!(a.passes(true), "the seed's example, which cites an undeclared id, still runs");
    }

    #[test]
    fn no_criteria_passes_on_success_and_says_none_were_checked() {
        let a = roll_up(&[], &[], &[], &Cut::default(), false);
        assert!(a.none_checked());
        assert!(a.passes(true));
    }

    #[test]
    fn evidence_past_the_cap_still_decides_and_long_text_is_cut_with_a_marker() {
        let mut cut = Cut::default();
        cut.add(&ev(EvidenceStatus::Passed, &["tests"]), 3000);
        cut.add(&ev(EvidenceStatus::Failed, &["lint"]), 10);
        let declared = [Criterion { id: "lint".into(), statement: "lint clean".into() }];
        let kept = [ev(EvidenceStatus::Passed, &["lint"])];
        let a = roll_up(&[], &declared, &kept, &cut, false);
        assert_eq!(
            a.criteria[0].verdict,
            AcceptanceVerdict::Unsatisfied,
            "a cut failure still fails"
        );
        assert_eq!(a.criteria[0].evidence, 2);
        assert_eq!(a.criteria[1].id, "tests");
        assert_eq!((cut.records, cut.bytes), (2, 3010));
        let mut long = ev(EvidenceStatus::Passed, &[]);
        long.label = "é".repeat(EVIDENCE_TEXT);
        let b = bounded(long);
        assert!(b.label.len() < EVIDENCE_TEXT + 40, "{}", b.label.len());
        assert!(b.label.ends_with(&format!("[…{} bytes cut]", EVIDENCE_TEXT * 2 - EVIDENCE_TEXT)));
    }
}
