//! The pages of `harn web`, each read from the root as `harn dash` reads it and rendered by a
//! template that escapes every value: the overview, the items a page at a time, one item
//! with what a person may do, a goal and its graph, a run as it goes, a proof with its
//! attested diff, the approvals, the harnesses and one harness's screen.

use super::diff::{files, FileDiff};
use super::reply::Reply;
use super::shown::shown;
use super::Web;
use crate::dash::readers::{self, name_of, Detail, Focus, Reader};
use askama::Template;
use harn_core::ids::Id;
use harn_core::web::route::Route;
use std::collections::BTreeMap;
use std::time::Duration;

/// Items shown on one page of `/items`.
const PAGE: usize = 200;

/// Most bytes of a diff a proof's page shows.
const DIFF_LIMIT: usize = 2 << 20;

/// How long a page waits on the harness daemon.
const DAEMON_WAIT: Duration = Duration::from_secs(2);

/// What every page carries: its title, the root, what the session's last actions came to,
/// the session's token for its forms, and how often it reloads itself.
pub struct Frame {
    title: String,
    root: String,
    said: Vec<String>,
    token: String,
    refresh: Option<u32>,
}

/// A goal's line on the overview.
struct GoalLine {
    id: String,
    state: String,
    next: String,
    reason: String,
}

#[derive(Template)]
#[template(path = "web/overview.html")]
struct Overview {
    f: Frame,
    service: String,
    goals: Vec<GoalLine>,
    counts: Vec<(String, usize)>,
    pending: usize,
    harnesses: String,
    problems: Vec<String>,
}

/// An item's line on `/items`.
struct ItemLine {
    id: String,
    title: String,
    state: String,
    next: String,
    attempts: String,
    now: String,
}

#[derive(Template)]
#[template(path = "web/items.html")]
struct Items {
    f: Frame,
    shown: String,
    next: Option<String>,
    rows: Vec<ItemLine>,
    problems: Vec<String>,
}

/// A decision a person may take on a page: a form posting to `path`.
pub struct Action {
    label: String,
    path: String,
    /// `feedback` (required words for the next attempt), `reason`, or empty.
    words: &'static str,
    note: String,
}

#[derive(Template)]
#[template(path = "web/detail.html")]
struct DetailPage {
    f: Frame,
    links: Vec<(String, String)>,
    /// What a person should know before acting (why an action is not offered).
    notes: Vec<String>,
    actions: Vec<Action>,
    screen: Option<String>,
    sections: Vec<(String, Vec<String>)>,
}

#[derive(Template)]
#[template(path = "web/run.html")]
struct RunPage {
    f: Frame,
    run: String,
    item: String,
    standing: String,
    status: String,
    ended: bool,
    lines: Vec<String>,
}

#[derive(Template)]
#[template(path = "web/proof.html")]
struct ProofPage {
    f: Frame,
    run: String,
    item: String,
    summary: Vec<String>,
    criteria: Vec<(String, String, String, String)>,
    evidence: Vec<String>,
    diff_note: String,
    files: Vec<FileDiff>,
}

#[derive(Template)]
#[template(path = "web/approvals.html")]
struct Approvals {
    f: Frame,
    rows: Vec<readers::ApprovalRow>,
    problems: Vec<String>,
}

/// A harness's line on `/harnesses`.
struct HarnessLine {
    name: String,
    state: String,
    runs: String,
    last_exit: String,
}

#[derive(Template)]
#[template(path = "web/harnesses.html")]
struct Harnesses {
    f: Frame,
    note: String,
    rows: Vec<HarnessLine>,
}

#[derive(Template)]
#[template(path = "web/message.html")]
struct Message {
    f: Frame,
    text: String,
}

/// The page `route` names, for the session at `session`.
pub fn read(web: &Web, session: usize, route: Route, query: &str) -> Reply {
    let said = web.said_count(session);
    let frame = |title: String| web.frame(session, title);
    let page = match route {
        Route::Overview => overview(web, frame("Overview".into())),
        Route::Items => items(web, frame("Work items".into()), query),
        Route::Item(id) => item(web, frame(format!("Work item {id}")), &id),
        Route::Goal(id) => goal(web, frame(format!("Goal {id}")), &id),
        Route::Run(id) => run(web, frame(format!("Run {id}")), &id),
        Route::Proof(id) => proof(web, frame(format!("Proof of run {id}")), &id),
        Route::Approvals => approvals(web, frame("Approvals".into())),
        Route::Harnesses => harnesses(web, frame("Harnesses".into())),
        Route::Harness(name) => harness(web, frame(format!("Harness {name}")), &name),
        _ => Err((404, "no such page".into())),
    };
    match page {
        Ok(html) => {
            web.said_shown(session, said);
            Reply::html(200, html)
        }
        Err((status, text)) => message(web, session, status, text),
    }
}

