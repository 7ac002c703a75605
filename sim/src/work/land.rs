//! Landing accepted work under crashes: the core's landing decision (`work::landing`, the
//! code `work land` runs) over a simulated repository, with branches that move after a
//! review, a base branch that moves on its own, reopened and re-accepted items, and a
//! crash drawn between moving the branch and recording `work.landed`.
//!
//! Invariants, after every step: no acceptance lands twice (one landing commit per proof at
//! most, and none for a proof whose attested commit was fast-forwarded); nothing that was not
//! reviewed reaches the base branch; a recorded land is in the base branch's history; and
//! once the faults stop, one more land of every accepted item leaves it landed and recorded.
//! Each land is the core's landing driver (`work::landing::driver`) over [`SimLand`].

use crate::entropy::{Entropy, SeededEntropy};
use harn_core::ids::Id;
use harn_core::time::WallTime;
use harn_core::work::events::{EventKind, LandMethod, WorkEvent};
use harn_core::work::landing::driver::{self, NotLanded};
use harn_core::work::landing::{self, AcceptedProof, Observed, Refused};
use harn_core::work::projection::WorkState;
use harn_core::work::workspace::{Attestation, Workspace};
use std::collections::{BTreeMap, BTreeSet};

/// Steps with faults.
const STEPS: u64 = 300;
/// Items per seed.
const ITEMS: usize = 4;

/// What one seed did.
#[derive(Clone, Debug, Default)]
pub struct LandSimSummary {
    /// Lands that moved the base branch.
    pub landed: u64,
    /// Of those, fast-forwards.
    pub fast_forwards: u64,
    /// Lands cut short by a crash after the branch moved.
    pub crashes: u64,
    /// Lands found already done and recorded afterwards.
    pub found: u64,
    /// Lands refused because the item's branch moved after its review.
    pub refused_moved: u64,
}

impl LandSimSummary {
    /// Adds another seed's counts.
    pub fn add(&mut self, o: &LandSimSummary) {
        self.landed += o.landed;
        self.fast_forwards += o.fast_forwards;
        self.crashes += o.crashes;
        self.found += o.found;
        self.refused_moved += o.refused_moved;
    }
}

/// A commit of the simulated repository.
#[derive(Clone, Debug)]
struct Commit {
    parents: Vec<usize>,
    /// The accepted proof a landing commit names in its trailers.
    proof: Option<String>,
    /// True for a commit nobody reviewed (made on an item's branch after its acceptance).
    unreviewed: bool,
}

#[derive(Default)]
struct Repo {
    commits: Vec<Commit>,
    branches: BTreeMap<String, usize>,
}

impl Repo {
    fn commit(&mut self, parents: Vec<usize>, proof: Option<String>, unreviewed: bool) -> usize {
        self.commits.push(Commit { parents, proof, unreviewed });
        self.commits.len() - 1
    }

    /// Every commit reachable from `tip`.
    fn history(&self, tip: usize) -> BTreeSet<usize> {
        let (mut seen, mut stack) = (BTreeSet::new(), vec![tip]);
        while let Some(c) = stack.pop() {
            if seen.insert(c) {
                stack.extend(self.commits[c].parents.iter().copied());
            }
        }
        seen
    }

    fn is_ancestor(&self, a: usize, b: usize) -> bool {
        self.history(b).contains(&a)
    }
}

/// One work item: its durable history and its accepted attestation.
struct Item {
    id: Id,
    events: Vec<WorkEvent>,
    /// The attestation of each accepted proof, by proof digest.
    attested: BTreeMap<String, Attestation>,
    accepts: u32,
    /// The commit its branch was made from, which every attestation diffs from.
    base: Option<usize>,
}

struct World {
    e: SeededEntropy,
    repo: Repo,
    items: Vec<Item>,
    summary: LandSimSummary,
    /// The bug planted in the landing driver, if any.
    #[cfg(feature = "planted-bugs")]
    planted: Option<harn_core::planted::PlantedBug>,
}

fn hex(c: usize) -> String {
    format!("{c:040x}")
}

fn unhex(s: &str) -> usize {
    usize::from_str_radix(s, 16).expect("a simulated commit id")
}

impl World {
    fn push(&mut self, i: usize, kind: EventKind) {
        let item = &mut self.items[i];
        let seq = item.events.len() as u64 + 1;
        let event = WorkEvent {
            schema_version: 1,
            work_id: item.id.clone(),
            seq,
            ts: WallTime(seq as i64),
            actor: "sim".into(),
            reason: None,
            kind,
        };
        item.events.push(event);
    }

