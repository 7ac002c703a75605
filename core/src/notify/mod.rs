//! What needs a person, told where they are: the channels `.harnery/config.json` names under
//! `notify` (a webhook, a command), the notices harn records once in a durable outbox when
//! something waits for a person (an item in review, a parked run, a goal stopped, a run the
//! machine or the cluster ended), each with its words and the command to type, and what is
//! due to be delivered (`outbox`). The shell gathers what the records say, records what is
//! new, and delivers what is due; everything decided is here.

pub mod outbox;

use crate::error::FieldError;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a notice is about; the names a channel's `events` filter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// An item's proof waits for a person's review.
    Review,
    /// A run parked on an approval.
    Approval,
    /// A goal stopped for a person (a review, an approval, an item it could not accept).
    GoalStopped,
    /// A goal reached one of its ceilings (cycles, attempts, runtime, cost).
    GoalCeiling,
    /// A harness gave up restarting.
    HarnessGaveUp,
    /// The supervisor service's record says it runs, but it does not (it crashed).
    ServiceStale,
    /// A goal's ticks failed [`BACKOFF_NOTICE_ERRORS`] times in a row (or a multiple of it):
    /// the service backs off.
    ServiceBackoff,
    /// A run ended at one of its resource limits (`resource`, charged).
    RunResource,
    /// A run its cluster's engine ended (`infrastructure`, uncharged).
    RunInfrastructure,
    /// `harn notify test`.
    Test,
}

impl NoticeKind {
    /// Every kind, in the order the configuration's error lists them.
    pub const ALL: [NoticeKind; 10] = [
        NoticeKind::Review,
        NoticeKind::Approval,
        NoticeKind::GoalStopped,
        NoticeKind::GoalCeiling,
        NoticeKind::HarnessGaveUp,
        NoticeKind::ServiceStale,
        NoticeKind::ServiceBackoff,
        NoticeKind::RunResource,
        NoticeKind::RunInfrastructure,
        NoticeKind::Test,
    ];

    /// Its name in `events` and in records.
    pub fn name(self) -> &'static str {
        match self {
            NoticeKind::Review => "review",
            NoticeKind::Approval => "approval",
            NoticeKind::GoalStopped => "goal_stopped",
            NoticeKind::GoalCeiling => "goal_ceiling",
            NoticeKind::HarnessGaveUp => "harness_gave_up",
            NoticeKind::ServiceStale => "service_stale",
            NoticeKind::ServiceBackoff => "service_backoff",
            NoticeKind::RunResource => "run_resource",
            NoticeKind::RunInfrastructure => "run_infrastructure",
            NoticeKind::Test => "test",
        }
    }
}

/// Where a notice goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// An HTTP(S) URL that gets a JSON POST with a `text` field (Slack-style and ntfy-style
    /// receivers take it as it is) and an `Idempotency-Key` header.
    Webhook(String),
    /// A program and its first arguments; the message is its last argument, and the whole
    /// notice as JSON its standard input.
    Command(Vec<String>),
}

/// One entry of `notify`: a channel, and the kinds it wants (every kind when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelSpec {
    /// Where.
    pub channel: Channel,
    /// Which kinds; `None` for all.
    pub events: Option<Vec<NoticeKind>>,
}

impl ChannelSpec {
    /// Whether a notice of `kind` goes to this channel.
    pub fn wants(&self, kind: NoticeKind) -> bool {
        self.events.as_ref().is_none_or(|e| e.contains(&kind))
    }

    /// A name for the channel that stays while its entry does: the first 16 hex digits of
    /// the SHA-256 of what it is. A notice names the channels it was recorded for by it, so
    /// a channel added later is not sent what came before it.
    pub fn id(&self) -> String {
        let what = serde_json::to_vec(&self.channel).expect("channels serialize");
        crate::hash::sha256_hex(&what)[..16].to_owned()
    }

    /// The channel as a person reads it: the URL (its query left out: it may hold a
    /// token) or the program.
    pub fn shown(&self) -> String {
        match &self.channel {
            Channel::Webhook(url) => url.split(['?', '#']).next().unwrap_or(url).to_owned(),
            Channel::Command(argv) => argv.join(" "),
        }
    }
}

