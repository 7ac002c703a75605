//! The outbox (`.harnery/notify/outbox.jsonl`, a journal): each notice recorded once under its
//! key, then each delivery to each of its channels recorded as it succeeded or failed. What is
//! due is a pure function of those records, the configured channels and `now`: a delivery not
//! yet made, to a channel still configured, past its backoff, under its bound of attempts. A
//! deliverer killed after sending and before recording sends again under the same key.

use super::{ChannelSpec, Notice};
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The outbox journal, relative to the root.
pub const OUTBOX: &str = ".harnery/notify/outbox.jsonl";
/// The lock a deliverer holds while it delivers, so two never send the same notice at once.
pub const DELIVERY_LOCK: &str = ".harnery/notify/deliver.lock";

/// The most attempts of one delivery; past it, the delivery has given up (shown by `harn
/// notify list`, never retried by itself).
pub const MAX_ATTEMPTS: u32 = 10;
/// The wait after a first failure, doubled after each (at most [`BACKOFF_MAX_MS`]).
pub const BACKOFF_BASE_MS: i64 = 2_000;
/// The longest wait between two attempts.
pub const BACKOFF_MAX_MS: i64 = 300_000;

/// One line of the outbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum OutboxRecord {
    /// A notice, recorded once.
    #[serde(rename = "notify.recorded")]
    Recorded {
        /// The notice.
        notice: Notice,
    },
    /// A delivery succeeded.
    #[serde(rename = "notify.sent")]
    Sent {
        /// The notice's key.
        key: String,
        /// The channel ([`ChannelSpec::id`]).
        channel: String,
        /// Which attempt, from 1.
        attempt: u32,
        /// When.
        at: WallTime,
    },
    /// A delivery failed.
    #[serde(rename = "notify.failed")]
    Failed {
        /// The notice's key.
        key: String,
        /// The channel.
        channel: String,
        /// Which attempt, from 1.
        attempt: u32,
        /// When.
        at: WallTime,
        /// Why, in words.
        error: String,
    },
}

/// Where one notice stands with one channel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// When it was sent, once it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<WallTime>,
    /// Failed attempts so far.
    pub failures: u32,
    /// When the last one failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<WallTime>,
    /// Why it last failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Delivery {
    /// Its state in a word: `sent`, `pending`, or `gave_up`.
    pub fn state(&self) -> &'static str {
        match (self.sent_at, self.failures >= MAX_ATTEMPTS) {
            (Some(_), _) => "sent",
            (None, true) => "gave_up",
            (None, false) => "pending",
        }
    }

    /// When it may be tried next: now for a first attempt, after the backoff for a retry.
    pub fn next_at(&self) -> Option<WallTime> {
        if self.sent_at.is_some() || self.failures >= MAX_ATTEMPTS {
            return None;
        }
        match self.failed_at {
            None => Some(WallTime(i64::MIN)),
            Some(at) => Some(WallTime(at.0.saturating_add(backoff_ms(self.failures)))),
        }
    }
}

/// The wait after `failures` failures: [`BACKOFF_BASE_MS`] doubled, at most [`BACKOFF_MAX_MS`].
pub fn backoff_ms(failures: u32) -> i64 {
    let doublings = failures.saturating_sub(1).min(20);
    (BACKOFF_BASE_MS << doublings).min(BACKOFF_MAX_MS)
}

/// A delivery to make now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    /// The notice.
    pub notice: Notice,
    /// The channel, as configured now.
    pub channel: ChannelSpec,
    /// Which attempt this is, from 1.
    pub attempt: u32,
}

/// The outbox folded: every notice by key, in the order recorded, and each delivery.
#[derive(Clone, Debug, Default)]
pub struct Outbox {
    /// The notices by key.
    pub notices: BTreeMap<String, Notice>,
    /// Their keys in the order they were recorded.
    pub order: Vec<String>,
    /// Each (key, channel id)'s delivery.
    pub deliveries: BTreeMap<(String, String), Delivery>,
}

