//! The dashboard's pages, drawn from a [`Snapshot`] and the wall-clock time alone: no reads,
//! no clocks, so the same snapshot always draws the same screen (the snapshot tests rely on it).

use super::Snapshot;
use crate::dash::readers::{name_of, Focus, GoalRow, WorkRow};
use harn_core::service::wake::{GoalWake, WakeState};
use harn_core::service::Liveness;
use harn_core::time::WallTime;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, TableState, Tabs, Wrap};
use ratatui::Frame;
use serde_json::Value;
use std::time::Duration;

/// A page of the dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Page {
    /// The service and every goal.
    Goals,
    /// Work items and their attempts.
    Work,
    /// The harness daemon's harnesses.
    Harnesses,
    /// Approvals, pending ones first.
    Approvals,
}

const PAGES: [Page; 4] = [Page::Goals, Page::Work, Page::Harnesses, Page::Approvals];

/// What the screen shows besides the snapshot: the page, its selected row, whether that row's
/// detail is open and how far it is scrolled, and whether the keys are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    /// The page.
    pub page: Page,
    /// The selected row of the page's list.
    pub selected: usize,
    /// Whether the selected row's detail is open.
    pub open: bool,
    /// Lines the detail is scrolled by.
    pub scroll: u16,
    /// Whether the keys are shown.
    pub help: bool,
}

impl View {
    /// The first screen: `page`, its first row, nothing open.
    pub fn new(page: Page) -> View {
        View { page, selected: 0, open: false, scroll: 0, help: false }
    }
}

/// How many rows the page's list has in `s`.
pub fn rows(s: &Snapshot, page: Page) -> usize {
    match page {
        Page::Goals => s.goals.as_ref().map_or(0, |(rows, _)| rows.len()),
        Page::Work => s.work.as_ref().map_or(0, |(rows, _)| rows.len()),
        Page::Harnesses => {
            s.harnesses.as_ref().map_or(0, |d| d["harnesses"].as_array().map_or(0, Vec::len))
        }
        Page::Approvals => s.approvals.as_ref().map_or(0, |(rows, _)| rows.len()),
    }
}

/// What the selected row of `view`'s page is, for its detail; none on a page without details.
pub fn focus(s: &Snapshot, view: &View) -> Option<Focus> {
    let at = view.selected;
    match view.page {
        Page::Goals => s.goals.as_ref().ok()?.0.get(at).map(|g| Focus::Goal(g.id.clone())),
        Page::Work => s.work.as_ref().ok()?.0.get(at).map(|w| Focus::Work(w.id.clone())),
        Page::Harnesses => {
            let doc = s.harnesses.as_ref().ok()?;
            let name = doc["harnesses"].get(at)?["name"].as_str()?;
            harn_core::ids::Id::new(name).ok().map(Focus::Harness)
        }
        Page::Approvals => None,
    }
}

impl Page {
    /// The page after this one, wrapping.
    pub fn next(self) -> Page {
        PAGES[(self.index() + 1) % PAGES.len()]
    }

    /// The page before this one, wrapping.
    pub fn previous(self) -> Page {
        PAGES[(self.index() + PAGES.len() - 1) % PAGES.len()]
    }

    /// The page a digit key names.
    pub fn from_key(c: char) -> Option<Page> {
        c.to_digit(10).and_then(|d| PAGES.get((d as usize).checked_sub(1)?)).copied()
    }

    fn index(self) -> usize {
        PAGES.iter().position(|p| *p == self).expect("every page is listed")
    }

    fn title(self) -> &'static str {
        match self {
            Page::Goals => "1 Goals",
            Page::Work => "2 Work",
            Page::Harnesses => "3 Harnesses",
            Page::Approvals => "4 Approvals",
        }
    }
}

const HEADER: Style = Style::new().add_modifier(Modifier::BOLD);
const PROBLEM: Style = Style::new().fg(Color::Red);
const DIM: Style = Style::new().fg(Color::DarkGray);

