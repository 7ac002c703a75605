//! Unit tests of the daemon core: effect ordering behind the barrier, intent precedence,
//! profiles, reloads and refused commands.

use super::*;
use crate::env::ExitStatus;
use crate::harness::lifecycle::{HarnessSpec, RestartPolicy, State};

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn spec(program: &str, enabled: bool) -> HarnessSpec {
    HarnessSpec {
        spawn: SpawnSpec { argv: vec![program.into()], ..Default::default() },
        enabled,
        ..Default::default()
    }
}

fn config(harnesses: &[(&str, bool)]) -> DaemonConfig {
    let mut c = DaemonConfig::default();
    for (name, enabled) in harnesses {
        c.harnesses.insert(id(name), spec(name, *enabled));
    }
    c
}

fn drain(d: &mut Daemon) -> Vec<DaemonEffect> {
    let effects: Vec<DaemonEffect> = std::iter::from_fn(|| d.poll_effect()).collect();
    d.check().unwrap();
    effects
}

/// A compact name per effect, to compare orderings.
fn kinds(effects: &[DaemonEffect]) -> Vec<&'static str> {
    effects
        .iter()
        .map(|e| match e {
            DaemonEffect::PersistState { .. } => "persist",
            DaemonEffect::AppendEvents(_) => "events",
            DaemonEffect::Spawn { .. } => "spawn",
            DaemonEffect::Signal { .. } => "signal",
            DaemonEffect::Ack { .. } => "ack",
            DaemonEffect::Attached { .. } => "attached",
        })
        .collect()
}

fn persisted(effects: &[DaemonEffect]) -> PersistedState {
    effects
        .iter()
        .find_map(|e| match e {
            DaemonEffect::PersistState { bytes, .. } => {
                Some(PersistedState::decode(bytes).unwrap())
            }
            _ => None,
        })
        .expect("a persist")
}

fn command(d: &mut Daemon, id: u64, command: Command) -> Vec<DaemonEffect> {
    d.handle(Instant(0), DaemonInput::Command { id, command });
    drain(d)
}

fn spawned(d: &mut Daemon, name: &str, pid: u32) {
    let run = d.harnesses()[&id(name)].current_run().unwrap();
    let report = HarnessInput::Spawned { run, pid };
    d.handle(Instant(0), DaemonInput::Process { name: id(name), report });
    drain(d);
}

/// The command's answer, a refusal in the words the operator reads.
fn ack(effects: &[DaemonEffect]) -> Result<(), String> {
    effects
        .iter()
        .find_map(|e| match e {
            DaemonEffect::Ack { result, .. } => Some(result.clone().map_err(|e| e.to_string())),
            _ => None,
        })
        .expect("an ack")
}

#[test]
fn boot_persists_the_run_before_spawning_it() {
    let mut d = Daemon::boot(config(&[("a", true), ("b", false)]), None, Instant(0)).unwrap();
    let effects = drain(&mut d);
    assert_eq!(kinds(&effects), ["persist", "events", "spawn"]);
    let state = persisted(&effects);
    assert_eq!(state.harnesses[&id("a")].runs, 1);
    assert!(state.harnesses[&id("a")].enabled);
    assert!(!state.harnesses[&id("b")].enabled);
}

#[test]
fn persisted_intent_wins_over_the_configured_default() {
    let mut prior = PersistedState { v: STATE_VERSION, generation: 9, ..Default::default() };
    let stopped_by_operator =
        Durable { enabled: false, pinned: true, runs: 4, ..Durable::default() };
    prior.harnesses.insert(id("a"), stopped_by_operator);
    let mut d = Daemon::boot(config(&[("a", true)]), Some(prior), Instant(0)).unwrap();
    assert!(drain(&mut d).is_empty(), "an operator's stop survives a restart");
    assert_eq!(d.harnesses()[&id("a")].state(), State::Stopped);
    assert_eq!(d.generation(), 9);
}

#[test]
fn autostart_profiles_enable_members_without_persisted_intent() {
    let mut c = config(&[("a", false), ("b", false)]);
    c.profiles.insert(id("dev"), Profile { harnesses: vec![id("b")], autostart: true });
    let mut d = Daemon::boot(c, None, Instant(0)).unwrap();
    drain(&mut d);
    assert_eq!(d.harnesses()[&id("a")].state(), State::Stopped);
    assert_eq!(d.harnesses()[&id("b")].state(), State::Starting);
}

