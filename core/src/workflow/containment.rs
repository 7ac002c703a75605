//! What contains a run's processes, as reached when it started (recorded in `run.json` and
//! the proof): how they are held and killed (a cgroup of the run's own, or its process groups)
//! and what keeps them from writing harn's records (Landlock, a mount namespace binding
//! `.harnery/` read-only, or nothing, and why). A policy may require confinement; the check is
//! here, so a run that cannot be confined is refused before anything is recorded.

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
    /// The Landlock ABI version in force, when Landlock confines the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<u32>,
    /// What the run may write beyond its workspace and temporary directory (its harnesses'
    /// state, what the configuration adds), resolved to absolute paths when it started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// True when a mount namespace binds the root's `.harnery/` read-only for the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub namespace: bool,
    /// True when nothing the run starts can create, write, rename or remove anything under
    /// `.harnery/`.
    pub confined: bool,
    /// True when the operator turned confinement off for the run (`--no-containment`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub turned_off: bool,
    /// Why it is not confined, or what confinement lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
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
    pub landlock: Result<u32, String>,
    /// Whether a mount namespace can bind `.harnery/` read-only for a child, and how (a user
    /// namespace too, for a process that is not root), or why not.
    pub namespace: Result<NamespaceKind, String>,
}

/// How a child gets its own mount namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceKind {
    /// A mount namespace alone (the host runs as root).
    Mount,
    /// A user namespace mapping the host's own uid and gid, and a mount namespace in it.
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
    /// Set when confinement was turned off for this run, with who or what turned it off.
    pub off: Option<String>,
}

/// How a segment's children are to be confined, and the record of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The Landlock ABI to restrict with, when Landlock is used.
    pub landlock: Option<u32>,
    /// Where children may write, beneath each: everything else is read-only to them.
    pub writable: Vec<String>,
    /// The directory a mount namespace binds read-only (the root's `.harnery/`), when one is
    /// needed because a writable path holds it.
    pub bind_readonly: Option<String>,
    /// True when that namespace needs a user namespace too.
    pub userns: bool,
    /// Writable paths refused because they lie inside `.harnery/`.
    pub refused: Vec<String>,
    /// For a call whose program brings a sandbox of its own that must mount (see
    /// [`crate::workflow::adapter::sandbox_mounts`]), which Landlock forbids: the namespace
    /// that binds `.harnery/` read-only in its stead, and whether it needs a user namespace.
    /// `None` when the machine offers no namespace or the segment is not confined.
    pub own_sandbox: Option<(String, bool)>,
    /// What the run records (its `holding` is the shell's to fill).
    pub record: Containment,
}

/// True when `path` is `dir` or lies below it.
fn within(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// Decides how to confine a segment: Landlock allows writes beneath the workspace, the
/// temporary directory and the other writable paths only; when one of them holds the root's
/// `.harnery/` (the workspace is the repository itself), a mount namespace binds it read-only,
/// since Landlock cannot allow new files at the top of a tree while refusing them in one of
/// its directories. Without Landlock, or without the namespace where one is needed, the run
/// is not confined, and the record says why.
pub fn plan(need: &Need, offer: &Offer) -> Plan {
    let harnery = format!("{}/.harnery", need.root.trim_end_matches('/'));
    let unconfined = |why: String| Plan {
        record: Containment { why: Some(why), ..Containment::default() },
        ..Plan::default()
    };
    if let Some(off) = &need.off {
        return unconfined(format!("turned off by {off}"));
    }
    let abi = match &offer.landlock {
        Ok(abi) => *abi,
        Err(why) => return unconfined(why.clone()),
    };
    let mut writable = Vec::new();
    let mut refused = Vec::new();
    let wanted = [&need.workspace, &need.temp].into_iter().chain(need.writable.iter());
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
    let holds_harnery = writable.iter().any(|p| within(&harnery, p));
    let (bind_readonly, userns, namespace) = match (holds_harnery, &offer.namespace) {
        (false, _) => (None, false, false),
        (true, Ok(kind)) => (Some(harnery.clone()), *kind == NamespaceKind::UserAndMount, true),
        (true, Err(why)) => {
            return unconfined(format!(
                "the workspace holds {harnery}, which only a mount namespace can keep \
                 read-only, and {why}"
            ))
        }
    };
    let record =
        Containment { landlock: Some(abi), namespace, confined: true, ..Containment::default() };
    let own_sandbox =
        offer.namespace.as_ref().ok().map(|k| (harnery.clone(), *k == NamespaceKind::UserAndMount));
    Plan { landlock: Some(abi), writable, bind_readonly, userns, refused, own_sandbox, record }
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
}

/// Refuses a run the policy requires to be confined when it cannot be; the error says why
/// and that nothing ran.
pub fn check(required: Requirement, reached: &Containment) -> Result<(), String> {
    if required == Requirement::Required && !reached.confined {
        return Err(format!(
            "the policy requires containment, and this run cannot be contained here: {}; \
             nothing ran and no attempt was charged",
            reached.why.as_deref().unwrap_or("no confinement is available")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(workspace: &str) -> Need {
        Need {
            root: "/repo".into(),
            workspace: workspace.into(),
            temp: "/tmp/harn-run".into(),
            writable: vec!["/home/u/.claude".into(), "/repo/.harnery/work".into()],
            off: None,
        }
    }

    fn offer(namespace: Result<NamespaceKind, String>) -> Offer {
        Offer { landlock: Ok(7), namespace }
    }

    #[test]
    fn the_repository_as_workspace_needs_the_namespace_and_a_worktree_does_not() {
        let p = plan(&need("/repo"), &offer(Ok(NamespaceKind::UserAndMount)));
        assert_eq!(p.bind_readonly.as_deref(), Some("/repo/.harnery"));
        assert!(p.userns && p.record.confined && p.record.namespace);
        assert_eq!(p.record.summary(), "landlock v7 + namespace");
        assert_eq!(p.writable, ["/repo", "/tmp/harn-run", "/home/u/.claude"]);
        assert_eq!(p.refused, ["/repo/.harnery/work"], "nothing inside .harnery is writable");
        let own = Some(("/repo/.harnery".to_owned(), true));
        assert_eq!(p.own_sandbox, own, "a self-sandboxing call gets the namespace instead");
        let p = plan(&need("/work/trees/w1"), &offer(Ok(NamespaceKind::Mount)));
        assert_eq!(p.own_sandbox, Some(("/repo/.harnery".to_owned(), false)), "in a worktree too");

        let p = plan(&need("/work/trees/w1"), &offer(Err("no user namespaces".into())));
        assert_eq!(p.bind_readonly, None, "Landlock alone keeps .harnery out of reach");
        assert_eq!(p.own_sandbox, None);
        assert_eq!(p.record.summary(), "landlock v7");

        let p = plan(&need("/repo"), &offer(Err("user namespaces are off".into())));
        assert!(!p.record.confined && p.landlock.is_none());
        assert!(p.record.why.as_deref().unwrap().contains("user namespaces are off"));
    }

    #[test]
    fn no_landlock_or_confinement_turned_off_confines_nothing_and_says_why() {
        let none = Offer {
            landlock: Err("no Landlock in this kernel".into()),
            namespace: Ok(NamespaceKind::Mount),
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
        let err = check(Requirement::Required, &none).unwrap_err();
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
    }
}
