//! The workflow host's options, shared by `harn work run|retry` and the supervisor's
//! `tick|run`: the harness, billing, policy, approver, isolation, working directory and
//! timeout, each checked and frozen by value into a run's limits.

use super::attempt::RunLimits;
use super::config::frozen_harness;
use crate::os::store::Store;
use clap::Args;
use harn_core::work::policy::{parse_policy, FrozenPolicy};
use harn_core::work::run::{Billing, Isolation};
use harn_core::work::team::Team;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Workflow host options.
#[derive(Debug, Clone, Args)]
pub struct HostArgs {
    /// Kill the workflow's process group after this many seconds (the run fails).
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout_secs: u64,
    /// The harness that answers the workflow's agent calls: `claude-code`, `codex`, or one
    /// declared in `.harnery/config.json` (default: none; agent calls are declined).
    #[arg(long)]
    pub harness: Option<String>,
    /// `subscription` removes API-key variables from agent calls, so nothing bills an API
    /// account per token; `api` passes them on.
    #[arg(long, default_value = "subscription", value_parser = ["subscription", "api"])]
    pub billing: String,
    /// Bill only logged-in subscriptions (the default, `--billing subscription`); refused
    /// together with `--billing api` or `--allow-api-billing`.
    #[arg(long)]
    pub subscription_only: bool,
    /// Let agent calls bill an API key per token (`--billing api`): an API key in the
    /// environment, Claude Code's `apiKeyHelper`, or a key in Codex's `auth.json`. Without
    /// it, a harness that would bill a key is refused at its pre-flight, uncharged.
    #[arg(long)]
    pub allow_api_billing: bool,
    /// A host policy file (JSON rules on agent calls and `authorize` requests), frozen into
    /// the run by content and digest; a relative path is taken from the root.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Who is asked when policy says `ask`; the run parks on an approval addressed to them
    /// (default: $USER).
    #[arg(long)]
    pub approval_to: Option<String>,
    /// Where the run's changes land: shared (the repository's working tree), worktree (the
    /// item's own git worktree on branch harn/<id>, made by harn and reused by its retries,
    /// never merged by it); sandbox and remote are recorded as you declare them.
    #[arg(long, default_value = "shared", value_parser = ["shared", "worktree", "sandbox", "remote"])]
    pub isolation: String,
    /// The working directory of the workflow and its agent calls (default: the root); a
    /// relative path is taken from the root.
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Run the workflow and its agents unconfined: they may write anywhere the user may,
    /// `.harnery/` included (recorded in run.json and the proof; refused by a policy that
    /// requires containment).
    #[arg(long)]
    pub no_containment: bool,
    /// Under --isolation worktree: the directory the items' worktrees are made in (default:
    /// `<repository>.worktrees` beside the repository); a relative path is taken from the root.
    #[arg(long, value_name = "DIR")]
    pub workspace_root: Option<PathBuf>,
    /// Under --isolation worktree: the commit a new item's branch starts from (default: HEAD).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Run each segment as a job step on a node of this cluster (`clusters` in
    /// `.harnery/config.json`; check it with `harn cluster check NAME`): the item's own
    /// worktree here, its branch pushed to and fetched from the cluster's repository.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// A resource limit of each run's cgroup over `.harnery/config.json`'s `limits`
    /// (repeatable): `tasks=64`, `memory=256M`, `cpu_weight=50`, `tmpfs=512M`, `disk=10G`.
    #[arg(long = "limit", value_name = "KEY=VALUE")]
    pub limits: Vec<String>,
    /// What each run may reach over the network, over `.harnery/config.json`'s `network`:
    /// `adapters` (the default: the vendors its adapters need), `none`, `open`, or
    /// `HOST:PORT` entries separated by commas (`pypi.org:443,*.pythonhosted.org:443`).
    #[arg(long, value_name = "POLICY")]
    pub network: Option<String>,
}

