//! What contains a run's processes, as reached when it started (recorded in `run.json` and
//! the proof): how they are held and killed (a cgroup of the run's own, or its process groups)
//! and what keeps them from writing what harn trusts or later runs (Landlock, a namespace
//! with `.harnery/`, git's directory and harn's configuration read-only and a `/dev` of its
//! own, or nothing, and why), and what this machine's containment does not hold (its gaps).
//! A policy may require confinement, or a complete one; the check is here, so a run that
//! cannot be confined is refused before anything is recorded.

pub mod credentials;
pub mod guard;

use crate::error::RecordError;
use serde::{Deserialize, Serialize};

/// How a run's processes are held together and killed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// A cgroup of the run's own: everything it starts, however it detaches, is killed with it.
    Cgroup,
    /// Its process groups, and the processes that still carry its `HARN_RUN_ID`.
    #[default]
    ProcessGroup,
}

/// What a run's processes could and could not do to harn's records, and how they were held.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Containment {
    /// How its processes are held and killed.
    pub holding: Holding,
    /// Why not a cgroup, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding_why: Option<String>,
    /// The resource limits set on its cgroup, in words (`memory 8G, tasks 4096, cpu weight
    /// 100 (cgroup v2)`), when any were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<String>,
    /// The limits this machine could not enforce, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unenforced: Vec<String>,
    /// The Landlock ABI version in force, when Landlock confines the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<u32>,
    /// What the run may write beyond its workspace and temporary directory (its harnesses'
    /// state, what the configuration adds), resolved to absolute paths when it started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// True when a namespace of the run's own binds `.harnery/` and the guarded paths
    /// read-only and gives it a `/dev` of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub namespace: bool,
    /// The paths held read-only although a writable path holds them (decision record 0010).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<String>,
    /// True when a call whose program sandboxes itself by mounting (Codex) runs sealed: every
    /// mount locked, everything but its writable paths read-only, a PID and cgroup namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
    /// The credentials from the environment its children were given, by name only (the
    /// ones `containment.env` names that were set); every other one is withheld.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// What this containment does not hold on this machine, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
    /// True when nothing the run starts can create, write, rename or remove anything under
    /// `.harnery/`.
    pub confined: bool,
    /// True when its workspace is read-only to it (a planner's or a reviewer's run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// True when the operator turned confinement off for the run (`--no-containment`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub turned_off: bool,
    /// Why it is not confined, or what confinement lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// What the run's network policy let it reach, resolved at the segment's start, and
    /// whether this machine held it (`None` for a run started before network policies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkHeld>,
}

impl Containment {
    /// In a few words: `landlock v7 + namespace`, `landlock v7`, or `none (why)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(abi) = self.landlock {
            parts.push(format!("landlock v{abi}"));
        }
        if self.namespace {
            parts.push("namespace".to_owned());
        }
        if self.read_only && self.confined {
            parts.push("workspace read-only".to_owned());
        }
        match (self.confined, &self.why) {
            (true, _) => parts.join(" + "),
            (false, Some(why)) => format!("none ({why})"),
            (false, None) => "none".to_owned(),
        }
    }
}

/// What this machine offers to confine a run, as the shell probed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// The Landlock ABI version the kernel supports, or why it has none.
    pub landlock: Result<u32, Unavailable>,
    /// Whether a child can have a namespace binding paths read-only with a `/dev` of its own,
    /// and how (a user namespace too, which every process but a root that may not make one
    /// gets), or why not.
    pub namespace: Result<NamespaceKind, Unavailable>,
    /// Whether a child can be sealed: its mounts locked by a second user namespace, a PID
    /// namespace with its own `/proc`, a cgroup namespace; or why not.
    pub sealed: Result<(), Unavailable>,
}

/// Why this machine does not offer one means of confinement, as its probe found it (the
/// kernel's words, or what the throwaway child met). Not a failure: the plan records it as
/// the reason a run is unconfined, or as a gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Unavailable {
    fn from(why: &str) -> Unavailable {
        Unavailable(why.to_owned())
    }
}