    fn state(&self, i: usize) -> WorkState {
        match landing::acceptance(&self.items[i].events) {
            Some(_) => WorkState::Succeeded,
            None => WorkState::InReview,
        }
    }

    /// The item's branch gets a commit of its own work and the proof attesting it is
    /// accepted: a first acceptance, or one after a reopen.
    fn accept(&mut self, i: usize) {
        let main = self.repo.branches["main"];
        let branch = format!("harn/{}", self.items[i].id);
        let parent = *self.repo.branches.get(&branch).unwrap_or(&main);
        let base = *self.items[i].base.get_or_insert(parent);
        let work = self.repo.commit(vec![parent], None, false);
        self.repo.branches.insert(branch.clone(), work);
        // The new review covers the whole diff from the base: what was on the branch before
        // (a commit nobody had reviewed) is reviewed now.
        for c in self.repo.history(work) {
            self.repo.commits[c].unreviewed = false;
        }
        if landing::acceptance(&self.items[i].events).is_some() {
            self.push(i, EventKind::Reopened { findings: Vec::new(), feedback: None });
        }
        self.items[i].accepts += 1;
        let proof = format!("{}-{}", self.items[i].id, self.items[i].accepts);
        let ws = Workspace {
            path: format!("/w/{}", self.items[i].id),
            branch,
            base_commit: hex(base),
            base_branch: Some("main".into()),
            prerequisites: Vec::new(),
            branched_from: None,
            git_dir: "/r/.git".into(),
            reused: false,
            own: false,
        };
        let attestation = Attestation {
            workspace: ws,
            final_commit: hex(work),
            diff_sha256: diff(base, work),
            diff_bytes: 1,
            files_changed: 1,
            uncommitted: false,
            tip: None,
        };
        self.items[i].attested.insert(proof.clone(), attestation);
        let run_id = Id::new(&format!("wf-{}", proof)).expect("valid");
        self.push(
            i,
            EventKind::Accepted {
                run_id,
                attempt: 1,
                proof_sha256: proof,
                dispositions: Vec::new(),
            },
        );
    }

    /// What git shows for item `i`, as `work land` reads it.
    fn observe(&self, a: &Attestation, proof: &str) -> Observed {
        let head = self.repo.branches.get(&a.workspace.branch).copied();
        let base = unhex(&a.workspace.base_commit);
        let main = self.repo.branches["main"];
        let history = self.repo.history(main);
        let by_proof =
            history.iter().find(|c| self.repo.commits[**c].proof.as_deref() == Some(proof));
        let attested = unhex(&a.final_commit);
        let already_in_target = match by_proof {
            Some(c) => Some(hex(*c)),
            None => history.contains(&attested).then(|| hex(main)),
        };
        Observed {
            branch_head: head.map(hex),
            diff_sha256: head.map(|h| diff(base, h)),
            target_head: Some(hex(main)),
            already_in_target,
            target_behind: self.repo.is_ancestor(main, attested),
            base_missing: (!self.repo.is_ancestor(base, main)).then(|| "its base".into()),
            changed: Vec::new(),
        }
    }

    /// `work land` of item `i` through the core's landing driver (the code `work land` runs),
    /// with a crash drawn between its two durable steps (the move of main and the record).
    fn land(&mut self, i: usize, faults: bool) -> Result<(), String> {
        if landing::acceptance(&self.items[i].events).is_none() {
            return Ok(());
        }
        let squash = self.e.chance(1, 4);
        let id = self.items[i].id.clone();
        let mut host = SimLand { w: self, i, faults, steps: 0 };
        match driver::land(&mut host, &id, Some("main"), squash) {
            Ok(_) => Ok(()),
            Err(NotLanded::Refused(Refused::BranchMoved { .. })) => {
                self.summary.refused_moved += 1;
                Ok(())
            }
            Err(NotLanded::Refused(why)) => Err(format!("{id}: refused: {why}")),
            Err(NotLanded::Failed(Fault::Crashed))
            | Err(NotLanded::Unrecorded { error: Fault::Crashed, .. }) => Ok(()),
            Err(NotLanded::Failed(Fault::Broken(e)))
            | Err(NotLanded::Unrecorded { error: Fault::Broken(e), .. }) => Err(e),
        }
    }