impl HostArgs {
    /// The limits of a run with this team, agent cap and concurrency: every harness named
    /// resolved, the policy read, the working directory checked, all by value.
    pub fn freeze(
        &self,
        store: &Store,
        team: Team,
        max_agents: u32,
        concurrency: usize,
    ) -> Result<RunLimits, String> {
        let default =
            self.harness.as_deref().map(|h| frozen_harness(store.root(), h)).transpose()?;
        let mut others = BTreeMap::new();
        for name in team.values().filter_map(|p| p.adapter.as_deref()) {
            if default.as_ref().is_none_or(|d| d.name != name) && !others.contains_key(name) {
                others.insert(name.to_owned(), frozen_harness(store.root(), name)?.spec);
            }
        }
        let policy = match self.policy.as_deref() {
            None => None,
            Some(path) => {
                let path = &store.given(path);
                let bytes = crate::input::read(path, crate::input::CONFIG_MAX)?;
                let policy =
                    parse_policy(&path.display().to_string(), &bytes).map_err(|e| e.to_string())?;
                Some(FrozenPolicy::new(policy))
            }
        };
        let cwd = match self.cwd.as_deref() {
            None => None,
            Some(given) => {
                let dir = store.root().join(given);
                let canonical = std::fs::canonicalize(&dir)
                    .map_err(|e| format!("--cwd {}: {e}", dir.display()))?;
                if !canonical.is_dir() {
                    return Err(format!("--cwd {}: not a directory", dir.display()));
                }
                // A relative directory stays inside the root; leaving it takes an absolute
                // path, named on purpose.
                if given.is_relative() && !canonical.starts_with(store.root()) {
                    return Err(format!(
                        "--cwd {}: resolves to {}, outside the coordination root {}; give an \
                         absolute path to run outside it",
                        given.display(),
                        canonical.display(),
                        store.root().display()
                    ));
                }
                Some(canonical.display().to_string())
            }
        };
        let api = self.billing == "api" || self.allow_api_billing;
        if self.subscription_only && api {
            return Err(
                "--subscription-only contradicts --billing api and --allow-api-billing".into()
            );
        }
        // Effort words are the harness's own: an unknown one is refused now, not by the
        // program in the middle of a run.
        let kind_of = |name: &str| {
            if default.as_ref().is_some_and(|d| d.name == name) {
                default.as_ref().map(|d| d.spec.kind)
            } else {
                others.get(name).map(|s| s.kind)
            }
        };
        harn_core::work::team::check_efforts(&team, self.harness.as_deref(), &kind_of)
            .map_err(|e| format!("--team: {e}"))?;
        if self.approval_to.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err("--approval-to: may not be empty".into());
        }
        // With a policy, an `ask` always parks: addressed to whoever was named, else to the
        // user running harn (a denial nobody chose would charge the attempt).
        let approval_to = match (&policy, &self.approval_to) {
            (_, Some(name)) => Some(name.clone()),
            (Some(_), None) => Some(std::env::var("USER").unwrap_or_else(|_| "operator".into())),
            (None, None) => None,
        };
        let mut isolation: Isolation = serde_json::from_value(serde_json::json!(self.isolation))
            .expect("clap checked the value");
        let cluster = match &self.cluster {
            None if isolation == Isolation::Remote => {
                return Err("--isolation remote takes --cluster NAME (a cluster in \
                            .harnery/config.json)"
                    .into())
            }
            None => None,
            Some(name) => {
                if isolation == Isolation::Sandbox {
                    return Err("--cluster contradicts --isolation sandbox: a remote run works \
                                in the item's worktree"
                        .into());
                }
                // The coordinator keeps the item's worktree: what comes back lands from it.
                isolation = Isolation::Worktree;
                let spec = super::config::cluster(store.root(), name)?;
                Some(harn_core::work::cluster::FrozenCluster { name: name.clone(), spec })
            }
        };
        let mut over = harn_core::limits::ResourceLimits::default();
        for given in &self.limits {
            over.set(given).map_err(|e| format!("--limit {e}"))?;
        }
        let resources = super::config::limits(store.root())?.with(&over);
        let writable = super::config::writable(store.root())?;
        let env = super::config::env(store.root())?;
        let worktree = isolation == Isolation::Worktree;
        if !worktree && (self.workspace_root.is_some() || self.base.is_some()) {
            return Err("--workspace-root and --base take --isolation worktree".into());
        }
        if worktree && self.cwd.is_some() {
            return Err("--cwd contradicts --isolation worktree: the item's worktree is the \
                        working directory"
                .into());
        }
        let network = match &self.network {
            Some(text) => harn_core::work::network::NetworkPolicy::from_flag(text)
                .map_err(|e| e.to_string())?,
            None => super::config::network(store.root())?,
        };
        Ok(RunLimits {
            network,
            workspace_root: self.workspace_root.as_ref().map(|p| store.root().join(p)),
            base: self.base.clone(),
            writable,
            env,
            no_containment: self.no_containment,
            policy,
            approval_to,
            cwd,
            isolation,
            timeout: Duration::from_secs(self.timeout_secs),
            concurrency,
            adapter: default,
            team,
            adapters: others,
            max_agents,
            billing: if api { Billing::Api } else { Billing::Subscription },
            goal_spent_micro_usd: None,
            resources,
            limit_overrides: over,
            cluster,
        })
    }
}
