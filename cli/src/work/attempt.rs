//! One attempt of a work item under its run lease: the attempt is recorded and the manifest
//! frozen before the workflow is spawned, or a parked attempt is resumed as the same run;
//! the proof is written for success and failure alike, never for a run that parked.

use super::host::run_segment;
use crate::os::store::{Item, Store, StoreError};
use harn_core::error::RecordError;
use harn_core::ids::Id;
use harn_core::work::agent::AdapterSpec;
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::attempt::{self, SegmentEnd};
use harn_core::work::ledger;
use harn_core::work::policy::FrozenPolicy;
use harn_core::work::run::{Billing, FrozenAdapter, Proof, RunManifest, RUN_VERSION};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why an attempt did not end in a proof.
#[derive(Debug)]
pub enum AttemptRefusal {
    /// Nothing was recorded: the item may not start an attempt now.
    NotNow(String),
    /// A record could not be read or written.
    Store(StoreError),
}

impl From<StoreError> for AttemptRefusal {
    fn from(e: StoreError) -> AttemptRefusal {
        AttemptRefusal::Store(e)
    }
}

/// What a run is started with, besides the work item.
#[derive(Clone, Debug)]
pub struct RunLimits {
    /// The whole run's wall-clock budget.
    pub timeout: Duration,
    /// Agent calls in flight at once.
    pub concurrency: usize,
    /// The adapter that answers agent calls, if any.
    pub adapter: Option<FrozenAdapter>,
    /// The specialist team.
    pub team: harn_core::work::team::Team,
    /// Every other adapter the team names.
    pub adapters: BTreeMap<String, AdapterSpec>,
    /// Most agent calls.
    pub max_agents: u32,
    /// Which account calls may bill.
    pub billing: Billing,
    /// The host policy, frozen by value.
    pub policy: Option<FrozenPolicy>,
    /// Who is asked when policy says `ask`.
    pub approval_to: Option<String>,
    /// The declared isolation boundary.
    pub isolation: harn_core::work::run::Isolation,
    /// The workflow's and its calls' working directory (absolute), if not the root.
    pub cwd: Option<String>,
    /// What the root's configuration lets every confined run write (unresolved).
    pub writable: Vec<String>,
    /// The credentials from the environment the root's configuration lets runs have.
    pub env: Vec<String>,
    /// True when the operator turned confinement off (`--no-containment`).
    pub no_containment: bool,
    /// Where items' worktrees are made, under `--isolation worktree`.
    pub workspace_root: Option<std::path::PathBuf>,
    /// The commit new worktree branches start from.
    pub base: Option<String>,
    /// The resource limits of each segment's cgroup and tmpfs: the configuration's, with
    /// what the command line named over them.
    pub resources: harn_core::limits::ResourceLimits,
    /// The limits the command line named (`--limit`), which a goal's frozen ones never
    /// replace.
    pub limit_overrides: harn_core::limits::ResourceLimits,
    /// The cluster whose nodes run each segment, if any.
    pub cluster: Option<harn_core::work::cluster::FrozenCluster>,
    /// What each run may reach over the network.
    pub network: harn_core::work::network::NetworkPolicy,
    /// What the dispatching goal's earlier runs spent on agent calls, for `scope: goal`
    /// cost rules; `None` for a run no goal dispatched.
    pub goal_spent_micro_usd: Option<u64>,
}

/// How an attempt's run ended for now.
pub enum Ended {
    /// With a proof.
    Proof(Id, Box<Proof>),
    /// Parked on an approval; no proof yet.
    Parked(Box<ApprovalRequest>),
}