/// Draws `view` of `snapshot` as seen at `now`.
pub fn render(f: &mut Frame, snapshot: &Snapshot, view: &View, now: WallTime) {
    let page = view.page;
    let [top, body, bottom] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)])
            .areas(f.area());
    let [name, tabs] = Layout::horizontal([Constraint::Min(10), Constraint::Length(48)]).areas(top);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" harn dash ", HEADER),
            Span::styled(snapshot.root.as_str(), DIM),
        ])),
        name,
    );
    f.render_widget(
        Tabs::new(PAGES.iter().map(|p| p.title()))
            .select(page.index())
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED)),
        tabs,
    );
    let selected = Some(view.selected.min(rows(snapshot, page).saturating_sub(1)));
    match page {
        _ if view.open => detail_page(f, body, snapshot, view.scroll),
        Page::Goals => goals_page(f, body, snapshot, now, selected),
        Page::Work => work_page(f, body, snapshot, now, selected),
        Page::Harnesses => harnesses_page(f, body, snapshot, selected),
        Page::Approvals => approvals_page(f, body, snapshot, selected),
    }
    f.render_widget(Paragraph::new(keys(view, bottom.width)).style(DIM), bottom);
    if view.help {
        help(f, body);
    }
    neutralize(f.buffer_mut());
}

/// The keys, over the page.
fn help(f: &mut Frame, area: Rect) {
    let lines = [
        "1 2 3 4, ←/→, Tab   Goals, Work, Harnesses, Approvals",
        "↑/↓, k/j            select a row (a long list scrolls)",
        "PgUp/PgDn, Home/End a page of rows; the first, the last",
        "Enter               open the selected goal, work item or harness",
        "Esc, Backspace      back to the list; close this help",
        "↑/↓ in a detail     scroll it",
        "r                   read the root now",
        "?                   show or hide these keys",
        "q, Ctrl-C           quit",
    ];
    let width = (lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) + 4) as u16;
    let height = lines.len() as u16 + 2;
    let spot = Rect::new(
        area.x + area.width.saturating_sub(width) / 2,
        area.y + area.height.saturating_sub(height) / 2,
        width.min(area.width),
        height.min(area.height),
    );
    let text: Vec<Line> = lines.iter().map(|l| Line::from(format!(" {l}"))).collect();
    f.render_widget(Clear, spot);
    f.render_widget(
        Paragraph::new(text).block(Block::bordered().title(" keys ").style(HEADER)),
        spot,
    );
}

/// The detail the reader took of the selected row: its title, then each section.
fn detail_page(f: &mut Frame, area: Rect, s: &Snapshot, scroll: u16) {
    let detail = match &s.detail {
        None => return message(f, area, "reading…", DIM),
        Some((_, Err(e))) => return message(f, area, &format!("cannot be read: {e}"), PROBLEM),
        Some((_, Ok(d))) => d,
    };
    let mut lines = vec![Line::styled(format!(" {}", detail.title), HEADER)];
    for (heading, body) in &detail.sections {
        lines.push(Line::raw(""));
        lines.push(Line::styled(format!(" {heading}"), HEADER));
        if body.is_empty() {
            lines.push(Line::styled("   (none)", DIM));
        }
        lines.extend(body.iter().map(|l| Line::raw(format!("   {l}"))));
    }
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((scroll, 0)), area);
}

/// `text` cut to `width` columns, ending in `…` when it was longer.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A table's fixed columns and which of them fit: on a narrow terminal the columns a person
/// can best do without go first (`drop`, in order), so what stays is whole and the last
/// column keeps room to be read.
struct Cols {
    widths: Vec<u16>,
    keep: Vec<bool>,
}

/// The least the last, flexible column is left.
const LAST_MIN: u16 = 16;