#[test]
fn a_stop_is_durable_before_the_signal_and_the_ack() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 77);
    let effects = command(&mut d, 1, Command::Stop { names: vec![id("a")] });
    assert_eq!(kinds(&effects), ["persist", "events", "signal", "ack"]);
    assert!(!persisted(&effects).harnesses[&id("a")].enabled);
    assert_eq!(ack(&effects), Ok(()));
}

#[test]
fn inputs_that_change_nothing_durable_persist_nothing() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    let run = d.harnesses()[&id("a")].current_run().unwrap();
    d.handle(
        Instant(0),
        DaemonInput::Process { name: id("a"), report: HarnessInput::Spawned { run, pid: 5 } },
    );
    assert_eq!(kinds(&drain(&mut d)), ["events"], "running is not durable");
    d.handle(
        Instant(0),
        DaemonInput::Process { name: id("a"), report: HarnessInput::Ready { run } },
    );
    assert!(drain(&mut d).is_empty());
    d.handle_timeout(Instant(1));
    assert!(drain(&mut d).is_empty(), "nothing is due");
}

#[test]
fn an_exit_persists_the_restart_count() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 5);
    let run = d.harnesses()[&id("a")].current_run().unwrap();
    let exited = HarnessInput::Exited { run, status: ExitStatus::Code(3) };
    d.handle(Instant(0), DaemonInput::Process { name: id("a"), report: exited });
    let effects = drain(&mut d);
    let state = persisted(&effects);
    assert_eq!(state.harnesses[&id("a")].restarts, 1);
    assert_eq!(state.harnesses[&id("a")].consecutive_failures, 1);
    assert!(d.poll_timeout().is_some(), "a retry is scheduled");
}

#[test]
fn commands_on_unknown_names_are_refused_and_change_nothing() {
    let mut d = Daemon::boot(config(&[("a", false)]), None, Instant(0)).unwrap();
    drain(&mut d);
    let effects = command(&mut d, 3, Command::Start { names: vec![id("ghost")] });
    assert_eq!(kinds(&effects), ["ack"]);
    assert!(ack(&effects).unwrap_err().contains("ghost"));
    let effects = command(&mut d, 4, Command::UseProfile { profile: id("nope") });
    assert!(ack(&effects).unwrap_err().contains("nope"));
}

#[test]
fn using_a_profile_starts_its_members_and_stops_the_others() {
    let mut c = config(&[("a", true), ("b", false)]);
    c.profiles.insert(id("only-b"), Profile { harnesses: vec![id("b")], autostart: false });
    let mut d = Daemon::boot(c, None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 10);
    let effects = command(&mut d, 1, Command::UseProfile { profile: id("only-b") });
    let state = persisted(&effects);
    assert_eq!(state.active_profile, Some(id("only-b")));
    assert!(!state.harnesses[&id("a")].enabled);
    assert!(state.harnesses[&id("b")].enabled);
    assert_eq!(d.harnesses()[&id("a")].state(), State::Stopping);
    assert_eq!(d.harnesses()[&id("b")].state(), State::Starting);
}

#[test]
fn a_reload_never_bounces_a_running_harness() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 10);
    let mut c = config(&[("a", true)]);
    c.harnesses.get_mut(&id("a")).unwrap().spawn.argv.push("--v2".into());
    let effects = command(&mut d, 1, Command::Reload { config: c, force: false });
    assert_eq!(kinds(&effects), ["ack"]);
    assert!(d.harnesses()[&id("a")].config_changed());
    assert_eq!(d.harnesses()[&id("a")].pid(), Some(10));
}