/// Runs one attempt of `id` (a retry when `retry`), or resumes its parked attempt once the
/// approval it waits on has been ruled on: the core's [`attempt::run_attempt`] over this
/// process's store, lease, spawner and git. A resumed run takes every option from its
/// manifest, none from the caller.
pub fn run_attempt(
    store: &mut Store,
    id: &Id,
    retry: bool,
    limits: &RunLimits,
    actor: &str,
) -> Result<Ended, AttemptRefusal> {
    let mut host = WorkHost { store, limits, lock: None };
    match attempt::run_attempt(&mut host, id, retry, actor) {
        Ok(attempt::AttemptEnded::Proof(run, proof)) => Ok(Ended::Proof(run, proof)),
        Ok(attempt::AttemptEnded::Parked(request)) => Ok(Ended::Parked(request)),
        Ok(attempt::AttemptEnded::Abandoned) => Err(AttemptRefusal::Store(StoreError::refused(
            "the run's host gave it up before its proof",
        ))),
        Ok(attempt::AttemptEnded::Unsealed(run, why)) => Err(AttemptRefusal::Store(
            StoreError::refused(format!("run {run} {}: {why}", attempt::UNSEALED)),
        )),
        Err(ledger::Refusal::NotNow(why)) => Err(AttemptRefusal::NotNow(why)),
        Err(ledger::Refusal::Unstarted(e)) => Err(AttemptRefusal::Store(StoreError::Unstarted(e))),
        Err(ledger::Refusal::Store(e)) => Err(AttemptRefusal::Store(e)),
    }
}

/// This process as an attempt's host.
struct WorkHost<'a> {
    store: &'a mut Store,
    limits: &'a RunLimits,
    /// The item's history lock, from the read to the attempt's record.
    lock: Option<crate::os::store::EventsLock>,
}

/// What the attempt's host owes the core: a refusal, or the store's error as it is.
type Refusal = ledger::Refusal<StoreError>;