/// Reads the `notify` entry of the configuration: a list of `{"webhook": URL}` or
/// `{"command": [PROGRAM, ARG…]}`, each with an optional `events` list. The error names the
/// field (`notify[1].events[0]`).
pub fn parse_channels(value: &Value) -> Result<Vec<ChannelSpec>, FieldError> {
    let Some(entries) = value.as_array() else {
        return Err(FieldError::new("notify", "must be a list of channels"));
    };
    let mut channels = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = |field: &str| format!("notify[{i}]{field}");
        let Some(fields) = entry.as_object() else {
            return Err(FieldError::new(
                at(""),
                "must be an object: {\"webhook\": URL} or {\"command\": [...]}",
            ));
        };
        if let Some(unknown) =
            fields.keys().find(|k| !["webhook", "command", "events"].contains(&k.as_str()))
        {
            return Err(FieldError::new(
                at(&format!(".{unknown}")),
                "unknown key (webhook, command, events)",
            ));
        }
        let channel = match (fields.get("webhook"), fields.get("command")) {
            (Some(url), None) => {
                let url = url.as_str().unwrap_or_default();
                let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
                let host = url.split("://").nth(1).unwrap_or_default();
                if !scheme_ok || host.is_empty() || host.starts_with('/') {
                    return Err(FieldError::new(
                        at(".webhook"),
                        "must be an http:// or https:// URL",
                    ));
                }
                Channel::Webhook(url.to_owned())
            }
            (None, Some(argv)) => {
                let argv: Option<Vec<String>> = argv
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default();
                match argv {
                    Some(argv) if !argv.is_empty() && !argv[0].is_empty() => Channel::Command(argv),
                    _ => {
                        return Err(FieldError::new(
                            at(".command"),
                            "must be a non-empty list of strings: the program and its arguments",
                        ))
                    }
                }
            }
            (Some(_), Some(_)) => {
                return Err(FieldError::new(at(""), "names both a webhook and a command: one each"))
            }
            (None, None) => return Err(FieldError::new(at(""), "names no webhook and no command")),
        };
        let events = match fields.get("events") {
            None => None,
            Some(list) => {
                let Some(list) = list.as_array() else {
                    return Err(FieldError::new(at(".events"), "must be a list of event names"));
                };
                let mut kinds = Vec::new();
                for (j, name) in list.iter().enumerate() {
                    let kind =
                        NoticeKind::ALL.into_iter().find(|k| Some(k.name()) == name.as_str());
                    match kind {
                        Some(k) => kinds.push(k),
                        None => {
                            let names: Vec<&str> =
                                NoticeKind::ALL.iter().map(|k| k.name()).collect();
                            return Err(FieldError::new(
                                at(&format!(".events[{j}]")),
                                format!("{name} is not an event ({})", names.join(", ")),
                            ));
                        }
                    }
                }
                Some(kinds)
            }
        };
        channels.push(ChannelSpec { channel, events });
    }
    Ok(channels)
}

/// Failed ticks in a row after which, and at each multiple of which, a backing-off goal is
/// told.
pub const BACKOFF_NOTICE_ERRORS: u32 = 3;

/// One thing a person is told, recorded once under its key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// Its idempotency key: what it is about, once (`review:parser:RUN`). A receiver that
    /// sees a key twice (a deliverer killed after sending, before recording) drops the second.
    pub key: String,
    /// What it is about.
    pub kind: NoticeKind,
    /// The item, goal or harness.
    pub subject: String,
    /// The coordination root, as this machine names it.
    pub root: String,
    /// The message: the root, the subject, what happened.
    pub text: String,
    /// The command to type, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// When it was recorded.
    pub at: WallTime,
    /// The channels it goes to ([`ChannelSpec::id`]), as the configuration named them then.
    pub to: Vec<String>,
}

impl Notice {
    /// The body a webhook gets, and a command on its standard input.
    pub fn body(&self) -> Value {
        serde_json::json!({
            "text": self.full_text(), "event": self.kind.name(), "key": self.key,
            "root": self.root, "subject": self.subject, "command": self.command,
        })
    }

    /// The message with the command to type.
    pub fn full_text(&self) -> String {
        match &self.command {
            Some(c) => format!("{} Next: {c}", self.text),
            None => self.text.clone(),
        }
    }
}