#[test]
fn a_reload_adds_new_harnesses_and_retires_removed_ones_after_their_exit() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 10);
    // Every harness it had goes: the operator said so with `--force`.
    let effects =
        command(&mut d, 1, Command::Reload { config: config(&[("b", true)]), force: true });
    assert!(kinds(&effects).contains(&"spawn"), "b starts");
    assert!(kinds(&effects).contains(&"signal"), "a is asked to stop");
    assert_eq!(ack(&effects), Ok(()));
    let effects = command(&mut d, 2, Command::Start { names: vec![id("a")] });
    assert!(ack(&effects).is_err(), "a removed harness takes no commands");
    let run = d.harnesses()[&id("a")].current_run().unwrap();
    let exited = HarnessInput::Exited { run, status: ExitStatus::Signal(15) };
    d.handle(Instant(0), DaemonInput::Process { name: id("a"), report: exited });
    let effects = drain(&mut d);
    assert!(!d.harnesses().contains_key(&id("a")));
    assert!(!persisted(&effects).harnesses.contains_key(&id("a")));
}

#[test]
fn a_reload_that_removes_every_harness_needs_force_and_none_is_taken_while_draining() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    let other = config(&[("b", true)]);
    assert_eq!(d.check_reload(&other, false), Err(ReloadRefused::RemovesEvery));
    assert!(ReloadRefused::RemovesEvery.bad_input());
    let effects = command(&mut d, 1, Command::Reload { config: other.clone(), force: false });
    assert!(ack(&effects).unwrap_err().contains("removes every harness"));
    assert!(d.harnesses().contains_key(&id("a")), "nothing changed");
    assert_eq!(d.check_reload(&other, true), Ok(()));
    command(&mut d, 2, Command::Shutdown { drain_timeout: None });
    assert_eq!(d.check_reload(&config(&[("a", true)]), true), Err(ReloadRefused::Draining));
    assert!(!ReloadRefused::Draining.bad_input());
}

#[test]
fn an_invalid_reload_is_refused_and_the_last_good_config_stays() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    let mut bad = config(&[("a", true)]);
    bad.profiles.insert(id("p"), Profile { harnesses: vec![id("ghost")], autostart: false });
    let effects = command(&mut d, 1, Command::Reload { config: bad, force: false });
    assert_eq!(kinds(&effects), ["ack"]);
    assert!(ack(&effects).unwrap_err().contains("profile.p.harnesses"));
    assert!(d.config().profiles.is_empty());
}

#[test]
fn a_policy_change_by_reload_decides_the_next_exit() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 10);
    let mut c = config(&[("a", true)]);
    c.harnesses.get_mut(&id("a")).unwrap().restart = RestartPolicy::No;
    command(&mut d, 1, Command::Reload { config: c, force: false });
    assert!(!d.harnesses()[&id("a")].config_changed());
    let run = d.harnesses()[&id("a")].current_run().unwrap();
    let exited = HarnessInput::Exited { run, status: ExitStatus::Code(0) };
    d.handle(Instant(0), DaemonInput::Process { name: id("a"), report: exited });
    let effects = drain(&mut d);
    assert!(!persisted(&effects).harnesses[&id("a")].enabled);
    assert_eq!(d.harnesses()[&id("a")].state(), State::Stopped);
}

#[test]
fn boot_refuses_an_inconsistent_configuration() {
    let mut c = config(&[("a", true)]);
    c.harnesses.get_mut(&id("a")).unwrap().spawn.argv.clear();
    let err = Daemon::boot(c, None, Instant(0)).unwrap_err();
    assert_eq!(
        err,
        BootError::Config(crate::error::RecordError::refused(
            "harness.a.command: must name a program"
        ))
    );
}

