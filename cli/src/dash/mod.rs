//! `harn dash`: a read-only terminal dashboard of the service, goals, work and harnesses. A
//! reader thread takes [`Snapshot`]s and hands over only the ones that changed; the screen
//! thread never reads a file, so a slow read shows as a stale age, never a frozen screen.

mod keys;
pub mod readers;
mod snapshot;
mod view;

#[cfg(test)]
mod tests;

pub use snapshot::Snapshot;
pub use view::{render, Page, View};

use crate::dash::readers::{Focus, Kept};
use crate::exit::Exit;
use clap::Args;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::Terminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// `harn dash`
#[derive(Debug, Args)]
pub struct DashArgs {
    /// The coordination root (default: found from the current directory, as git finds its
    /// repository).
    #[arg(long)]
    root: Option<PathBuf>,
    /// How often the root is read again, in ms.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    refresh_ms: u64,
    /// The page shown first.
    #[arg(long, value_enum, default_value_t = Page::Goals)]
    page: Page,
    /// Print the page once as text, at `--width` by `--height`, and exit.
    #[arg(long)]
    once: bool,
    /// Columns of `--once`.
    #[arg(long, default_value_t = 110)]
    width: u16,
    /// Rows of `--once`.
    #[arg(long, default_value_t = 30)]
    height: u16,
    /// With `--once`: open the detail of this goal, work item or harness (the page says
    /// which), as Enter does on its row.
    #[arg(long, requires = "once")]
    open: Option<String>,
    /// Draw without colour (`--color never`, or `NO_COLOR`): set by the command line.
    #[arg(skip)]
    pub plain: bool,
}

/// Runs the dashboard; returns the exit code.
pub fn run(args: DashArgs) -> Exit {
    let root = match crate::os::root::discover(args.root.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            let shown = args.root.unwrap_or_else(|| PathBuf::from(".")).display().to_string();
            return crate::exit::fail(crate::exit::EXIT_USAGE, format!("{shown}: {e}"));
        }
    };
    if let Err(e) = crate::os::root::require_ledger(&root, args.root.is_some()) {
        return crate::exit::fail(crate::exit::EXIT_FAILED, e);
    }
    if args.once {
        let focus = match args.open.as_deref().map(|id| focus_of(args.page, id)) {
            None => None,
            Some(Ok(f)) => Some(f),
            Some(Err(e)) => return crate::exit::fail(crate::exit::EXIT_USAGE, e),
        };
        let snapshot = Snapshot::take(&root, focus.as_ref(), &mut Kept::default());
        let view = View { open: focus.is_some(), ..View::new(args.page) };
        print!("{}", once(&snapshot, &view, args.width, args.height));
        return Ok(0);
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return crate::exit::fail(
            crate::exit::EXIT_USAGE,
            "harn dash draws on a terminal; use --once to print a page as text",
        );
    }
    match interactive(root, args.page, Duration::from_millis(args.refresh_ms), args.plain) {
        Ok(()) => Ok(0),
        Err(e) => crate::exit::fail(crate::exit::EXIT_FAILED, format!("dash: {e}")),
    }
}

/// What `--open ID` opens on `page`.
fn focus_of(page: Page, id: &str) -> Result<Focus, String> {
    let id = harn_core::ids::Id::new(id).map_err(|e| format!("--open {id:?}: {e}"))?;
    match page {
        Page::Goals => Ok(Focus::Goal(id)),
        Page::Work => Ok(Focus::Work(id)),
        Page::Harnesses => Ok(Focus::Harness(id)),
        Page::Approvals => Err("--open: the approvals page has no detail view".into()),
    }
}

