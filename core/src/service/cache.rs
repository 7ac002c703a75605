//! When the service may trust what it read of a goal before instead of reading it again: a
//! pure rule over the metadata of the files the goal's state comes from. The daemon collects
//! the metadata (`stat`), this decides.

use crate::goal::engine::GoalView;
use crate::goal::GoalState;
use crate::ids::Id;
use crate::service::wake::Fingerprint;
use crate::time::Duration;
use crate::work::WorkState;

/// The longest a goal goes without a full read, whatever its files' metadata says: a bound on
/// how long a change the metadata cannot show (a rewrite within one timestamp tick that keeps
/// the size) can go unnoticed.
pub const FULL_READ_EVERY: Duration = Duration::from_millis(60_000);

/// How far file timestamps may lag the change they record (coarse kernel clocks, file systems
/// with whole-second times).
pub const TIMESTAMP_SLACK: Duration = Duration::from_millis(2_000);

/// The metadata of one watched path, or its absence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathMeta {
    /// The path does not exist (or could not be examined): that counts too.
    Missing,
    /// What `lstat` said.
    Present {
        /// Inode number.
        ino: u64,
        /// Size in bytes.
        size: u64,
        /// Modification time, in nanoseconds since the unix epoch.
        mtime_ns: i128,
        /// Status change time, in nanoseconds since the unix epoch.
        ctime_ns: i128,
    },
}

/// The signature of a goal's files: a digest of every path's metadata, and the newest time
/// among them (in nanoseconds since the unix epoch; `None` when no path exists).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// A digest of inode, size, modification and change times, path by path.
    pub digest: Fingerprint,
    /// The newest modification or change time seen.
    pub newest_ns: Option<i128>,
}

/// Whether a goal's state follows from its files alone, so a read of it may be kept: nothing
/// running or parked, whose end or ruling shows first in a lease or in a file the cache does
/// not watch.
pub fn settled(g: &GoalView) -> bool {
    g.projection.state != GoalState::Running
        && g.items.iter().all(|i| {
            !matches!(i.projection.state, WorkState::Running | WorkState::AwaitingApproval)
        })
}

/// The files and directories a goal's state is read from, relative to the root: its
/// directory, intent, journal and plans, and for every work item of its graph (and of its
/// earlier plans, whose work still counts against its attempts) the item's directory and
/// journal, and each item's latest run.
pub fn watched_paths(g: &GoalView) -> Vec<String> {
    let dir = crate::goal::plan::goal_dir(&g.intent.id);
    // The intent is written once, but one edited or damaged by hand must be noticed (and
    // refused) at once, not at the next full read.
    let mut paths = vec![
        dir.clone(),
        format!("{dir}/intent.json"),
        format!("{dir}/events.jsonl"),
        format!("{dir}/plans"),
        crate::layout::WORK.to_owned(),
    ];
    let mut items: std::collections::BTreeSet<&Id> = g.items.iter().map(|i| &i.id).collect();
    items.extend(g.intent.root_work_id.iter());
    for p in &g.plans {
        let plan = crate::goal::plan::plan_dir(&g.intent.id, &p.request.plan_id);
        paths.push(format!("{plan}/events.jsonl"));
        paths.push(plan);
        items.extend(p.applied.iter().flat_map(|(_, work)| work));
    }
    for id in items {
        paths.push(crate::layout::work_dir(id));
        paths.push(format!("{}/events.jsonl", crate::layout::work_dir(id)));
    }
    for run in g.items.iter().filter_map(|i| i.projection.latest_run_id.as_ref()) {
        paths.push(crate::layout::run_dir(run));
    }
    paths
}

/// The signature of `metas`, in the order given.
pub fn signature(metas: &[PathMeta]) -> Signature {
    let mut bytes = Vec::with_capacity(metas.len() * 48);
    let mut newest_ns = None;
    for m in metas {
        match *m {
            PathMeta::Missing => bytes.push(0),
            PathMeta::Present { ino, size, mtime_ns, ctime_ns } => {
                newest_ns = newest_ns.max(Some(mtime_ns.max(ctime_ns)));
                bytes.push(1);
                for n in [i128::from(ino), i128::from(size), mtime_ns, ctime_ns] {
                    bytes.extend_from_slice(&n.to_le_bytes());
                }
            }
        }
    }
    Signature { digest: Fingerprint::new(bytes), newest_ns }
}

/// Whether a goal read in full at `read_at_ns` (wall clock, nanoseconds since the unix epoch)
/// may be cached with the signature its files had then: only when every file is older than
/// the read by more than [`TIMESTAMP_SLACK`]. A file changed during the read, or so close
/// before it that coarse timestamps cannot tell, may not be in what was read, so such a goal
/// is read in full again next time (git's "racily clean" rule). A goal with no file at all is
/// never cached.
pub fn cacheable(signature: &Signature, read_at_ns: i128) -> bool {
    let slack = i128::from(TIMESTAMP_SLACK.0);
    signature.newest_ns.is_some_and(|newest| newest.saturating_add(slack) < read_at_ns)
}

/// Whether a cached read, `age` old, whose files had signature `cached`, still stands now
/// that they have signature `now`: the same signature, and younger than [`FULL_READ_EVERY`].
pub fn still_valid(cached: &Signature, now: &Signature, age: Duration) -> bool {
    age < FULL_READ_EVERY && cached.digest == now.digest
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000_000;

    fn file(ino: u64, size: u64, mtime_s: i128) -> PathMeta {
        PathMeta::Present { ino, size, mtime_ns: mtime_s * S, ctime_ns: mtime_s * S }
    }

    #[test]
    fn any_field_of_any_path_changes_the_signature() {
        let base = [file(1, 10, 100), PathMeta::Missing];
        let changed = [
            [file(2, 10, 100), PathMeta::Missing],
            [file(1, 11, 100), PathMeta::Missing],
            [file(1, 10, 101), PathMeta::Missing],
            [file(1, 10, 100), file(3, 0, 1)],
        ];
        for other in changed {
            assert_ne!(signature(&base).digest, signature(&other).digest, "{other:?}");
        }
        let ctime =
            PathMeta::Present { ino: 1, size: 10, mtime_ns: 100 * S, ctime_ns: 100 * S + 1 };
        assert_ne!(signature(&base).digest, signature(&[ctime, PathMeta::Missing]).digest);
        assert_eq!(signature(&base), signature(&base.clone()));
    }

    #[test]
    fn a_file_changed_within_the_slack_of_the_read_is_not_cached() {
        let sig = signature(&[file(1, 10, 100), PathMeta::Missing]);
        assert_eq!(sig.newest_ns, Some(100 * S));
        assert!(!cacheable(&sig, 101 * S), "within the slack: racily clean");
        assert!(!cacheable(&sig, 102 * S), "at the slack");
        assert!(cacheable(&sig, 102 * S + 1));
        assert!(!cacheable(&signature(&[PathMeta::Missing]), 1_000 * S), "nothing to vouch");
    }

    #[test]
    fn a_cached_read_stands_only_with_the_same_signature_and_while_young() {
        let a = signature(&[file(1, 10, 100)]);
        let b = signature(&[file(1, 12, 100)]);
        assert!(still_valid(&a, &a, Duration::from_millis(59_999)));
        assert!(!still_valid(&a, &a, FULL_READ_EVERY), "old reads are read again");
        assert!(!still_valid(&a, &b, Duration::ZERO));
    }
}
