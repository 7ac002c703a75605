//! One reading of the root for the dashboard: everything a page shows, taken through the
//! readers alone, so rendering is a pure function of this value and the time.

use crate::dash::readers::{
    ApprovalRow, Detail, Focus, GoalListing, Kept, Reader, ServiceView, WorkRow,
};
use harn_core::time::WallTime;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// How long the dashboard waits for the harness daemon to answer.
const HARNESS_TIMEOUT: Duration = Duration::from_secs(2);

/// What the dashboard read, and when.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    /// The coordination root, as shown.
    pub root: String,
    /// When it was read.
    pub taken_at: WallTime,
    /// The supervisor service.
    pub service: ServiceView,
    /// Every goal and the entries that are not goals, or why none could be listed.
    pub goals: Result<GoalListing, String>,
    /// Every work item and the items that could not be read, or why none could be listed.
    pub work: Result<(Vec<WorkRow>, Vec<String>), String>,
    /// The harness daemon's status document, or why it could not be had.
    pub harnesses: Result<serde_json::Value, String>,
    /// Every approval and the ones that could not be read, or why none could be listed.
    pub approvals: Result<(Vec<ApprovalRow>, Vec<String>), String>,
    /// The detail of the entity the screen has open, when it has one, with that entity.
    pub detail: Option<(Focus, Result<Detail, String>)>,
}

impl Snapshot {
    /// Reads the root, and the detail of `focus` when the screen has one open; goals and
    /// work items whose files did not change come from `kept`, the reads of earlier calls.
    pub fn take(root: &Path, focus: Option<&Focus>, kept: &mut Kept) -> Snapshot {
        let mut reader = Reader::open(root);
        let service = reader.service();
        // Work first: a goal whose items are unchanged and whose own files are is not read.
        let work = reader.work(kept);
        let goals = reader.goals(&service, kept);
        let harnesses = reader.harnesses(HARNESS_TIMEOUT);
        let approvals = reader.approvals();
        let detail = focus.map(|f| (f.clone(), reader.detail(f)));
        Snapshot {
            root: reader.root().display().to_string(),
            taken_at: reader.now(),
            service,
            goals,
            work,
            harnesses,
            approvals,
            detail,
        }
    }

    /// Whether two readings show the same thing (the time they were taken aside).
    pub fn same_as(&self, other: &Snapshot) -> bool {
        Snapshot { taken_at: other.taken_at, ..self.clone() } == *other
    }
}