impl attempt::AttemptHost for WorkHost<'_> {
    type Fs = crate::os::fs::RealFs;
    type Error = StoreError;

    fn ledger(&mut self) -> &mut ledger::Ledger<Self::Fs> {
        self.store.ledger()
    }

    fn now(&mut self) -> harn_core::time::WallTime {
        self.store.now()
    }

    fn stopping(&mut self) -> Option<String> {
        crate::os::children::forced().then(crate::os::children::stopper)
    }

    fn lease(&mut self, id: &Id) -> Result<(), Refusal> {
        if !self.store.exists(id) {
            return Err(Refusal::NotNow(format!("no work item {id}")));
        }
        self.store.lock_run(id).map_err(Refusal::Store)
    }

    fn recover(&mut self) -> Result<(), Refusal> {
        let recovered = self.store.recover(super::hold::reap).map_err(Refusal::Store)?;
        for (run, killed) in &recovered.reaped {
            errln!("harn: run {run} had lost its host; {killed} of its processes were stopped");
        }
        for problem in &recovered.problems {
            errln!("harn: warning: {problem}");
        }
        super::hold::sweep_leftovers(self.store.root());
        Ok(())
    }

    fn read_locked(&mut self, id: &Id) -> Result<Item, Refusal> {
        let (lock, item) = self.store.lock_and_read(id).map_err(Refusal::Store)?;
        self.lock = Some(lock);
        Ok(item)
    }

    fn unlock(&mut self) {
        self.lock = None;
    }

    fn check_workflow(&mut self, item: &Item) -> Result<(), RecordError> {
        check_digest(self.store.root(), &item.intent.workflow.path, &item.intent.workflow.sha256)
            .map_err(RecordError::Refused)
    }

    fn options(&mut self, item: &Item) -> Result<RunManifest, Refusal> {
        let (id, limits) = (&item.intent.id, self.limits);
        // Under worktree isolation the item's own worktree is made (or found again) first:
        // it is the run's working directory, and the repository's git directory is
        // writable too.
        let (limits, workspace) = match limits.isolation {
            harn_core::work::run::Isolation::Worktree => {
                let recorded = recorded_workspace(self.store, item);
                let options = super::worktree::Options {
                    root: limits.workspace_root.as_deref(),
                    base: limits.base.as_deref(),
                    recorded,
                    open: limits.no_containment,
                    prerequisites: accepted_commits(self.store, item),
                };
                // Each attempt works in a repository of its own (the run may write all of it,
                // and nothing of the person's); a remote run's is published to its node.
                let ws = super::repository::prepare(self.store.root(), id, &options)
                    .map_err(|e| Refusal::NotNow(format!("{e}; no attempt was recorded")))?;
                let mut within = limits.clone();
                within.cwd = Some(ws.path.clone());
                // Its git directory lies beside its files; a remote run's is on its node.
                if limits.cluster.is_none() {
                    within.writable.push(ws.git_dir.clone());
                }
                (std::borrow::Cow::Owned(within), Some(ws))
            }
            _ => (std::borrow::Cow::Borrowed(limits), None),
        };
        let limits = limits.as_ref();
        // A policy that requires containment refuses a run this machine cannot confine,
        // before anything is recorded.
        let containment = planned_containment(self.store.root(), limits, false);
        if let Some(policy) = &limits.policy {
            harn_core::work::containment::check(policy.policy.containment, &containment)
                .map_err(|refused| Refusal::NotNow(refused.to_string()))?;
        }
        // A run that may reach nothing is never run open: where no namespace of its own can
        // hold it, it is refused before anything is recorded.
        let none = limits.network == harn_core::work::network::NetworkPolicy::None;
        if none && !(containment.confined && containment.namespace) {
            let why = containment.why.clone().unwrap_or_else(|| "no namespace of its own".into());
            return Err(Refusal::NotNow(format!(
                "its network policy is \"none\", which this run cannot hold ({why}); no attempt \
                 was recorded"
            )));
        }
        Ok(RunManifest {
            schema_version: RUN_VERSION,
            run_id: self.store.new_run_id(),
            work_id: id.clone(),
            attempt: 0,
            trigger: harn_core::work::Trigger::Initial,
            started_at: self.store.now(),
            script: item.intent.workflow.clone(),
            timeout_ms: limits.timeout.as_millis() as u64,
            adapter: limits.adapter.clone(),
            team: limits.team.clone(),
            adapters: limits.adapters.clone(),
            max_agents: Some(limits.max_agents),
            billing: limits.billing,
            policy: limits.policy.clone(),
            approval_to: limits.approval_to.clone(),
            concurrency: limits.concurrency as u32,
            isolation: limits.isolation,
            cwd: limits.cwd.clone(),
            context: None,
            goal_spent_micro_usd: limits.goal_spent_micro_usd,
            workspace,
            planning: None,
            containment: Some(containment),
            resource_limits: Some(limits.resources),
            cluster: limits.cluster.clone(),
            network: Some(limits.network.clone()),
        })
    }

    fn segment(
        &mut self,
        _item: &Item,
        m: &RunManifest,
        start: &serde_json::Value,
        fold: harn_core::work::run::RunFold,
    ) -> Result<SegmentEnd, Refusal> {
        run_segment(self.store, m, start, fold).map_err(Refusal::Store)
    }

    fn attest(&mut self, m: &RunManifest, fold: &mut harn_core::work::run::RunFold) {
        if let Some(ws) = &m.workspace {
            let open = m.containment.as_ref().is_some_and(|c| c.turned_off);
            let attested = match ws.own {
                true => super::repository::attest(
                    ws,
                    self.store.root(),
                    &m.work_id,
                    m.run_id.as_str(),
                    open,
                ),
                false => super::worktree::attest(ws, self.store.root(), open),
            };
            match attested {
                Ok((attested, guarded)) => {
                    // What git or harn would execute or obey in the change waits for a person,
                    // as a change the run made to a guarded file does.
                    let (run, work) = (m.run_id.as_str(), m.work_id.as_str());
                    let place = std::path::Path::new(&ws.path);
                    let found = crate::os::guarded::record_candidate(
                        self.store, run, work, place, &guarded,
                    );
                    // Unrecorded, the change could be accepted unseen: the work is then not
                    // attested, so it cannot land.
                    match found {
                        Ok(_) => fold.attest(attested),
                        Err(e) => {
                            errln!("harn: warning: the worktree {} was not attested: {e}", ws.path)
                        }
                    }
                }
                Err(e) => errln!("harn: warning: the worktree {} was not attested: {e}", ws.path),
            }
        }
    }

    fn reconcile(&mut self, id: &Id, actor: &str) -> Result<(), Refusal> {
        self.store.reconcile(id, actor).map(drop).map_err(Refusal::Store)
    }
}