/// Something that waits for a person, as the records say it: a notice not yet made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Item `item`'s run `run` passed and waits for review.
    Review {
        /// The item.
        item: String,
        /// Its run.
        run: String,
    },
    /// Run `run` of item `item` parked on approval `approval`, addressed to `to`.
    Approval {
        /// The item.
        item: String,
        /// The approval.
        approval: String,
        /// Its addressee.
        to: String,
    },
    /// Goal `goal` stopped (its `seq`-th history line says so) for a person or at a ceiling,
    /// saying `why`, with `command` to type.
    Goal {
        /// The goal.
        goal: String,
        /// The history line of the stop: a second stop is a second notice.
        seq: u64,
        /// True for a ceiling, false for a person.
        ceiling: bool,
        /// Why, in words.
        why: String,
        /// What to type.
        command: String,
    },
    /// Run `run` of item `item` ended `resource` or, when `infrastructure`, by its cluster.
    RunEnded {
        /// The item.
        item: String,
        /// The run.
        run: String,
        /// True for the cluster's end, false for a resource limit.
        infrastructure: bool,
        /// Why, in words.
        why: String,
    },
    /// Harness `name` gave up restarting (its `seq`-th give-up).
    HarnessGaveUp {
        /// The harness.
        name: String,
        /// Which give-up.
        seq: u64,
        /// Why, in words.
        why: String,
    },
    /// The service started at `started_at` (pid `pid`) stopped beating without stopping.
    ServiceStale {
        /// Its pid.
        pid: u32,
        /// When it started: one notice per service that died.
        started_at: WallTime,
        /// True while it still holds its lease (alive, but its heartbeat lapsed: hung), false
        /// once the lease is free (it died). Two notices with two keys, so a service that hung
        /// and came back is still told when it later dies.
        hung: bool,
    },
    /// Goal `goal`'s ticks under the service started at `started_at` failed `errors` times
    /// in a row, the last saying `why`.
    ServiceBackoff {
        /// The goal.
        goal: String,
        /// Failed ticks in a row: told at each multiple of [`BACKOFF_NOTICE_ERRORS`].
        errors: u32,
        /// When the service started.
        started_at: WallTime,
        /// The last tick's outcome.
        why: String,
    },
    /// `harn notify test`, made at `at`.
    Test {
        /// When, for its key.
        at: WallTime,
    },
}