/// Reads every item and goal once into the kept reads, so the first overview a person opens
/// costs what every later one does (at 10,000 items the first full read takes a second and a
/// half; see docs/PERFORMANCE.md).
pub fn warm(web: &Web) {
    let mut kept = web.kept.lock().unwrap_or_else(|p| p.into_inner());
    let mut reader = Reader::open(&web.root);
    let service = reader.service();
    let _ = reader.work(&mut kept);
    let _ = reader.goals(&service, &mut kept);
}

/// A page that says one thing: an error, or where to go.
pub fn message(web: &Web, session: usize, status: u16, text: String) -> Reply {
    let title = if status < 400 { "Done" } else { "Not done" };
    let said = web.said_count(session);
    let page = Message { f: web.frame(session, title.into()), text };
    match page.render() {
        Ok(html) => {
            web.said_shown(session, said);
            Reply::html(status, html)
        }
        Err(e) => Reply::text(500, format!("rendering: {e}")),
    }
}

type Page = Result<String, (u16, String)>;

fn render(t: impl Template) -> Page {
    t.render().map_err(|e| (500, format!("rendering: {e}")))
}

fn unreadable(e: impl std::fmt::Display) -> (u16, String) {
    (500, e.to_string())
}

fn overview(web: &Web, f: Frame) -> Page {
    let mut reader = Reader::open(&web.root);
    let service = reader.service();
    let mut kept = web.kept.lock().unwrap_or_else(|p| p.into_inner());
    let (rows, mut problems) = reader.work(&mut kept).map_err(unreadable)?;
    let (goal_rows, goal_problems) = reader.goals(&service, &mut kept).map_err(unreadable)?;
    drop(kept);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows {
        *counts.entry(name_of(&r.state)).or_default() += 1;
    }
    let goals = goal_rows
        .iter()
        .map(|g| match &g.read {
            Ok(s) => GoalLine {
                id: g.id.to_string(),
                state: name_of(&s.state),
                next: name_of(&s.next_action),
                reason: shown(&s.reason),
            },
            Err(e) => GoalLine {
                id: g.id.to_string(),
                state: "unreadable".into(),
                next: String::new(),
                reason: e.clone(),
            },
        })
        .collect();
    problems.extend(goal_problems);
    let (approvals, _) = reader.approvals().map_err(unreadable)?;
    let pending = approvals.iter().filter(|a| a.status == "pending").count();
    let harnesses = match reader.harnesses(DAEMON_WAIT) {
        Ok(doc) => harness_summary(&doc),
        Err(e) => format!("the harness daemon's status could not be read: {e}"),
    };
    let service = service_line(&service);
    let counts = counts.into_iter().collect();
    render(Overview { f, service, goals, counts, pending, harnesses, problems })
}

fn service_line(s: &readers::ServiceView) -> String {
    let goals = s.config.as_ref().map_or(0, |c| c.goal_ids.len());
    match name_of(&s.liveness).as_str() {
        "unconfigured" => "The supervisor service was never enrolled here.".into(),
        live => format!("The supervisor service is {live}, with {goals} goals enrolled."),
    }
}

