//! `harn notify …` and the notices every writing verb and the service leave behind: what
//! waits for a person is recorded once in the outbox (`harn_core::notify::outbox`) and
//! delivered to the channels `.harnery/config.json` names, each delivery recorded. A
//! notification never fails the command that made it: its problems are warnings, and what
//! was not delivered is delivered by the next verb, tick or `harn notify deliver`.

pub mod deliver;
pub mod sweep;

use crate::exit::{Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use crate::os::store::{Store, StoreError};
use clap::{Args, Subcommand};
use harn_core::notify::outbox::{Outbox, OutboxRecord, DELIVERY_LOCK, OUTBOX};
use harn_core::notify::{ChannelSpec, Waiting};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The lock under which notices are recorded, so two recorders never record one key twice.
const RECORD_LOCK: &str = ".harnery/notify/record.lock";

/// What the rooms above this one say waits for a person (the service's own state): given by
/// the caller, so notify never reaches into them.
pub type Also = fn(&mut Store) -> Vec<Waiting>;

/// Longest a verb spends delivering before it leaves the rest to the next one.
pub const VERB_BUDGET: Duration = Duration::from_secs(15);

/// `harn notify`.
#[derive(Debug, Args)]
pub struct NotifyArgs {
    #[command(subcommand)]
    verb: NotifyVerb,
    /// The coordination root (default: found from the current directory).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum NotifyVerb {
    /// Every notice in the outbox and where each delivery stands (sent, pending, gave up).
    #[command(after_help = "Examples:\n  harn notify list\n  harn notify list --json")]
    List {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Records a test notice and delivers it to every channel now; exit 1 when one fails.
    #[command(after_help = "Examples:\n  harn notify test")]
    Test {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Records what waits for a person and delivers what is due now (for cron, or after a
    /// change of channels).
    #[command(after_help = "Examples:\n  harn notify deliver")]
    Deliver {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

fn usage(message: impl std::fmt::Display) -> Failure {
    Failure::new(EXIT_USAGE, message)
}

/// Runs a `notify` verb; `also` adds what the rooms above say waits.
pub fn run(args: NotifyArgs, also: Also) -> Exit {
    let mut store = crate::os::store::open_root(args.root)?;
    let channels = crate::work::config::notify_channels(store.root()).map_err(usage)?;
    if !matches!(args.verb, NotifyVerb::List { .. }) {
        say_set_aside(set_aside_damaged(&mut store));
    }
    match args.verb {
        NotifyVerb::List { json } => list(&mut store, &channels, json),
        NotifyVerb::Test { json } => {
            let test = Waiting::Test { at: store.now() };
            let key = test.notice("", store.now(), &channels).key;
            record(&mut store, &channels, vec![test]).map_err(Failure::failed)?;
            let report = deliver_due(&mut store, &channels, Duration::from_secs(120), true)
                .map_err(Failure::failed)?;
            let mine: Vec<&Attempted> = report.iter().filter(|a| a.key == key).collect();
            if json {
                outln!("{}", json!({ "key": key, "deliveries": mine }));
            } else {
                for a in &mine {
                    match &a.error {
                        None => outln!("sent     {}", a.channel),
                        Some(e) => outln!("FAILED   {}: {e}", a.channel),
                    }
                }
                if channels.is_empty() {
                    outln!("no channels: add \"notify\" to .harnery/config.json");
                }
            }
            if mine.iter().any(|a| a.error.is_some()) {
                Err(Failure::new(EXIT_FAILED, "a channel did not take the test notice"))
            } else {
                Ok(0)
            }
        }
        NotifyVerb::Deliver { json } => {
            let mut waiting = sweep::waiting(&mut store);
            waiting.extend(also(&mut store));
            let recorded = record(&mut store, &channels, waiting).map_err(Failure::failed)?;
            let report = deliver_due(&mut store, &channels, Duration::from_secs(300), true)
                .map_err(Failure::failed)?;
            if json {
                outln!("{}", json!({ "recorded": recorded, "deliveries": report }));
            } else {
                outln!(
                    "{recorded} recorded, {} delivered, {} failed",
                    count(&report, true),
                    count(&report, false)
                );
            }
            Ok(0)
        }
    }
}

fn count(report: &[Attempted], sent: bool) -> usize {
    report.iter().filter(|a| a.error.is_none() == sent).count()
}

/// After a writing verb or a service sweep: records what now waits for a person and
/// delivers what is due, within `budget`. Never fails its caller.
pub fn after(store: &mut Store, budget: Duration, also: Also) {
    let channels = match crate::work::config::notify_channels(store.root()) {
        Ok(c) if c.is_empty() => return,
        Ok(c) => c,
        Err(e) => {
            errln!("harn: warning: notifications: {e}");
            return;
        }
    };
    say_set_aside(set_aside_damaged(store));
    let mut waiting = sweep::waiting(store);
    waiting.extend(also(store));
    if let Err(e) = record(store, &channels, waiting) {
        errln!("harn: warning: notifications were not recorded: {e}");
    }
    match deliver_due(store, &channels, budget, false) {
        Ok(report) => {
            for a in report.iter().filter(|a| a.error.is_some()) {
                let e = a.error.as_deref().unwrap_or_default();
                errln!("harn: warning: notice {} to {}: {e}; it is retried", a.key, a.channel);
            }
        }
        Err(e) => errln!("harn: warning: notifications were not delivered: {e}"),
    }
}

/// What [`set_aside_damaged`] did: where the damaged outbox went, what was wrong, and how
/// many records the new one kept.
pub struct SetAside {
    /// The damaged outbox's new name, relative to the root.
    pub moved_to: String,
    /// Each line left out, with why.
    pub damage: Vec<String>,
    /// The records that verified on their own and were kept.
    pub kept: usize,
}

/// Sets a damaged outbox aside, whole, as `outbox.jsonl.damaged-<wall ms>`, and replaces it
/// with every record that verifies on its own, so that one bad line (a full disk's garbage, a
/// hand edit) never stops every notice after it: the daemon's journals are treated the same
/// way. A `notify.sent` lost with a bad line may send its notice once more, under the same
/// idempotency key; a `notify.recorded` lost is recorded again when it still waits. Both
/// locks are taken, recording's first (the only order any process takes both in), and the
/// damage is looked for again under them. `None` when the outbox is whole or absent.
pub fn set_aside_damaged(store: &mut Store) -> Result<Option<SetAside>, StoreError> {
    let damaged = |store: &mut Store| -> Result<Option<Vec<u8>>, StoreError> {
        let Some(bytes) = store.read_bytes(OUTBOX)? else { return Ok(None) };
        let whole = harn_core::journal::parse_as::<OutboxRecord>(OUTBOX, &bytes).is_ok();
        Ok((!whole).then_some(bytes))
    };
    if damaged(store)?.is_none() {
        return Ok(None);
    }
    let _record = store.lock_file(RECORD_LOCK)?;
    let _deliver = store.lock_file(DELIVERY_LOCK)?;
    let Some(bytes) = damaged(store)? else { return Ok(None) };
    let salvaged = harn_core::journal::salvage_as::<OutboxRecord>(OUTBOX, &bytes);
    let now = store.now();
    let moved_to = format!("{OUTBOX}.damaged-{}", now.0);
    let (dir, name) = OUTBOX.rsplit_once('/').expect("a path below the root");
    let os = |e: std::io::Error| StoreError::Os(format!("{OUTBOX}: {e}"));
    let d = crate::os::private::Dir::open(store.root(), dir, false).map_err(os)?;
    // The damaged bytes are kept first, synced, so a crash before the replacement only sets
    // them aside once more.
    let aside = moved_to.rsplit_once('/').map_or(moved_to.as_str(), |(_, n)| n);
    d.create_new(aside, &bytes).map_err(os)?;
    d.open_read(aside).and_then(|f| f.sync_all()).map_err(os)?;
    let mut fresh = Vec::new();
    for (i, r) in salvaged.kept.iter().enumerate() {
        harn_core::journal::encode_line_into(&mut fresh, i as u64 + 1, now, r);
    }
    d.replace(name, &fresh).map_err(os)?;
    let damage = salvaged.damaged.iter().map(ToString::to_string).collect();
    Ok(Some(SetAside { moved_to, damage, kept: salvaged.kept.len() }))
}

/// Says what [`set_aside_damaged`] did, or why it could not.
fn say_set_aside(done: Result<Option<SetAside>, StoreError>) {
    match done {
        Ok(None) => {}
        Ok(Some(s)) => errln!(
            "harn: warning: the notify outbox was damaged ({}); set aside as {}, {} records kept \
             in a new one, and notices go on",
            s.damage.join("; "),
            s.moved_to,
            s.kept
        ),
        Err(e) => errln!("harn: warning: the damaged notify outbox could not be set aside: {e}"),
    }
}

/// The outbox as recorded.
fn read(store: &mut Store) -> Result<Vec<OutboxRecord>, StoreError> {
    let Some(bytes) = store.read_bytes(OUTBOX)? else { return Ok(Vec::new()) };
    let shown = store.root().join(OUTBOX).display().to_string();
    let read = harn_core::journal::parse_as::<OutboxRecord>(&shown, &bytes)
        .map_err(harn_core::error::RecordError::from)?;
    Ok(read.records.into_iter().map(|r| r.body).collect())
}

/// Records each of `waiting` not yet in the outbox, for the channels that want it; returns
/// how many were recorded. Nothing is recorded without a channel to send it to.
fn record(
    store: &mut Store,
    channels: &[ChannelSpec],
    waiting: Vec<Waiting>,
) -> Result<usize, StoreError> {
    if channels.is_empty() || waiting.is_empty() {
        return Ok(0);
    }
    let _lock = store.lock_file(RECORD_LOCK)?;
    let outbox = Outbox::fold(&read(store)?);
    let root = store.root().display().to_string();
    let now = store.now();
    let new: Vec<OutboxRecord> = waiting
        .iter()
        .map(|w| w.notice(&root, now, channels))
        .filter(|n| !outbox.has(&n.key) && !n.to.is_empty())
        .map(|notice| OutboxRecord::Recorded { notice })
        .collect();
    if new.is_empty() {
        return Ok(0);
    }
    let mut writer = store.open_journal(OUTBOX)?;
    for r in &new {
        store.append_journal(&mut writer, r)?;
    }
    Ok(new.len())
}

/// One delivery made.
#[derive(Debug, serde::Serialize)]
struct Attempted {
    key: String,
    channel: String,
    attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Delivers what is due now, each attempt recorded (synced) as it ends, until `budget` is
/// spent. Another process delivering (its lock held) is left to it, unless `wait`.
fn deliver_due(
    store: &mut Store,
    channels: &[ChannelSpec],
    budget: Duration,
    wait: bool,
) -> Result<Vec<Attempted>, StoreError> {
    let _lock = match wait {
        true => store.lock_file(DELIVERY_LOCK)?,
        false => match try_lock(store)? {
            Some(lock) => lock,
            None => return Ok(Vec::new()),
        },
    };
    let outbox = Outbox::fold(&read(store)?);
    let started = Instant::now();
    let mut report = Vec::new();
    let mut writer = None;
    for due in outbox.due(channels, store.now()) {
        if started.elapsed() > budget {
            break;
        }
        let sent = deliver::deliver(&due.notice, &due.channel);
        let (key, channel, attempt, at) =
            (due.notice.key.clone(), due.channel.id(), due.attempt, store.now());
        let r = match &sent {
            Ok(()) => OutboxRecord::Sent { key: key.clone(), channel, attempt, at },
            Err(e) => {
                OutboxRecord::Failed { key: key.clone(), channel, attempt, at, error: e.clone() }
            }
        };
        let writer = match &mut writer {
            Some(w) => w,
            None => writer.insert(store.open_journal(OUTBOX)?),
        };
        store.append_journal(writer, &r)?;
        report.push(Attempted { key, channel: due.channel.shown(), attempt, error: sent.err() });
    }
    Ok(report)
}

/// The delivery lock, when no other process holds it.
fn try_lock(store: &Store) -> Result<Option<std::fs::File>, StoreError> {
    let (dir, name) = DELIVERY_LOCK.rsplit_once('/').expect("a path below the root");
    let file = crate::os::private::Dir::open(store.root(), dir, true)
        .and_then(|d| d.open_lock(name))
        .map_err(|e| StoreError::Os(format!("{DELIVERY_LOCK}: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(StoreError::Os(format!("{DELIVERY_LOCK}: {e}")))
        }
    }
}

fn list(store: &mut Store, channels: &[ChannelSpec], as_json: bool) -> Exit {
    let outbox = Outbox::fold(&read(store).map_err(Failure::failed)?);
    let shown = |id: &str| {
        channels
            .iter()
            .find(|c| c.id() == id)
            .map_or_else(|| format!("{id} (no longer configured)"), ChannelSpec::shown)
    };
    let mut notices = Vec::new();
    for key in &outbox.order {
        let notice = &outbox.notices[key];
        let deliveries: Vec<serde_json::Value> = notice
            .to
            .iter()
            .map(|id| {
                let d = &outbox.deliveries[&(key.clone(), id.clone())];
                json!({ "channel": shown(id), "channel_id": id, "state": d.state(), "delivery": d })
            })
            .collect();
        notices.push(json!({ "notice": notice, "deliveries": deliveries }));
    }
    if as_json {
        outln!(
            "{}",
            json!({ "notices": notices, "channels": channels.iter().map(ChannelSpec::shown).collect::<Vec<_>>() })
        );
        return Ok(0);
    }
    if notices.is_empty() {
        outln!("no notices");
    }
    for n in &notices {
        let notice = &n["notice"];
        let at = harn_core::time::WallTime(notice["at"].as_i64().unwrap_or_default());
        outln!(
            "{}  {}  {}",
            at.utc(),
            notice["kind"].as_str().unwrap_or(""),
            notice["key"].as_str().unwrap_or("")
        );
        outln!("  {}", notice["text"].as_str().unwrap_or(""));
        for d in n["deliveries"].as_array().into_iter().flatten() {
            let error =
                d["delivery"]["error"].as_str().map(|e| format!(" ({e})")).unwrap_or_default();
            outln!(
                "  {:<8} {}{error}",
                d["state"].as_str().unwrap_or(""),
                d["channel"].as_str().unwrap_or("")
            );
        }
    }
    if channels.is_empty() {
        outln!("no channels: add \"notify\" to .harnery/config.json");
    }
    Ok(0)
}