/// How a child gets its own mount namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceKind {
    /// A mount namespace alone: root on a machine that refuses it a user namespace, whose
    /// capabilities then stay the machine's.
    Mount,
    /// A user namespace mapping the host's own uid and gid, and a mount namespace in it: the
    /// child's capabilities are the namespace's only.
    UserAndMount,
}

/// What a run segment asks of confinement: absolute paths, no trailing `/`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Need {
    /// The coordination root: its `.harnery/` is what must stay out of reach.
    pub root: String,
    /// Where the workflow and its agents work (the root, a `--cwd`, a worktree).
    pub workspace: String,
    /// The segment's private temporary directory (its `TMPDIR`).
    pub temp: String,
    /// Every other path the run may write: its harnesses' state directories and what the
    /// configuration adds. A path that does not exist is left out (it cannot be created).
    pub writable: Vec<String>,
    /// The paths that must stay read-only, existing ones only ([`guard::guard`]); `.harnery/`
    /// among them.
    pub protected: Vec<String>,
    /// Set when confinement was turned off for this run, with who or what turned it off.
    pub off: Option<String>,
    /// True for a run that only reads its workspace (a planner's or a reviewer's): it writes
    /// its temporary directory and its adapters' state, never the workspace.
    pub read_only: bool,
}

/// A run's network as a segment held it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkHeld {
    /// What the policy lets it reach.
    #[serde(flatten)]
    pub allowed: crate::work::network::Allowed,
    /// True when a network namespace of its own held it (its only way out harn's proxy).
    pub held: bool,
    /// Why not, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// How a segment's children are to be confined, and the record of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The Landlock ABI to restrict with, when Landlock is used.
    pub landlock: Option<u32>,
    /// Where children may write, beneath each: everything else is read-only to them.
    pub writable: Vec<String>,
    /// The namespace every child starts in, when the machine offers one.
    pub namespace: Option<NamespaceKind>,
    /// What that namespace binds read-only: the protected paths a writable path holds.
    pub readonly: Vec<String>,
    /// Writable paths refused because they lie inside `.harnery/`.
    pub refused: Vec<String>,
    /// For a call whose program brings a sandbox of its own that must mount (see
    /// [`crate::work::adapter::sandbox_mounts`]), which Landlock forbids: it runs sealed
    /// in the same layout instead, everything else read-only. `None` when the machine cannot
    /// seal a namespace or the segment is not confined.
    pub sealed: Option<NamespaceKind>,
    /// What the run records (its `holding` is the shell's to fill).
    pub record: Containment,
}

/// The newest Landlock ABI whose rights a run uses.
pub(crate) const LANDLOCK_USED: u32 = 7;

/// The most writable paths a sealed call takes (each is a mount tree cloned for it).
pub const SEAL_MAX: usize = 32;

