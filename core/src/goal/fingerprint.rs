//! The fingerprint of a goal's graph: every item's durable standing, hashed in graph order,
//! so that equal fingerprints before and after a cycle mean it made no progress. The goal's
//! own fingerprint (`cycle::goal_fingerprint`) adds the goal's standing to the same rows.

use crate::work::projection::GraphItem;
use sha2::{Digest, Sha256};

/// The progress fingerprint of a goal's graph: every item's durable standing, in graph
/// order. Equal before and after a cycle means the cycle made no progress.
pub(crate) fn progress_fingerprint(items: &[GraphItem]) -> String {
    let mut h = Sha256::new();
    feed_items(&mut h, items);
    hex16(h)
}

/// Each item's id, state, next action, attempts used, charged attempts and latest run,
/// length-prefixed so no two graphs feed the same bytes.
pub(super) fn feed_items(h: &mut Sha256, items: &[GraphItem]) {
    h.update((items.len() as u32).to_le_bytes());
    for i in items {
        let p = &i.projection;
        feed_str(h, i.id.as_str());
        // Declaration positions: the enums only ever grow at the end.
        h.update([p.state as u8, p.next_action as u8]);
        h.update(p.attempts_used.to_le_bytes());
        h.update(p.charged_attempts.to_le_bytes());
        feed_str(h, p.latest_run_id.as_ref().map_or("", |r| r.as_str()));
    }
}

pub(super) fn feed_str(h: &mut Sha256, s: &str) {
    h.update((s.len() as u32).to_le_bytes());
    h.update(s.as_bytes());
}

pub(super) fn hex16(h: Sha256) -> String {
    h.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}
