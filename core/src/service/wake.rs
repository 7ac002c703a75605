//! The service wake and backoff machine: per-goal sweep decisions over an opaque fingerprint, and
//! the sans-IO [`ServiceScheduler`] that says when to sweep, which file change brings a sweep
//! forward, and when the wake hints need writing.
//!
//! The rules (harnery §6.3, ADR 0026) live in three pure functions, [`decide`],
//! [`after_tick_ok`] and [`after_tick_err`], over a [`GoalWake`] hint:
//!
//! - a goal whose durable [`Fingerprint`] changed is reconsidered at once, bypassing both a stale
//!   backoff and quiescence;
//! - an unchanged `awaiting_change` goal is skipped: one cheap read, no tick, no model call;
//! - a tick that fails backs the goal off exponentially, capped at `error_backoff_max`.
//!
//! Service backoff never touches work attempts. Nothing here sees, counts or grants a work
//! attempt: the only thing a backoff delays is the next *tick* of the goal, and whether a tick
//! may dispatch or retry work stays with the goal's frozen automation policy and its attempt
//! ceilings. That is also why a domain outcome (a plan failed, the goal is now blocked) should
//! be reported through [`after_tick_ok`] with `still_ready = false`, which quiesces the goal,
//! rather than through [`after_tick_err`], which would re-run it after the delay (harnery §9.6);
//! and why a read error of one goal belongs to that goal's backoff, not to the whole sweep
//! (harnery §9.12).
//!
//! Wake records are scheduling hints, never truth: [`ServiceScheduler::new`] repairs an
//! inconsistent or stale record instead of trusting it, and losing every record only costs one
//! extra read per goal.

use crate::ids::Id;
use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The shortest time between the end of a sweep and a sweep an early-wake hint brings forward.
pub const EARLY_WAKE_GAP: Duration = Duration::from_millis(250);

/// The largest exponent of the backoff: after 21 consecutive errors the delay stops doubling.
/// `2^20` times even a 1 ms base is over 17 minutes, so with valid settings the cap
/// (`error_backoff_max`) binds long before this does; the bound keeps the arithmetic small and
/// the schedule independent of how large an error count a corrupt hint claims.
pub const BACKOFF_EXPONENT_MAX: u32 = 20;

/// The intervals of the service, frozen with its configuration. Defaults are harnery's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeConfig {
    /// Pause between the end of one sweep and the start of the next (`wake_interval_ms`).
    pub wake_interval: Duration,
    /// Period of the liveness heartbeat, independent of sweeps (`heartbeat_interval_ms`).
    pub heartbeat_interval: Duration,
    /// Delay after the first consecutive error (`error_backoff_base_ms`).
    pub error_backoff_base: Duration,
    /// Cap of every error delay (`error_backoff_max_ms`); at least the base.
    pub error_backoff_max: Duration,
}

impl Default for WakeConfig {
    fn default() -> WakeConfig {
        WakeConfig {
            wake_interval: Duration::from_millis(5_000),
            heartbeat_interval: Duration::from_millis(2_000),
            error_backoff_base: Duration::from_millis(2_000),
            error_backoff_max: Duration::from_millis(300_000),
        }
    }
}

/// Why a [`WakeConfig`] was refused. Fields are named by their configuration keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WakeConfigError {
    /// A field lies outside its accepted range (both ends inclusive).
    OutOfRange {
        /// The configuration key, e.g. `wake_interval_ms`.
        field: &'static str,
        /// The refused value.
        value: Duration,
        /// The smallest accepted value.
        min: Duration,
        /// The largest accepted value.
        max: Duration,
    },
    /// `error_backoff_max_ms` is below `error_backoff_base_ms`.
    BackoffMaxBelowBase {
        /// The configured base.
        base: Duration,
        /// The configured cap.
        max: Duration,
    },
}

impl WakeConfigError {
    /// The configuration key at fault.
    pub fn field(&self) -> &'static str {
        match self {
            WakeConfigError::OutOfRange { field, .. } => field,
            WakeConfigError::BackoffMaxBelowBase { .. } => "error_backoff_max_ms",
        }
    }
}

/// Prints a span exactly: in milliseconds when whole, else in nanoseconds, so a sub-millisecond
/// value is not shown as a misleading `0ms`.
fn exact(d: Duration) -> String {
    if d.0.is_multiple_of(Duration::from_millis(1).0) {
        d.to_string()
    } else {
        format!("{}ns", d.0)
    }
}

impl fmt::Display for WakeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WakeConfigError::OutOfRange { field, value, min, max } => write!(
                f,
                "{field} must be between {} and {}, not {}",
                exact(*min),
                exact(*max),
                exact(*value)
            ),
            WakeConfigError::BackoffMaxBelowBase { base, max } => write!(
                f,
                "error_backoff_max_ms ({}) must be at least error_backoff_base_ms ({})",
                exact(*max),
                exact(*base)
            ),
        }
    }
}

impl std::error::Error for WakeConfigError {}

impl WakeConfig {
    /// Checks every field against harnery's ranges and the cap against the base.
    pub fn validate(&self) -> Result<(), WakeConfigError> {
        let fields = [
            ("wake_interval_ms", self.wake_interval, 3_600_000),
            ("heartbeat_interval_ms", self.heartbeat_interval, 60_000),
            ("error_backoff_base_ms", self.error_backoff_base, 3_600_000),
            ("error_backoff_max_ms", self.error_backoff_max, 86_400_000),
        ];
        for (field, value, max_ms) in fields {
            let (min, max) = (Duration::from_millis(1), Duration::from_millis(max_ms));
            if value < min || value > max {
                return Err(WakeConfigError::OutOfRange { field, value, min, max });
            }
        }
        if self.error_backoff_max < self.error_backoff_base {
            let (base, max) = (self.error_backoff_base, self.error_backoff_max);
            return Err(WakeConfigError::BackoffMaxBelowBase { base, max });
        }
        Ok(())
    }

    /// The delay after `consecutive_errors` errors under this configuration.
    pub fn backoff(&self, consecutive_errors: u32) -> Duration {
        backoff_delay(self.error_backoff_base, self.error_backoff_max, consecutive_errors)
    }
}

/// An opaque digest of the durable state of one goal. Only equality matters: a different value
/// means something durable changed and the goal must be looked at again. It is sixteen bytes,
/// copied and compared without allocation, so a sweep over many quiescent goals costs a read
/// and a compare each; on disk it is 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint([u8; 16]);

impl Fingerprint {
    /// The fingerprint of arbitrary bytes (the first half of their SHA-256).
    pub fn new(bytes: impl AsRef<[u8]>) -> Fingerprint {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(bytes.as_ref());
        let mut out = [0; 16];
        out.copy_from_slice(&digest[..16]);
        Fingerprint(out)
    }

    /// Wraps a digest that is already sixteen bytes.
    pub const fn from_digest(digest: [u8; 16]) -> Fingerprint {
        Fingerprint(digest)
    }

    /// The digest as 32 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 32 hex digits.
    pub fn from_hex(text: &str) -> Option<Fingerprint> {
        if text.len() != 32 || !text.is_ascii() {
            return None;
        }
        let mut out = [0; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Fingerprint(out))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.to_hex())
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fingerprint, D::Error> {
        let text = String::deserialize(d)?;
        Fingerprint::from_hex(&text)
            .ok_or_else(|| serde::de::Error::custom("a fingerprint is 32 hex digits"))
    }
}

/// The capped exponential delay after `consecutive_errors` errors: zero for none, else
/// `min(max, base × 2^min(n − 1, BACKOFF_EXPONENT_MAX))`. Saturates instead of overflowing for
/// every input, and never decreases as the count grows.
pub fn backoff_delay(base: Duration, max: Duration, consecutive_errors: u32) -> Duration {
    if consecutive_errors == 0 {
        return Duration::ZERO;
    }
    let exponent = (consecutive_errors - 1).min(BACKOFF_EXPONENT_MAX);
    // A multiplication by a power of two, not `Duration::saturating_shl`: this is exact for
    // every base, including bases with the top bit set and an exponent of zero.
    Duration(base.0.saturating_mul(1u64 << exponent)).min(max)
}