    fn check(&self) -> Result<(), String> {
        let main = self.repo.branches["main"];
        let history = self.repo.history(main);
        let mut per_proof: BTreeMap<&str, u32> = BTreeMap::new();
        for c in &history {
            let commit = &self.repo.commits[*c];
            if commit.unreviewed {
                return Err(format!("commit {c}, never reviewed, reached main"));
            }
            if let Some(p) = &commit.proof {
                *per_proof.entry(p).or_default() += 1;
            }
        }
        if let Some((p, n)) = per_proof.iter().find(|(_, n)| **n > 1) {
            return Err(format!("proof {p} landed {n} times"));
        }
        for item in &self.items {
            for e in &item.events {
                let EventKind::Landed { proof_sha256, commit, .. } = &e.kind else { continue };
                if !history.contains(&unhex(commit)) {
                    return Err(format!("{}: recorded land {commit} is not on main", item.id));
                }
                let a = &item.attested[proof_sha256];
                if !per_proof.contains_key(proof_sha256.as_str())
                    && !history.contains(&unhex(&a.final_commit))
                {
                    return Err(format!(
                        "{}: landed {proof_sha256} holds neither its commit nor one naming it",
                        item.id
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What stops a simulated land.
#[derive(Debug)]
enum Fault {
    /// The process was killed between the land's two durable steps.
    Crashed,
    /// The simulation found something wrong.
    Broken(String),
}

/// The landing driver's host over the simulated repository and history of item `i`.
struct SimLand<'w> {
    w: &'w mut World,
    i: usize,
    faults: bool,
    /// Durable steps taken so far: a crash is drawn before any after the first.
    steps: u32,
}

impl SimLand<'_> {
    /// Before a durable step: one after the first may find the process killed.
    fn step(&mut self) -> Result<(), Fault> {
        self.steps += 1;
        if self.steps > 1 && self.faults && self.w.e.chance(1, 5) {
            self.w.summary.crashes += 1;
            return Err(Fault::Crashed);
        }
        Ok(())
    }
}

impl driver::LandingHost for SimLand<'_> {
    type Error = Fault;

    fn read(&mut self, _: &Id) -> Result<driver::Read, Fault> {
        let item = &self.w.items[self.i];
        let (events, title) = (item.events.clone(), item.id.to_string());
        Ok(driver::Read { state: self.w.state(self.i), events, title })
    }

    fn attestation(&mut self, accepted: &AcceptedProof) -> Result<Option<Attestation>, Fault> {
        Ok(self.w.items[self.i].attested.get(&accepted.proof_sha256).cloned())
    }

    fn observe(
        &mut self,
        _: &Id,
        attested: &Attestation,
        accepted: &AcceptedProof,
        _: &str,
    ) -> Result<Observed, Fault> {
        Ok(self.w.observe(attested, &accepted.proof_sha256))
    }

    fn move_branch(&mut self, plan: &driver::Move<'_>) -> Result<Result<String, Refused>, Fault> {
        self.step()?;
        let (from, attested) = (unhex(plan.from), unhex(plan.commit));
        let proof = landing::acceptance(&self.w.items[self.i].events).map(|a| a.proof_sha256);
        let repo = &mut self.w.repo;
        let landed = match plan.method {
            LandMethod::FastForward => attested,
            LandMethod::Merge => repo.commit(vec![from, attested], proof, false),
            _ => repo.commit(vec![from], proof, false),
        };
        // Compare-and-swap, as update-ref does.
        if repo.branches["main"] != from {
            return Err(Fault::Broken("main moved under the land".into()));
        }
        repo.branches.insert("main".into(), landed);
        self.w.summary.landed += 1;
        if plan.method == LandMethod::FastForward {
            self.w.summary.fast_forwards += 1;
        }
        Ok(Ok(hex(landed)))
    }

    fn record(&mut self, landed: EventKind) -> Result<(), Fault> {
        self.step()?;
        if let EventKind::Landed { method: LandMethod::Found, .. } = &landed {
            self.w.summary.found += 1;
        }
        self.w.push(self.i, landed);
        Ok(())
    }

    #[cfg(feature = "planted-bugs")]
    fn planted(&self) -> Option<harn_core::planted::PlantedBug> {
        self.w.planted
    }
}

/// The simulated diff digest of `base..head`.
fn diff(base: usize, head: usize) -> String {
    format!("{base}..{head}")
}

/// Runs one landing seed.
pub fn run_land_seed(seed: u64) -> Result<LandSimSummary, String> {
    run_land(seed, None)
}

/// Runs one landing seed with `bug` planted in the landing driver.
#[cfg(feature = "planted-bugs")]
pub fn run_land_seed_planted(
    seed: u64,
    bug: harn_core::planted::PlantedBug,
) -> Result<LandSimSummary, String> {
    run_land(seed, Some(bug))
}

#[cfg(feature = "planted-bugs")]
type Planted = Option<harn_core::planted::PlantedBug>;
#[cfg(not(feature = "planted-bugs"))]
type Planted = Option<std::convert::Infallible>;

fn run_land(seed: u64, planted: Planted) -> Result<LandSimSummary, String> {
    #[cfg(not(feature = "planted-bugs"))]
    let _ = planted;
    let mut w = World {
        e: SeededEntropy::new(seed),
        repo: Repo::default(),
        items: Vec::new(),
        summary: LandSimSummary::default(),
        #[cfg(feature = "planted-bugs")]
        planted,
    };
    let root = w.repo.commit(Vec::new(), None, false);
    w.repo.branches.insert("main".into(), root);
    for n in 0..ITEMS {
        let id = Id::new(&format!("w{n}")).expect("valid");
        let (events, attested) = (Vec::new(), BTreeMap::new());
        w.items.push(Item { id, events, attested, accepts: 0, base: None });
        w.push(n, EventKind::Created { intent_sha256: None });
    }
    let fail = |step: u64, e: String| format!("seed {seed} step {step}: {e}");
    for step in 0..STEPS {
        let i = w.e.below(ITEMS as u64) as usize;
        match w.e.below(10) {
            0..=2 => w.accept(i),
            3..=6 => w.land(i, true).map_err(|e| fail(step, e))?,
            7 => {
                // Someone commits on the item's branch after its review.
                let branch = format!("harn/{}", w.items[i].id);
                if let Some(head) = w.repo.branches.get(&branch).copied() {
                    let sneaked = w.repo.commit(vec![head], None, true);
                    w.repo.branches.insert(branch, sneaked);
                }
            }
            8 => {
                let main = w.repo.branches["main"];
                let own = w.repo.commit(vec![main], None, false);
                w.repo.branches.insert("main".into(), own);
            }
            _ => {
                // The sneaked commit is taken back: the branch is the reviewed one again.
                if let Some(acc) = landing::acceptance(&w.items[i].events) {
                    let a = &w.items[i].attested[&acc.proof_sha256];
                    w.repo.branches.insert(a.workspace.branch.clone(), unhex(&a.final_commit));
                }
            }
        }
        w.check().map_err(|e| fail(step, e))?;
    }
    // Calm: branches put back to what was reviewed, then every accepted item lands.
    for i in 0..ITEMS {
        if let Some(acc) = landing::acceptance(&w.items[i].events) {
            let a = &w.items[i].attested[&acc.proof_sha256];
            w.repo.branches.insert(a.workspace.branch.clone(), unhex(&a.final_commit));
            w.land(i, false).map_err(|e| fail(STEPS, e))?;
            w.check().map_err(|e| fail(STEPS, e))?;
            if !landing::landed(&w.items[i].events) {
                return Err(fail(
                    STEPS,
                    format!("{}: accepted, never landed once calm", w.items[i].id),
                ));
            }
        }
    }
    Ok(w.summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_land_once_and_record_every_land_a_crash_cut_short() {
        let mut total = LandSimSummary::default();
        for seed in 0..200 {
            total.add(&run_land_seed(seed).unwrap());
        }
        assert!(total.crashes > 0 && total.found > 0, "{total:?}");
        assert!(total.refused_moved > 0 && total.fast_forwards > 0, "{total:?}");
        assert!(total.landed > total.fast_forwards, "merges and squashes too: {total:?}");
    }

    /// The landing driver's planted bug (`work.landed` recorded before main moves) is found
    /// by the check that every recorded land is in main's history, within the first seeds.
    #[cfg(feature = "planted-bugs")]
    #[test]
    fn a_land_recorded_before_its_branch_moves_is_found() {
        let bug = harn_core::planted::PlantedBug::RecordBeforeMove;
        let failure = (0..20).find_map(|seed| run_land_seed_planted(seed, bug).err());
        let failure = failure.expect("no seed of 20 found the record before the move");
        assert!(failure.contains("is not on main"), "{failure}");
    }
}
