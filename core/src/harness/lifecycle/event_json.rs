//! The events journal's bodies written field by field: serde's compact JSON of an [`Event`],
//! byte for byte (a property test holds the two equal), without serde's escaping of key
//! names that need none. The daemon appends a few of these at nearly every step.

use super::{Cause, Event, Hang};
use crate::ids::Id;

impl Event {
    /// Appends this event's compact JSON to `out`, as `serde_json::to_writer` would.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Event::HarnessStateChanged { name, from, to, cause } => {
                head(out, "harness_state_changed", name);
                key_str(out, "from", from.as_str());
                key_str(out, "to", to.as_str());
                if let Some(cause) = cause {
                    key_str(out, "cause", cause_name(*cause));
                }
            }
            Event::HarnessExited { name, code, signal } => {
                head(out, "harness_exited", name);
                out.extend_from_slice(b",\"code\":");
                match code {
                    Some(code) => crate::journal::push_signed(out, i64::from(*code)),
                    None => out.extend_from_slice(b"null"),
                }
                if let Some(signal) = signal {
                    out.extend_from_slice(b",\"signal\":");
                    crate::journal::push_signed(out, i64::from(*signal));
                }
            }
            Event::HarnessReady { name, run } => {
                head(out, "harness_ready", name);
                key_u64(out, "run", *run);
            }
            Event::HarnessUnready { name, run } => {
                head(out, "harness_unready", name);
                key_u64(out, "run", *run);
            }
            Event::HarnessHung { name, reason, after_ms } => {
                head(out, "harness_hung", name);
                let reason = match reason {
                    Hang::ReadyTimeout => "ready_timeout",
                    Hang::Watchdog => "watchdog",
                };
                key_str(out, "reason", reason);
                key_u64(out, "after_ms", *after_ms);
            }
            Event::HarnessFlapping { name, restarts, next_retry_in } => {
                head(out, "harness_flapping", name);
                key_u64(out, "restarts", *restarts);
                key_u64(out, "next_retry_in", *next_retry_in);
            }
        }
        out.push(b'}');
    }
}

/// The serde name of a cause.
fn cause_name(cause: Cause) -> &'static str {
    match cause {
        Cause::Autostart => "autostart",
        Cause::Operator => "operator",
        Cause::Profile => "profile",
        Cause::Configuration => "configuration",
        Cause::RestartPolicy => "restart_policy",
        Cause::Shutdown => "shutdown",
        Cause::Hung => "hung",
    }
}

/// `{"event":"KIND","name":"NAME"`: ids and these names need no escape.
fn head(out: &mut Vec<u8>, kind: &str, name: &Id) {
    out.extend_from_slice(b"{\"event\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"name\":\"");
    out.extend_from_slice(name.as_str().as_bytes());
    out.push(b'"');
}

fn key_str(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":\"");
    out.extend_from_slice(value.as_bytes());
    out.push(b'"');
}

fn key_u64(out: &mut Vec<u8>, key: &str, value: u64) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    crate::journal::push_decimal(out, value);
}

#[cfg(test)]
mod tests {
    use super::super::State;
    use super::*;
    use proptest::prelude::*;

    fn event() -> impl Strategy<Value = Event> {
        let name =
            prop::sample::select(vec!["a", "h0", "web.api-2_x"]).prop_map(|s| Id::new(s).unwrap());
        let state = prop::sample::select(State::ALL.to_vec());
        let cause = prop::option::of(prop::sample::select(vec![
            Cause::Autostart,
            Cause::Operator,
            Cause::Profile,
            Cause::Configuration,
            Cause::RestartPolicy,
            Cause::Shutdown,
            Cause::Hung,
        ]));
        let hang = prop::sample::select(vec![Hang::ReadyTimeout, Hang::Watchdog]);
        prop_oneof![
            (name.clone(), state.clone(), state, cause).prop_map(|(name, from, to, cause)| {
                Event::HarnessStateChanged { name, from, to, cause }
            }),
            (name.clone(), prop::option::of(any::<i32>()), prop::option::of(any::<i32>()))
                .prop_map(|(name, code, signal)| Event::HarnessExited { name, code, signal }),
            (name.clone(), any::<u64>()).prop_map(|(name, run)| Event::HarnessReady { name, run }),
            (name.clone(), any::<u64>())
                .prop_map(|(name, run)| Event::HarnessUnready { name, run }),
            (name.clone(), hang, any::<u64>())
                .prop_map(|(name, reason, after_ms)| Event::HarnessHung { name, reason, after_ms }),
            (name, any::<u64>(), any::<u64>()).prop_map(|(name, restarts, next_retry_in)| {
                Event::HarnessFlapping { name, restarts, next_retry_in }
            }),
        ]
    }

    proptest! {
        #[test]
        fn writes_what_serde_writes(e in event()) {
            let mut ours = Vec::new();
            e.write_json(&mut ours);
            let serde = serde_json::to_vec(&e).unwrap();
            prop_assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(serde).unwrap());
        }
    }
}