/// Where a goal stands in the service's schedule (harnery `runtime.json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeState {
    /// Ticked on every sweep while it stays ready.
    #[default]
    Idle,
    /// The last tick failed; not ticked again before `next_wake_at` unless its state changes.
    Backoff,
    /// Not ready (needs review, approval, retry authority…); read but not ticked until its
    /// fingerprint changes.
    AwaitingChange,
}

/// The service's recoverable scheduling hint for one goal. Consistent records satisfy
/// [`GoalWake::check`]: errors are counted exactly in `backoff`, which alone has a deadline, and
/// `awaiting_change` always knows the fingerprint it waits to see change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct GoalWake {
    /// Where the goal stands.
    pub state: WakeState,
    /// Failed ticks in a row; zero unless in backoff.
    pub consecutive_errors: u32,
    /// The fingerprint seen when this record was written.
    pub observed: Option<Fingerprint>,
    /// When a backed-off goal may be ticked again; `None` in every other state.
    pub next_wake_at: Option<Instant>,
}

impl GoalWake {
    /// The record of a goal that is not ready: quiescent on `fp`, with its errors forgiven.
    pub fn awaiting(fp: Fingerprint) -> GoalWake {
        GoalWake {
            state: WakeState::AwaitingChange,
            consecutive_errors: 0,
            observed: Some(fp),
            next_wake_at: None,
        }
    }

    /// Checks the record's own consistency (see the type's documentation).
    pub fn check(&self) -> Result<(), String> {
        let backoff = self.state == WakeState::Backoff;
        if backoff != (self.consecutive_errors > 0) {
            return Err(format!("{:?} with {} errors", self.state, self.consecutive_errors));
        }
        if backoff != self.next_wake_at.is_some() {
            return Err(format!("{:?} with next_wake_at {:?}", self.state, self.next_wake_at));
        }
        if self.state == WakeState::AwaitingChange && self.observed.is_none() {
            return Err("awaiting_change without an observed fingerprint".into());
        }
        Ok(())
    }

    /// Turns a record read back from disk into a consistent one. A backoff deadline is clamped
    /// to `now` plus the goal's own delay because a persisted `Instant` may come from another
    /// process's epoch: a restart then never waits longer than the schedule (and the cap)
    /// allows, while the error count, and with it the next delay, survives. Anything
    /// inconsistent falls back to `idle`, which costs one extra read and never a missed change.
    fn restored(self, now: Instant, cfg: &WakeConfig) -> GoalWake {
        let GoalWake { state, consecutive_errors, observed, next_wake_at } = self;
        match (state, observed) {
            (WakeState::Backoff, observed) if consecutive_errors > 0 => {
                let latest = now.saturating_add(cfg.backoff(consecutive_errors));
                let at = next_wake_at.map_or(now, |at| at.min(latest));
                GoalWake { state, consecutive_errors, observed, next_wake_at: Some(at) }
            }
            (WakeState::AwaitingChange, Some(fp)) => GoalWake::awaiting(fp),
            (_, observed) => GoalWake { observed, ..GoalWake::default() },
        }
    }
}

/// Why a sweep leaves a goal alone this time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The goal is backing off and its state has not changed.
    BackoffNotElapsed {
        /// When the backoff ends.
        until: Instant,
    },
    /// The goal awaits a durable change and its fingerprint is the one already seen.
    Unchanged,
}

/// What a sweep does with one goal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SweepDecision {
    /// Leave the goal and its record as they are; no tick.
    Skip(SkipReason),
    /// The goal is not ready: store this record (quiescent on the current fingerprint, errors
    /// reset) and do not tick.
    BecomeAwaiting(GoalWake),
    /// Run one tick of the goal, then record [`after_tick_ok`] or [`after_tick_err`].
    Tick,
}

/// The sweep decision for one goal (harnery §6.3), from its previous record, its fingerprint
/// and readiness as just read, and `now`. A changed fingerprint is never skipped; an unchanged
/// `awaiting_change` goal is never ticked.
pub fn decide(
    prev: &GoalWake,
    current: &Fingerprint,
    goal_is_ready: bool,
    now: Instant,
) -> SweepDecision {
    // Only a fingerprint actually seen before can have changed; with none, the record's state
    // decides alone (a backoff without one still waits its delay).
    let changed = prev.observed.as_ref().is_some_and(|seen| seen != current);
    if !changed {
        match (prev.state, prev.next_wake_at) {
            (WakeState::Backoff, Some(until)) if until > now => {
                return SweepDecision::Skip(SkipReason::BackoffNotElapsed { until });
            }
            // Without an observed fingerprint the record is inconsistent and cannot prove the
            // goal unchanged; reading it again is the safe side.
            (WakeState::AwaitingChange, _) if prev.observed.is_some() => {
                return SweepDecision::Skip(SkipReason::Unchanged);
            }
            _ => {}
        }
    }
    if goal_is_ready {
        SweepDecision::Tick
    } else {
        SweepDecision::BecomeAwaiting(GoalWake::awaiting(*current))
    }
}

/// The record after a tick that returned: `idle` if the goal is still ready (ticked again next
/// sweep), else `awaiting_change` on `fp_after`; errors forgiven either way. A caller that wants
/// to stop re-ticking a goal that keeps reporting no progress (harnery §9.20) passes
/// `still_ready = false`; the goal then waits for its fingerprint to change.
pub fn after_tick_ok(fp_after: Fingerprint, still_ready: bool) -> GoalWake {
    if still_ready {
        GoalWake { observed: Some(fp_after), ..GoalWake::default() }
    } else {
        GoalWake::awaiting(fp_after)
    }
}

/// The record after a tick that failed at `now`: one more consecutive error and a backoff
/// until `now + backoff_delay(..)`. `fp` is the goal's fingerprint re-read after the failure if
/// that works, else the one read before the tick; a later change of it ends the backoff early.
pub fn after_tick_err(
    prev: &GoalWake,
    fp: Fingerprint,
    now: Instant,
    cfg: &WakeConfig,
) -> GoalWake {
    let consecutive_errors = prev.consecutive_errors.saturating_add(1);
    GoalWake {
        state: WakeState::Backoff,
        consecutive_errors,
        observed: Some(fp),
        next_wake_at: Some(now.saturating_add(cfg.backoff(consecutive_errors))),
    }
}

/// Work the driver must do for the [`ServiceScheduler`]. The heartbeat is not among them: the
/// watcher (`service::watch`) beats on its own schedule, also while a sweep runs for hours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceEffect {
    /// Run one sweep over [`ServiceScheduler::goals`] in order, recording each goal's new wake
    /// with [`ServiceScheduler::record_goal`], then report [`ServiceScheduler::sweep_finished`].
    Sweep,
    /// Persist the wake hints (`runtime.json`): [`ServiceScheduler::wakes`] and
    /// [`ServiceScheduler::outcomes`] changed since they were last written. A write that
    /// fails is reported with [`ServiceScheduler::hints_lost`], so the next sweep tries again.
    WriteHints,
}

/// Whether the service is still sweeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServicePhase {
    /// Sweeping and beating.
    Running,
    /// A stop was requested during a sweep; the sweep finishes (so it orphans no workflow
    /// child) first.
    Stopping,
    /// Done: no effects, no deadlines.
    Stopped,
}

/// Where the sweep cycle stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SweepSlot {
    /// The next sweep starts at this instant.
    Waiting(Instant),
    /// Due; [`ServiceEffect::Sweep`] waits to be polled.
    Queued,
    /// Handed to the driver at this instant; waiting for `sweep_finished`.
    Running(Instant),
    /// Stopped.
    Off,
}