/// True when `path` is `dir` or lies below it.
pub(crate) fn within(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// Decides how to confine a segment. Landlock allows writes beneath the workspace, the
/// temporary directory and the other writable paths only; a namespace of the child's own
/// gives it a `/dev` with only what programs need (no terminal of the person's) and binds
/// read-only every protected path a writable path holds (Landlock grants whole subtrees, so
/// it cannot allow the top of the repository and refuse its `.harnery/` or `.git/`).
/// Without Landlock, or without the namespace where `.harnery/` needs it, the run is not
/// confined, and the record says why; what else is not held is listed in `gaps`.
pub fn plan(need: &Need, offer: &Offer) -> Plan {
    let harnery = format!("{}/.harnery", need.root.trim_end_matches('/'));
    let unconfined = |why: String| Plan {
        record: Containment { why: Some(why), ..Containment::default() },
        ..Plan::default()
    };
    if let Some(off) = &need.off {
        return unconfined(format!("turned off by {off}"));
    }
    // Rights of later ABIs are not used, so the record names the ABI in force.
    let abi = match &offer.landlock {
        Ok(abi) => (*abi).min(LANDLOCK_USED),
        Err(why) => return unconfined(why.to_string()),
    };
    let mut writable = Vec::new();
    let mut refused = Vec::new();
    let workspace = (!need.read_only).then_some(&need.workspace);
    let wanted = workspace.into_iter().chain([&need.temp]).chain(need.writable.iter());
    for path in wanted {
        let path = path.trim_end_matches('/').to_owned();
        if within(&path, &harnery) {
            refused.push(path);
        } else if !writable.contains(&path) {
            writable.push(path);
        }
    }
    if refused.contains(&need.workspace.trim_end_matches('/').to_owned()) {
        return unconfined(format!("the workspace {} is inside {harnery}", need.workspace));
    }
    let mut protected: Vec<String> = Vec::new();
    for p in need.protected.iter().chain([&harnery]) {
        let p = p.trim_end_matches('/').to_owned();
        if writable.iter().any(|w| within(&p, w)) && !protected.contains(&p) {
            protected.push(p);
        }
    }
    let mut gaps = Vec::new();
    let namespace = match &offer.namespace {
        Ok(kind) => Some(*kind),
        Err(why) if protected.contains(&harnery) => {
            return unconfined(format!(
                "the workspace holds {harnery}, which only a mount namespace can keep \
                 read-only, and {why}"
            ))
        }
        Err(why) => {
            gaps.push(format!("no namespace of its own ({why}): /dev/pts is the machine's"));
            let open: Vec<&str> = protected.iter().map(String::as_str).collect();
            if !open.is_empty() {
                gaps.push(format!("can change {}", open.join(", ")));
            }
            None
        }
    };
    if namespace == Some(NamespaceKind::Mount) {
        gaps.push("capabilities are the machine's (no user namespace for root here)".into());
    }
    if abi < 3 && namespace.is_none() {
        // Before ABI 3 Landlock cannot refuse truncate(2): `.harnery/` could be emptied.
        return unconfined(format!(
            "Landlock ABI {abi} cannot refuse truncating files, and no namespace holds \
             {harnery} read-only"
        ));
    }
    if abi < 3 {
        gaps.push(format!(
            "can truncate files outside its writable paths (Landlock ABI {abi} < 3)"
        ));
    }
    if abi < 5 {
        gaps.push(format!("device ioctls are not restricted (Landlock ABI {abi} < 5)"));
    }
    if abi < 6 {
        gaps.push(format!("may signal processes outside the run (Landlock ABI {abi} < 6)"));
    }
    let sealed = match (&offer.sealed, namespace) {
        (Ok(()), Some(_)) if writable.len() > SEAL_MAX => {
            gaps.push(format!(
                "calls with a sandbox of their own cannot be sealed with more than {SEAL_MAX} \
                 writable paths"
            ));
            None
        }
        (Ok(()), Some(kind)) => Some(kind),
        (Err(why), Some(_)) => {
            gaps.push(format!("calls with a sandbox of their own cannot be sealed: {why}"));
            None
        }
        (_, None) => None,
    };
    let readonly = if namespace.is_some() { protected.clone() } else { Vec::new() };
    let record = Containment {
        landlock: Some(abi),
        namespace: namespace.is_some(),
        protected: readonly.clone(),
        sealed: sealed.is_some(),
        gaps,
        confined: true,
        read_only: need.read_only,
        ..Containment::default()
    };
    Plan { landlock: Some(abi), writable, namespace, readonly, refused, sealed, record }
}

/// What a writable path that does not exist yet is made as, before the rules are built:
/// a rule can only be given to a path that exists, and a program that finds its state path
/// unwritable behaves otherwise than an open one (Claude Code without a writable
/// `~/.claude.json` loses settings its flags set). A `.json` file starts as an empty object
/// (an empty file is corrupt to the programs that read it); a name without an extension
/// (`~/.claude`, `~/.codex`) is a directory; anything else is left alone, its format
/// unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// A directory (0700, with its missing parents).
    Directory,
    /// A file with these bytes (0600), made only where its directory exists.
    File(&'static str),
}

/// See [`Made`].
pub fn made_before_rules(path: &str) -> Option<Made> {
    let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let stem = name.trim_start_matches('.');
    if stem.is_empty() || name == ".." {
        return None;
    }
    match stem.rsplit_once('.') {
        None => Some(Made::Directory),
        Some((_, "json")) => Some(Made::File("{}\n")),
        Some(_) => None,
    }
}

/// Whether a run must be confined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Confined where the machine allows; recorded either way.
    #[default]
    Preferred,
    /// Refused, before anything is recorded, where it cannot be confined.
    Required,
    /// Refused where it cannot be confined, or where the confinement has a gap.
    Complete,
}