/// The worktree the item's latest earlier attempt recorded (its base, its prerequisites).
pub(crate) fn recorded_workspace(
    store: &mut Store,
    item: &Item,
) -> Option<harn_core::work::workspace::Workspace> {
    let runs = item.events.iter().rev().filter_map(|e| match &e.kind {
        harn_core::work::events::EventKind::AttemptStarted { run_id, .. } => Some(run_id.clone()),
        _ => None,
    });
    for run in runs.collect::<Vec<_>>() {
        if let Ok((Some(m), _)) = store.ledger().run_records(&run) {
            if let Some(ws) = m.workspace {
                return Some(ws);
            }
        }
    }
    None
}

/// The commits the accepted proofs of `item`'s prerequisites attest, for those made in a
/// worktree, in the order the item names them.
fn accepted_commits(store: &mut Store, item: &Item) -> Vec<(Id, String)> {
    let mut commits = Vec::new();
    for dep in &item.intent.dependencies {
        let Ok(events) = store.events(dep) else { continue };
        let Some(acc) = harn_core::work::landing::acceptance(&events) else { continue };
        if let Ok(Some(ws)) = super::worktree::accepted_attestation(store, &acc) {
            commits.push((dep.clone(), ws.final_commit));
        }
    }
    commits
}

/// Refuses a workflow that is gone or differs from the bytes the item was frozen with.
fn check_digest(root: &std::path::Path, path: &str, frozen: &str) -> Result<(), String> {
    crate::os::root::check_file_owner(root, std::path::Path::new(path), "workflow")
        .map_err(|e| format!("{e}; no attempt was recorded"))?;
    let bytes = crate::input::read(std::path::Path::new(path), crate::input::WORKFLOW_MAX)
        .map_err(|e| format!("workflow {e}; no attempt was recorded"))?;
    let now = harn_core::hash::sha256_hex(&bytes);
    if now != frozen {
        return Err(format!(
            "workflow {path} changed since the work item was frozen (sha256 {} now, {} then); \
             create a new work item; no attempt was recorded",
            &now[..12],
            &frozen[..12.min(frozen.len())]
        ));
    }
    Ok(())
}

/// The credentials from this process's environment a run with these limits gives its
/// children, by name: what the configuration names, and under API billing the agents' keys.
pub(crate) fn passed_credentials(limits: &RunLimits) -> Vec<String> {
    let mut allowed = limits.env.clone();
    if limits.billing == Billing::Api {
        allowed.extend(harn_core::work::agent::API_KEY_VARS.iter().map(|s| s.to_string()));
    }
    let present: Vec<String> =
        std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()).collect();
    harn_core::work::containment::credentials::passed(present.iter().map(String::as_str), &allowed)
}

/// What a run with these limits, started now, would be contained by, for its manifest: the
/// core's plan over what this machine offers, with the writable paths resolved.
pub(crate) fn planned_containment(
    root: &std::path::Path,
    limits: &RunLimits,
    read_only: bool,
) -> harn_core::work::containment::Containment {
    let (holding, holding_why) = super::hold::planned();
    let mut writable = Vec::new();
    let harnesses = limits.adapter.iter().map(|h| &h.spec).chain(limits.adapters.values());
    for path in harnesses.flat_map(|h| h.writable.iter()).chain(&limits.writable) {
        let resolved = crate::os::root::resolve(root, path);
        if !writable.contains(&resolved) {
            writable.push(resolved);
        }
    }
    let workspace = limits.cwd.clone().unwrap_or_else(|| root.display().to_string());
    // Under worktree isolation the workspace is a repository of the run's own: all of it is
    // the run's to write.
    let own = limits.isolation == harn_core::work::run::Isolation::Worktree;
    let guarded = crate::os::guarded::find(root, workspace.as_ref(), None, own);
    let need = harn_core::work::containment::Need {
        root: root.display().to_string(),
        workspace,
        temp: std::env::temp_dir().join("harn-run").display().to_string(),
        writable: writable.clone(),
        protected: crate::os::guarded::existing(&guarded.readonly),
        off: limits.no_containment.then(|| "--no-containment".to_owned()),
        read_only,
    };
    let plan = harn_core::work::containment::plan(&need, &super::confine::offer());
    harn_core::work::containment::Containment {
        holding,
        holding_why,
        env: passed_credentials(limits),
        writable,
        turned_off: limits.no_containment,
        ..plan.record
    }
}
