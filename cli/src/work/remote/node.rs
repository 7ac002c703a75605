//! `harn cluster segment`: one segment of a remote run, on the node the engine chose. It says
//! which job and node it is, clones the item's branch as the coordinator pushed it, runs the
//! workflow and its agent calls confined as a local run is, relays everything they do to the
//! coordinator and carries out what the coordinator's driver decides, then pushes the work
//! and removes its clone. It writes no record: the node's directory is scratch, gone when the
//! segment ends, and the coordinator alone writes `.harnery/`.

use crate::exit::{Exit, Failure, EXIT_USAGE};
use crate::os::store::Store;
use crate::work::inbox::HostEvent;
use crate::work::local::{Local, Output};
use harn_core::work::remote::{self, Checkout, FromNode, NodeSignal, ToNode};
use harn_core::work::run::RunManifest;
use harn_core::work::segment::driver::{Call, SegmentSignal};
use harn_core::work::segment::Reach;
use std::io::{BufRead, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// Says one message to the coordinator. A coordinator that no longer reads is gone: the
/// segment ends.
fn say(message: &FromNode) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(&remote::line(message)).and_then(|()| out.flush()).is_ok()
}

/// The coordinator's lines, read on a thread: each message, then `None` at the end of its
/// input (the coordinator or the step's connection is gone) or at a line that is not one.
fn listen(tx: mpsc::SyncSender<HostEvent>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            match remote::parse_to_node(&line) {
                Ok(message) => {
                    if tx.send(HostEvent::Told(Some(Box::new(message)))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    errln!("harn: {e}");
                    break;
                }
            }
        }
        let _ = tx.send(HostEvent::Told(None));
    });
}

/// The segment's own directory on the node: the clone, and a scratch root for the run's
/// copy of its workflow and its logs. Removed when dropped.
struct Place {
    dir: PathBuf,
}