/// The sans-IO service loop (harnery §6.4): a sweep `wake_interval` after the previous one
/// finished, a capped exponential pause after a failed sweep, early wakes on file changes
/// that came after the last sweep, the wake hints written when they changed, and a graceful
/// stop between sweeps. Every decision uses the `now` it is given, never
/// a count of wakes, so a late, early or repeated [`handle_timeout`](Self::handle_timeout) only
/// shifts work in time. A `now` older than one already seen is treated as the latest seen.
#[derive(Clone, Debug)]
pub struct ServiceScheduler {
    cfg: WakeConfig,
    order: Vec<Id>,
    /// Each goal's record, by its position in `order`.
    wakes: Vec<GoalWake>,
    /// Each goal's position in `order`.
    index: BTreeMap<Id, usize>,
    now: Instant,
    phase: ServicePhase,
    sweep: SweepSlot,
    /// What each goal's last tick came to, for status readers.
    outcomes: BTreeMap<Id, String>,
    /// The records and outcomes last handed out to be persisted; `None` before the first.
    written: Option<(Vec<GoalWake>, BTreeMap<Id, String>)>,
    hints_queued: bool,
    sweep_count: u64,
    sweep_errors: u32,
    last_error: Option<String>,
    last_sweep_at: Option<Instant>,
}

impl ServiceScheduler {
    /// A running service at `now` over the enrolled `goals` (duplicates dropped, first kept),
    /// restoring each goal's record from `prior` (see the module documentation: records of
    /// goals no longer enrolled are dropped, missing ones start `idle`, inconsistent ones are
    /// repaired). The first sweep is due at once.
    pub fn new(
        cfg: WakeConfig,
        goals: Vec<Id>,
        mut prior: BTreeMap<Id, GoalWake>,
        now: Instant,
    ) -> Result<ServiceScheduler, WakeConfigError> {
        cfg.validate()?;
        let mut order: Vec<Id> = Vec::with_capacity(goals.len());
        let mut wakes = Vec::with_capacity(goals.len());
        let mut index = BTreeMap::new();
        for id in goals {
            if index.contains_key(&id) {
                continue;
            }
            wakes.push(prior.remove(&id).unwrap_or_default().restored(now, &cfg));
            index.insert(id.clone(), order.len());
            order.push(id);
        }
        Ok(ServiceScheduler {
            cfg,
            order,
            wakes,
            index,
            now,
            phase: ServicePhase::Running,
            sweep: SweepSlot::Waiting(now),
            outcomes: BTreeMap::new(),
            written: None,
            hints_queued: false,
            sweep_count: 0,
            sweep_errors: 0,
            last_error: None,
            last_sweep_at: None,
        })
    }

    /// The last outcomes of the goals' ticks a previous daemon persisted (for status readers
    /// until each goal is ticked again); outcomes of goals not enrolled are dropped.
    pub fn restore_outcomes(&mut self, mut outcomes: BTreeMap<Id, String>) {
        outcomes.retain(|id, _| self.index.contains_key(id));
        self.outcomes = outcomes;
    }