/// One view drawn into a buffer of `width` by `height`, as text with trailing blanks trimmed.
pub fn once(snapshot: &Snapshot, view: &View, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("a test backend");
    let now = snapshot.taken_at;
    terminal.draw(|f| render(f, snapshot, view, now)).expect("drawing into memory");
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let line: String =
            (0..buffer.area.width).map(|x| buffer[(x, y)].symbol().to_owned()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn interactive(root: PathBuf, page: Page, refresh: Duration, plain: bool) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<Snapshot>();
    let (poke, poked) = mpsc::channel::<Option<Focus>>();
    let last_read = Arc::new(AtomicI64::new(0));
    let read_at = last_read.clone();
    std::thread::spawn(move || reader(&root, refresh, &tx, &poked, &read_at));
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> std::io::Result<()> {
        let mut latest: Option<Snapshot> = None;
        let mut view = View::new(page);
        // The entity whose detail is open: a snapshot's detail of any other is not drawn.
        let mut opened: Option<Focus> = None;
        loop {
            while let Ok(mut s) = rx.try_recv() {
                if s.detail.as_ref().map(|(f, _)| f) != opened.as_ref() {
                    s.detail = None;
                }
                latest = Some(s);
            }
            let wall = crate::dash::readers::wall_now();
            let read_age = wall.0.saturating_sub(last_read.load(Ordering::SeqCst));
            let body_rows = terminal.size()?.height.saturating_sub(6);
            terminal.draw(|f| {
                match &latest {
                    Some(s) => {
                        render(f, s, &view, wall);
                        view::read_age(f, &view, read_age, refresh);
                    }
                    None => view::reading(f),
                }
                if plain {
                    view::uncolour(f.buffer_mut());
                }
            })?;
            // Redraws at least every half second, so ages move while nothing changes.
            if !event::poll(Duration::from_millis(500))? {
                continue;
            }
            let Event::Key(key) = event::read()? else { continue };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
                return Ok(());
            }
            let rows = latest.as_ref().map_or(0, |s| view::rows(s, view.page));
            let was_open = view.open;
            match keys::press(&mut view, key.code, rows, body_rows) {
                keys::Then::Quit => return Ok(()),
                keys::Then::ReadNow => {
                    let _ = poke.send(opened.clone());
                }
                keys::Then::Draw => {}
            }
            if view.open && !was_open {
                // The detail is read by the reader, never here: drop any older one first.
                opened = focus(latest.as_ref(), &view);
                if let Some(s) = latest.as_mut() {
                    s.detail = None;
                }
                if opened.is_none() {
                    view.open = false; // Nothing on that row to open.
                }
                let _ = poke.send(opened.clone());
            } else if was_open && !view.open {
                opened = None;
                let _ = poke.send(None);
            }
        }
    })();
    ratatui::restore();
    result
}

/// The entity whose detail `view` has open, in `latest`.
fn focus(latest: Option<&Snapshot>, view: &View) -> Option<Focus> {
    latest.filter(|_| view.open).and_then(|s| view::focus(s, view))
}

/// Reads the root every `refresh` (longer for a root whose reading is slow; at once when poked)
/// and sends each snapshot that differs from the last one sent; ends when the screen thread
/// has gone.
fn reader(
    root: &std::path::Path,
    refresh: Duration,
    tx: &mpsc::Sender<Snapshot>,
    poked: &mpsc::Receiver<Option<Focus>>,
    read_at: &AtomicI64,
) {
    let mut last: Option<Snapshot> = None;
    let mut focus: Option<Focus> = None;
    let mut kept = Kept::default();
    loop {
        let began = std::time::Instant::now();
        let snapshot = Snapshot::take(root, focus.as_ref(), &mut kept);
        // A big root is read less often, so reading never takes more than a fifth of a core.
        let pause = refresh.max(began.elapsed() * 4);
        read_at.store(snapshot.taken_at.0, Ordering::SeqCst);
        if last.as_ref().is_none_or(|l| !l.same_as(&snapshot)) {
            if tx.send(snapshot.clone()).is_err() {
                return;
            }
            last = Some(snapshot);
        }
        match poked.recv_timeout(pause) {
            Ok(wanted) => focus = wanted,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}