impl Place {
    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }
    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }
    fn git_dir(&self) -> PathBuf {
        self.dir.join("repo.git")
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the segment. Exits 0 once the work is pushed, 1 when it could not be (or the
/// coordinator left first); the coordinator judges either from what it was told.
pub fn run() -> Exit {
    crate::os::children::block_sigpipe();
    let job = std::env::var("SLURM_JOB_ID").unwrap_or_default();
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .or_else(crate::os::procfs::hostname)
        .unwrap_or_default();
    if !say(&FromNode::Started { job, node, harn: super::version() }) {
        return Ok(1);
    }
    let (tx, events) = mpsc::sync_channel(256);
    listen(tx.clone());
    // Started by hand, or by something else than a coordinator: bad input, nothing done.
    let not_setup = || {
        Failure::new(
            EXIT_USAGE,
            "cluster segment: no setup on standard input (the coordinator starts it through \
             the engine: harn work run ID --cluster NAME)",
        )
    };
    let Ok(HostEvent::Told(Some(first))) = events.recv() else { return Err(not_setup()) };
    let ToNode::Setup { manifest, workflow_hex, checkout, scratch } = *first else {
        say(&FromNode::Unready { error: "the first message was not the setup".into() });
        return Err(not_setup());
    };
    let (place, m) = match prepare(&manifest, &workflow_hex, &checkout, Path::new(&scratch)) {
        Ok(ready) => ready,
        Err(error) => {
            say(&FromNode::Unready { error });
            return Ok(1);
        }
    };
    let mut store = Store::new(&place.root());
    let hold =
        crate::work::hold::RunHold::create(&place.root(), &m.run_id, m.resource_limits.as_ref());
    let guarded = crate::os::guarded::find(&place.root(), &place.work(), None, false);
    let mut local = Local::new(hold);
    let spawned = match local.spawn(&mut store, &m, &guarded, Output::Raw) {
        Ok(fields) => say(&FromNode::Spawned { fields }),
        Err(f) => {
            let (error, program, missing) = (f.error, f.program, f.missing);
            say(&FromNode::SpawnFailed { error, program, missing });
            false
        }
    };
    // The coordinator's own lines come on their own channel until the workflow runs; after
    // that, on the workflow's, so one wait serves both.
    if spawned {
        local.forward(events);
    } else {
        return finish_without_workflow(&events, &place, &checkout, &m);
    }
    loop {
        let Some(event) = local.next(None) else { continue };
        let said = match event {
            HostEvent::Raw(bytes) => say(&FromNode::Out { hex: remote::to_hex(&bytes) }),
            HostEvent::Eof => say(&FromNode::OutEnded),
            HostEvent::Exited(status) => {
                let (code, signal) = status.map_or((None, None), |s| (s.code(), s.signal()));
                say(&FromNode::Exited { code, signal })
            }
            HostEvent::AgentDone(call, outcome) => {
                say(&FromNode::AgentDone { call, outcome: Box::new(outcome) })
            }
            HostEvent::AgentProgress(call, shown) => say(&FromNode::AgentProgress { call, shown }),
            HostEvent::ToolAsk(call, request, answer) => {
                local.awaiting(call.clone(), answer);
                say(&FromNode::ToolAsk { call, request })
            }
            // The engine stops this step (a cancel, a node going down): the coordinator
            // learns it from the engine, and the stop's own grace is kept.
            HostEvent::Interrupting(_, ack) => {
                let _ = ack.send(());
                true
            }
            HostEvent::Line(_) => true,
            HostEvent::Told(Some(message)) => match *message {
                ToNode::Send { line } => {
                    local.send(&line);
                    true
                }
                ToNode::Call { id, dispatch, resume } => {
                    local.start_call(&store, &m, Call { id, dispatch, resume });
                    true
                }
                ToNode::Signal { signal } => {
                    local.signal(match signal {
                        NodeSignal::Term => SegmentSignal::Term(Reach::Groups),
                        NodeSignal::TermAll => SegmentSignal::Term(Reach::Everything),
                        NodeSignal::Kill => SegmentSignal::Kill(Reach::Groups),
                        NodeSignal::KillAll => SegmentSignal::Kill(Reach::Everything),
                        NodeSignal::Leftovers => SegmentSignal::Leftovers,
                    });
                    true
                }
                ToNode::Answer { call, verdict, rules } => {
                    local.answer_tool(&call, verdict, rules);
                    true
                }
                ToNode::Finish => {
                    say(&FromNode::Limits { reached: local.limits_reached() });
                    local.end();
                    say_stderr(&place, &m);
                    return Ok(push_and_say(&place, &checkout, &m));
                }
                // A second setup is not a message of a running segment.
                ToNode::Setup { .. } => false,
            },
            // The coordinator is gone: nothing it did not see happens, and nothing is pushed.
            HostEvent::Told(None) => false,
        };
        if !said {
            local.end();
            return Ok(1);
        }
    }
}

/// Sends the end of the workflow's standard error, which the node's log kept.
fn say_stderr(place: &Place, m: &RunManifest) {
    use std::io::{Read, Seek, SeekFrom};
    let log = place.root().join(format!("{}/stderr.log", crate::os::store::run_dir(&m.run_id)));
    let Ok(mut file) = std::fs::File::open(&log) else { return };
    let len = file.metadata().map_or(0, |md| md.len());
    let from = len.saturating_sub(remote::STDERR_TAIL as u64);
    let mut bytes = Vec::new();
    let read = file.seek(SeekFrom::Start(from)).is_ok() && file.read_to_end(&mut bytes).is_ok();
    if read && !bytes.is_empty() {
        say(&FromNode::Stderr { hex: remote::to_hex(&bytes) });
    }
}

/// After a spawn that failed, waits for the coordinator's finish and pushes the clone as it
/// is (unchanged), so the coordinator's fetch finds what it expects.
fn finish_without_workflow(
    events: &mpsc::Receiver<HostEvent>,
    place: &Place,
    checkout: &Checkout,
    m: &RunManifest,
) -> Exit {
    while let Ok(HostEvent::Told(Some(message))) = events.recv() {
        if matches!(*message, ToNode::Finish) {
            say(&FromNode::Limits { reached: Vec::new() });
            return Ok(push_and_say(place, checkout, m));
        }
    }
    Ok(1)
}

/// Makes the segment's directory under this user's own directory in `scratch`, clones the
/// item's branch at the commit the coordinator pushed, lays the last segment's uncommitted
/// work over it, and writes the run's copy of its workflow. The manifest comes back with the
/// clone as the run's workspace.
fn prepare(
    manifest: &RunManifest,
    workflow_hex: &str,
    checkout: &Checkout,
    scratch: &Path,
) -> Result<(Place, RunManifest), String> {
    let mine = super::scratch::own_dir(scratch)?;
    let dir = mine.join(format!("{}.{}", manifest.run_id, std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let place = Place { dir };
    let work = place.work();
    super::sync::clone(checkout, &place.git_dir(), &work)?;
    let bytes = remote::from_hex(workflow_hex).ok_or("the workflow's bytes are not hexadecimal")?;
    if harn_core::hash::sha256_hex(&bytes) != manifest.script.sha256 {
        return Err("the workflow's bytes are not the ones the work item froze".into());
    }
    let run_dir = place.root().join(crate::os::store::run_dir(&manifest.run_id));
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    let copy = run_dir.join(crate::work::frozen::copy_name(&manifest.script.path));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&copy)
            .map_err(|e| format!("{}: {e}", copy.display()))?;
        file.write_all(&bytes).map_err(|e| format!("{}: {e}", copy.display()))?;
    }
    let mut m = manifest.clone();
    m.cwd = Some(work.display().to_string());
    // The run may commit in its clone, as in a worktree on the coordinator: the clone's
    // objects and refs are writable, its configuration and hooks are not.
    if let Some(c) = &mut m.containment {
        let git_dir = place.git_dir().display().to_string();
        c.writable.extend(crate::os::guarded::git_writable(&work, &git_dir));
    }
    Ok((place, m))
}

/// Sends the clone's work back as a bundle over the step's output, in parts, and says what it
/// holds; the exit code of the segment. The node needs no credential to push.
fn push_and_say(place: &Place, checkout: &Checkout, m: &RunManifest) -> i32 {
    let open = m.containment.as_ref().is_some_and(|c| c.turned_off);
    match super::sync::bundle(
        &place.root(),
        &place.git_dir(),
        &place.work(),
        checkout,
        m.work_id.as_str(),
        open,
    ) {
        Ok((head, wip, bytes)) => {
            for part in bytes.chunks(remote::BUNDLE_PART) {
                if !say(&FromNode::BundlePart { hex: remote::to_hex(part) }) {
                    return 1;
                }
            }
            say(&FromNode::Bundled { head, wip });
            0
        }
        Err(error) => {
            say(&FromNode::PushFailed { error });
            1
        }
    }
}