impl Cols {
    fn new(widths: &[u16], drop: &[usize], total: u16) -> Cols {
        let mut keep = vec![true; widths.len()];
        let need = |keep: &[bool]| -> u16 {
            let kept = widths.iter().zip(keep).filter(|(_, k)| **k);
            kept.map(|(w, _)| w + 1).sum::<u16>() + LAST_MIN
        };
        for &i in drop {
            if need(&keep) <= total {
                break;
            }
            keep[i] = false;
        }
        Cols { widths: widths.to_vec(), keep }
    }

    /// The kept fixed widths.
    fn kept(&self) -> Vec<u16> {
        self.widths.iter().zip(&self.keep).filter(|(_, k)| **k).map(|(w, _)| *w).collect()
    }

    /// The kept ones of `items` (one per fixed column, then the last column's).
    fn pick<T>(&self, items: Vec<T>) -> Vec<T> {
        let n = self.widths.len();
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i >= n || self.keep[*i])
            .map(|(_, t)| t)
            .collect()
    }

    /// The header of the kept columns.
    fn header(&self, names: &[&'static str]) -> Row<'static> {
        Row::new(self.pick(names.to_vec())).style(HEADER)
    }
}

/// Each cell fit to its column: the kept fixed widths, then what is left of `total` for the
/// last.
fn fitted(cells: Vec<String>, cols: &Cols, total: u16) -> Vec<String> {
    let widths = cols.kept();
    let fixed: u16 = widths.iter().sum::<u16>() + widths.len() as u16; // a space between
    let last = usize::from(total.saturating_sub(fixed)).max(1);
    cols.pick(cells)
        .into_iter()
        .enumerate()
        .map(|(i, c)| fit(&c, widths.get(i).map_or(last, |w| usize::from(*w))))
        .collect()
}

/// A table of `rows` under `header`, columns of `widths` and a last one taking the rest, the
/// `selected` row highlighted and kept in view.
fn table(
    f: &mut Frame,
    area: Rect,
    header: Row<'static>,
    rows: Vec<Row<'static>>,
    cols: &Cols,
    selected: Option<usize>,
) {
    let mut constraints: Vec<Constraint> =
        cols.kept().iter().map(|w| Constraint::Length(*w)).collect();
    constraints.push(Constraint::Min(8));
    let table = Table::new(rows, constraints)
        .header(header)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(selected);
    f.render_stateful_widget(table, area, &mut state);
}

/// Titles, reasons and errors come from agents and workflows: no character of theirs that a
/// terminal would act on (an escape sequence, a bidi override) reaches it; each becomes `�`.
fn neutralize(buffer: &mut ratatui::buffer::Buffer) {
    for cell in buffer.content.iter_mut() {
        if cell.symbol().chars().any(harn_core::text::is_control) {
            let shown: String = cell
                .symbol()
                .chars()
                .map(|c| if harn_core::text::is_control(c) { '\u{fffd}' } else { c })
                .collect();
            cell.set_symbol(&shown);
        }
    }
}

/// Takes the colours off a drawn screen, keeping bold, dim and reversed (the selection), for
/// `--color never` and `NO_COLOR`.
pub fn uncolour(buffer: &mut ratatui::buffer::Buffer) {
    for cell in buffer.content.iter_mut() {
        cell.set_fg(Color::Reset).set_bg(Color::Reset);
    }
}

/// The first screen, before anything was read.
pub fn reading(f: &mut Frame) {
    f.render_widget(Paragraph::new(" harn dash: reading the root…"), f.area());
}

/// Room kept at the right of the footer for the age of the last reading (`read 59.9 s ago`).
const AGE_ROOM: usize = 20;

/// The footer's keys for a terminal `width` wide: the short list where the whole one would
/// leave no room for the reading's age.
fn keys(view: &View, width: u16) -> &'static str {
    const LIST: &str = " q quit · ←/→ or 1-4 page · ↑/↓ select · Enter open · ? keys · r read now";
    const SHORT: &str = " q quit · 1-4 page · Enter open · ? keys · r read now";
    if view.open {
        " Esc back · ↑/↓ scroll · ? keys · q quit"
    } else if LIST.chars().count() + AGE_ROOM <= usize::from(width) {
        LIST
    } else {
        SHORT
    }
}

