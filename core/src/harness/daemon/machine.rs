//! The transitions of [`Daemon`]: boot, commands, process reports, timeouts, and batching
//! their effects behind the durability barrier.

use super::*;
use crate::error::{InvariantError, RecordError};
use crate::harness::lifecycle::State;
use std::hash::{Hash, Hasher};

/// A command's id and the answer it gets.
type Ack = (u64, Result<(), RecordError>);

/// Upper bound on effects queued by one input; a larger queue means a runaway loop.
const MAX_QUEUED_EFFECTS: usize = 1 << 16;

/// Most harness timers one [`Daemon::handle_timeout`] acts on; the rest stay due for the
/// next. Bounds the spawns of one step, so the daemon's turn stays short under a storm.
pub(crate) const TIMERS_PER_STEP: usize = 8;

impl Daemon {
    /// Builds the core from configuration and the durable state of an earlier life (`None` on a
    /// first boot) and starts every harness whose intent says so. A first start and a restart
    /// after a crash are this same path.
    pub fn boot(
        config: DaemonConfig,
        persisted: Option<PersistedState>,
        now: Instant,
    ) -> Result<Daemon, BootError> {
        config.validate().map_err(BootError::Config)?;
        let persisted =
            persisted.unwrap_or(PersistedState { v: STATE_VERSION, ..Default::default() });
        let mut retired = persisted.retired.clone();
        for (name, d) in &persisted.harnesses {
            if !config.harnesses.contains_key(name) {
                retired.insert(name.clone(), d.runs);
            }
        }
        let mut harnesses = BTreeMap::new();
        for (name, spec) in &config.harnesses {
            let mut durable = persisted.harnesses.get(name).copied().unwrap_or(Durable {
                runs: retired.remove(name).unwrap_or(0),
                ..Durable::default()
            });
            if !durable.pinned {
                durable.enabled = config.default_intent(name);
            }
            let mut harness = Harness::new(name.clone(), spec.clone(), durable);
            // Counters kept under other limits (a reload before a crash) must fit these.
            harness.limits_changed(&config.limits);
            harnesses.insert(name.clone(), harness);
        }
        let mut daemon = Daemon {
            active_profile: persisted.active_profile.clone(),
            generation: persisted.generation,
            persisted,
            config,
            harnesses,
            draining: false,
            drain_deadline: None,
            drain_forced: false,
            removed: Vec::new(),
            retired,
            effects: VecDeque::new(),
            scratch: Vec::new(),
            held: BTreeMap::new(),
            attachments: Default::default(),
            #[cfg(feature = "planted-bugs")]
            planted: None,
        };
        let mut batch = Batch::default();
        let names: Vec<Id> = daemon.harnesses.keys().cloned().collect();
        for name in names {
            let h = daemon.harnesses.get_mut(&name).expect("listed");
            h.boot(now, &mut daemon.scratch);
            batch.take(&name, &mut daemon.scratch);
        }
        daemon.finish(now, batch, None);
        Ok(daemon)
    }

    /// Handles exactly one input. Drain [`Daemon::poll_effect`] afterwards.
    pub fn handle(&mut self, now: Instant, input: DaemonInput) {
        let mut batch = Batch::default();
        let ack = match input {
            DaemonInput::Command { id, command } => {
                Some((id, self.command(now, command, &mut batch)))
            }
            DaemonInput::Process { name, report } => {
                self.deliver(now, &name, report, &mut batch);
                None
            }
            DaemonInput::Attach { client, name, read_only } => {
                return self.handle_attach(client, name, read_only);
            }
            DaemonInput::Detach { client } => return self.detach(client),
        };
        self.finish(now, batch, ack);
    }