#[test]
fn shutdown_closes_intake_stops_everything_and_keeps_intent() {
    let mut d = Daemon::boot(config(&[("a", true), ("b", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 10);
    spawned(&mut d, "b", 11);
    let effects = command(&mut d, 1, Command::Shutdown { drain_timeout: None });
    assert_eq!(kinds(&effects).iter().filter(|k| **k == "signal").count(), 2);
    assert!(!kinds(&effects).contains(&"persist"), "intent does not change");
    assert!(d.draining() && !d.drained());
    assert!(ack(&command(&mut d, 2, Command::Start { names: vec![id("a")] })).is_err());
    for (name, pid) in [("a", 10), ("b", 11)] {
        let run = d.harnesses()[&id(name)].current_run().unwrap();
        let exited = HarnessInput::Exited { run, status: ExitStatus::Signal(15) };
        d.handle(Instant(0), DaemonInput::Process { name: id(name), report: exited });
        drain(&mut d);
        let _ = pid;
    }
    assert!(d.drained());
    assert!(d.harnesses().values().all(|h| h.enabled()));
}

#[test]
fn a_bounded_shutdown_kills_what_is_still_stopping_at_its_deadline() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 10);
    let secs = |n: u64| crate::time::Duration::from_millis(n * 1_000);
    command(&mut d, 1, Command::Shutdown { drain_timeout: Some(secs(3)) });
    command(&mut d, 2, Command::Shutdown { drain_timeout: Some(secs(9)) });
    let deadline = Instant(0).saturating_add(secs(3));
    assert_eq!(d.drain_deadline(), Some(deadline), "a later shutdown never pushes it back");
    assert!(d.poll_timeout().is_some_and(|at| at <= deadline));
    let kill = |effects: &[DaemonEffect]| {
        effects
            .iter()
            .any(|e| matches!(e, DaemonEffect::Signal { signal: crate::env::Signal::Kill, .. }))
    };
    d.handle_timeout(Instant(deadline.0 - 1));
    assert!(!kill(&drain(&mut d)) && !d.drain_forced(), "not before the deadline");
    d.handle_timeout(deadline);
    assert!(kill(&drain(&mut d)) && d.drain_forced());
    d.handle_timeout(deadline);
    assert!(!kill(&drain(&mut d)), "forced once");
    assert_eq!(d.check(), Ok(()));
}

#[test]
fn intent_nobody_pinned_follows_the_configuration_across_boots_and_reloads() {
    let mut d = Daemon::boot(config(&[("a", false)]), None, Instant(0)).unwrap();
    let first = drain(&mut d);
    let prior = persisted(&first);
    assert!(!prior.harnesses[&id("a")].pinned);
    // The operator edits harness.toml to enable it: the next boot starts it.
    let mut d = Daemon::boot(config(&[("a", true)]), Some(prior), Instant(0)).unwrap();
    assert!(kinds(&drain(&mut d)).contains(&"spawn"));
    spawned(&mut d, "a", 5);
    // A reload that disables it stops it, still without pinning.
    let effects =
        command(&mut d, 1, Command::Reload { config: config(&[("a", false)]), force: false });
    assert!(kinds(&effects).contains(&"signal"));
    assert!(!persisted(&effects).harnesses[&id("a")].pinned);
}

#[test]
fn an_operators_decision_pins_the_intent_against_the_configuration() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "a", 5);
    let effects = command(&mut d, 1, Command::Stop { names: vec![id("a")] });
    let state = persisted(&effects);
    assert!(state.harnesses[&id("a")].pinned);
    let effects =
        command(&mut d, 2, Command::Reload { config: config(&[("a", true)]), force: false });
    assert_eq!(kinds(&effects), ["ack"], "a reload does not undo an operator's stop");
    let mut d = Daemon::boot(config(&[("a", true)]), Some(state), Instant(0)).unwrap();
    assert!(drain(&mut d).is_empty(), "nor does a restart of the daemon");
}

#[test]
fn lowering_limits_by_reload_keeps_every_invariant() {
    let mut d = Daemon::boot(config(&[("a", true)]), None, Instant(0)).unwrap();
    drain(&mut d);
    for _ in 0..3 {
        spawned(&mut d, "a", 5);
        let run = d.harnesses()[&id("a")].current_run().unwrap();
        let exited = HarnessInput::Exited { run, status: ExitStatus::Code(1) };
        d.handle(Instant(0), DaemonInput::Process { name: id("a"), report: exited });
        drain(&mut d);
        let at = d.poll_timeout().unwrap();
        d.handle_timeout(at);
        drain(&mut d);
    }
    let mut lower = config(&[("a", true)]);
    lower.limits.flap_threshold = 1;
    lower.limits.give_up_after = 2;
    command(&mut d, 1, Command::Reload { config: lower, force: false });
    assert_eq!(d.harnesses()[&id("a")].durable().consecutive_failures, 1);
    assert_eq!(d.harnesses()[&id("a")].recent_exit_count(), 1);
}