/// The age of the last reading, at the bottom right where the keys leave room; marked when
/// reads fall behind.
pub fn read_age(f: &mut Frame, view: &View, age_ms: i64, refresh: Duration) {
    let area = f.area();
    let text = format!("read {} ago ", human_ms(age_ms.max(0) as u64));
    let width = text.chars().count() as u16;
    let used = keys(view, area.width).chars().count() as u16 + 1;
    if area.height == 0 || area.width < width + used {
        return;
    }
    let slow = age_ms > 3 * refresh.as_millis() as i64 + 2_000;
    let style = if slow { PROBLEM } else { DIM };
    let spot = Rect::new(area.width - width, area.height - 1, width, 1);
    f.render_widget(Paragraph::new(text).style(style), spot);
}

fn goals_page(f: &mut Frame, area: Rect, s: &Snapshot, now: WallTime, selected: Option<usize>) {
    let mut service = service_lines(s, now);
    if let Ok((_, problems)) = &s.goals {
        service.extend(problems.iter().map(|p| Line::styled(format!(" unreadable: {p}"), PROBLEM)));
    }
    let [head, table] =
        Layout::vertical([Constraint::Length(service.len() as u16 + 1), Constraint::Min(1)])
            .areas(area);
    f.render_widget(Paragraph::new(service).wrap(Wrap { trim: false }), head);
    let rows = match &s.goals {
        Ok((rows, _)) if rows.is_empty() => {
            return message(f, table, "no goals yet: harn supervisor create …", DIM);
        }
        Ok((rows, _)) => rows,
        Err(e) => return message(f, table, &format!("goals cannot be listed: {e}"), PROBLEM),
    };
    let widths = Cols::new(&[20, 8, 18, 14, 21], &[1, 4], table.width);
    let lines = rows.iter().map(|g| goal_row(g, s, now, &widths, table.width)).collect();
    let header = widths.header(&["GOAL", "SERVICE", "STATE", "NEXT", "WAKE", "LAST TICK"]);
    self::table(f, table, header, lines, &widths, selected);
}

fn service_lines(s: &Snapshot, now: WallTime) -> Vec<Line<'static>> {
    let v = &s.service;
    let (glyph, style) = match v.liveness {
        Liveness::Running => ("●", Style::new().fg(Color::Green)),
        Liveness::Stopping => ("◐", Style::new().fg(Color::Yellow)),
        Liveness::Stale => ("✖", PROBLEM),
        Liveness::Stopped | Liveness::Unconfigured => ("○", DIM),
    };
    let name = serde_json::json!(v.liveness).as_str().unwrap_or("").replace('_', " ");
    let mut first = vec![Span::raw(" service "), Span::styled(format!("{glyph} {name}"), style)];
    if let Some(st) = &v.status {
        let age = now.0.saturating_sub(st.heartbeat_at.0).max(0) as u64;
        // A stopped service has no heartbeat to age: when it stopped is the fact.
        let beat = match v.liveness {
            Liveness::Stopped => {
                let at = st.stopped_at.unwrap_or(st.heartbeat_at);
                format!("stopped at {} UTC", at.utc())
            }
            _ => format!("heartbeat {} ago", human_ms(age)),
        };
        first.push(Span::raw(format!("  pid {}  {beat}  {} sweeps", st.pid, st.sweep_count)));
        if let Some(ms) = st.last_sweep_ms {
            first.push(Span::raw(format!(" (last took {})", human_ms(ms))));
        }
        if let Some(g) = &st.active_goal_id {
            first.push(Span::styled(format!("  ticking {g}"), HEADER));
        }
    }
    let mut lines = vec![Line::from(first)];
    match &v.config {
        Some(c) => lines.push(Line::from(format!(
            " enrolled {} goal{}  sweep every {}  heartbeat every {}  backoff {}..{}",
            c.goal_ids.len(),
            if c.goal_ids.len() == 1 { "" } else { "s" },
            human_ms(c.wake_interval_ms),
            human_ms(c.heartbeat_interval_ms),
            human_ms(c.error_backoff_base_ms),
            human_ms(c.error_backoff_max_ms),
        ))),
        None => {
            lines.push(Line::styled(" not enrolled: harn supervisor service start <goal>…", DIM))
        }
    }
    if let Some(e) = v.status.as_ref().and_then(|st| st.last_error.as_ref()) {
        lines.push(Line::styled(format!(" last sweep error: {e}"), PROBLEM));
    }
    for p in &v.problems {
        lines.push(Line::styled(format!(" unreadable: {p}"), PROBLEM));
    }
    lines
}

