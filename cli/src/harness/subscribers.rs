//! The live event stream's subscribers: each has a bounded queue of journal lines (with their
//! `seq` and `ts`, as `events.jsonl` has them) and a record of what it missed. A subscriber
//! that falls behind loses events, never the daemon's time, and is told where: before the
//! first line after the loss, or as soon as its queue is drained if nothing follows.

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Queue length of one subscriber.
pub const QUEUE: usize = 128;

/// What a subscriber missed since it was last told: journal sequence numbers `first..=last`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Missed {
    /// The first event lost.
    pub first: u64,
    /// The last event lost.
    pub last: u64,
    /// How many.
    pub count: u64,
}

/// The daemon's end of one subscription.
pub struct Subscriber {
    tx: SyncSender<(u64, String)>,
    missed: Arc<Mutex<Option<Missed>>>,
}

/// The connection's end of one subscription.
pub struct Subscription {
    rx: Receiver<(u64, String)>,
    missed: Arc<Mutex<Option<Missed>>>,
    /// The line that came after a loss, written right after its gap notice.
    held: Option<String>,
}

/// A new subscription: the daemon's end and the connection's.
pub fn pair() -> (Subscriber, Subscription) {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    let missed = Arc::new(Mutex::new(None));
    (Subscriber { tx, missed: missed.clone() }, Subscription { rx, missed, held: None })
}

impl Subscriber {
    /// Queues journal line `seq`; false once the connection is gone.
    pub fn send(&self, seq: u64, line: &str) -> bool {
        match self.tx.try_send((seq, line.to_owned())) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                let mut missed = self.missed.lock().unwrap_or_else(|e| e.into_inner());
                let m = missed.get_or_insert(Missed { first: seq, last: seq, count: 0 });
                m.last = seq;
                m.count += 1;
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

/// What the connection writes next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A journal line.
    Line(String),
    /// Events were lost here.
    Gap(Missed),
    /// Nothing within the wait.
    Quiet,
    /// The daemon ended the subscription.
    Closed,
}

impl Subscription {
    /// The next thing to write, waiting at most `wait`. A loss is reported before the first
    /// line that follows it, or at once when the queue holds nothing more.
    pub fn next(&mut self, wait: Duration) -> Next {
        if let Some(line) = self.held.take() {
            return Next::Line(line);
        }
        let pending = *self.missed.lock().unwrap_or_else(|e| e.into_inner());
        // Lines queued before the loss come first; an empty queue means they all went.
        let got = if pending.is_some() {
            self.rx.try_recv().map_err(|_| RecvTimeoutError::Timeout)
        } else {
            self.rx.recv_timeout(wait)
        };
        let told = || self.missed.lock().unwrap_or_else(|e| e.into_inner()).take();
        match got {
            Ok((seq, line)) => match pending {
                Some(m) if seq > m.first => {
                    let m = told().unwrap_or(m);
                    self.held = Some(line);
                    Next::Gap(m)
                }
                _ => Next::Line(line),
            },
            Err(RecvTimeoutError::Timeout) => told().map_or(Next::Quiet, Next::Gap),
            Err(RecvTimeoutError::Disconnected) => told().map_or(Next::Closed, Next::Gap),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_that_fell_behind_is_told_where_at_once() {
        let (daemon, mut conn) = pair();
        for seq in 1..=(QUEUE as u64 + 10) {
            assert!(daemon.send(seq, &format!("{{\"seq\":{seq}}}")));
        }
        // The queue's lines first, then the gap at once, with nothing after it yet.
        for seq in 1..=QUEUE as u64 {
            assert_eq!(conn.next(Duration::ZERO), Next::Line(format!("{{\"seq\":{seq}}}")));
        }
        let lost = QUEUE as u64 + 1;
        let m = Missed { first: lost, last: lost + 9, count: 10 };
        assert_eq!(conn.next(Duration::ZERO), Next::Gap(m));
        assert_eq!(conn.next(Duration::ZERO), Next::Quiet);
        // A loss with lines after it: the notice comes right before the first of them.
        for seq in 200..=(200 + QUEUE as u64) {
            daemon.send(seq, "x");
        }
        for _ in 0..QUEUE {
            assert_eq!(conn.next(Duration::ZERO), Next::Line("x".into()));
        }
        daemon.send(500, "after");
        let gap = Missed { first: 200 + QUEUE as u64, last: 200 + QUEUE as u64, count: 1 };
        assert_eq!(conn.next(Duration::ZERO), Next::Gap(gap));
        assert_eq!(conn.next(Duration::ZERO), Next::Line("after".into()));
        drop(daemon);
        assert_eq!(conn.next(Duration::ZERO), Next::Closed);
    }
}