/// Refuses a run the policy requires to be confined (or confined without a gap) when it
/// cannot be; the error says why and that nothing ran.
pub fn check(required: Requirement, reached: &Containment) -> Result<(), RecordError> {
    let why = match required {
        Requirement::Preferred => None,
        _ if !reached.confined => {
            Some(reached.why.clone().unwrap_or_else(|| "no confinement is available".into()))
        }
        Requirement::Complete if !reached.gaps.is_empty() => {
            Some(format!("its confinement here has gaps: {}", reached.gaps.join("; ")))
        }
        _ => None,
    };
    match why {
        Some(why) => Err(RecordError::refused(format!(
            "the policy requires {}, and this run cannot have it here: {why}; nothing ran and \
             no attempt was charged",
            if required == Requirement::Complete { "complete containment" } else { "containment" }
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_state_path_is_made_as_what_its_name_says() {
        assert_eq!(made_before_rules("/home/a/.claude"), Some(Made::Directory));
        assert_eq!(made_before_rules("/home/a/.codex/"), Some(Made::Directory));
        assert_eq!(made_before_rules("/home/a/.claude.json"), Some(Made::File("{}\n")));
        assert_eq!(made_before_rules("/home/a/.config/x/config.toml"), None);
        assert_eq!(made_before_rules("/"), None);
        assert_eq!(made_before_rules("/home/a/.."), None);
    }

    fn need(workspace: &str) -> Need {
        Need {
            root: "/repo".into(),
            workspace: workspace.into(),
            temp: "/tmp/harn-run".into(),
            writable: vec!["/home/u/.claude".into(), "/repo/.harnery/work".into()],
            protected: vec!["/repo/.git".into(), "/repo/harness.toml".into(), "/etc/x".into()],
            off: None,
            read_only: false,
        }
    }

    fn offer(namespace: Result<NamespaceKind, Unavailable>) -> Offer {
        Offer { landlock: Ok(7), namespace, sealed: Ok(()) }
    }

    #[test]
    fn the_repository_as_workspace_binds_what_it_must_not_change() {
        let p = plan(&need("/repo"), &offer(Ok(NamespaceKind::UserAndMount)));
        assert_eq!(p.namespace, Some(NamespaceKind::UserAndMount));
        assert_eq!(p.readonly, ["/repo/.git", "/repo/harness.toml", "/repo/.harnery"]);
        assert!(p.record.confined && p.record.namespace && p.record.gaps.is_empty());
        assert_eq!(p.record.summary(), "landlock v7 + namespace");
        assert_eq!(p.writable, ["/repo", "/tmp/harn-run", "/home/u/.claude"]);
        assert_eq!(p.refused, ["/repo/.harnery/work"], "nothing inside .harnery is writable");
        assert_eq!(p.sealed, Some(NamespaceKind::UserAndMount), "a sandboxing call is sealed");

        let p = plan(&need("/work/trees/w1"), &offer(Ok(NamespaceKind::Mount)));
        assert_eq!(p.readonly, Vec::<String>::new(), "nothing protected is writable");
        assert_eq!(p.namespace, Some(NamespaceKind::Mount), "a /dev of its own all the same");
        assert!(p.record.gaps[0].contains("capabilities"), "{:?}", p.record.gaps);
    }

    #[test]
    fn a_reading_run_writes_only_its_temporary_directory_and_its_state() {
        let mut n = need("/repo");
        n.read_only = true;
        let p = plan(&n, &offer(Err(Unavailable("no user namespaces".into()))));
        assert_eq!(p.writable, ["/tmp/harn-run", "/home/u/.claude"]);
        assert!(p.record.confined, "nothing writable holds .harnery: Landlock alone holds it");
        assert!(p.record.summary().ends_with("workspace read-only"), "{}", p.record.summary());
    }

    #[test]
    fn without_a_namespace_a_worktree_is_confined_with_its_gaps_named() {
        let mut n = need("/work/trees/w1");
        n.protected.push("/work/trees/w1/.git".into());
        let p = plan(&n, &offer(Err("no user namespaces".into())));
        assert!(p.readonly.is_empty() && p.namespace.is_none() && p.sealed.is_none());
        assert_eq!(p.record.summary(), "landlock v7");
        let gaps = p.record.gaps.join("; ");
        assert!(gaps.contains("/dev/pts is the machine's"), "{gaps}");
        assert!(gaps.contains("can change /work/trees/w1/.git"), "{gaps}");
        assert!(check(Requirement::Required, &p.record).is_ok());
        let err = check(Requirement::Complete, &p.record).unwrap_err().to_string();
        assert!(err.contains("complete containment") && err.contains("/work/trees/w1/.git"));

        let p = plan(&need("/repo"), &offer(Err("user namespaces are off".into())));
        assert!(!p.record.confined && p.landlock.is_none());
        assert!(p.record.why.as_deref().unwrap().contains("user namespaces are off"));
    }

    #[test]
    fn an_old_landlock_and_no_seal_are_gaps() {
        let o = Offer {
            landlock: Ok(4),
            namespace: Ok(NamespaceKind::UserAndMount),
            sealed: Err("no PID namespace".into()),
        };
        let p = plan(&need("/repo"), &o);
        let gaps = p.record.gaps.join("; ");
        assert!(gaps.contains("ioctls") && gaps.contains("signal") && gaps.contains("sealed"));
        assert_eq!(p.sealed, None);
        assert!(p.record.confined);
    }

    #[test]
    fn the_record_names_the_abi_in_force_and_an_abi_without_truncate_is_not_enough_alone() {
        let o = |abi| Offer {
            landlock: Ok(abi),
            namespace: Ok(NamespaceKind::UserAndMount),
            sealed: Ok(()),
        };
        assert_eq!(plan(&need("/repo"), &o(9)).record.landlock, Some(LANDLOCK_USED));
        let p = plan(&need("/repo"), &o(2));
        assert!(p.record.confined && p.record.gaps.join(" ").contains("truncate"));
        let alone = Offer { namespace: Err("none".into()), ..o(2) };
        let p = plan(&need("/work/trees/w1"), &alone);
        assert!(!p.record.confined, "{:?}", p.record);
        let mut many = need("/repo");
        many.writable = (0..SEAL_MAX).map(|i| format!("/w/{i}")).collect();
        let p = plan(&many, &o(7));
        assert!(p.sealed.is_none() && p.record.gaps.join(" ").contains("sealed"), "{:?}", p.record);
    }

    #[test]
    fn no_landlock_or_confinement_turned_off_confines_nothing_and_says_why() {
        let none = Offer {
            landlock: Err("no Landlock in this kernel".into()),
            namespace: Ok(NamespaceKind::Mount),
            sealed: Ok(()),
        };
        let p = plan(&need("/work/trees/w1"), &none);
        assert_eq!(p.record.summary(), "none (no Landlock in this kernel)");
        let mut off = need("/repo");
        off.off = Some("--no-containment".into());
        let p = plan(&off, &offer(Ok(NamespaceKind::Mount)));
        assert_eq!(p.record.summary(), "none (turned off by --no-containment)");
        let p = plan(&need("/repo/.harnery/x"), &offer(Ok(NamespaceKind::Mount)));
        assert!(!p.record.confined, "a workspace inside .harnery cannot be confined");
    }

    #[test]
    fn a_required_containment_refuses_an_unconfined_run_and_says_why() {
        let none = Containment {
            why: Some("no Landlock in this kernel".into()),
            ..Containment::default()
        };
        assert_eq!(none.summary(), "none (no Landlock in this kernel)");
        assert!(check(Requirement::Preferred, &none).is_ok());
        let err = check(Requirement::Required, &none).unwrap_err().to_string();
        assert!(err.contains("no Landlock in this kernel") && err.contains("nothing ran"), "{err}");
        let full = Containment {
            holding: Holding::Cgroup,
            landlock: Some(7),
            namespace: true,
            confined: true,
            ..Containment::default()
        };
        assert_eq!(full.summary(), "landlock v7 + namespace");
        assert!(check(Requirement::Required, &full).is_ok());
        assert!(check(Requirement::Complete, &full).is_ok());
    }
}