fn goal_row(g: &GoalRow, s: &Snapshot, now: WallTime, widths: &Cols, total: u16) -> Row<'static> {
    let enrolled = if g.enrolled { "enrolled" } else { "-" };
    // The goal the running service is in the middle of reads so, whatever its last record.
    let live = s.service.liveness == Liveness::Running;
    let active = s.service.status.as_ref().and_then(|st| st.active_goal_id.as_ref());
    let wake = match (&g.wake, g.enrolled) {
        _ if live && active == Some(&g.id) => "ticking now".into(),
        (Some(w), _) => wake_text(w, s.service.hints.as_ref(), now),
        (None, true) => "not swept yet".into(),
        (None, false) => String::new(),
    };
    match &g.read {
        Ok(sum) => Row::new(fitted(
            vec![
                g.id.to_string(),
                enrolled.into(),
                name_of(&sum.state),
                name_of(&sum.next_action),
                wake,
                g.last_outcome.clone().unwrap_or_default(),
            ],
            widths,
            total,
        )),
        Err(e) => Row::new(fitted(
            vec![
                g.id.to_string(),
                enrolled.into(),
                "unreadable".into(),
                String::new(),
                wake,
                e.clone(),
            ],
            widths,
            total,
        ))
        .style(PROBLEM),
    }
}

fn wake_text(
    w: &GoalWake,
    hints: Option<&harn_core::service::RuntimeHints>,
    now: WallTime,
) -> String {
    match w.state {
        WakeState::Idle => "idle".into(),
        WakeState::AwaitingChange => "awaiting change".into(),
        WakeState::Backoff => {
            let at = w.next_wake_at.and_then(|at| hints?.wall_of(at));
            match at {
                Some(at) if at.0 > now.0 => {
                    format!(
                        "backoff ×{}, in {}",
                        w.consecutive_errors,
                        human_ms((at.0 - now.0) as u64)
                    )
                }
                _ => format!("backoff ×{}, due", w.consecutive_errors),
            }
        }
    }
}

fn work_page(f: &mut Frame, area: Rect, s: &Snapshot, now: WallTime, selected: Option<usize>) {
    let (rows, problems) = match &s.work {
        Ok((rows, problems)) => (rows, problems),
        Err(e) => return message(f, area, &format!("work cannot be listed: {e}"), PROBLEM),
    };
    let mut head = vec![Line::from(format!(" {}", state_counts(rows)))];
    head.extend(problems.iter().map(|p| Line::styled(format!(" unreadable: {p}"), PROBLEM)));
    let [top, table] =
        Layout::vertical([Constraint::Length(head.len() as u16 + 1), Constraint::Min(1)])
            .areas(area);
    f.render_widget(Paragraph::new(head), top);
    if rows.is_empty() {
        return message(f, table, "no work items yet: harn work create …", DIM);
    }
    let widths = Cols::new(&[18, 11, 32, 19, 8], &[4, 3], table.width);
    let header = widths.header(&["ITEM", "STATE", "NEXT", "ATTEMPTS", "COST", "TITLE"]);
    let lines = rows.iter().map(|w| {
        // A running item shows how long its run has taken and the call it waits on.
        let next = match &w.running {
            Some(r) => {
                let took = human_ms(now.0.saturating_sub(r.started_at.0).max(0) as u64);
                match &r.call {
                    Some((id, harness)) => format!("{took} · {id} on {harness}"),
                    None => format!("{took} · workflow"),
                }
            }
            None => name_of(&w.next_action),
        };
        let cost =
            w.cost_micro_usd.map_or_else(|| "-".to_owned(), harn_core::work::adapter::dollars);
        let cells =
            vec![w.id.to_string(), name_of(&w.state), next, attempts(w), cost, w.title.clone()];
        Row::new(fitted(cells, &widths, table.width))
    });
    self::table(f, table, header, lines.collect(), &widths, selected);
}