#[test]
fn run_numbers_are_reserved_in_blocks_so_most_respawns_write_nothing_first() {
    let mut limits = crate::harness::lifecycle::LifecycleLimits {
        restart_delay: crate::time::Duration::ZERO,
        give_up_after: 0,
        ..Default::default()
    };
    limits.flap_threshold = 100;
    let mut c = config(&[("a", true)]);
    c.limits = limits;
    let mut d = Daemon::boot(c.clone(), None, Instant(0)).unwrap();
    let first = drain(&mut d);
    assert_eq!(kinds(&first), ["persist", "events", "spawn"], "the first run reserves a block");
    assert_eq!(persisted(&first).harnesses[&id("a")].reserved_runs, 16);
    let mut last = PersistedState::default();
    let mut now = Instant(0);
    for _ in 0..5 {
        spawned(&mut d, "a", 5);
        let run = d.harnesses()[&id("a")].current_run().unwrap();
        let exited = HarnessInput::Exited { run, status: ExitStatus::Code(1) };
        d.handle(now, DaemonInput::Process { name: id("a"), report: exited });
        drain(&mut d);
        // The respawn waits the floor, whatever the configured delay.
        now = now.saturating_add(crate::harness::lifecycle::limits::RESTART_FLOOR);
        d.handle_timeout(now);
        let effects = drain(&mut d);
        let order = kinds(&effects);
        let spawn_at = order.iter().position(|k| *k == "spawn").expect("an immediate respawn");
        assert!(
            !order[..spawn_at].contains(&"persist"),
            "no write before a reserved respawn: {order:?}"
        );
        assert!(order[spawn_at..].contains(&"persist"), "the bookkeeping follows: {order:?}");
        last = persisted(&effects);
    }
    // After a crash, numbering resumes past the whole reservation: no number is used twice.
    let mut d = Daemon::boot(c, Some(last), Instant(0)).unwrap();
    drain(&mut d);
    assert_eq!(d.harnesses()[&id("a")].current_run(), Some(17));
}

fn spawns(effects: &[DaemonEffect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            DaemonEffect::Spawn { name, .. } => Some(name.to_string()),
            _ => None,
        })
        .collect()
}

/// `web` requires `db`, whose readiness is a file: web's run waits in `starting`, unspawned,
/// until db is ready; a stop meanwhile ends web at rest with nothing to reap.
#[test]
fn a_harness_waits_for_what_it_requires_to_be_ready() {
    let mut c = config(&[("db", true), ("web", true)]);
    c.harnesses.get_mut(&id("db")).unwrap().readiness =
        crate::harness::lifecycle::Readiness::File { path: "ready".into() };
    c.harnesses.get_mut(&id("web")).unwrap().requires = vec![id("db")];
    let mut d = Daemon::boot(c, None, Instant(0)).unwrap();
    assert_eq!(spawns(&drain(&mut d)), ["db"], "web waits");
    assert_eq!(d.harnesses()[&id("web")].state(), State::Starting);
    assert_eq!(d.waiting_for(&id("web")), [(id("db"), "starting")]);
    spawned(&mut d, "db", 5);
    assert_eq!(d.waiting_for(&id("web")), [(id("db"), "not ready yet")]);
    let run = d.harnesses()[&id("db")].current_run().unwrap();
    d.handle(
        Instant(0),
        DaemonInput::Process { name: id("db"), report: HarnessInput::Ready { run } },
    );
    assert_eq!(spawns(&drain(&mut d)), ["web"], "released once db is ready");
    spawned(&mut d, "web", 6);
    assert_eq!(d.harnesses()[&id("web")].state(), State::Running);

    // Held again after a restart of both, then stopped while waiting.
    let mut c = config(&[("db", false), ("web", true)]);
    c.harnesses.get_mut(&id("web")).unwrap().requires = vec![id("db")];
    let mut d = Daemon::boot(c, None, Instant(0)).unwrap();
    assert!(spawns(&drain(&mut d)).is_empty(), "db is stopped: web waits for it");
    assert_eq!(d.waiting_for(&id("web")), [(id("db"), "stopped")]);
    let effects = command(&mut d, 1, Command::Stop { names: vec![id("web")] });
    assert!(spawns(&effects).is_empty());
    assert_eq!(d.harnesses()[&id("web")].state(), State::Stopped, "withdrawn, at rest");
}