impl Outbox {
    /// Folds the outbox's records in order. A second record of one key is ignored, as is a
    /// delivery of a key never recorded (a torn history cannot invent a notice).
    pub fn fold<'a>(records: impl IntoIterator<Item = &'a OutboxRecord>) -> Outbox {
        let mut o = Outbox::default();
        for r in records {
            match r {
                OutboxRecord::Recorded { notice } => {
                    if !o.notices.contains_key(&notice.key) {
                        o.order.push(notice.key.clone());
                        for channel in &notice.to {
                            o.deliveries
                                .insert((notice.key.clone(), channel.clone()), Delivery::default());
                        }
                        o.notices.insert(notice.key.clone(), notice.clone());
                    }
                }
                OutboxRecord::Sent { key, channel, at, .. } => {
                    if let Some(d) = o.deliveries.get_mut(&(key.clone(), channel.clone())) {
                        d.sent_at.get_or_insert(*at);
                    }
                }
                OutboxRecord::Failed { key, channel, at, error, .. } => {
                    if let Some(d) = o.deliveries.get_mut(&(key.clone(), channel.clone())) {
                        if d.sent_at.is_none() {
                            d.failures += 1;
                            d.failed_at = Some(*at);
                            d.error = Some(error.clone());
                        }
                    }
                }
            }
        }
        o
    }

    /// Whether a notice of `key` was recorded.
    pub fn has(&self, key: &str) -> bool {
        self.notices.contains_key(key)
    }

    /// The deliveries to make at `now` to the channels configured now, in the order their
    /// notices were recorded. A notice's channel no longer configured is not due (and shows
    /// as such); one configured since is not sent what came before it.
    pub fn due(&self, channels: &[ChannelSpec], now: WallTime) -> Vec<Due> {
        let mut due = Vec::new();
        for key in &self.order {
            let notice = &self.notices[key];
            for id in &notice.to {
                let Some(channel) = channels.iter().find(|c| &c.id() == id) else { continue };
                let d = &self.deliveries[&(key.clone(), id.clone())];
                if d.next_at().is_some_and(|at| at <= now) {
                    let attempt = d.failures + 1;
                    due.push(Due { notice: notice.clone(), channel: channel.clone(), attempt });
                }
            }
        }
        due
    }

    /// When the next delivery to a configured channel falls due, if one will.
    pub fn next_due(&self, channels: &[ChannelSpec]) -> Option<WallTime> {
        let configured: Vec<String> = channels.iter().map(ChannelSpec::id).collect();
        self.deliveries
            .iter()
            .filter(|((_, id), _)| configured.contains(id))
            .filter_map(|(_, d)| d.next_at())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_channels, Waiting};
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn channels() -> Vec<ChannelSpec> {
        parse_channels(&json!([{"webhook": "http://127.0.0.1:9/a"}, {"command": ["true"]}]))
            .unwrap()
    }

    fn recorded(item: &str, at: i64) -> OutboxRecord {
        let w = Waiting::Review { item: item.into(), run: "r".into() };
        OutboxRecord::Recorded { notice: w.notice("/r", WallTime(at), &channels()) }
    }

    #[test]
    fn a_notice_is_due_to_each_channel_until_sent_and_retried_after_its_backoff() {
        let c = channels();
        let (a, b) = (c[0].id(), c[1].id());
        let mut records = vec![recorded("x", 0), recorded("x", 1)];
        let o = Outbox::fold(&records);
        assert_eq!(o.order, vec!["review:x:r"], "recorded once");
        assert_eq!(o.due(&c, WallTime(0)).len(), 2);
        records.push(OutboxRecord::Sent {
            key: "review:x:r".into(),
            channel: a.clone(),
            attempt: 1,
            at: WallTime(10),
        });
        let fail = |at: i64, attempt: u32| OutboxRecord::Failed {
            key: "review:x:r".into(),
            channel: b.clone(),
            attempt,
            at: WallTime(at),
            error: "refused".into(),
        };
        records.push(fail(10, 1));
        let o = Outbox::fold(&records);
        assert!(o.due(&c, WallTime(11)).is_empty(), "sent, and the other backs off");
        let due = o.due(&c, WallTime(10 + BACKOFF_BASE_MS));
        assert_eq!((due.len(), due[0].attempt), (1, 2));
        assert_eq!(o.next_due(&c), Some(WallTime(10 + BACKOFF_BASE_MS)));
        // A channel no longer configured is not due; one added later gets nothing old.
        assert!(o.due(&c[..1], WallTime(i64::MAX)).is_empty());
        let added = parse_channels(&json!([{"webhook": "http://127.0.0.1:9/new"}])).unwrap();
        assert!(o.due(&added, WallTime(i64::MAX)).is_empty());
        for i in 2..=MAX_ATTEMPTS {
            records.push(fail(10 + i64::from(i), i));
        }
        let o = Outbox::fold(&records);
        let d = &o.deliveries[&("review:x:r".to_owned(), b.clone())];
        assert_eq!(d.state(), "gave_up");
        assert!(o.due(&c, WallTime(i64::MAX)).is_empty());
        assert_eq!(o.next_due(&c), None);
    }

    #[test]
    fn records_read_back_as_written() {
        let r = recorded("x", 3);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with("{\"event\":\"notify.recorded\""), "{text}");
        assert_eq!(serde_json::from_str::<OutboxRecord>(&text).unwrap(), r);
    }

    proptest! {
        /// Whatever the order of deliveries and failures, a sent delivery is never due
        /// again, and nothing is due more than once per (notice, channel).
        #[test]
        fn a_sent_delivery_is_never_due_again(ops in proptest::collection::vec((0u8..3, 0u8..2, 0i64..100), 0..40)) {
            let c = channels();
            let mut records = Vec::new();
            for (op, ch, at) in ops {
                let key = format!("review:i{}:r", ch);
                let channel = c[usize::from(ch)].id();
                records.push(match op {
                    0 => recorded(&format!("i{ch}"), at),
                    1 => OutboxRecord::Sent { key, channel, attempt: 1, at: WallTime(at) },
                    _ => OutboxRecord::Failed { key, channel, attempt: 1, at: WallTime(at), error: "e".into() },
                });
            }
            let o = Outbox::fold(&records);
            let due = o.due(&c, WallTime(i64::MAX));
            for d in &due {
                let state = &o.deliveries[&(d.notice.key.clone(), d.channel.id())];
                prop_assert!(state.sent_at.is_none());
            }
            let mut seen = std::collections::BTreeSet::new();
            for d in &due {
                prop_assert!(seen.insert((d.notice.key.clone(), d.channel.id())));
            }
        }
    }
}