    /// Acts on due deadlines: the drain deadline (SIGKILL to every run still stopping),
    /// then the harnesses' timers, the earliest first and at most [`TIMERS_PER_STEP`] of
    /// them. Harmless when late, early or repeated.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut batch = Batch::default();
        if !self.drain_forced && self.drain_deadline.is_some_and(|at| at <= now) {
            self.drain_forced = true;
            let names: Vec<Id> = self.harnesses.keys().cloned().collect();
            for name in names {
                self.deliver(now, &name, HarnessInput::KillNow, &mut batch);
            }
        }
        // The earliest-due timers first, at most `TIMERS_PER_STEP` of them: a storm of
        // restarts falling due together is spread over steps, and the host serves its
        // control socket and signals between them (the rest are still due, so it steps
        // again at once).
        let limits = &self.config.limits;
        let mut due: Vec<(Instant, &Id)> = self
            .harnesses
            .iter()
            .filter_map(|(name, h)| {
                h.poll_timeout(limits).filter(|at| *at <= now).map(|at| (at, name))
            })
            .collect();
        due.sort_unstable();
        due.truncate(TIMERS_PER_STEP);
        let due: Vec<Id> = due.into_iter().map(|(_, name)| name.clone()).collect();
        for name in due {
            let h = self.harnesses.get_mut(&name).expect("a due harness exists");
            h.handle_timeout(now, &self.config.limits, &mut self.scratch);
            batch.take(&name, &mut self.scratch);
        }
        self.finish(now, batch, None);
    }

    /// The next effect to execute, in order. Call until `None` after every mutation.
    #[must_use]
    pub fn poll_effect(&mut self) -> Option<DaemonEffect> {
        self.effects.pop_front()
    }

    /// When [`Daemon::handle_timeout`] next has work; `None` when only an input can wake it.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let limits = &self.config.limits;
        let drain = self.drain_deadline.filter(|_| !self.drain_forced);
        self.harnesses.values().filter_map(|h| h.poll_timeout(limits)).chain(drain).min()
    }

    fn command(
        &mut self,
        now: Instant,
        command: Command,
        batch: &mut Batch,
    ) -> Result<(), RecordError> {
        if self.draining && !matches!(command, Command::Shutdown { .. }) {
            return Err(RecordError::refused(
                "the daemon is shutting down and takes no more commands",
            ));
        }
        match command {
            Command::Shutdown { drain_timeout } => {
                if let Some(timeout) = drain_timeout {
                    let asked = now.saturating_add(timeout);
                    self.drain_deadline = Some(self.drain_deadline.map_or(asked, |d| d.min(asked)));
                }
                self.broadcast(now, HarnessInput::Halt, batch)
            }
            Command::Start { names } => self.operator(now, &names, HarnessInput::Start, batch),
            Command::Stop { names } => self.operator(now, &names, HarnessInput::Stop, batch),
            Command::Restart { names } => self.operator(now, &names, HarnessInput::Restart, batch),
            Command::UseProfile { profile } => self.use_profile(now, profile, batch),
            Command::Reload { config, force } => {
                self.check_reload(&config, force)
                    .map_err(|r| RecordError::refused(r.to_string()))?;
                self.reload(now, config, batch)
            }
        }
    }

    /// An operator's start, stop or restart of `names`, all in one batch: one durable write
    /// of the intents and one acknowledgement however many there are. An unknown name
    /// refuses the whole command, so nothing changes.
    fn operator(
        &mut self,
        now: Instant,
        names: &[Id],
        input: HarnessInput,
        batch: &mut Batch,
    ) -> Result<(), RecordError> {
        let unknown = self.unknown_names(names);
        if !unknown.is_empty() {
            return Err(RecordError::refused(no_such_harness(&unknown)));
        }
        for name in names {
            self.deliver(now, name, input.clone(), batch);
        }
        Ok(())
    }

    /// The names in `names` this daemon has no harness of (never had, or removed by a
    /// reload): a command naming one is refused whole, and its shell says so as bad input.
    pub fn unknown_names(&self, names: &[Id]) -> Vec<Id> {
        let unknown = |n: &&Id| !self.harnesses.contains_key(*n) || self.removed.contains(*n);
        names.iter().filter(unknown).cloned().collect()
    }

    fn broadcast(
        &mut self,
        now: Instant,
        input: HarnessInput,
        batch: &mut Batch,
    ) -> Result<(), RecordError> {
        self.draining = true;
        let names: Vec<Id> = self.harnesses.keys().cloned().collect();
        for name in names {
            self.deliver(now, &name, input.clone(), batch);
        }
        Ok(())
    }

    /// True once a shutdown was asked for and no harness has a live run: the daemon may exit.
    pub fn drained(&self) -> bool {
        self.draining && self.harnesses.values().all(|h| h.current_run().is_none())
    }

    /// True once a shutdown was asked for.
    pub fn draining(&self) -> bool {
        self.draining
    }

    /// Whether `next` may replace the configuration now: not while draining; not when it is
    /// invalid; not when it removes every harness, unless `force`. A host asks before it
    /// changes anything of its own (its readiness watches), and the command asks again.
    pub fn check_reload(&self, next: &DaemonConfig, force: bool) -> Result<(), ReloadRefused> {
        if self.draining {
            return Err(ReloadRefused::Draining);
        }
        next.validate().map_err(ReloadRefused::Invalid)?;
        if !force && self.config.removes_every_harness(next) {
            return Err(ReloadRefused::RemovesEvery);
        }
        Ok(())
    }

    /// The drain deadline of a bounded shutdown, if one was asked for.
    pub fn drain_deadline(&self) -> Option<Instant> {
        self.drain_deadline
    }

    /// True once the drain deadline passed and every run still stopping was killed.
    pub fn drain_forced(&self) -> bool {
        self.drain_forced
    }

    fn use_profile(
        &mut self,
        now: Instant,
        profile: Id,
        batch: &mut Batch,
    ) -> Result<(), RecordError> {
        let Some(members) = self.config.profiles.get(&profile).map(|p| p.harnesses.clone()) else {
            return Err(RecordError::refused(format!("no profile named \"{profile}\"")));
        };
        let outside: Vec<Id> = self
            .harnesses
            .iter()
            .filter(|(name, h)| h.enabled() && !members.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in outside {
            self.deliver_because(now, &name, HarnessInput::Stop, Cause::Profile, batch);
        }
        for name in &members {
            self.deliver_because(now, name, HarnessInput::Start, Cause::Profile, batch);
        }
        self.active_profile = Some(profile);
        Ok(())
    }

    fn reload(
        &mut self,
        now: Instant,
        config: DaemonConfig,
        batch: &mut Batch,
    ) -> Result<(), RecordError> {
        config.validate()?;
        for (name, spec) in &config.harnesses {
            self.removed.retain(|r| r != name);
            if self.harnesses.contains_key(name) {
                self.deliver(now, name, HarnessInput::Reconfigure(Box::new(spec.clone())), batch);
                let intent = config.default_intent(name);
                self.deliver(now, name, HarnessInput::FollowConfig(intent), batch);
            } else {
                let durable = Durable {
                    enabled: config.default_intent(name),
                    runs: self.retired.remove(name).unwrap_or(0),
                    ..Durable::default()
                };
                let mut h = Harness::new(name.clone(), spec.clone(), durable);
                h.boot_because(now, Cause::Configuration, &mut self.scratch);
                batch.take(name, &mut self.scratch);
                self.harnesses.insert(name.clone(), h);
            }
        }
        let gone: Vec<Id> =
            self.harnesses.keys().filter(|n| !config.harnesses.contains_key(*n)).cloned().collect();
        for name in gone {
            self.deliver_because(now, &name, HarnessInput::Stop, Cause::Configuration, batch);
            if !self.removed.contains(&name) {
                self.removed.push(name);
            }
        }
        if config.limits != self.config.limits {
            for h in self.harnesses.values_mut() {
                h.limits_changed(&config.limits);
            }
        }
        if self.active_profile.as_ref().is_some_and(|p| !config.profiles.contains_key(p)) {
            self.active_profile = None;
        }
        self.config = config;
        Ok(())
    }

    fn deliver(&mut self, now: Instant, name: &Id, input: HarnessInput, batch: &mut Batch) {
        let Some(h) = self.harnesses.get_mut(name) else {
            return; // A report about a harness that no longer exists: stale.
        };
        h.handle(now, &self.config.limits, input, &mut self.scratch);
        batch.take(name, &mut self.scratch);
    }

    /// [`deliver`](Self::deliver) on behalf of `cause` (a profile, a reload).
    fn deliver_because(
        &mut self,
        now: Instant,
        name: &Id,
        input: HarnessInput,
        cause: Cause,
        batch: &mut Batch,
    ) {
        let Some(h) = self.harnesses.get_mut(name) else {
            return;
        };
        h.handle_because(now, &self.config.limits, input, cause, &mut self.scratch);
        batch.take(name, &mut self.scratch);
    }

    /// Holds back the spawns of harnesses whose dependencies are not ready, releases those
    /// whose dependencies now are, and withdraws those whose harness was stopped meanwhile,
    /// until nothing changes (a withdrawal can start a new run).
    fn gate(&mut self, now: Instant, batch: &mut Batch) {
        loop {
            let mut changed = false;
            let acts = std::mem::take(&mut batch.acts);
            for act in acts {
                match act {
                    DaemonEffect::Spawn { name, run, spec } if !self.dependencies_ready(&name) => {
                        self.held.insert(name, (run, spec));
                        changed = true;
                    }
                    act => batch.acts.push(act),
                }
            }
            let held: Vec<(Id, u64)> =
                self.held.iter().map(|(n, (r, _))| (n.clone(), *r)).collect();
            for (name, run) in held {
                let h = self.harnesses.get(&name);
                let pending = h.is_some_and(|h| h.current_run() == Some(run) && h.pid().is_none());
                if !pending {
                    self.held.remove(&name); // Stale: that run is gone.
                    changed = true;
                } else if h.is_some_and(|h| h.state() == State::Stopping) {
                    self.held.remove(&name);
                    self.deliver(now, &name, HarnessInput::Withdrawn { run }, batch);
                    changed = true;
                } else if self.dependencies_ready(&name) {
                    let (run, spec) = self.held.remove(&name).expect("listed");
                    batch.acts.push(DaemonEffect::Spawn { name, run, spec });
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// True when every harness `name` waits for is ready: running (or degraded) with a live
    /// pid and its readiness evidence. An `after` one that is not starting is not waited for.
    fn dependencies_ready(&self, name: &Id) -> bool {
        self.waiting_for(name).is_empty()
    }

    /// The dependencies `name` still waits for, each with where it stands.
    pub fn waiting_for(&self, name: &Id) -> Vec<(Id, &'static str)> {
        let Some(h) = self.harnesses.get(name) else { return Vec::new() };
        let spec = h.active_spec();
        let mut out = Vec::new();
        for (dep, required) in
            spec.requires.iter().map(|d| (d, true)).chain(spec.after.iter().map(|d| (d, false)))
        {
            let Some(d) = self.harnesses.get(dep) else {
                if required {
                    out.push((dep.clone(), "not configured"));
                }
                continue;
            };
            let ready = d.pid().is_some()
                && d.ready()
                && matches!(d.state(), State::Running | State::Degraded);
            // An `after` dependency orders only: it is waited for while it is on its way up,
            // never when it is stopped or failed.
            let on_its_way = matches!(d.state(), State::Starting | State::Restarting)
                || matches!(d.state(), State::Running | State::Degraded) && !ready;
            if ready || (!required && !on_its_way) {
                continue;
            }
            let how = match d.state() {
                State::Running | State::Degraded => "not ready yet",
                State::Starting | State::Restarting => "starting",
                State::Stopping => "stopping",
                State::Stopped => "stopped",
                State::Failed => "failed",
            };
            if !out.iter().any(|(n, _)| n == dep) {
                out.push((dep.clone(), how));
            }
        }
        out
    }

    /// Drops removed harnesses that are at rest, then queues the batch behind a persist if
    /// the durable view changed.
    fn finish(&mut self, now: Instant, mut batch: Batch, ack: Option<Ack>) {
        self.lapse_attachments();
        self.gate(now, &mut batch);
        let (harnesses, retired) = (&mut self.harnesses, &mut self.retired);
        self.removed.retain(|name| {
            let at_rest = harnesses.get(name).is_none_or(|h| h.current_run().is_none());
            if at_rest {
                if let Some(h) = harnesses.remove(name) {
                    retired.insert(name.clone(), h.durable().runs);
                }
            }
            !at_rest
        });
        #[cfg(feature = "planted-bugs")]
        let (batch, ack) = self.planted_reorder(batch, ack);
        // Intent, latches and run reservations go to disk before the acts that depend on
        // them; pure bookkeeping (counters, the last exit) right after, so a respawn does
        // not wait for an fsync it does not depend on.
        let barrier = self.barrier_changed();
        let changed = barrier || self.durable_view_changed();
        if barrier {
            self.queue_persist();
        }
        if !batch.events.is_empty() {
            self.effects.push_back(DaemonEffect::AppendEvents(batch.events));
        }
        self.effects.extend(batch.acts);
        if changed && !barrier {
            self.queue_persist();
        }
        if let Some((id, result)) = ack {
            self.effects.push_back(DaemonEffect::Ack { id, result });
        }
        assert!(self.effects.len() <= MAX_QUEUED_EFFECTS, "runaway effect queue");
        // Every input ends here: in debug builds the invariants are checked after each one,
        // not only where the simulator looks.
        #[cfg(debug_assertions)]
        if let Err(broken) = self.check() {
            panic!("daemon invariant broken: {broken}");
        }
    }

    /// Plants a bug in this core (test builds only).
    #[cfg(feature = "planted-bugs")]
    pub fn plant(&mut self, bug: PlantedBug) {
        self.planted = Some(bug);
    }

    /// The planted bugs: queue acts or the acknowledgement ahead of the barrier.
    #[cfg(feature = "planted-bugs")]
    fn planted_reorder(&mut self, mut batch: Batch, ack: Option<Ack>) -> (Batch, Option<Ack>) {
        match self.planted {
            Some(PlantedBug::SpawnBeforePersist) => {
                self.effects.extend(batch.acts.drain(..));
                (batch, ack)
            }
            Some(PlantedBug::AckBeforePersist) => {
                if let Some((id, result)) = ack {
                    self.effects.push_back(DaemonEffect::Ack { id, result });
                }
                (batch, None)
            }
            Some(PlantedBug::TermWithoutHangup) => {
                batch.acts.retain(|a| {
                    !matches!(a, DaemonEffect::Signal { signal: crate::env::Signal::Hangup, .. })
                });
                (batch, ack)
            }
            _ => (batch, ack),
        }
    }

    /// True when the planted bug lets a second typist attach.
    pub(super) fn planted_second_typist(&self) -> bool {
        #[cfg(feature = "planted-bugs")]
        return self.planted == Some(PlantedBug::SecondTypist);
        #[cfg(not(feature = "planted-bugs"))]
        return false;
    }

    fn queue_persist(&mut self) {
        self.generation += 1;
        self.refresh_persisted();
        let bytes = self.persisted.encode();
        self.effects.push_back(DaemonEffect::PersistState { generation: self.generation, bytes });
    }

    /// True when something acts depend on changed: a harness's intent, latch or run
    /// reservation, the active profile, or which harnesses exist.
    fn barrier_changed(&self) -> bool {
        self.persisted.active_profile != self.active_profile
            || self.persisted.retired != self.retired
            || self.persisted.harnesses.len() != self.harnesses.len()
            || self.persisted.harnesses.iter().zip(self.harnesses.iter()).any(
                |((pn, pd), (n, h))| pn != n || pd.barrier_part() != h.durable().barrier_part(),
            )
    }

    fn durable_view_changed(&self) -> bool {
        self.persisted.active_profile != self.active_profile
            || self.persisted.retired != self.retired
            || self.persisted.harnesses.len() != self.harnesses.len()
            || self
                .persisted
                .harnesses
                .iter()
                .zip(self.harnesses.iter())
                .any(|((pn, pd), (n, h))| pn != n || *pd != h.durable())
    }

    /// Brings `persisted` up to date with the harnesses' durable records: in place while the
    /// same harnesses exist (nearly every write), built anew when the set changed.
    fn refresh_persisted(&mut self) {
        let persisted = &mut self.persisted;
        persisted.v = STATE_VERSION;
        persisted.generation = self.generation;
        if persisted.active_profile != self.active_profile {
            persisted.active_profile = self.active_profile.clone();
        }
        if persisted.retired != self.retired {
            persisted.retired = self.retired.clone();
        }
        let same_names = persisted.harnesses.len() == self.harnesses.len()
            && persisted.harnesses.keys().zip(self.harnesses.keys()).all(|(a, b)| a == b);
        if same_names {
            for (durable, h) in persisted.harnesses.values_mut().zip(self.harnesses.values()) {
                *durable = h.durable();
            }
        } else {
            persisted.harnesses =
                self.harnesses.iter().map(|(n, h)| (n.clone(), h.durable())).collect();
        }
    }

    /// The harnesses, by name.
    pub fn harnesses(&self) -> &BTreeMap<Id, Harness> {
        &self.harnesses
    }
    /// The configuration in force.
    pub fn config(&self) -> &DaemonConfig {
        &self.config
    }
    /// The profile last made active.
    pub fn active_profile(&self) -> Option<&Id> {
        self.active_profile.as_ref()
    }
    /// The generation of the last queued persist.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Checks every harness's invariants and the daemon's own.
    pub fn check(&self) -> Result<(), InvariantError> {
        for h in self.harnesses.values() {
            h.check(&self.config.limits)?;
        }
        if self.persisted.generation != self.generation {
            return Err(InvariantError::new("the persisted view lags the generation"));
        }
        for name in &self.removed {
            let live = self.harnesses.get(name).and_then(Harness::current_run);
            if live.is_none() {
                return Err(InvariantError::new(format!(
                    "{name}: removed but kept without a live run"
                )));
            }
        }
        if (self.drain_deadline.is_some() || self.drain_forced) && !self.draining {
            return Err(InvariantError::new("a drain deadline without a shutdown"));
        }
        if self.drain_forced && self.drain_deadline.is_none() {
            return Err(InvariantError::new("a forced drain without a deadline"));
        }
        self.check_attachments()?;
        for (name, (run, _)) in &self.held {
            let h = self.harnesses.get(name).ok_or_else(|| {
                InvariantError::new(format!("{name}: a held spawn of no harness"))
            })?;
            if h.current_run() != Some(*run) || h.pid().is_some() || h.state() != State::Starting {
                return Err(InvariantError::new(format!(
                    "{name}: a held spawn of run {run} that is not starting"
                )));
            }
        }
        Ok(())
    }

    /// A stable hash of everything that decides future behaviour, for traces and replay.
    pub fn state_hash(&self) -> u64 {
        let mut hasher = crate::hash::StateHasher::default();
        self.generation.hash(&mut hasher);
        self.active_profile.hash(&mut hasher);
        self.draining.hash(&mut hasher);
        self.drain_deadline.hash(&mut hasher);
        self.drain_forced.hash(&mut hasher);
        for h in self.harnesses.values() {
            h.hash_into(&mut hasher);
        }
        self.removed.hash(&mut hasher);
        self.held.hash(&mut hasher);
        self.attachments().hash(&mut hasher);
        hasher.finish()
    }
}

/// The outputs of one input, sorted into events and acts, in the order they were produced.
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    acts: Vec<DaemonEffect>,
}

impl Batch {
    fn take(&mut self, name: &Id, outs: &mut Vec<HarnessOut>) {
        for out in outs.drain(..) {
            match out {
                HarnessOut::Event(e) => self.events.push(e),
                HarnessOut::Spawn { run, spec } => {
                    self.acts.push(DaemonEffect::Spawn { name: name.clone(), run, spec })
                }
                HarnessOut::Signal { run, pid, signal } => {
                    self.acts.push(DaemonEffect::Signal { name: name.clone(), run, pid, signal })
                }
            }
        }
    }
}

/// The refusal of a command that names harnesses the daemon does not have.
pub fn no_such_harness(unknown: &[Id]) -> String {
    let quoted: Vec<String> = unknown.iter().map(|n| format!("\"{n}\"")).collect();
    let s = if quoted.len() == 1 { "" } else { "es" };
    format!("no harness{s} named {}", quoted.join(", "))
}