/// `after` orders only: a stopped dependency is not waited for, one starting is.
#[test]
fn after_orders_starts_without_requiring() {
    let mut c = config(&[("db", false), ("web", true)]);
    c.harnesses.get_mut(&id("web")).unwrap().after = vec![id("db")];
    let mut d = Daemon::boot(c.clone(), None, Instant(0)).unwrap();
    assert_eq!(spawns(&drain(&mut d)), ["web"], "db is not starting: no wait");
    c.harnesses.get_mut(&id("db")).unwrap().enabled = true;
    let mut d = Daemon::boot(c, None, Instant(0)).unwrap();
    assert_eq!(spawns(&drain(&mut d)), ["db"], "db is starting: web follows it");
    let run = d.harnesses()[&id("db")].current_run().unwrap();
    let report = HarnessInput::Spawned { run, pid: 5 };
    d.handle(Instant(0), DaemonInput::Process { name: id("db"), report });
    assert_eq!(spawns(&drain(&mut d)), ["web"], "db runs (no readiness to wait for): web goes");
}

#[test]
fn dependency_cycles_and_unknown_names_are_refused() {
    let mut c = config(&[("a", true), ("b", true)]);
    c.harnesses.get_mut(&id("a")).unwrap().requires = vec![id("b")];
    c.harnesses.get_mut(&id("b")).unwrap().after = vec![id("a")];
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("cycle") && e.contains("a -> b -> a"), "{e}");
    let mut c = config(&[("a", true)]);
    c.harnesses.get_mut(&id("a")).unwrap().requires = vec![id("nope")];
    assert!(c.validate().unwrap_err().to_string().contains("harness.a.requires"));
}

#[test]
fn many_names_in_one_command_are_one_write_and_one_ack_and_an_unknown_one_refuses_all() {
    let mut d = Daemon::boot(config(&[("a", false), ("b", false), ("c", false)]), None, Instant(0))
        .unwrap();
    drain(&mut d);
    let refused = command(&mut d, 1, Command::Start { names: vec![id("a"), id("ghost"), id("x")] });
    assert_eq!(kinds(&refused), ["ack"], "nothing started, nothing written");
    let e = ack(&refused).unwrap_err();
    assert!(e.contains("\"ghost\", \"x\"") && !e.contains("\"a\""), "{e}");
    let effects = command(&mut d, 2, Command::Start { names: vec![id("a"), id("b"), id("c")] });
    let k = kinds(&effects);
    assert_eq!(k.iter().filter(|k| **k == "persist").count(), 1, "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "spawn").count(), 3, "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "ack").count(), 1, "{k:?}");
    let position = |what: &str| k.iter().position(|x| *x == what).unwrap();
    assert!(position("persist") < position("spawn") && position("persist") < position("ack"));
    assert!(persisted(&effects).harnesses.values().all(|h| h.enabled));
}

fn terminal_config() -> DaemonConfig {
    let mut c = config(&[("agent", true), ("plain", true)]);
    let tty = Some(crate::env::TtySize::default());
    c.harnesses.get_mut(&id("agent")).unwrap().spawn.tty = tty;
    c
}

/// Attaches `client` and returns the answer, as the person reads it.
fn attach(d: &mut Daemon, client: u64, name: &str, read_only: bool) -> Result<Attachment, String> {
    d.handle(Instant(0), DaemonInput::Attach { client, name: id(name), read_only });
    let effects = drain(d);
    assert_eq!(kinds(&effects), ["attached"], "an attach changes nothing else");
    match effects.into_iter().next() {
        Some(DaemonEffect::Attached { result, .. }) => result.map_err(|e| e.to_string()),
        _ => unreachable!(),
    }
}

