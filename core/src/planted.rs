//! The deliberate bugs of test builds (the `planted-bugs` feature), one enum for every
//! machine and driver they break, so tests can prove the simulator's checker notices each
//! class. A release build has none.

/// A deliberate bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// The harness daemon queues spawns and signals before the `state.json` barrier they
    /// depend on.
    SpawnBeforePersist,
    /// The harness daemon queues the acknowledgement before the `state.json` barrier.
    AckBeforePersist,
    /// A second client may attach to a terminal harness as a typist while the first is.
    SecondTypist,
    /// A terminal harness is sent SIGTERM without its session being hung up first.
    TermWithoutHangup,
    /// The segment driver records a resumed segment as `run.start`: a parked run's resume
    /// reads as a new start of its attempt.
    ResumeAsStart,
    /// The landing driver records `work.landed` before the target branch moves: a crash
    /// between the two leaves a record of a land that did not happen.
    RecordBeforeMove,
    /// The planning attempt records a new run's manifest before it holds the run's lease.
    ManifestBeforeLease,
    /// The segment driver ends a segment its cluster's engine ended as a plain exit: the
    /// engine's fault is charged as the work's.
    FaultAsExit,
}