/// `charged/max`, and `(+N uncharged)` when attempts ran that the budget did not count.
fn attempts(w: &WorkRow) -> String {
    match w.uncharged {
        0 => format!("{}/{}", w.charged, w.max_attempts),
        n => format!("{}/{} (+{n} uncharged)", w.charged, w.max_attempts),
    }
}

/// "3 items: 1 succeeded · 2 ready", states in the order they first appear by count.
fn state_counts(rows: &[WorkRow]) -> String {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for r in rows {
        *counts.entry(name_of(&r.state)).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let noun = if rows.len() == 1 { "item" } else { "items" };
    if parts.is_empty() {
        format!("{} {noun}", rows.len())
    } else {
        format!("{} {noun}: {}", rows.len(), parts.join(" · "))
    }
}

fn harnesses_page(f: &mut Frame, area: Rect, s: &Snapshot, selected: Option<usize>) {
    let doc = match &s.harnesses {
        Ok(doc) => doc,
        Err(e) => return message(f, area, &format!("harnesses cannot be read: {e}"), PROBLEM),
    };
    let d = &doc["daemon"];
    let head = if d["running"] == true {
        format!(
            " daemon ● running  pid {}  {}{}",
            d["pid"],
            d["containment"].as_str().unwrap_or(""),
            if d["draining"] == true { "  shutting down" } else { "" }
        )
    } else {
        " daemon ○ not running: intent and counters from state.json".into()
    };
    let rows: Vec<&Value> = doc["harnesses"].as_array().into_iter().flatten().collect();
    // A harness given up on waits for a person: the second line says what to type.
    let failed = rows.iter().find(|h| h["state"] == "failed").and_then(|h| h["name"].as_str());
    let next = match failed {
        Some(name) => Line::from(format!(" next: harn harness restart {name}")).style(PROBLEM),
        None => Line::from(""),
    };
    let [top, table] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    f.render_widget(Paragraph::new(vec![Line::from(head), next]), top);
    if rows.is_empty() {
        return message(
            f,
            table,
            "no harnesses: declare them in harness.toml, then harn harness up",
            DIM,
        );
    }
    let widths = Cols::new(&[20, 20, 7, 8, 8, 8, 10, 16], &[2, 4, 3, 5, 6], table.width);
    let header = widths.header(&[
        "HARNESS",
        "STATE",
        "ENABLED",
        "PID",
        "UPTIME",
        "RESTARTS",
        "NEXT RETRY",
        "LAST EXIT",
        "READY",
    ]);
    let lines = rows.into_iter().map(|h| harness_row(h, &widths, table.width)).collect();
    self::table(f, table, header, lines, &widths, selected);
}

fn harness_row(h: &Value, widths: &Cols, total: u16) -> Row<'static> {
    let mut state = h["state"].as_str().unwrap_or("?").to_owned();
    let mut glyph = crate::dash::readers::state_glyph(&state);
    let changed = h["config_changed"] == true;
    // Running again after crashes is not yet healthy: it reads as a crash loop until the
    // healthy-run clock forgives the failures.
    let failures = h["consecutive_failures"].as_u64().unwrap_or(0);
    if state == "running" && failures > 0 {
        glyph = '◐';
        state = format!("running, {failures} failed");
    }
    let style = match glyph {
        '●' => Style::new().fg(Color::Green),
        '◐' => Style::new().fg(Color::Yellow),
        '✖' => PROBLEM,
        _ => Style::new(),
    };
    // A configuration changed since the run started takes effect at its next start.
    if changed {
        state.push_str(" (changed)");
    }
    let last_exit = crate::dash::readers::last_exit_text(h).unwrap_or_else(|| "-".into());
    let ready = match (h["pid"].is_u64(), h["ready"].as_bool()) {
        (false, _) => "-".to_owned(),
        // The ledger's words: without a check, ready is taken, not proven.
        (true, Some(true)) if h["readiness"] == "none" => "no check".into(),
        (true, Some(true)) => "ready".into(),
        (true, _) => format!("waiting ({})", h["readiness"].as_str().unwrap_or("?")),
    };
    let cells = vec![
        format!("{glyph} {}", h["name"].as_str().unwrap_or("")),
        state,
        if h["enabled"] == true { "yes" } else { "no" }.into(),
        h["pid"].as_u64().map_or("-".into(), |p| p.to_string()),
        h["uptime_ms"].as_u64().map_or("-".into(), human_ms),
        h["restarts"].as_u64().unwrap_or(0).to_string(),
        h["next_retry_in_ms"].as_u64().map_or("-".into(), |ms| format!("in {}", human_ms(ms))),
        last_exit,
        ready,
    ];
    Row::new(fitted(cells, widths, total)).style(style)
}