#[test]
fn one_client_types_into_a_terminal_harness_and_others_watch() {
    let mut d = Daemon::boot(terminal_config(), None, Instant(0)).unwrap();
    drain(&mut d);
    let why = attach(&mut d, 1, "agent", false).unwrap_err();
    assert!(why.contains("no running session (starting)"), "{why}");
    spawned(&mut d, "agent", 10);
    spawned(&mut d, "plain", 11);
    let hash = d.state_hash();
    let first = attach(&mut d, 1, "agent", false).unwrap();
    assert_eq!(first, Attachment { name: id("agent"), run: 1, writes: true });
    let why = attach(&mut d, 2, "agent", false).unwrap_err();
    assert!(why.contains("already has a client attached that types"), "{why}");
    assert!(!attach(&mut d, 2, "agent", true).unwrap().writes);
    let why = attach(&mut d, 3, "plain", true).unwrap_err();
    assert!(why.contains("tty = true"), "{why}");
    assert!(attach(&mut d, 3, "nobody", true).unwrap_err().contains("no harness named"));
    // The writer detaches: the harness runs on, and the slot is free.
    d.handle(Instant(0), DaemonInput::Detach { client: 1 });
    assert!(drain(&mut d).is_empty());
    assert_eq!(d.harnesses()[&id("agent")].state(), State::Running);
    assert!(attach(&mut d, 4, "agent", false).unwrap().writes);
    assert_ne!(d.state_hash(), hash, "attachments are part of what replays compare");
}

#[test]
fn attachments_lapse_with_their_run() {
    let mut d = Daemon::boot(terminal_config(), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "agent", 10);
    attach(&mut d, 1, "agent", false).unwrap();
    attach(&mut d, 2, "agent", true).unwrap();
    let report = HarnessInput::Exited { run: 1, status: ExitStatus::Code(1) };
    d.handle(Instant(5), DaemonInput::Process { name: id("agent"), report });
    drain(&mut d);
    assert!(d.attachments().is_empty(), "{:?}", d.attachments());
}

#[test]
fn stopping_a_terminal_harness_hangs_its_session_up_before_term() {
    let mut d = Daemon::boot(terminal_config(), None, Instant(0)).unwrap();
    drain(&mut d);
    spawned(&mut d, "agent", 10);
    spawned(&mut d, "plain", 11);
    let effects = command(&mut d, 1, Command::Stop { names: vec![id("agent"), id("plain")] });
    let signals: Vec<(String, crate::env::Signal)> = effects
        .iter()
        .filter_map(|e| match e {
            DaemonEffect::Signal { name, signal, .. } => Some((name.to_string(), *signal)),
            _ => None,
        })
        .collect();
    use crate::env::Signal::{Hangup, Term};
    let expected = [("agent".into(), Hangup), ("agent".into(), Term), ("plain".into(), Term)];
    assert_eq!(signals, expected);
}

/// Twenty harnesses whose restarts fall due together are restarted a bounded number per
/// step, the earliest due first, each step leaving the rest due at once: a storm of
/// restarts is spread over steps, and the host serves its socket between them.
#[test]
fn due_restarts_are_spread_over_steps_the_earliest_first() {
    let names: Vec<String> = (0..20).map(|i| format!("h{i:02}")).collect();
    let set: Vec<(&str, bool)> = names.iter().map(|n| (n.as_str(), true)).collect();
    let mut d = Daemon::boot(config(&set), None, Instant(0)).unwrap();
    drain(&mut d);
    // They exit one millisecond apart, the last named first.
    for (i, name) in names.iter().rev().enumerate() {
        spawned(&mut d, name, 100 + i as u32);
        let run = d.harnesses()[&id(name)].current_run().unwrap();
        let exited = HarnessInput::Exited { run, status: ExitStatus::Code(1) };
        let at = Instant(i as u64 * 1_000_000);
        d.handle(at, DaemonInput::Process { name: id(name), report: exited });
        drain(&mut d);
    }
    let late = Instant(60_000_000_000);
    let mut order = Vec::new();
    while d.poll_timeout().is_some_and(|t| t <= late) {
        d.handle_timeout(late);
        let spawned = spawns(&drain(&mut d));
        assert!(
            spawned.len() <= super::machine::TIMERS_PER_STEP,
            "{} spawns in one step",
            spawned.len()
        );
        order.extend(spawned);
    }
    let expected: Vec<String> = names.iter().rev().cloned().collect();
    assert_eq!(order, expected, "every one restarted, the earliest due first");
}
