//! One land, in the one order every host follows: read the item under its history lock, find
//! what its acceptance attests and the branch to land on, look at the repository, decide
//! ([`super::decide`]), move the target branch, and only then record `work.landed`, so a
//! crash between the two leaves a land the next one finds in the branch's history and
//! records, never a record of a land that did not happen. `harn work land`, a goal's
//! `--land-accepted` and the simulator's landing world are its hosts.

use super::{acceptance, decide, message, target, AcceptedProof, Landing, Observed, Refused};
use crate::ids::Id;
#[cfg(feature = "planted-bugs")]
use crate::planted::PlantedBug;
use crate::work::events::{EventKind, LandMethod, WorkEvent};
use crate::work::projection::WorkState;
use crate::work::workspace::Attestation;

/// The item as its host read it, under its history lock (held until the land is recorded).
pub struct Read {
    /// Its projected state.
    pub state: WorkState,
    /// Its history.
    pub events: Vec<WorkEvent>,
    /// Its title, for a landing commit's message.
    pub title: String,
}

/// What a land's host does: the item's records and the repository.
pub trait LandingHost {
    /// The host's error (a record that cannot be read or written, git failing).
    type Error;
    /// Reads item `id`, taking its history lock for the rest of the land.
    fn read(&mut self, id: &Id) -> Result<Read, Self::Error>;
    /// The worktree attestation of the accepted proof, `None` for work made outside one.
    fn attestation(&mut self, accepted: &AcceptedProof)
        -> Result<Option<Attestation>, Self::Error>;
    /// What the repository shows now about the item's branch and `into`.
    fn observe(
        &mut self,
        id: &Id,
        attested: &Attestation,
        accepted: &AcceptedProof,
        into: &str,
    ) -> Result<Observed, Self::Error>;
    /// Makes the landing commit `method` needs (none for a fast-forward) and moves `into`
    /// from `from` to it; a refusal (a conflict, a dirty checkout, a branch that moved)
    /// changes nothing and says why.
    fn move_branch(&mut self, plan: &Move<'_>) -> Result<Result<String, Refused>, Self::Error>;
    /// Appends `work.landed` to the item's history.
    fn record(&mut self, landed: EventKind) -> Result<(), Self::Error>;
    /// The bug this host plants in the driver, if any.
    #[cfg(feature = "planted-bugs")]
    fn planted(&self) -> Option<PlantedBug> {
        None
    }
}

/// A move of the target branch.
pub struct Move<'a> {
    /// The target branch.
    pub into: &'a str,
    /// The target's head the move starts from (compare-and-swap).
    pub from: &'a str,
    /// The attested commit.
    pub commit: &'a str,
    /// Fast-forward, merge or squash.
    pub method: LandMethod,
    /// The message of a merge or squash commit (its trailers find a land cut short).
    pub message: &'a str,
    /// The accepted attestation.
    pub attested: &'a Attestation,
}

/// How a land ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Landed {
    /// Accepted work made outside a worktree: nothing to land.
    Nothing,
    /// This acceptance had landed already.
    Before {
        /// Where.
        into: String,
        /// As which commit.
        commit: String,
        /// The attestation it landed.
        attested: Box<Attestation>,
    },
    /// Landed now, or found landed and recorded now (`LandMethod::Found`).
    Now {
        /// Where.
        into: String,
        /// As which commit.
        commit: String,
        /// How.
        method: LandMethod,
        /// The attestation it landed (its worktree may go now).
        attested: Box<Attestation>,
    },
}

/// Why a land did not end in a record.
#[derive(Debug)]
pub enum NotLanded<E> {
    /// Refused; nothing was changed.
    Refused(Refused),
    /// The host failed before anything moved.
    Failed(E),
    /// The branch moved but its record could not be written: the next land records it.
    Unrecorded {
        /// Where.
        into: String,
        /// As which commit.
        commit: String,
        /// The host's error.
        error: E,
    },
}

/// Lands item `id` on `into` (`None`: the branch its worktree was made from), by a squash
/// when `squash`.
pub fn land<H: LandingHost>(
    host: &mut H,
    id: &Id,
    into: Option<&str>,
    squash: bool,
) -> Result<Landed, NotLanded<H::Error>> {
    let read = host.read(id).map_err(NotLanded::Failed)?;
    let accepted = acceptance(&read.events);
    let attested = match &accepted {
        Some(acc) => host.attestation(acc).map_err(NotLanded::Failed)?,
        None => None,
    };
    if accepted.is_some() && attested.is_none() && read.state == WorkState::Succeeded {
        return Ok(Landed::Nothing);
    }
    let into = target(id, into, attested.as_ref()).map_err(NotLanded::Refused)?;
    let seen = match attested.as_ref().zip(accepted.as_ref()) {
        Some((a, acc)) => host.observe(id, a, acc, &into).map_err(NotLanded::Failed)?,
        None => Observed::default(),
    };
    let landing = decide(id, read.state, &read.events, attested.as_ref(), &into, squash, &seen)
        .map_err(NotLanded::Refused)?;
    let (Some(acc), Some(a)) = (accepted, attested) else {
        unreachable!("a land is decided only on an acceptance of worktree work")
    };
    let record = |commit: &str, method| EventKind::Landed {
        run_id: acc.run_id.clone(),
        proof_sha256: acc.proof_sha256.clone(),
        into: into.clone(),
        commit: commit.to_owned(),
        method,
    };
    let (commit, method) = match landing {
        Landing::Landed { into, commit } => {
            return Ok(Landed::Before { into, commit, attested: Box::new(a) })
        }
        Landing::Record { commit } => (commit, LandMethod::Found),
        Landing::Land { method, from, commit } => {
            let message = message(id, &read.title, &acc);
            let plan = Move {
                into: &into,
                from: &from,
                commit: &commit,
                method,
                message: &message,
                attested: &a,
            };
            #[cfg(feature = "planted-bugs")]
            if host.planted() == Some(PlantedBug::RecordBeforeMove) {
                host.record(record(&commit, method)).map_err(NotLanded::Failed)?;
            }
            let landed = host.move_branch(&plan).map_err(NotLanded::Failed)?;
            (landed.map_err(NotLanded::Refused)?, method)
        }
    };
    #[cfg(feature = "planted-bugs")]
    if host.planted() == Some(PlantedBug::RecordBeforeMove) && method != LandMethod::Found {
        return Ok(Landed::Now { into, commit, method, attested: Box::new(a) });
    }
    match host.record(record(&commit, method)) {
        Ok(()) => Ok(Landed::Now { into, commit, method, attested: Box::new(a) }),
        Err(error) => Err(NotLanded::Unrecorded { into, commit, error }),
    }
}
