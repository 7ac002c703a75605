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

use crate::error::{InvariantError, RecordError};
use crate::ids::Id;
use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The shortest time between the end of a sweep and a sweep an early-wake hint brings forward.
pub(crate) const EARLY_WAKE_GAP: Duration = Duration::from_millis(250);

/// The largest exponent of the backoff: after 21 consecutive errors the delay stops doubling.
/// `2^20` times even a 1 ms base is over 17 minutes, so with valid settings the cap
/// (`error_backoff_max`) binds long before this does; the bound keeps the arithmetic small and
/// the schedule independent of how large an error count a corrupt hint claims.
pub(crate) const BACKOFF_EXPONENT_MAX: u32 = 20;

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
    pub(crate) fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 32 hex digits.
    pub(crate) fn from_hex(text: &str) -> Option<Fingerprint> {
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
pub(crate) fn backoff_delay(base: Duration, max: Duration, consecutive_errors: u32) -> Duration {
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
    pub fn check(&self) -> Result<(), InvariantError> {
        let backoff = self.state == WakeState::Backoff;
        let broken = |detail: String| Err(InvariantError::new(detail));
        if backoff != (self.consecutive_errors > 0) {
            return broken(format!("{:?} with {} errors", self.state, self.consecutive_errors));
        }
        if backoff != self.next_wake_at.is_some() {
            return broken(format!("{:?} with next_wake_at {:?}", self.state, self.next_wake_at));
        }
        if self.state == WakeState::AwaitingChange && self.observed.is_none() {
            return broken("awaiting_change without an observed fingerprint".into());
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
pub(crate) fn after_tick_ok(fp_after: Fingerprint, still_ready: bool) -> GoalWake {
    if still_ready {
        GoalWake { observed: Some(fp_after), ..GoalWake::default() }
    } else {
        GoalWake::awaiting(fp_after)
    }
}

/// The record after a tick that failed at `now`: one more consecutive error and a backoff
/// until `now + backoff_delay(..)`. `fp` is the goal's fingerprint re-read after the failure if
/// that works, else the one read before the tick; a later change of it ends the backoff early.
pub(crate) fn after_tick_err(
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
        self.debug_check();
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
    pub(crate) fn hints_lost(&mut self) {
        self.written = None;
    }

    /// Records what a goal's tick came to (`"<stop reason>: <detail>"`), for the hints.
    pub(crate) fn record_outcome(&mut self, id: &Id, outcome: String) {
        if self.index.contains_key(id) {
            self.outcomes.insert(id.clone(), outcome);
        }
    }

    /// A wake of the service's loop, the one order both drivers follow: a drain the watcher
    /// began (`draining`) is handed over first, then whatever is due is done.
    pub fn wake(&mut self, now: Instant, draining: bool) {
        if draining {
            self.request_stop(now);
        }
        self.handle_timeout(now);
    }

    /// The end of a sweep, the one order both drivers follow: a drain begun while it ran is
    /// handed over before its end, so the scheduler stops instead of waiting for another wake.
    pub(crate) fn sweep_ended(
        &mut self,
        now: Instant,
        draining: bool,
        result: Result<(), RecordError>,
    ) {
        if draining {
            self.request_stop(now);
        }
        self.sweep_finished(now, result);
    }

    /// Reports the end of the running sweep at `now`. Success schedules the next sweep
    /// `wake_interval` from `now` and forgets earlier sweep errors. An error that no single
    /// goal owns schedules it after the *exponential* backoff of consecutive sweep errors,
    /// capped at `error_backoff_max` (harnery sleeps the flat cap, which stalls every goal for
    /// five minutes after one transient error, §9.12). A report with no sweep running is
    /// ignored.
    pub(crate) fn sweep_finished(&mut self, now: Instant, result: Result<(), RecordError>) {
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
                self.last_error = Some(error.to_string());
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
        self.debug_check();
    }

    /// Stores the new record of an enrolled goal, normally from [`decide`], [`after_tick_ok`]
    /// or [`after_tick_err`] at `now`. Refuses, changing nothing, a goal that is not enrolled, an
    /// inconsistent record, or a backoff ending later than `now` plus the cap.
    pub(crate) fn record_goal(
        &mut self,
        now: Instant,
        id: &Id,
        wake: GoalWake,
    ) -> Result<(), RecordError> {
        let Some(&at) = self.index.get(id) else {
            self.advance(now);
            return Err(RecordError::refused(format!("goal {id} is not enrolled")));
        };
        self.record_goal_at(now, at, wake)
    }

    /// [`record_goal`](Self::record_goal) by the goal's position in [`goals`](Self::goals),
    /// which a sweep walks without looking ids up.
    pub(crate) fn record_goal_at(
        &mut self,
        now: Instant,
        at: usize,
        wake: GoalWake,
    ) -> Result<(), RecordError> {
        self.advance(now);
        let Some(id) = self.order.get(at) else {
            return Err(RecordError::refused(format!("no goal at position {at}")));
        };
        // A record that would break the machine's invariants is refused, changing nothing.
        wake.check().map_err(|e| RecordError::refused(format!("goal {id}: {e}")))?;
        self.check_cap(id, &wake).map_err(|e| RecordError::refused(e.to_string()))?;
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
        self.debug_check();
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
        self.debug_check();
    }

    fn stop_now(&mut self) {
        self.phase = ServicePhase::Stopped;
        self.sweep = SweepSlot::Off;
    }

    fn advance(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// In debug builds, the invariants after a transition (not after each goal's record,
    /// which a sweep of many goals makes one by one and which is checked on its own).
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if let Err(broken) = self.check() {
            panic!("service scheduler invariant broken: {broken}");
        }
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
    pub(crate) fn goal_at(&self, at: usize) -> Option<&GoalWake> {
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
    #[cfg(test)]
    pub(crate) fn is_sweeping(&self) -> bool {
        matches!(self.sweep, SweepSlot::Queued | SweepSlot::Running(_))
    }

    /// Sweep-level errors in a row since the last successful sweep.
    #[cfg(test)]
    pub(crate) fn sweep_errors(&self) -> u32 {
        self.sweep_errors
    }

    /// Checks the machine's invariants: the goals and their records agree and each record is
    /// consistent with a backoff within the cap; deadlines exist exactly when not stopped and
    /// lie no further ahead than their interval; the phase matches the sweep; a sweep error is
    /// remembered exactly while errors are counted.
    pub fn check(&self) -> Result<(), InvariantError> {
        self.check_goals()?;
        self.check_phase()?;
        self.check_deadlines()?;
        if (self.sweep_errors == 0) != self.last_error.is_none() {
            return Err(InvariantError::new(format!(
                "{} sweep errors, last {:?}",
                self.sweep_errors, self.last_error
            )));
        }
        Ok(())
    }

    fn check_goals(&self) -> Result<(), InvariantError> {
        if self.order.len() != self.wakes.len()
            || self.order.len() != self.index.len()
            || self.order.iter().enumerate().any(|(at, id)| self.index.get(id) != Some(&at))
        {
            return Err(InvariantError::new(format!(
                "goal order {:?} disagrees with records",
                self.order
            )));
        }
        for (id, wake) in self.order.iter().zip(&self.wakes) {
            wake.check().map_err(|e| InvariantError::new(format!("goal {id}: {e}")))?;
            self.check_cap(id, wake)?;
        }
        Ok(())
    }

    /// A backoff never ends later than the cap from now: the delay is never above the cap.
    fn check_cap(&self, id: &Id, wake: &GoalWake) -> Result<(), InvariantError> {
        match wake.next_wake_at {
            Some(at) if at.saturating_since(self.now) > self.cfg.error_backoff_max => {
                let detail =
                    format!("goal {id}: backoff until {at:?} exceeds the cap from {:?}", self.now);
                Err(InvariantError::new(detail))
            }
            _ => Ok(()),
        }
    }

    fn check_phase(&self) -> Result<(), InvariantError> {
        let stopped = self.phase == ServicePhase::Stopped;
        let consistent = match self.sweep {
            SweepSlot::Off => stopped,
            SweepSlot::Running(_) => !stopped,
            SweepSlot::Waiting(_) | SweepSlot::Queued => self.phase == ServicePhase::Running,
        };
        if !consistent {
            return Err(InvariantError::new(format!(
                "phase {:?} with sweep {:?}",
                self.phase, self.sweep
            )));
        }
        if let Some(id) = self.outcomes.keys().find(|id| !self.index.contains_key(*id)) {
            return Err(InvariantError::new(format!("an outcome for {id}, which is not enrolled")));
        }
        Ok(())
    }

    fn check_deadlines(&self) -> Result<(), InvariantError> {
        if let SweepSlot::Waiting(at) = self.sweep {
            let longest = self.cfg.wake_interval.max(self.cfg.error_backoff_max);
            if at.saturating_since(self.now) > longest {
                return Err(InvariantError::new(format!(
                    "sweep at {at:?} is more than {longest} after {:?}",
                    self.now
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
