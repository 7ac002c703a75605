//! `harn approval list|show|approve|deny`: the approvals parked runs wait on, and the one
//! place a person rules on them. A ruling is recorded once and never changed; it resumes
//! nothing by itself: the next `harn work run` of the item resumes the parked attempt.

use super::approvals::FindService;
use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::Store;
use crate::verb::actor;
use crate::verb::{Shown, Signed};
use clap::{Args, Subcommand};
use harn_core::ids::Id;
use harn_core::service::outlook::{self, ResumeFacts};
use harn_core::work::approval::{ruling_word, status, ApprovalStatus, Ruling};
use serde_json::{json, Value};
use std::path::PathBuf;

/// `harn approval …`
#[derive(Debug, Args)]
pub struct ApprovalCmd {
    /// The coordination root (the repository); default: found from the current directory as
    /// git finds its repository (the nearest `.harnery/` above, else the git top level).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    verb: ApprovalVerb,
}

#[derive(Debug, Subcommand)]
enum ApprovalVerb {
    /// Every approval with its status (pending, approved, denied).
    List {
        /// Only approvals with this status.
        #[arg(long, value_parser = ["pending", "approved", "denied"])]
        status: Option<String>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// One approval: what the run asks, why policy asks, and any ruling.
    Show(Shown),
    /// Allow what the parked run asks; `harn work run` then resumes it.
    Approve(RuleArgs),
    /// Deny it; the resumed run fails at that point.
    Deny(RuleArgs),
}

#[derive(Debug, Args)]
struct RuleArgs {
    /// The approval id.
    id: String,
    #[command(flatten)]
    signed: Signed,
}

/// Runs an `approval` verb; `service` says what the service would do about an item.
pub fn run(cmd: ApprovalCmd, service: FindService) -> Exit {
    let explicit = cmd.root.is_some();
    let mut store = crate::os::store::open_root(cmd.root)?;
    if matches!(cmd.verb, ApprovalVerb::List { .. } | ApprovalVerb::Show(_)) {
        crate::os::root::require_ledger(store.root(), explicit)
            .map_err(|e| Failure::new(EXIT_FAILED, e))?;
    }
    match cmd.verb {
        ApprovalVerb::List { status, json } => list(&mut store, status.as_deref(), json),
        ApprovalVerb::Show(Shown { id, json }) => show(&mut store, &id, json),
        ApprovalVerb::Approve(a) => {
            crate::work::hold::reap_before_writing(&mut store);
            rule(&mut store, a, Ruling::Allow, service)
        }
        ApprovalVerb::Deny(a) => {
            crate::work::hold::reap_before_writing(&mut store);
            rule(&mut store, a, Ruling::Deny, service)
        }
    }
}

fn parse_id(s: &str) -> Result<Id, Failure> {
    Id::new(s).map_err(|e| Failure::new(EXIT_USAGE, format!("{s:?}: {e}")))
}

/// An approval as one JSON document.
fn document(store: &mut Store, id: &Id) -> Result<Value, String> {
    let (request, decision) = store
        .approval(id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no approval {id}"))?;
    Ok(json!({
        "id": request.approval_id, "status": status(decision.as_ref()), "request": request,
        "decision": decision,
    }))
}

fn list(store: &mut Store, wanted: Option<&str>, as_json: bool) -> Exit {
    let listing = match store.approval_ids() {
        Ok(listing) => listing,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let (mut rows, mut errors) = (Vec::new(), Vec::new());
    for w in &listing.problems {
        errln!("harn: warning: {w}");
    }
    for id in listing.ids {
        match document(store, &id) {
            Ok(d) if wanted.is_none_or(|w| d["status"] == w) => rows.push(d),
            Ok(_) => {}
            Err(e) => errors.push(format!("approval {id}: {e}")),
        }
    }
    if as_json {
        outln!("{}", json!({ "approvals": rows, "errors": errors }));
    } else {
        for d in &rows {
            let r = &d["request"];
            outln!(
                "{:<44} {:<9} {:<12} asks {} about {}",
                d["id"].as_str().unwrap_or(""),
                d["status"].as_str().unwrap_or(""),
                r["work_id"].as_str().unwrap_or(""),
                r["addressee"].as_str().unwrap_or(""),
                super::approvals::summary(&r["request"]),
            );
        }
        if rows.is_empty() && errors.is_empty() {
            outln!("no approvals");
        }
        for e in &errors {
            errln!("harn: {e}");
        }
    }
    crate::exit::listed(&errors)
}

fn show(store: &mut Store, id: &str, as_json: bool) -> Exit {
    let id = approval_id(store, id)?;
    let d = match document(store, &id) {
        Ok(d) => d,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    if as_json {
        outln!("{d}");
        return Ok(0);
    }
    let r = &d["request"];
    outln!("approval {id}: {}", d["status"].as_str().unwrap_or(""));
    outln!(
        "  run        {} (work {})",
        r["run_id"].as_str().unwrap_or(""),
        r["work_id"].as_str().unwrap_or("")
    );
    outln!("  asks       {}", r["addressee"].as_str().unwrap_or(""));
    outln!("  request    {}", super::approvals::summary(&r["request"]));
    outln!("  rules      {}", r["evaluation"]["matched"]);
    outln!("  policy     sha256 {}", r["policy_sha256"].as_str().unwrap_or(""));
    if let Some(decision) = d["decision"].as_object() {
        outln!(
            "  ruled      {} by {}{}",
            decision["verdict"].as_str().unwrap_or(""),
            decision["actor"].as_str().unwrap_or(""),
            decision
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    } else {
        outln!("  next       harn approval approve {id}");
        outln!("  or         harn approval deny {id} --reason WHY");
    }
    Ok(0)
}

/// The approval an operator named: its id, or a unique prefix of one approval's id.
fn approval_id(store: &mut Store, s: &str) -> Result<Id, Failure> {
    parse_id(s)?;
    let listing = store.approval_ids()?;
    let full = crate::os::store::complete(s, listing.ids.iter().map(Id::as_str), "approval")?;
    parse_id(&full)
}

fn rule(store: &mut Store, a: RuleArgs, verdict: Ruling, service: FindService) -> Exit {
    let id = approval_id(store, &a.id)?;
    let ((request, decision), applied) =
        match store.rule(&id, verdict, &actor(a.signed.actor), a.signed.reason) {
            Ok(done) => done,
            Err(e) => return fail(EXIT_FAILED, format!("cannot rule on {id}: {e}")),
        };
    // Read before this process takes the run lease to note the ruling.
    let run_held = store.held_elsewhere(&crate::os::store::run_lock(&request.work_id));
    if applied {
        note_ruling(store, &request, decision.as_ref());
    }
    let now = status(decision.as_ref());
    let service = service(store, &request.work_id);
    let facts = ResumeFacts {
        work_id: &request.work_id,
        run_id: &request.run_id,
        run_held,
        liveness: service.liveness,
        enrolled: &service.enrolled,
        governing: &service.governing,
    };
    if a.signed.json {
        let resumer = match outlook::resumer(&facts) {
            outlook::Resumer::Resuming => json!({ "by": "run" }),
            outlook::Resumer::Service(goal) => json!({ "by": "service", "goal": goal }),
            outlook::Resumer::Person { idle } => {
                json!({ "by": "person", "idle_service_goal": idle })
            }
        };
        outln!(
            "{}",
            json!({ "id": id, "status": now, "applied": applied, "decision": decision,
                    "resumed_by": resumer })
        );
    } else {
        let word = ruling_word(verdict);
        let done = if applied { "recorded" } else { "was already recorded" };
        outln!("approval {id}: {word} {done}");
        for line in outlook::lines(&facts, now == ApprovalStatus::Approved) {
            outln!("  {line}");
        }
    }
    Ok(0)
}

/// Records `approval.resolved` in the parked run's transcript, under the run lease so no
/// runner writes it at the same time. Best effort: the decision file is the record, and a
/// run being resumed right now will consume it either way.
fn note_ruling(
    store: &mut Store,
    request: &harn_core::work::approval::ApprovalRequest,
    decision: Option<&harn_core::work::approval::ApprovalDecision>,
) {
    let Some(d) = decision else { return };
    if !matches!(store.hold(&crate::os::store::run_lock(&request.work_id)), Ok(true)) {
        return;
    }
    let body = json!({
        "event": "approval.resolved", "approval_id": d.approval_id, "verdict": d.verdict,
        "actor": d.actor,
    });
    let now = store.now();
    let _ = store.ledger().append_transcript(&request.run_id, body, now);
}