    /// Queues the sweep if its time came at `now`. Harmless when early, late or repeated.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        if self.phase == ServicePhase::Stopped {
            return;
        }
        if matches!(self.sweep, SweepSlot::Waiting(at) if at <= self.now) {
            self.sweep = SweepSlot::Queued;
        }
    }

    /// The next effect to execute: the hints of the sweep that just ended, then a due sweep.
    /// Handing out [`ServiceEffect::WriteHints`] counts the current hints as written.
    pub fn poll_effect(&mut self) -> Option<ServiceEffect> {
        if std::mem::take(&mut self.hints_queued) {
            self.written = Some((self.wakes.clone(), self.outcomes.clone()));
            return Some(ServiceEffect::WriteHints);
        }
        if self.sweep == SweepSlot::Queued {
            self.sweep = SweepSlot::Running(self.now);
            return Some(ServiceEffect::Sweep);
        }
        None
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called: the next sweep;
    /// `None` while one is queued or running (it has no deadline of its own) and once stopped.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep_at()
    }

    /// The write handed out with the last [`ServiceEffect::WriteHints`] failed: the hints count
    /// as unwritten, and the next sweep's end queues them again.
    pub fn hints_lost(&mut self) {
        self.written = None;
    }

    /// Records what a goal's tick came to (`"<stop reason>: <detail>"`), for the hints.
    pub fn record_outcome(&mut self, id: &Id, outcome: String) {
        if self.index.contains_key(id) {
            self.outcomes.insert(id.clone(), outcome);
        }
    }

    /// Reports the end of the running sweep at `now`. Success schedules the next sweep
    /// `wake_interval` from `now` and forgets earlier sweep errors. An error that no single
    /// goal owns schedules it after the *exponential* backoff of consecutive sweep errors,
    /// capped at `error_backoff_max` (harnery sleeps the flat cap, which stalls every goal for
    /// five minutes after one transient error, §9.12). A report with no sweep running is
    /// ignored.
    pub fn sweep_finished(&mut self, now: Instant, result: Result<(), String>) {
        self.advance(now);
        if !matches!(self.sweep, SweepSlot::Running(_)) {
            return;
        }
        let delay = match result {
            Ok(()) => {
                self.sweep_count = self.sweep_count.saturating_add(1);
                self.sweep_errors = 0;
                self.last_error = None;
                self.cfg.wake_interval
            }
            Err(error) => {
                self.sweep_errors = self.sweep_errors.saturating_add(1);
                self.last_error = Some(error);
                self.cfg.backoff(self.sweep_errors)
            }
        };
        self.last_sweep_at = Some(self.now);
        // Written when they change, not every sweep: an idle service writes only its heartbeat.
        let now_hints = (&self.wakes, &self.outcomes);
        self.hints_queued = self.written.as_ref().map(|(w, o)| (w, o)) != Some(now_hints);
        if self.phase == ServicePhase::Stopping {
            self.stop_now();
        } else {
            self.sweep = SweepSlot::Waiting(self.now.saturating_add(delay));
        }
    }

    /// Stores the new record of an enrolled goal, normally from [`decide`], [`after_tick_ok`]
    /// or [`after_tick_err`] at `now`. Refuses, changing nothing, a goal that is not enrolled, an
    /// inconsistent record, or a backoff ending later than `now` plus the cap.
    pub fn record_goal(&mut self, now: Instant, id: &Id, wake: GoalWake) -> Result<(), String> {
        let Some(&at) = self.index.get(id) else {
            self.advance(now);
            return Err(format!("goal {id} is not enrolled"));
        };
        self.record_goal_at(now, at, wake)
    }

    /// [`record_goal`](Self::record_goal) by the goal's position in [`goals`](Self::goals),
    /// which a sweep walks without looking ids up.
    pub fn record_goal_at(
        &mut self,
        now: Instant,
        at: usize,
        wake: GoalWake,
    ) -> Result<(), String> {
        self.advance(now);
        let Some(id) = self.order.get(at) else {
            return Err(format!("no goal at position {at}"));
        };
        wake.check().map_err(|e| format!("goal {id}: {e}"))?;
        self.check_cap(id, &wake)?;
        self.wakes[at] = wake;
        Ok(())
    }

    /// A hint at `now` that something durable may have changed (a file-change notification):
    /// brings the next sweep forward to `now`, but to no earlier than [`EARLY_WAKE_GAP`] after
    /// the last sweep ended, so a burst of changes costs one sweep. Ignored while a sweep is
    /// queued or running, after a sweep-level error (its backoff stands), and once stopping.
    /// The poll at `wake_interval` stays the guarantee: a lost hint costs only latency.
    pub fn wake_early(&mut self, now: Instant) {
        self.advance(now);
        if self.sweep_errors > 0 || self.phase != ServicePhase::Running {
            return;
        }
        if let SweepSlot::Waiting(at) = self.sweep {
            let gap_end = self.last_sweep_at.map_or(self.now, |t| t.saturating_add(EARLY_WAKE_GAP));
            self.sweep = SweepSlot::Waiting(at.min(gap_end.max(self.now)));
        }
    }

    /// A watched file changed at `seen_at`, reported at `now`: [`wake_early`](Self::wake_early)
    /// unless the change is old news, seen before the last sweep ended (that sweep made it
    /// itself, or read after it).
    pub fn file_changed(&mut self, now: Instant, seen_at: Instant) {
        if self.last_sweep_at.is_some_and(|ended| seen_at <= ended) {
            self.advance(now);
            return;
        }
        self.wake_early(now);
    }

    /// Asks the service to stop at `now`: at once between sweeps (dropping a sweep not yet
    /// polled), else after the running sweep finishes. Repeating it is harmless.
    pub fn request_stop(&mut self, now: Instant) {
        self.advance(now);
        match (self.phase, self.sweep) {
            (ServicePhase::Stopped, _) => {}
            (_, SweepSlot::Running(_)) => self.phase = ServicePhase::Stopping,
            _ => self.stop_now(),
        }
    }

    fn stop_now(&mut self) {
        self.phase = ServicePhase::Stopped;
        self.sweep = SweepSlot::Off;
    }

    fn advance(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// The configuration in force.
    pub fn config(&self) -> &WakeConfig {
        &self.cfg
    }

    /// The enrolled goals in sweep order.
    pub fn goals(&self) -> &[Id] {
        &self.order
    }

    /// The current record of an enrolled goal.
    pub fn goal(&self, id: &Id) -> Option<&GoalWake> {
        self.index.get(id).map(|&at| &self.wakes[at])
    }

    /// The record of the goal at position `at` of [`goals`](Self::goals).
    pub fn goal_at(&self, at: usize) -> Option<&GoalWake> {
        self.wakes.get(at)
    }

    /// Every enrolled goal's record, as persisted in the runtime hints.
    pub fn wakes(&self) -> BTreeMap<Id, GoalWake> {
        self.order.iter().cloned().zip(self.wakes.iter().cloned()).collect()
    }

    /// Running, stopping or stopped.
    pub fn phase(&self) -> ServicePhase {
        self.phase
    }

    /// Sweeps that finished successfully.
    pub fn sweep_count(&self) -> u64 {
        self.sweep_count
    }

    /// Sweep-level errors in a row since the last successful sweep.
    pub fn sweep_errors(&self) -> u32 {
        self.sweep_errors
    }

    /// The last sweep-level error, cleared by a successful sweep.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// When the last sweep finished, successfully or not.
    pub fn last_sweep_at(&self) -> Option<Instant> {
        self.last_sweep_at
    }

    /// When the next sweep is due; `None` while one is queued or running, or once stopped.
    pub fn next_sweep_at(&self) -> Option<Instant> {
        match self.sweep {
            SweepSlot::Waiting(at) => Some(at),
            _ => None,
        }
    }

    /// What each goal's last tick came to.
    pub fn outcomes(&self) -> &BTreeMap<Id, String> {
        &self.outcomes
    }

    /// Whether a sweep is queued or running.
    pub fn is_sweeping(&self) -> bool {
        matches!(self.sweep, SweepSlot::Queued | SweepSlot::Running(_))
    }

    /// Checks the machine's invariants: the goals and their records agree and each record is
    /// consistent with a backoff within the cap; deadlines exist exactly when not stopped and
    /// lie no further ahead than their interval; the phase matches the sweep; a sweep error is
    /// remembered exactly while errors are counted.
    pub fn check(&self) -> Result<(), String> {
        self.check_goals()?;
        self.check_phase()?;
        self.check_deadlines()?;
        if (self.sweep_errors == 0) != self.last_error.is_none() {
            return Err(format!("{} sweep errors, last {:?}", self.sweep_errors, self.last_error));
        }
        Ok(())
    }

    fn check_goals(&self) -> Result<(), String> {
        if self.order.len() != self.wakes.len()
            || self.order.len() != self.index.len()
            || self.order.iter().enumerate().any(|(at, id)| self.index.get(id) != Some(&at))
        {
            return Err(format!("goal order {:?} disagrees with records", self.order));
        }
        for (id, wake) in self.order.iter().zip(&self.wakes) {
            wake.check().map_err(|e| format!("goal {id}: {e}"))?;
            self.check_cap(id, wake)?;
        }
        Ok(())
    }

    /// A backoff never ends later than the cap from now: the delay is never above the cap.
    fn check_cap(&self, id: &Id, wake: &GoalWake) -> Result<(), String> {
        match wake.next_wake_at {
            Some(at) if at.saturating_since(self.now) > self.cfg.error_backoff_max => {
                Err(format!("goal {id}: backoff until {at:?} exceeds the cap from {:?}", self.now))
            }
            _ => Ok(()),
        }
    }

    fn check_phase(&self) -> Result<(), String> {
        let stopped = self.phase == ServicePhase::Stopped;
        let consistent = match self.sweep {
            SweepSlot::Off => stopped,
            SweepSlot::Running(_) => !stopped,
            SweepSlot::Waiting(_) | SweepSlot::Queued => self.phase == ServicePhase::Running,
        };
        if !consistent {
            return Err(format!("phase {:?} with sweep {:?}", self.phase, self.sweep));
        }
        if let Some(id) = self.outcomes.keys().find(|id| !self.index.contains_key(*id)) {
            return Err(format!("an outcome for {id}, which is not enrolled"));
        }
        Ok(())
    }

    fn check_deadlines(&self) -> Result<(), String> {
        if let SweepSlot::Waiting(at) = self.sweep {
            let longest = self.cfg.wake_interval.max(self.cfg.error_backoff_max);
            if at.saturating_since(self.now) > longest {
                return Err(format!("sweep at {at:?} is more than {longest} after {:?}", self.now));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn t(n: u64) -> Instant {
        Instant::ZERO.saturating_add(ms(n))
    }

    fn fp(s: &str) -> Fingerprint {
        Fingerprint::new(s)
    }

    fn id(s: &str) -> Id {
        Id::new(s).unwrap()
    }

    fn backoff(errors: u32, observed: &str, until: Instant) -> GoalWake {
        GoalWake {
            state: WakeState::Backoff,
            consecutive_errors: errors,
            observed: Some(fp(observed)),
            next_wake_at: Some(until),
        }
    }

    fn drain(s: &mut ServiceScheduler) -> Vec<ServiceEffect> {
        std::iter::from_fn(|| s.poll_effect()).collect()
    }

    fn scheduler(goals: &[&str]) -> ServiceScheduler {
        let goals = goals.iter().map(|g| id(g)).collect();
        ServiceScheduler::new(WakeConfig::default(), goals, BTreeMap::new(), t(0)).unwrap()
    }

    /// A scheduler at t(0) whose first sweep has been handed to the driver.
    fn sweeping() -> ServiceScheduler {
        let mut s = scheduler(&["a"]);
        s.handle_timeout(t(0));
        assert_eq!(drain(&mut s), [ServiceEffect::Sweep]);
        s
    }

    // --- configuration ---

    #[test]
    fn default_config_is_harnerys_and_valid() {
        let c = WakeConfig::default();
        assert_eq!(c.wake_interval, ms(5_000));
        assert_eq!(c.heartbeat_interval, ms(2_000));
        assert_eq!(c.error_backoff_base, ms(2_000));
        assert_eq!(c.error_backoff_max, ms(300_000));
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn validate_names_the_field_out_of_range() {
        type Set = fn(&mut WakeConfig, Duration);
        let fields: [(&str, u64, Set); 4] = [
            ("wake_interval_ms", 3_600_000, |c, d| c.wake_interval = d),
            ("heartbeat_interval_ms", 60_000, |c, d| c.heartbeat_interval = d),
            ("error_backoff_base_ms", 3_600_000, |c, d| {
                c.error_backoff_base = d;
                c.error_backoff_max = ms(86_400_000);
            }),
            ("error_backoff_max_ms", 86_400_000, |c, d| {
                c.error_backoff_max = d;
                c.error_backoff_base = ms(1);
            }),
        ];
        for (name, max_ms, set) in fields {
            for (value, ok) in [(ms(0), false), (ms(1), true), (ms(max_ms), true)] {
                let mut c = WakeConfig::default();
                set(&mut c, value);
                assert_eq!(c.validate().is_ok(), ok, "{name} = {value}");
            }
            for bad in [Duration(999_999), ms(max_ms).saturating_add(Duration(1))] {
                let mut c = WakeConfig::default();
                set(&mut c, bad);
                let err = c.validate().unwrap_err();
                assert_eq!(err.field(), name);
                assert!(err.to_string().starts_with(name), "{err}");
            }
        }
    }

    #[test]
    fn validate_refuses_a_cap_below_the_base() {
        let c = WakeConfig { error_backoff_max: ms(1_999), ..WakeConfig::default() };
        let err = c.validate().unwrap_err();
        assert_eq!(err, WakeConfigError::BackoffMaxBelowBase { base: ms(2_000), max: ms(1_999) });
        assert_eq!(err.field(), "error_backoff_max_ms");
        let equal = WakeConfig { error_backoff_max: ms(2_000), ..WakeConfig::default() };
        assert_eq!(equal.validate(), Ok(()));
    }

    #[test]
    fn sub_millisecond_values_are_reported_exactly() {
        let c = WakeConfig { wake_interval: Duration(500), ..WakeConfig::default() };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "wake_interval_ms must be between 1ms and 3600s, not 500ns"
        );
    }

    // --- backoff_delay ---

    #[test]
    fn backoff_is_zero_without_errors_then_doubles_to_the_cap() {
        let (base, max) = (ms(2_000), ms(300_000));
        let delays: Vec<u64> = (0..11).map(|n| backoff_delay(base, max, n).as_millis()).collect();
        assert_eq!(
            delays,
            [0, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000]
        );
    }

    #[test]
    fn backoff_exponent_stops_at_its_bound() {
        let (base, max) = (ms(1), Duration::MAX);
        assert_eq!(backoff_delay(base, max, 21), ms(1 << 20));
        assert_eq!(backoff_delay(base, max, 22), ms(1 << 20));
        assert_eq!(backoff_delay(base, max, u32::MAX), ms(1 << 20));
    }

    #[test]
    fn backoff_saturates_on_huge_inputs() {
        assert_eq!(backoff_delay(Duration::MAX, Duration::MAX, u32::MAX), Duration::MAX);
        assert_eq!(backoff_delay(Duration(1 << 63), Duration::MAX, 1), Duration(1 << 63));
        assert_eq!(backoff_delay(Duration(1 << 63), Duration::MAX, 2), Duration::MAX);
        assert_eq!(backoff_delay(Duration::MAX, ms(7), 1), ms(7));
    }

    // --- decide ---

    #[test]
    fn a_ready_idle_goal_is_ticked_every_time() {
        let prev = after_tick_ok(fp("a"), true);
        assert_eq!(decide(&prev, &fp("a"), true, t(0)), SweepDecision::Tick);
        assert_eq!(decide(&GoalWake::default(), &fp("a"), true, t(0)), SweepDecision::Tick);
    }

    #[test]
    fn a_goal_that_is_not_ready_becomes_awaiting_with_errors_forgiven() {
        let prev = backoff(4, "a", t(10));
        let expected = GoalWake::awaiting(fp("a"));
        assert_eq!(decide(&prev, &fp("a"), false, t(10)), SweepDecision::BecomeAwaiting(expected));
        let d = decide(&GoalWake::default(), &fp("b"), false, t(0));
        assert_eq!(d, SweepDecision::BecomeAwaiting(GoalWake::awaiting(fp("b"))));
    }

    #[test]
    fn backoff_skips_until_its_deadline_then_ticks() {
        let prev = backoff(1, "a", t(10));
        let skip = SweepDecision::Skip(SkipReason::BackoffNotElapsed { until: t(10) });
        assert_eq!(decide(&prev, &fp("a"), true, t(9)), skip);
        assert_eq!(decide(&prev, &fp("a"), true, t(10)), SweepDecision::Tick);
        assert_eq!(decide(&prev, &fp("a"), true, t(11)), SweepDecision::Tick);
    }

    #[test]
    fn a_changed_fingerprint_bypasses_backoff() {
        let prev = backoff(3, "a", t(1_000));
        assert_eq!(decide(&prev, &fp("b"), true, t(0)), SweepDecision::Tick);
        let d = decide(&prev, &fp("b"), false, t(0));
        assert_eq!(d, SweepDecision::BecomeAwaiting(GoalWake::awaiting(fp("b"))));
    }

    #[test]
    fn an_unchanged_awaiting_goal_costs_no_tick_even_if_it_claims_ready() {
        let prev = GoalWake::awaiting(fp("a"));
        assert_eq!(decide(&prev, &fp("a"), true, t(0)), SweepDecision::Skip(SkipReason::Unchanged));
        assert_eq!(
            decide(&prev, &fp("a"), false, t(0)),
            SweepDecision::Skip(SkipReason::Unchanged)
        );
    }

    #[test]
    fn a_changed_fingerprint_bypasses_quiescence() {
        let prev = GoalWake::awaiting(fp("a"));
        assert_eq!(decide(&prev, &fp("b"), true, t(0)), SweepDecision::Tick);
        let d = decide(&prev, &fp("b"), false, t(0));
        assert_eq!(d, SweepDecision::BecomeAwaiting(GoalWake::awaiting(fp("b"))));
    }

    #[test]
    fn inconsistent_records_fall_on_the_side_of_reading_again() {
        let no_deadline = GoalWake { next_wake_at: None, ..backoff(1, "a", t(0)) };
        assert_eq!(decide(&no_deadline, &fp("a"), true, t(0)), SweepDecision::Tick);
        let blind = GoalWake { observed: None, ..GoalWake::awaiting(fp("a")) };
        assert_eq!(decide(&blind, &fp("a"), true, t(0)), SweepDecision::Tick);
        // A backoff with no fingerprint cannot be "changed", so it still waits its delay.
        let unseen = GoalWake { observed: None, ..backoff(1, "a", t(5)) };
        assert!(matches!(decide(&unseen, &fp("b"), true, t(0)), SweepDecision::Skip(_)));
    }

    // --- after a tick ---

    #[test]
    fn a_successful_tick_forgives_errors() {
        let idle = after_tick_ok(fp("b"), true);
        assert_eq!(idle, GoalWake { observed: Some(fp("b")), ..GoalWake::default() });
        assert_eq!(after_tick_ok(fp("c"), false), GoalWake::awaiting(fp("c")));
        assert_eq!(idle.check(), Ok(()));
    }

    #[test]
    fn a_failed_tick_backs_off_exponentially_to_the_cap() {
        let cfg = WakeConfig::default();
        let mut wake = GoalWake::default();
        let mut delays = Vec::new();
        for _ in 0..10 {
            wake = after_tick_err(&wake, fp("a"), t(1_000), &cfg);
            assert_eq!(wake.check(), Ok(()));
            delays.push(wake.next_wake_at.unwrap().saturating_since(t(1_000)).as_millis());
        }
        assert_eq!(wake.consecutive_errors, 10);
        assert_eq!(delays[..3], [2_000, 4_000, 8_000]);
        assert_eq!(delays[8..], [300_000, 300_000]);
    }

    #[test]
    fn the_error_count_saturates() {
        let prev = backoff(u32::MAX, "a", t(0));
        let next = after_tick_err(&prev, fp("b"), t(0), &WakeConfig::default());
        assert_eq!(next.consecutive_errors, u32::MAX);
        assert_eq!(next.observed, Some(fp("b")));
    }

    #[test]
    fn records_serialize_in_snake_case_and_round_trip() {
        let wake = GoalWake::awaiting(fp("ab12"));
        let value = serde_json::to_value(&wake).unwrap();
        let expected = json!({"state": "awaiting_change", "consecutive_errors": 0,
            "observed": fp("ab12").to_hex(), "next_wake_at": null});
        assert_eq!(value, expected);
        let b = backoff(2, "ff", Instant(7));
        let text = serde_json::to_string(&b).unwrap();
        assert!(text.contains("\"backoff\""), "{text}");
        assert_eq!(serde_json::from_str::<GoalWake>(&text).unwrap(), b);
        let short = json!({"state": "idle", "consecutive_errors": 0, "observed": "ab12",
            "next_wake_at": null});
        assert!(serde_json::from_value::<GoalWake>(short).is_err(), "not 32 hex digits");
    }

    #[test]
    fn check_rejects_inconsistent_records() {
        let bad = [
            GoalWake { consecutive_errors: 1, ..GoalWake::default() },
            GoalWake { next_wake_at: Some(t(1)), ..GoalWake::default() },
            GoalWake { consecutive_errors: 0, ..backoff(1, "a", t(1)) },
            GoalWake { next_wake_at: None, ..backoff(1, "a", t(1)) },
            GoalWake { observed: None, ..GoalWake::awaiting(fp("a")) },
        ];
        for wake in bad {
            assert!(wake.check().is_err(), "{wake:?}");
        }
    }

    // --- scheduler ---

    #[test]
    fn a_new_service_sweeps_at_once() {
        let mut s = scheduler(&["a"]);
        assert_eq!(s.poll_timeout(), Some(t(0)));
        assert_eq!(s.check(), Ok(()));
        s.handle_timeout(t(0));
        assert_eq!(drain(&mut s), [ServiceEffect::Sweep]);
        assert!(s.is_sweeping());
        assert_eq!(s.poll_timeout(), None, "a running sweep has no deadline of its own");
    }

    #[test]
    fn early_late_and_repeated_wakes_during_a_sweep_do_nothing() {
        let mut s = sweeping();
        for at in [0, 1_999, 11_000, 11_000] {
            s.handle_timeout(t(at));
            assert!(drain(&mut s).is_empty());
        }
    }

    #[test]
    fn the_hints_are_written_after_the_first_sweep_then_only_when_they_change() {
        let mut s = sweeping();
        s.sweep_finished(t(10), Ok(()));
        assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "nothing written yet");
        let next_sweep = |s: &mut ServiceScheduler| {
            let at = s.next_sweep_at().expect("waiting");
            s.handle_timeout(at);
            assert_eq!(drain(s), [ServiceEffect::Sweep]);
            at.saturating_add(ms(10))
        };
        for _ in 0..3 {
            let end = next_sweep(&mut s);
            s.sweep_finished(end, Ok(()));
            assert!(drain(&mut s).is_empty(), "an idle service writes no hints");
        }
        let end = next_sweep(&mut s);
        s.record_outcome(&id("a"), "no_progress: nothing to do".into());
        s.record_outcome(&id("ghost"), "never enrolled".into());
        s.sweep_finished(end, Ok(()));
        assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "an outcome changed");
        assert_eq!(s.outcomes().len(), 1, "only enrolled goals have outcomes");
        s.hints_lost();
        let end = next_sweep(&mut s);
        s.sweep_finished(end, Ok(()));
        assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "a lost write is tried again");
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_file_change_seen_before_the_last_sweep_ended_is_old_news() {
        let mut s = sweeping();
        s.sweep_finished(t(1_000), Ok(()));
        drain(&mut s);
        assert_eq!(s.next_sweep_at(), Some(t(6_000)));
        s.file_changed(t(2_000), t(900));
        assert_eq!(s.next_sweep_at(), Some(t(6_000)), "the sweep made it, or read after it");
        s.file_changed(t(2_000), t(1_000));
        assert_eq!(s.next_sweep_at(), Some(t(6_000)), "seen as the sweep ended");
        s.file_changed(t(2_000), t(1_001));
        assert_eq!(s.next_sweep_at(), Some(t(2_000)), "a change after the sweep wakes it early");
    }

    #[test]
    fn outcomes_of_goals_no_longer_enrolled_are_dropped_on_restore() {
        let mut s = scheduler(&["a"]);
        let prior = [("a", "succeeded: done"), ("gone", "blocked: x")];
        s.restore_outcomes(prior.iter().map(|(g, o)| (id(g), o.to_string())).collect());
        assert_eq!(s.outcomes().keys().collect::<Vec<_>>(), [&id("a")]);
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn an_early_wake_brings_the_sweep_forward_but_not_closer_than_the_gap() {
        let mut s = sweeping();
        s.wake_early(t(10));
        assert!(s.is_sweeping(), "a hint during a sweep changes nothing");
        s.sweep_finished(t(1_000), Ok(()));
        assert_eq!(s.next_sweep_at(), Some(t(6_000)));
        s.wake_early(t(1_100));
        assert_eq!(s.next_sweep_at(), Some(t(1_250)), "not sooner than the gap");
        s.wake_early(t(3_000));
        assert_eq!(s.next_sweep_at(), Some(t(1_250)), "repeating it never delays");
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn an_early_wake_leaves_a_sweep_level_backoff_alone() {
        let mut s = sweeping();
        s.sweep_finished(t(1_000), Err("disk".into()));
        let backoff = s.next_sweep_at();
        s.wake_early(t(1_500));
        assert_eq!(s.next_sweep_at(), backoff);
    }

    #[test]
    fn the_next_sweep_waits_the_wake_interval_after_the_last_finished() {
        let mut s = sweeping();
        s.sweep_finished(t(3_000), Ok(()));
        assert_eq!((s.sweep_count(), s.last_sweep_at()), (1, Some(t(3_000))));
        assert_eq!(s.next_sweep_at(), Some(t(8_000)));
        assert_eq!(drain(&mut s), [ServiceEffect::WriteHints]);
        s.handle_timeout(t(7_999));
        assert!(drain(&mut s).is_empty());
        s.handle_timeout(t(8_000));
        assert_eq!(drain(&mut s), [ServiceEffect::Sweep]);
    }

    #[test]
    fn sweep_errors_back_off_exponentially_and_success_forgets_them() {
        let mut s = sweeping();
        let mut finish = 0;
        for expected in [2_000, 4_000, 8_000] {
            finish += 100;
            s.sweep_finished(t(finish), Err("runtime.json: EIO".into()));
            assert_eq!(s.next_sweep_at(), Some(t(finish + expected)));
            assert_eq!(s.last_error(), Some("runtime.json: EIO"));
            finish += expected;
            s.handle_timeout(t(finish));
            assert!(drain(&mut s).contains(&ServiceEffect::Sweep));
        }
        assert_eq!((s.sweep_errors(), s.sweep_count()), (3, 0));
        s.sweep_finished(t(finish), Ok(()));
        assert_eq!((s.sweep_errors(), s.last_error(), s.sweep_count()), (0, None, 1));
        assert_eq!(s.next_sweep_at(), Some(t(finish + 5_000)));
    }

    #[test]
    fn a_stray_sweep_report_is_ignored() {
        let mut s = scheduler(&["a"]);
        s.sweep_finished(t(10), Ok(()));
        assert_eq!((s.sweep_count(), s.next_sweep_at()), (0, Some(t(0))));
        s.handle_timeout(t(0));
        s.sweep_finished(t(10), Err("x".into()));
        assert_eq!(s.sweep_errors(), 0, "a sweep not yet polled has not started");
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_stop_between_sweeps_is_immediate() {
        let mut s = sweeping();
        s.sweep_finished(t(1), Ok(()));
        assert_eq!(drain(&mut s), [ServiceEffect::WriteHints]);
        s.request_stop(t(2));
        assert_eq!(s.phase(), ServicePhase::Stopped);
        assert_eq!(s.poll_timeout(), None);
        s.handle_timeout(t(100_000));
        assert!(drain(&mut s).is_empty());
        s.request_stop(t(100_001));
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_stop_drops_a_sweep_not_yet_handed_out() {
        let mut s = scheduler(&["a"]);
        s.handle_timeout(t(0));
        s.request_stop(t(0));
        assert_eq!(s.phase(), ServicePhase::Stopped);
        assert!(drain(&mut s).is_empty());
    }

    #[test]
    fn a_stop_during_a_sweep_waits_for_it_then_writes_its_hints() {
        let mut s = sweeping();
        s.request_stop(t(1));
        assert_eq!(s.phase(), ServicePhase::Stopping);
        s.handle_timeout(t(2_000));
        assert!(drain(&mut s).is_empty());
        s.sweep_finished(t(2_500), Ok(()));
        assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "the last sweep's hints");
        assert_eq!((s.phase(), s.sweep_count()), (ServicePhase::Stopped, 1));
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn new_restores_prior_records_as_hints() {
        let cfg = WakeConfig::default();
        let prior = BTreeMap::from([
            (id("gone"), backoff(1, "x", t(1))),
            (id("far"), backoff(2, "a", t(999_999_999))),
            (id("lost"), GoalWake { next_wake_at: None, ..backoff(1, "b", t(0)) }),
            (id("blind"), GoalWake { observed: None, ..GoalWake::awaiting(fp("c")) }),
            (id("quiet"), GoalWake::awaiting(fp("d"))),
        ]);
        let goals = ["far", "lost", "blind", "quiet", "new", "far"].map(id).to_vec();
        let s = ServiceScheduler::new(cfg, goals, prior, t(100)).unwrap();
        assert_eq!(s.goals(), ["far", "lost", "blind", "quiet", "new"].map(id));
        assert_eq!(s.goal(&id("gone")), None);
        assert_eq!(s.goal(&id("far")), Some(&backoff(2, "a", t(4_100))), "clamped to its delay");
        assert_eq!(s.goal(&id("lost")), Some(&backoff(1, "b", t(100))), "due at once");
        assert_eq!(s.goal(&id("blind")), Some(&GoalWake::default()));
        assert_eq!(s.goal(&id("quiet")), Some(&GoalWake::awaiting(fp("d"))));
        assert_eq!(s.goal(&id("new")), Some(&GoalWake::default()));
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn new_refuses_an_invalid_config() {
        let cfg = WakeConfig { heartbeat_interval: Duration::ZERO, ..WakeConfig::default() };
        let err = ServiceScheduler::new(cfg, vec![id("a")], BTreeMap::new(), t(0)).unwrap_err();
        assert_eq!(err.field(), "heartbeat_interval_ms");
    }

    #[test]
    fn record_goal_stores_tick_results_and_refuses_bad_ones() {
        let mut s = sweeping();
        let a = id("a");
        let prev = s.goal(&a).unwrap().clone();
        let failed = after_tick_err(&prev, fp("a"), t(50), s.config());
        assert_eq!(s.record_goal(t(50), &a, failed.clone()), Ok(()));
        assert_eq!(s.goal(&a), Some(&failed));
        assert!(s.record_goal(t(50), &id("b"), GoalWake::default()).is_err());
        let inconsistent = GoalWake { next_wake_at: None, ..failed.clone() };
        assert!(s.record_goal(t(50), &a, inconsistent).is_err());
        let beyond = backoff(1, "a", t(50 + 300_001));
        assert!(s.record_goal(t(50), &a, beyond).is_err());
        assert_eq!(s.goal(&a), Some(&failed), "a refusal changes nothing");
        assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn a_sweep_driven_by_decide_quiesces_and_wakes_on_change() {
        let mut s = sweeping();
        let a = id("a");
        let prev = s.goal(&a).unwrap().clone();
        let SweepDecision::BecomeAwaiting(wake) = decide(&prev, &fp("1"), false, t(0)) else {
            panic!("not ready goal must become awaiting");
        };
        s.record_goal(t(0), &a, wake).unwrap();
        let prev = s.goal(&a).unwrap().clone();
        assert_eq!(decide(&prev, &fp("1"), true, t(9)), SweepDecision::Skip(SkipReason::Unchanged));
        assert_eq!(decide(&prev, &fp("2"), true, t(9)), SweepDecision::Tick);
    }

    // --- properties ---

    fn wake_strategy() -> impl Strategy<Value = GoalWake> {
        let state = prop_oneof![
            Just(WakeState::Idle),
            Just(WakeState::Backoff),
            Just(WakeState::AwaitingChange)
        ];
        let observed = proptest::option::of("[abc]".prop_map(Fingerprint::new));
        let at = proptest::option::of(any::<u64>().prop_map(Instant));
        (state, any::<u32>(), observed, at).prop_map(|(state, consecutive_errors, observed, at)| {
            GoalWake { state, consecutive_errors, observed, next_wake_at: at }
        })
    }

    fn config_strategy() -> impl Strategy<Value = WakeConfig> {
        (1u64..50, 1u64..20, 1u64..20, 0u64..200).prop_map(|(wake, beat, base, extra)| WakeConfig {
            wake_interval: ms(wake),
            heartbeat_interval: ms(beat),
            error_backoff_base: ms(base),
            error_backoff_max: ms(base + extra),
        })
    }

    proptest! {
        #[test]
        fn backoff_never_exceeds_the_cap(base: u64, max: u64, n: u32) {
            let d = backoff_delay(Duration(base), Duration(max), n);
            prop_assert!(d <= Duration(max));
            if n == 0 {
                prop_assert_eq!(d, Duration::ZERO);
            }
        }

        #[test]
        fn backoff_never_decreases_with_more_errors(base: u64, max: u64, n in 0u32..u32::MAX) {
            let (base, max) = (Duration(base), Duration(max));
            prop_assert!(backoff_delay(base, max, n) <= backoff_delay(base, max, n + 1));
        }

        #[test]
        fn one_error_waits_exactly_the_base(
            (base, max) in any::<u64>().prop_flat_map(|max| (0..=max, Just(max)))
        ) {
            prop_assert_eq!(backoff_delay(Duration(base), Duration(max), 1), Duration(base));
        }

        #[test]
        fn a_changed_fingerprint_is_never_skipped(
            prev in wake_strategy(), seen in "[abc]", ready: bool, now: u64
        ) {
            let current = Fingerprint::new(format!("{seen}'"));
            let prev = GoalWake { observed: Some(Fingerprint::new(seen)), ..prev };
            let d = decide(&prev, &current, ready, Instant(now));
            prop_assert!(!matches!(d, SweepDecision::Skip(_)), "{:?}", d);
        }

        #[test]
        fn an_unchanged_awaiting_goal_is_never_ticked(
            prev in wake_strategy(), seen in "[abc]", ready: bool, now: u64
        ) {
            let current = Fingerprint::new(seen);
            let prev = GoalWake {
                state: WakeState::AwaitingChange,
                observed: Some(current),
                ..prev
            };
            let d = decide(&prev, &current, ready, Instant(now));
            prop_assert_ne!(d, SweepDecision::Tick);
        }

        #[test]
        fn decisions_and_tick_results_are_consistent_records(
            prev in wake_strategy(), current in "[abc]", ready: bool, now: u64,
            cfg in config_strategy()
        ) {
            let (current, now) = (Fingerprint::new(current), Instant(now));
            if let SweepDecision::BecomeAwaiting(w) = decide(&prev, &current, ready, now) {
                prop_assert_eq!(w.check(), Ok(()));
                prop_assert_eq!(w.observed.as_ref(), Some(&current));
            }
            let err = after_tick_err(&prev, current, now, &cfg);
            prop_assert_eq!(err.check(), Ok(()));
            let until = err.next_wake_at.unwrap_or(now);
            prop_assert!(until.saturating_since(now) <= cfg.error_backoff_max);
            prop_assert_eq!(after_tick_ok(current, ready).check(), Ok(()));
        }

        #[test]
        fn any_prior_record_is_restored_consistently(
            prior in proptest::collection::vec(wake_strategy(), 1..4), now: u64,
            cfg in config_strategy()
        ) {
            let goals: Vec<Id> = (0..prior.len()).map(|i| id(&format!("g{i}"))).collect();
            let prior = goals.iter().cloned().zip(prior).collect();
            let s = ServiceScheduler::new(cfg, goals, prior, Instant(now)).unwrap();
            prop_assert_eq!(s.check(), Ok(()));
        }

        #[test]
        fn the_scheduler_survives_any_schedule_of_wakes(
            cfg in config_strategy(),
            start: u32,
            ops in proptest::collection::vec(op_strategy(), 1..120),
        ) {
            drive(cfg, Instant(u64::from(start)), ops)?;
        }
    }

    /// When the driver wakes, relative to the machine's next deadline.
    #[derive(Clone, Debug)]
    enum When {
        Early,
        Exact,
        Late(u64),
        Repeat,
    }

    #[derive(Clone, Debug)]
    enum Op {
        Timeout(When),
        /// A sweep report: whether it succeeded, whether its hints' write is lost.
        Finish(When, bool, bool),
        /// A file change seen this many nanoseconds before it is reported.
        Changed(When, u64),
        Record(When, usize, u8, u8),
        Stop(When),
        WakeEarly(When),
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        let when = prop_oneof![
            Just(When::Early),
            Just(When::Exact),
            (1u64..300_000_000).prop_map(When::Late),
            Just(When::Repeat),
        ];
        prop_oneof![
            12 => when.clone().prop_map(Op::Timeout),
            4 => (when.clone(), any::<bool>(), any::<bool>())
                .prop_map(|(w, ok, lost)| Op::Finish(w, ok, lost)),
            2 => (when.clone(), 0u64..20_000_000_000).prop_map(|(w, back)| Op::Changed(w, back)),
            4 => (when.clone(), 0usize..3, 0u8..3, 0u8..3)
                .prop_map(|(w, g, kind, f)| Op::Record(w, g, kind, f)),
            2 => when.clone().prop_map(Op::WakeEarly),
            1 => when.prop_map(Op::Stop),
        ]
    }

    fn next_time(now: Instant, deadline: Option<Instant>, when: &When) -> Instant {
        let target = deadline.unwrap_or(now).max(now);
        match when {
            When::Repeat => now,
            When::Exact => target,
            When::Early => Instant(target.0.saturating_sub(1)).max(now),
            When::Late(ns) => target.saturating_add(Duration(*ns)),
        }
    }

    /// A test driver: plays operations against a scheduler as the service loop would.
    struct Driver {
        cfg: WakeConfig,
        goals: Vec<Id>,
        s: ServiceScheduler,
        now: Instant,
        sweeping: bool,
        /// The hints last handed out to be written, as the model sees them.
        written: Option<BTreeMap<Id, GoalWake>>,
    }

    impl Driver {
        /// Wakes the machine and checks that effects come only once a deadline passed, and
        /// that a sweep is handed out only when none runs.
        fn timeout(&mut self, w: &When) -> Result<(), TestCaseError> {
            let now = next_time(self.now, self.s.poll_timeout(), w);
            let deadline = self.s.poll_timeout();
            self.s.handle_timeout(now);
            let effects = drain(&mut self.s);
            if !effects.is_empty() {
                prop_assert!(deadline.is_some_and(|d| d <= now));
                prop_assert_eq!(&effects, &[ServiceEffect::Sweep]);
                prop_assert!(!self.sweeping, "a second sweep while one runs");
                self.sweeping = true;
            }
            self.now = now;
            Ok(())
        }

        /// Reports a sweep (or a stray report) and checks the next sweep's delay, and that the
        /// hints are handed out exactly when they differ from the last ones written.
        fn finish(&mut self, w: &When, ok: bool, lost: bool) -> Result<(), TestCaseError> {
            self.now = next_time(self.now, None, w);
            let result = if ok { Ok(()) } else { Err("boom".into()) };
            self.s.sweep_finished(self.now, result);
            if self.sweeping && self.s.phase() == ServicePhase::Running {
                let errors = self.s.sweep_errors();
                let delay = if ok { self.cfg.wake_interval } else { self.cfg.backoff(errors) };
                prop_assert_eq!(self.s.next_sweep_at(), Some(self.now.saturating_add(delay)));
            }
            let effects = drain(&mut self.s);
            let changed = self.written.as_ref() != Some(&self.s.wakes());
            if self.sweeping && changed {
                prop_assert_eq!(&effects, &[ServiceEffect::WriteHints]);
                self.written = Some(self.s.wakes());
                if lost {
                    self.s.hints_lost();
                    self.written = None;
                }
            } else {
                prop_assert!(effects.is_empty(), "hints written unchanged: {:?}", effects);
            }
            self.sweeping = false;
            Ok(())
        }

        /// A file change: old news (seen before the last sweep ended) changes nothing, a new
        /// one acts as an early wake.
        fn changed(&mut self, w: &When, back: u64) -> Result<(), TestCaseError> {
            self.now = next_time(self.now, None, w);
            let seen_at = Instant(self.now.0.saturating_sub(back));
            let before = self.s.next_sweep_at();
            let old_news = self.s.last_sweep_at().is_some_and(|ended| seen_at <= ended);
            self.s.file_changed(self.now, seen_at);
            if old_news {
                prop_assert_eq!(self.s.next_sweep_at(), before);
            }
            Ok(())
        }

        /// Records a tick result of one goal, as a sweep would.
        fn record(&mut self, w: &When, g: usize, kind: u8, f: u8) -> Result<(), TestCaseError> {
            self.now = next_time(self.now, None, w);
            let (goal, f) = (&self.goals[g], Fingerprint::new(f.to_string()));
            let prev = self.s.goal(goal).unwrap().clone();
            let wake = match kind {
                0 => after_tick_ok(f, true),
                1 => after_tick_ok(f, false),
                _ => after_tick_err(&prev, f, self.now, &self.cfg),
            };
            prop_assert_eq!(self.s.record_goal(self.now, goal, wake), Ok(()));
            Ok(())
        }

        /// An early-wake hint: never delays the sweep, never brings it closer than the gap
        /// after the last one, never bypasses a sweep-level backoff.
        fn wake_early(&mut self, w: &When) -> Result<(), TestCaseError> {
            self.now = next_time(self.now, None, w);
            let before = self.s.next_sweep_at();
            self.s.wake_early(self.now);
            let after = self.s.next_sweep_at();
            prop_assert_eq!(before.is_some(), after.is_some());
            if let (Some(b), Some(a)) = (before, after) {
                prop_assert!(a <= b, "a hint delayed the sweep");
                if self.s.sweep_errors() > 0 {
                    prop_assert_eq!(a, b);
                }
                if let Some(last) = self.s.last_sweep_at() {
                    prop_assert!(a >= last.saturating_add(EARLY_WAKE_GAP).min(b));
                }
            }
            Ok(())
        }

        fn stop(&mut self, w: &When) {
            self.now = next_time(self.now, None, w);
            self.s.request_stop(self.now);
            self.sweeping &= self.s.phase() == ServicePhase::Stopping;
        }

        /// What must hold after every step, whatever the step was.
        fn after_step(&mut self) -> Result<(), TestCaseError> {
            prop_assert!(drain(&mut self.s).is_empty(), "effects outside handle_timeout");
            prop_assert_eq!(self.s.check(), Ok(()));
            let stopped = self.s.phase() == ServicePhase::Stopped;
            prop_assert_eq!(self.s.poll_timeout().is_none(), stopped || self.s.is_sweeping());
            Ok(())
        }
    }

    /// Plays `ops` against a fresh scheduler, checking the driver's assertions at every step.
    fn drive(cfg: WakeConfig, start: Instant, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let goals: Vec<Id> = ["g0", "g1", "g2"].map(id).to_vec();
        let s = ServiceScheduler::new(cfg, goals.clone(), BTreeMap::new(), start).unwrap();
        let mut d = Driver { cfg, goals, s, now: start, sweeping: false, written: None };
        for op in ops {
            match op {
                Op::Timeout(w) => d.timeout(&w)?,
                Op::Finish(w, ok, lost) => d.finish(&w, ok, lost)?,
                Op::Changed(w, back) => d.changed(&w, back)?,
                Op::Record(w, g, kind, f) => d.record(&w, g, kind, f)?,
                Op::WakeEarly(w) => d.wake_early(&w)?,
                Op::Stop(w) => d.stop(&w),
            }
            d.after_step()?;
        }
        Ok(())
    }
}