fn approvals_page(f: &mut Frame, area: Rect, s: &Snapshot, selected: Option<usize>) {
    let (rows, problems) = match &s.approvals {
        Ok((rows, problems)) => (rows, problems),
        Err(e) => return message(f, area, &format!("approvals cannot be listed: {e}"), PROBLEM),
    };
    let pending = rows.iter().filter(|r| r.status == "pending").count();
    let mut head = vec![Line::from(format!(" {pending} pending of {}", rows.len()))];
    head.extend(problems.iter().map(|p| Line::styled(format!(" unreadable: {p}"), PROBLEM)));
    if let Some(first) = rows.first().filter(|r| r.status == "pending") {
        head.push(Line::styled(format!(" next: harn approval approve {}", first.id), DIM));
    }
    let [top, list] =
        Layout::vertical([Constraint::Length(head.len() as u16 + 1), Constraint::Min(1)])
            .areas(area);
    f.render_widget(Paragraph::new(head), top);
    if rows.is_empty() {
        return message(f, list, "no approvals: a run a policy asks about parks on one", DIM);
    }
    let widths = Cols::new(&[38, 9, 20, 12], &[3, 2], list.width);
    let header = widths.header(&["APPROVAL", "STATUS", "WORK", "ADDRESSEE", "ASKS"]);
    let lines = rows
        .iter()
        .map(|r| {
            let cells = vec![
                r.id.to_string(),
                r.status.clone(),
                r.work_id.clone(),
                r.addressee.clone(),
                r.asks.clone(),
            ];
            let row = Row::new(fitted(cells, &widths, list.width));
            if r.status == "pending" {
                row.style(Style::new().fg(Color::Yellow))
            } else {
                row
            }
        })
        .collect();
    table(f, list, header, lines, &widths, selected);
}

fn message(f: &mut Frame, area: Rect, text: &str, style: Style) {
    f.render_widget(
        Paragraph::new(format!(" {text}")).style(style).wrap(Wrap { trim: false }),
        area,
    );
}

/// `850 ms`, `4.2 s`, `3 min`, `2 h`.
pub fn human_ms(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{}.{} s", ms / 1_000, ms % 1_000 / 100),
        60_000..=7_199_999 => format!("{} min", ms / 60_000),
        _ => format!("{} h", ms / 3_600_000),
    }
}