fn harness_summary(doc: &serde_json::Value) -> String {
    let rows = doc["harnesses"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return "no harnesses".into();
    }
    let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
    for h in &rows {
        *by_state.entry(h["state"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    let parts: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!("{} harnesses: {}", rows.len(), parts.join(", "))
}

/// `state=S` and `from=N` of a query.
fn query_pairs(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes()).into_owned().collect()
}

fn items(web: &Web, f: Frame, query: &str) -> Page {
    let q = query_pairs(query);
    let state = q.get("state").cloned().filter(|s| !s.is_empty());
    let from: usize = q.get("from").and_then(|n| n.parse().ok()).unwrap_or(0);
    let mut reader = Reader::open(&web.root);
    let mut kept = web.kept.lock().unwrap_or_else(|p| p.into_inner());
    let (rows, problems) = reader.work(&mut kept).map_err(unreadable)?;
    drop(kept);
    let chosen: Vec<_> =
        rows.iter().filter(|r| state.as_ref().is_none_or(|s| name_of(&r.state) == *s)).collect();
    let total = chosen.len();
    let from = from.min(total);
    let lines = chosen
        .iter()
        .skip(from)
        .take(PAGE)
        .map(|r| ItemLine {
            id: r.id.to_string(),
            title: shown(&r.title),
            state: name_of(&r.state),
            next: name_of(&r.next_action),
            attempts: format!("{} of {}", r.charged, r.max_attempts),
            now: r.running.as_ref().map_or(String::new(), |n| format!("running {}", n.run_id)),
        })
        .collect::<Vec<_>>();
    let which = state.as_deref().map_or(String::new(), |s| format!(" {s}"));
    let shown = if total == 0 {
        format!("no{which} items")
    } else {
        format!("{}–{} of {total}{which} items", from + 1, from + lines.len())
    };
    let next = (from.saturating_add(PAGE) < total).then(|| {
        let state = state.as_deref().map_or(String::new(), |s| format!("state={s}&"));
        format!("/items?{state}from={}", from + PAGE)
    });
    render(Items { f, shown, next, rows: lines, problems })
}

/// The detail `focus`, or a 404 when there is no such record; every line [`shown`].
fn detail(web: &Web, focus: &Focus) -> Result<Detail, (u16, String)> {
    let mut d = Reader::open(&web.root).detail(focus).map_err(|e| {
        let status = if e.contains("no ") || e.contains("not found") { 404 } else { 500 };
        (status, e)
    })?;
    d.title = shown(&d.title);
    for (_, lines) in &mut d.sections {
        for line in lines.iter_mut() {
            *line = shown(line);
        }
    }
    Ok(d)
}

fn item(web: &Web, mut f: Frame, id: &Id) -> Page {
    use harn_core::work::{NextAction, WorkState};
    let mut store = crate::os::store::Store::new(&web.root);
    if !store.exists(id) {
        return Err((404, format!("no work item {id}")));
    }
    let d = detail(web, &Focus::Work(id.clone()))?;
    let read = store.read(id, &mut Default::default()).map_err(unreadable)?;
    let p = &read.projection;
    let mut links = Vec::new();
    let mut notes = Vec::new();
    let mut last_run = None;
    for e in &read.events {
        if let harn_core::work::events::EventKind::AttemptStarted { run_id, attempt, .. } = &e.kind
        {
            links.push((format!("/runs/{run_id}"), format!("attempt {attempt}: run {run_id}")));
            last_run = Some(run_id.clone());
        }
    }
    if let Some(run) = &last_run {
        links.push((format!("/runs/{run}/proof"), "the latest proof and its diff".into()));
    }
    let post = |verb: &str| format!("/items/{id}/{verb}");
    let mut actions = Vec::new();
    let act = |label: &str, verb: &str, words: &'static str, note: String| Action {
        label: label.into(),
        path: post(verb),
        words,
        note,
    };
    let manifest = last_run.as_ref().and_then(|r| store.run_records(r).ok()).and_then(|(m, _)| m);
    // What a new attempt would run with, or why the web leaves it to the terminal.
    let again = match manifest.as_ref().map(|m| super::act::again(m, &web.root)) {
        None => Ok("with the defaults of `harn work run`".to_owned()),
        Some(Ok(options)) => Ok(format!("as the latest attempt ran: {}", options.join(" "))),
        Some(Err(why)) => Err(why),
    };
    match p.next_action {
        NextAction::Review => {
            actions.push(act("Accept", "accept", "reason", "accept the proof as it is".into()));
            actions.push(act(
                "Reject with feedback",
                "reject",
                "feedback",
                "reopened; the feedback goes to the next attempt".into(),
            ));
        }
        NextAction::Run | NextAction::Retry => match again {
            Ok(note) => {
                let (label, verb) = match p.next_action {
                    NextAction::Retry => ("Retry", "retry"),
                    _ => ("Run the next attempt", "run"),
                };
                actions.push(act(label, verb, "", note));
            }
            Err(why) => notes.push(format!(
                "{why}, which the web cannot give again: run the next attempt from a terminal"
            )),
        },
        NextAction::Resume => {
            actions.push(act("Resume the run", "run", "", "the ruling is in; resume it".into()))
        }
        NextAction::ResolveApproval => {
            if let Some(a) = &p.approval_id {
                links.push(("/approvals".into(), format!("approval {a} waits for a ruling")));
            }
        }
        _ => {}
    }
    // Only an item whose runs had a worktree of their own has a branch to land.
    let branch = manifest.as_ref().is_some_and(|m| m.workspace.is_some());
    if p.state == WorkState::Succeeded && !p.landed && branch {
        actions.push(act("Land", "land", "reason", "onto the branch it was made from".into()));
    }
    if matches!(p.state, WorkState::Running) {
        f.refresh = Some(3);
    }
    f.title = d.title.clone();
    render(DetailPage { f, links, notes, actions, screen: None, sections: d.sections })
}

fn goal(web: &Web, mut f: Frame, id: &Id) -> Page {
    let d = detail(web, &Focus::Goal(id.clone()))?;
    let g = crate::goal::store::read(&mut crate::os::store::Store::new(&web.root), id)
        .map_err(|e| (404, e.to_string()))?;
    let links = g
        .items
        .iter()
        .map(|i| {
            (format!("/items/{}", i.id), format!("{} ({})", i.id, name_of(&i.projection.state)))
        })
        .collect();
    f.title = d.title.clone();
    let (notes, actions) = (Vec::new(), Vec::new());
    render(DetailPage { f, links, notes, actions, screen: None, sections: d.sections })
}

fn run(web: &Web, mut f: Frame, run_id: &Id) -> Page {
    let mut store = crate::os::store::Store::new(&web.root);
    let (manifest, proof) = store.run_records(run_id).map_err(unreadable)?;
    let manifest = manifest.ok_or_else(|| (404, format!("no workflow run {run_id}")))?;
    let records = store.ledger().transcript(run_id).map_err(unreadable)?;
    let lines = records.iter().filter_map(crate::work::progress::line).map(|l| shown(&l)).collect();
    let (standing, status, ended) = match &proof {
        Some(p) => {
            let status = name_of(&p.run.status);
            let error = p.run.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
            (status.clone(), format!("ended {status}{error}"), true)
        }
        None => {
            let s = crate::work::run_show::standing(&mut store, &manifest, &records);
            (s.to_owned(), s.replace('_', " "), false)
        }
    };
    if standing == "running" {
        f.refresh = Some(2);
    }
    let item = manifest.work_id.to_string();
    render(RunPage { f, run: run_id.to_string(), item, standing, status, ended, lines })
}

fn proof(web: &Web, f: Frame, run_id: &Id) -> Page {
    let mut store = crate::os::store::Store::new(&web.root);
    let (manifest, proof) = store.run_records(run_id).map_err(unreadable)?;
    manifest.ok_or_else(|| (404, format!("no workflow run {run_id}")))?;
    let proof = proof.ok_or_else(|| (404, format!("run {run_id} has no proof yet")))?;
    let mut summary = vec![
        format!(
            "run {} of {}, attempt {}: {}",
            proof.run.id,
            proof.run.work_id,
            proof.run.attempt,
            name_of(&proof.run.status)
        ),
        {
            let s = &proof.acceptance.summary;
            format!(
                "acceptance: {} satisfied, {} unsatisfied, {} unknown; the proof {}",
                s.satisfied,
                s.unsatisfied,
                s.unknown,
                if proof.passes() { "passes" } else { "does not pass" }
            )
        },
    ];
    if let Some(e) = &proof.run.error {
        summary.push(shown(&format!("error: {e}")));
    }
    summary.extend(proof.stages.iter().map(|s| format!("stage {s}")));
    let criteria = proof
        .acceptance
        .criteria
        .iter()
        .map(|c| (shown(&c.id), name_of(&c.verdict), shown(&c.statement), c.evidence.to_string()))
        .collect();
    let evidence = proof
        .evidence
        .iter()
        .map(|e| {
            let summary = e.summary.as_deref().map(|s| format!(" — {s}")).unwrap_or_default();
            shown(&format!("[{}] {} {}{summary}", name_of(&e.status), e.kind, e.label))
        })
        .collect();
    let (diff_note, files) = match &proof.workspace {
        None => ("The run made no worktree of its own: no diff was attested.".into(), Vec::new()),
        Some(a) => attested(web, a),
    };
    let (run, item) = (run_id.to_string(), proof.run.work_id.to_string());
    render(ProofPage { f, run, item, summary, criteria, evidence, diff_note, files })
}

/// The note and the files of the diff attestation `a` speaks for: the worktree's files when
/// the run left changes uncommitted, else the commit it attests; each checked against the
/// attested digest.
fn attested(web: &Web, a: &harn_core::work::workspace::Attestation) -> (String, Vec<FileDiff>) {
    use crate::work::worktree::{readable_diff, Side};
    let ws = &a.workspace;
    let (side, what) = if a.uncommitted && a.workspace.own {
        (Side::Commit(a.files_commit()), "the files the run left hold")
    } else if a.uncommitted {
        (Side::Worktree, "the worktree's files hold")
    } else {
        (Side::Commit(&a.final_commit), "the commit holds")
    };
    let read = match readable_diff(ws, &web.root, side, Some(DIFF_LIMIT)) {
        Ok(read) => read,
        Err(e) => return (format!("the diff could not be read: {e}"), Vec::new()),
    };
    let holds = if read.digest == a.diff_sha256 {
        format!("{what} exactly the attested diff")
    } else {
        format!(
            "{what} no longer the attested diff (SHA-256 {} now): what is shown is not what \
             was attested",
            short(&read.digest)
        )
    };
    let cut = if read.cut { " (cut: only the first 2 MiB are shown)" } else { "" };
    let left = if a.uncommitted { ", changes left uncommitted" } else { "" };
    let note = format!(
        "{} → {}{left}: {} files, {} bytes (SHA-256 {}); {holds}{cut}",
        short(&ws.base_commit),
        short(&a.final_commit),
        a.files_changed,
        a.diff_bytes,
        short(&a.diff_sha256),
    );
    (note, files(&read.text))
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

fn approvals(web: &Web, f: Frame) -> Page {
    let (mut rows, problems) = Reader::open(&web.root).approvals().map_err(unreadable)?;
    for r in &mut rows {
        r.asks = shown(&r.asks);
    }
    render(Approvals { f, rows, problems })
}

fn harnesses(web: &Web, f: Frame) -> Page {
    let (note, rows) = match Reader::open(&web.root).harnesses(DAEMON_WAIT) {
        Ok(doc) => {
            let rows = doc["harnesses"].as_array().cloned().unwrap_or_default();
            let rows = rows
                .iter()
                .map(|h| HarnessLine {
                    name: h["name"].as_str().unwrap_or("?").to_owned(),
                    state: h["state"].as_str().unwrap_or("?").to_owned(),
                    runs: h["runs"].as_u64().map_or(String::new(), |n| n.to_string()),
                    last_exit: readers::last_exit_text(h).unwrap_or_default(),
                })
                .collect();
            (harness_summary(&doc), rows)
        }
        Err(e) => (format!("the harness daemon's status could not be read: {e}"), Vec::new()),
    };
    render(Harnesses { f, note, rows })
}

fn harness(web: &Web, mut f: Frame, name: &Id) -> Page {
    let d = detail(web, &Focus::Harness(name.clone()))?;
    let screen = crate::harness::paths::Paths::new(&web.root).ok().and_then(|paths| {
        let ask = crate::harness::protocol::Request::Screen { name: name.to_string() };
        let answer = crate::harness::client::request(&paths, &ask, DAEMON_WAIT).ok()?;
        answer["screen"].as_str().map(shown)
    });
    let actions = vec![Action {
        label: "Restart".into(),
        path: format!("/harnesses/{name}/restart"),
        words: "",
        note: "a new run, clearing a give-up".into(),
    }];
    if screen.is_some() {
        f.refresh = Some(2);
    }
    f.title = d.title.clone();
    render(DetailPage {
        f,
        links: Vec::new(),
        notes: Vec::new(),
        actions,
        screen,
        sections: d.sections,
    })
}

impl Web {
    /// The frame of a page for the session at `session`, with what its actions came to (kept
    /// until a page showing them is rendered: [`Web::said_shown`]).
    pub fn frame(&self, session: usize, title: String) -> Frame {
        let token = {
            let door = self.door.lock().unwrap_or_else(|p| p.into_inner());
            door.session(session).map(|s| s.token.clone()).unwrap_or_default()
        };
        let said = {
            let said = self.said.lock().unwrap_or_else(|p| p.into_inner());
            said.get(session).cloned().unwrap_or_default()
        };
        Frame { title, root: self.root.display().to_string(), said, token, refresh: None }
    }

    /// How many lines wait for the session's next page.
    pub fn said_count(&self, session: usize) -> usize {
        self.said.lock().unwrap_or_else(|p| p.into_inner()).get(session).map_or(0, Vec::len)
    }

    /// Forgets the first `n` lines waiting for the session: a page showed them.
    pub fn said_shown(&self, session: usize, n: usize) {
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lines) = said.get_mut(session) {
            lines.drain(..n.min(lines.len()));
        }
    }

    /// Leaves `line` for the next page the session at `session` reads.
    pub fn say(&self, session: usize, line: String) {
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        if said.len() <= session {
            said.resize(session + 1, Vec::new());
        }
        said[session].push(line);
    }
}
