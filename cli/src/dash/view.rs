//! The dashboard's pages, drawn from a [`Snapshot`] and the wall-clock time alone: no reads,
//! no clocks, so the same snapshot always draws the same screen (the snapshot tests rely on it).

use super::Snapshot;
use crate::readers::{GoalRow, WorkRow};
use harn_core::service::wake::{GoalWake, WakeState};
use harn_core::service::Liveness;
use harn_core::time::WallTime;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, Tabs, Wrap};
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
}

const PAGES: [Page; 3] = [Page::Goals, Page::Work, Page::Harnesses];

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
        }
    }
}

const HEADER: Style = Style::new().add_modifier(Modifier::BOLD);
const PROBLEM: Style = Style::new().fg(Color::Red);
const DIM: Style = Style::new().fg(Color::DarkGray);

/// Draws `page` of `snapshot` as seen at `now`.
pub fn render(f: &mut Frame, snapshot: &Snapshot, page: Page, now: WallTime) {
    let [top, body, bottom] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)])
            .areas(f.area());
    let [name, tabs] = Layout::horizontal([Constraint::Min(10), Constraint::Length(34)]).areas(top);
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
    match page {
        Page::Goals => goals_page(f, body, snapshot, now),
        Page::Work => work_page(f, body, snapshot, now),
        Page::Harnesses => harnesses_page(f, body, snapshot),
    }
    f.render_widget(Paragraph::new(" q quit · ←/→ or 1-3 page · r read now").style(DIM), bottom);
    neutralize(f.buffer_mut());
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

/// The first screen, before anything was read.
pub fn reading(f: &mut Frame) {
    f.render_widget(Paragraph::new(" harn dash: reading the root…"), f.area());
}

/// The age of the last reading, at the bottom right; marked when reads fall behind.
pub fn read_age(f: &mut Frame, age_ms: i64, refresh: Duration) {
    let area = f.area();
    let text = format!("read {} ago ", human_ms(age_ms.max(0) as u64));
    let width = text.chars().count() as u16;
    if area.height == 0 || area.width < width {
        return;
    }
    let slow = age_ms > 3 * refresh.as_millis() as i64 + 2_000;
    let style = if slow { PROBLEM } else { DIM };
    let spot = Rect::new(area.width - width, area.height - 1, width, 1);
    f.render_widget(Paragraph::new(text).style(style), spot);
}

fn goals_page(f: &mut Frame, area: Rect, s: &Snapshot, now: WallTime) {
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
    let hints = s.service.hints.as_ref();
    let lines = rows.iter().map(|g| goal_row(g, hints, now));
    let widths = [
        Constraint::Length(20),
        Constraint::Length(8),
        Constraint::Length(18),
        Constraint::Length(14),
        Constraint::Length(21),
        Constraint::Min(10),
    ];
    let header = Row::new(["GOAL", "SERVICE", "STATE", "NEXT", "WAKE", "LAST TICK"]).style(HEADER);
    f.render_widget(Table::new(lines, widths).header(header), table);
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
        first.push(Span::raw(format!(
            "  pid {}  heartbeat {} ago  {} sweeps",
            st.pid,
            human_ms(age),
            st.sweep_count
        )));
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

fn goal_row<'a>(
    g: &'a GoalRow,
    hints: Option<&harn_core::service::RuntimeHints>,
    now: WallTime,
) -> Row<'a> {
    let enrolled = if g.enrolled { "enrolled" } else { "-" };
    let wake = match (&g.wake, g.enrolled) {
        (Some(w), _) => wake_text(w, hints, now),
        (None, true) => "not swept yet".into(),
        (None, false) => String::new(),
    };
    match &g.read {
        Ok(sum) => Row::new(vec![
            g.id.to_string(),
            enrolled.into(),
            name_of(&sum.state),
            name_of(&sum.next_action),
            wake,
            g.last_outcome.clone().unwrap_or_default(),
        ]),
        Err(e) => Row::new(vec![
            g.id.to_string(),
            enrolled.into(),
            "unreadable".into(),
            String::new(),
            wake,
            e.clone(),
        ])
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

fn work_page(f: &mut Frame, area: Rect, s: &Snapshot, now: WallTime) {
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
    let widths = [
        Constraint::Length(18),
        Constraint::Length(11),
        Constraint::Length(32),
        Constraint::Length(19),
        Constraint::Length(8),
        Constraint::Min(10),
    ];
    let header = Row::new(["ITEM", "STATE", "NEXT", "ATTEMPTS", "COST", "TITLE"]).style(HEADER);
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
            w.cost_micro_usd.map_or_else(|| "-".to_owned(), harn_core::workflow::adapter::dollars);
        Row::new(vec![
            w.id.to_string(),
            name_of(&w.state),
            next,
            attempts(w),
            cost,
            w.title.clone(),
        ])
    });
    f.render_widget(Table::new(lines, widths).header(header), table);
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

fn harnesses_page(f: &mut Frame, area: Rect, s: &Snapshot) {
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
    let [top, table] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    f.render_widget(Paragraph::new(head), top);
    let rows: Vec<&Value> = doc["harnesses"].as_array().into_iter().flatten().collect();
    if rows.is_empty() {
        return message(
            f,
            table,
            "no harnesses: declare them in harness.toml, then harn harness up",
            DIM,
        );
    }
    let widths = [
        Constraint::Length(24),
        Constraint::Length(13),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(12),
        Constraint::Length(18),
        Constraint::Min(8),
    ];
    let header =
        Row::new(["HARNESS", "STATE", "ENABLED", "RESTARTS", "NEXT RETRY", "LAST EXIT", "READY"])
            .style(HEADER);
    f.render_widget(Table::new(rows.into_iter().map(harness_row), widths).header(header), table);
}

fn harness_row(h: &Value) -> Row<'static> {
    let state = h["state"].as_str().unwrap_or("?").to_owned();
    let glyph = crate::readers::state_glyph(&state);
    let style = match glyph {
        '●' => Style::new().fg(Color::Green),
        '◐' => Style::new().fg(Color::Yellow),
        '✖' => PROBLEM,
        _ => Style::new(),
    };
    let last_exit = crate::readers::last_exit_text(h).unwrap_or_else(|| "-".into());
    let ready = match (h["pid"].is_u64(), h["ready"].as_bool()) {
        (false, _) => "-".to_owned(),
        (true, Some(true)) => "ready".into(),
        (true, _) => format!("waiting ({})", h["readiness"].as_str().unwrap_or("?")),
    };
    Row::new(vec![
        format!("{glyph} {}", h["name"].as_str().unwrap_or("")),
        state,
        if h["enabled"] == true { "yes" } else { "no" }.into(),
        h["restarts"].as_u64().unwrap_or(0).to_string(),
        h["next_retry_in_ms"].as_u64().map_or("-".into(), |ms| format!("in {}", human_ms(ms))),
        last_exit,
        ready,
    ])
    .style(style)
}

fn message(f: &mut Frame, area: Rect, text: &str, style: Style) {
    f.render_widget(
        Paragraph::new(format!(" {text}")).style(style).wrap(Wrap { trim: false }),
        area,
    );
}

/// The snake_case name serde gives a state or an action.
fn name_of(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
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