impl Waiting {
    /// The notice it makes at `at` in `root`, for the channels that want it.
    pub fn notice(&self, root: &str, at: WallTime, channels: &[ChannelSpec]) -> Notice {
        let (key, kind, subject, text, command) = match self {
            Waiting::Review { item, run } => (
                format!("review:{item}:{run}"),
                NoticeKind::Review,
                item.clone(),
                format!("harn: {item} in {root} waits for review: run {run} passed."),
                Some(format!("harn work show {item}; then harn work accept {item}, or harn work reject {item} --feedback TEXT")),
            ),
            Waiting::Approval { item, approval, to } => (
                format!("approval:{approval}"),
                NoticeKind::Approval,
                item.clone(),
                format!("harn: {item} in {root} is parked on approval {approval} for {to}."),
                Some(format!("harn approval show {approval}; then harn approval approve {approval} or deny {approval}")),
            ),
            Waiting::Goal { goal, seq, ceiling, why, command } => (
                format!("goal:{goal}:{seq}"),
                if *ceiling { NoticeKind::GoalCeiling } else { NoticeKind::GoalStopped },
                goal.clone(),
                format!("harn: goal {goal} in {root} stopped: {why}."),
                Some(command.clone()),
            ),
            Waiting::RunEnded { item, run, infrastructure, why } => (
                format!("run:{run}"),
                if *infrastructure { NoticeKind::RunInfrastructure } else { NoticeKind::RunResource },
                item.clone(),
                format!("harn: run {run} of {item} in {root} ended: {why}."),
                Some(format!("harn run show {run}")),
            ),
            Waiting::HarnessGaveUp { name, seq, why } => (
                format!("harness:{name}:{seq}"),
                NoticeKind::HarnessGaveUp,
                name.clone(),
                format!("harn: harness {name} in {root} gave up: {why}."),
                Some(format!("harn harness show {name}; then harn harness restart {name}")),
            ),
            Waiting::ServiceStale { pid, started_at, hung: true } => (
                format!("service:hung:{}", started_at.0),
                NoticeKind::ServiceStale,
                "service".into(),
                format!("harn: the supervisor service of {root} (pid {pid}) stopped beating but still holds its lease; its goals may not be ticked."),
                Some("harn supervisor service status; then harn supervisor service stop --timeout 30".into()),
            ),
            Waiting::ServiceStale { pid, started_at, hung: false } => (
                format!("service:stale:{}", started_at.0),
                NoticeKind::ServiceStale,
                "service".into(),
                format!("harn: the supervisor service of {root} (pid {pid}) died without stopping; its goals are not ticked."),
                Some("harn supervisor service status; then harn supervisor service start".into()),
            ),
            Waiting::ServiceBackoff { goal, errors, started_at, why } => (
                format!("service:backoff:{goal}:{}:{}", started_at.0, errors / BACKOFF_NOTICE_ERRORS),
                NoticeKind::ServiceBackoff,
                goal.clone(),
                format!("harn: the service of {root} backs off goal {goal}: {errors} ticks failed in a row, the last: {why}."),
                Some("harn supervisor service logs".into()),
            ),
            Waiting::Test { at } => (
                format!("test:{}", at.0),
                NoticeKind::Test,
                "notify".into(),
                format!("harn: a test of the notification channels of {root}."),
                Some("harn notify list".into()),
            ),
        };
        let to = channels.iter().filter(|c| c.wants(kind)).map(ChannelSpec::id).collect();
        Notice { key, kind, subject, root: root.to_owned(), text, command, at, to }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_backing_off_goal_is_told_at_each_multiple_of_the_threshold_per_service() {
        let key = |errors: u32, started: i64| {
            let w = Waiting::ServiceBackoff {
                goal: "g".into(),
                errors,
                started_at: WallTime(started),
                why: "tick failed".into(),
            };
            w.notice("/r", WallTime(0), &[]).key
        };
        assert_eq!(key(3, 1), key(5, 1), "one notice for errors 3 to 5");
        assert_ne!(key(5, 1), key(6, 1), "again at 6");
        assert_ne!(key(3, 1), key(3, 2), "again under a service started anew");
    }

    #[test]
    fn channels_parse_and_each_wrong_field_is_named() {
        let ok = json!([
            {"webhook": "http://127.0.0.1:9/hook?token=s"},
            {"command": ["notify-send", "harn"], "events": ["review", "approval"]},
        ]);
        let channels = parse_channels(&ok).unwrap();
        assert_eq!(channels.len(), 2);
        assert!(channels[0].wants(NoticeKind::GoalCeiling));
        assert!(
            channels[1].wants(NoticeKind::Review) && !channels[1].wants(NoticeKind::RunResource)
        );
        assert_eq!(channels[0].shown(), "http://127.0.0.1:9/hook", "the query may hold a token");
        assert_ne!(channels[0].id(), channels[1].id());
        let field = |v: Value| parse_channels(&v).unwrap_err().field;
        assert_eq!(field(json!({})), "notify");
        assert_eq!(field(json!([{"webhook": "ftp://x"}])), "notify[0].webhook");
        assert_eq!(field(json!([{"command": []}])), "notify[0].command");
        assert_eq!(field(json!([{"webhook": "http://x", "command": ["a"]}])), "notify[0]");
        assert_eq!(field(json!([{"hook": "http://x"}])), "notify[0].hook");
        assert_eq!(
            field(json!([{"webhook": "http://x", "events": ["reviews"]}])),
            "notify[0].events[0]"
        );
    }

    #[test]
    fn a_notice_names_the_root_the_subject_and_the_command_and_goes_where_it_is_wanted() {
        let channels = parse_channels(&json!([
            {"webhook": "http://127.0.0.1:9/a"},
            {"webhook": "http://127.0.0.1:9/b", "events": ["approval"]},
        ]))
        .unwrap();
        let review = Waiting::Review { item: "parser".into(), run: "r1".into() };
        let n = review.notice("/srv/app", WallTime(5), &channels);
        assert_eq!(n.key, "review:parser:r1");
        assert_eq!(n.to, vec![channels[0].id()]);
        let text = n.body()["text"].as_str().unwrap().to_owned();
        assert!(text.contains("/srv/app") && text.contains("parser"), "{text}");
        assert!(text.contains("harn work accept parser"), "{text}");
        let approval =
            Waiting::Approval { item: "p".into(), approval: "r1-p0".into(), to: "ana".into() };
        assert_eq!(approval.notice("/r", WallTime(5), &channels).to.len(), 2);
    }
}
