//! The metadata signature of the files a derived read came from, and the rule (git's "racily
//! clean") for when such a read may be kept: what the service's read cache, the dashboard's
//! kept reads and the index of projections share. The shell collects the metadata (`stat`);
//! this decides.

use crate::time::Duration;

/// How far file timestamps may lag the change they record (coarse kernel clocks, file systems
/// with whole-second times).
pub(crate) const TIMESTAMP_SLACK: Duration = Duration::from_millis(2_000);

/// The metadata of one path, or its absence.
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

/// The signature of a read's files: a digest of every path's metadata, and the newest time
/// among them (in nanoseconds since the unix epoch; `None` when no path exists).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// A digest of inode, size, modification and change times, path by path.
    pub digest: [u8; 16],
    /// The newest modification or change time seen.
    pub newest_ns: Option<i128>,
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
    // Two FNV-1a lanes: a change detector over metadata, not a defence against a forger
    // (who cannot choose a change time anyway), so no cryptographic digest is needed.
    use std::hash::Hasher;
    let mut lanes = [crate::hash::Fnv64::default(), crate::hash::Fnv64::seeded(0x5bd1_e995)];
    for lane in &mut lanes {
        lane.write(&bytes);
    }
    let mut digest = [0; 16];
    digest[..8].copy_from_slice(&lanes[0].finish().to_le_bytes());
    digest[8..].copy_from_slice(&lanes[1].finish().to_le_bytes());
    Signature { digest, newest_ns }
}

/// Whether a read made in full at `read_at_ns` (wall clock, nanoseconds since the unix epoch)
/// may be cached with the signature its files had then: only when every file is older than
/// the read by more than [`TIMESTAMP_SLACK`]. A file changed during the read, or so close
/// before it that coarse timestamps cannot tell, may not be in what was read, so such a goal
/// read is made in full again next time (git's "racily clean" rule). A read with no file at
/// all is never cached.
pub fn cacheable(signature: &Signature, read_at_ns: i128) -> bool {
    let slack = i128::from(TIMESTAMP_SLACK.0);
    signature.newest_ns.is_some_and(|newest| newest.saturating_add(slack) < read_at_ns)
}

/// A present file's metadata for tests: its inode, size, and change and modification time in
/// seconds.
#[cfg(test)]
pub(crate) fn file(ino: u64, size: u64, mtime_s: i128) -> PathMeta {
    const S: i128 = 1_000_000_000;
    PathMeta::Present { ino, size, mtime_ns: mtime_s * S, ctime_ns: mtime_s * S }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000_000;

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
}
