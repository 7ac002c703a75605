//! One dispatched agent call carried to a usable reply, decided purely: how often a failed
//! call is tried again (within one time budget, the call's timeout, for all its tries),
//! when a failure ends it at once, and how a reply that does not match its schema is
//! repaired a bounded number of times. The host makes each call the step asks for and
//! reports its outcome; nothing here calls anything.

use super::adapter::Usage;
use super::agent::CallOutcome;
use super::schema::{check_reply, repair_prompt, REPAIRS_MAX};
use crate::text::measured_words;
use crate::work::projection::FailureClass;
use serde_json::Value;

/// What the host does next for a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallStep {
    /// Make the call with this prompt, and report its outcome with [`CallLoop::next`].
    Call(String),
    /// The call is over: this is its outcome (a reply checked against the schema, or why
    /// there is none).
    Done(CallOutcome),
}

/// The state of one dispatched call: its prompt, how many tries the current prompt has had,
/// and how many repairs were asked for.
#[derive(Clone, Debug)]
pub struct CallLoop {
    /// The prompt the workflow asked with; every repair quotes it.
    original: String,
    /// The prompt of the current call: the original, or the last repair.
    prompt: String,
    max_attempts: u32,
    schema: Option<Value>,
    tries: u32,
    repairs: u32,
    /// The time every try of the call shares, in ms.
    budget_ms: u64,
    /// Time the tries so far took.
    spent_ms: u64,
    /// What the tries so far used, summed: the call's outcome carries all of it.
    usage: Option<Usage>,
}

impl CallLoop {
    /// A call of `prompt`, tried up to `max_attempts` times (at least once) within
    /// `budget_ms` for all its tries, its reply held to `schema` if one is given. Returns the
    /// loop and its first step.
    pub fn start(
        prompt: &str,
        max_attempts: u32,
        schema: Option<Value>,
        budget_ms: u64,
    ) -> (CallLoop, CallStep) {
        let call = CallLoop {
            original: prompt.to_owned(),
            prompt: prompt.to_owned(),
            max_attempts: max_attempts.max(1),
            schema,
            tries: 1,
            repairs: 0,
            budget_ms: budget_ms.max(1),
            spent_ms: 0,
            usage: None,
        };
        (call, CallStep::Call(prompt.to_owned()))
    }

    /// The time the next try may take: what is left of the budget (at least 1 ms).
    pub fn remaining_ms(&self) -> u64 {
        self.budget_ms.saturating_sub(self.spent_ms).max(1)
    }

    /// The transcript's note of a failed try that is tried again: its number, its class and
    /// why, so every try of a call is visible.
    pub fn retry_note(&self, failed: &CallOutcome) -> Value {
        serde_json::json!({
            "what": "retry",
            "try": self.tries - 1,
            "of": self.max_attempts,
            "class": failed.class,
            "error": failed.error,
            "left": measured_words(self.remaining_ms()),
        })
    }

    /// Ends the call with `outcome`, carrying what every try used.
    fn done(&self, mut outcome: CallOutcome) -> CallStep {
        outcome.usage = self.usage.clone();
        CallStep::Done(outcome)
    }

    /// The outcome of the call last asked for, and whether the run is over (`cancelled`):
    /// - a failure is tried again with the same prompt until the attempts run out, unless it
    ///   is the environment's (a missing program: trying again cannot help) or the run is over;
    /// - a reply with no schema, or one that matches it, ends the call (the matching value,
    ///   normalized, becomes the reply);
    /// - a reply that does not match asks for a repair that quotes it and its problems, with
    ///   the attempts counted afresh, up to [`REPAIRS_MAX`] repairs; after that, or once the
    ///   run is over, the call fails naming the problems.
    pub fn next(&mut self, mut outcome: CallOutcome, cancelled: bool) -> CallStep {
        self.spent_ms = self.spent_ms.saturating_add(outcome.elapsed_ms.unwrap_or(0));
        if let Some(used) = &outcome.usage {
            self.usage.get_or_insert_with(Usage::default).add(used);
        }
        let out_of_time = self.spent_ms >= self.budget_ms;
        if !outcome.ok {
            let hopeless = outcome.class == Some(FailureClass::Environment) || outcome.stopped;
            if hopeless || cancelled || out_of_time || self.tries >= self.max_attempts {
                return self.done(outcome);
            }
            self.tries += 1;
            return CallStep::Call(self.prompt.clone());
        }
        let Some(schema) = &self.schema else { return self.done(outcome) };
        let text = outcome.text.clone().unwrap_or_default();
        match check_reply(&text, schema) {
            Ok(value) => {
                outcome.text = Some(value.to_string());
                self.done(outcome)
            }
            Err(problems) if self.repairs == REPAIRS_MAX || cancelled || out_of_time => {
                let mut failed = CallOutcome::failed(
                    format!(
                        "the reply does not match its schema after {} repairs: {}",
                        self.repairs,
                        problems.join("; ")
                    ),
                    None,
                );
                failed.session_id = outcome.session_id;
                self.done(failed)
            }
            Err(problems) => {
                self.repairs += 1;
                self.tries = 1;
                self.prompt = repair_prompt(&self.original, &text, &problems);
                CallStep::Call(self.prompt.clone())
            }
        }
    }

    /// Repairs asked for so far.
    pub fn repairs(&self) -> u32 {
        self.repairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn failure(class: Option<FailureClass>) -> CallOutcome {
        CallOutcome::failed("exit 1", class)
    }

    fn schema() -> Value {
        json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}})
    }

    #[test]
    fn a_failure_is_tried_again_until_the_attempts_run_out() {
        let (mut c, first) = CallLoop::start("fix it", 3, None, u64::MAX);
        assert_eq!(first, CallStep::Call("fix it".into()));
        assert_eq!(c.next(failure(None), false), CallStep::Call("fix it".into()));
        assert_eq!(c.next(failure(None), false), CallStep::Call("fix it".into()));
        assert_eq!(c.next(failure(None), false), CallStep::Done(failure(None)), "three tries");
    }

    #[test]
    fn a_missing_program_or_a_finished_run_ends_the_call_at_once() {
        let (mut c, _) = CallLoop::start("p", 5, None, u64::MAX);
        let missing = failure(Some(FailureClass::Environment));
        assert_eq!(c.next(missing.clone(), false), CallStep::Done(missing));
        let (mut c, _) = CallLoop::start("p", 5, None, u64::MAX);
        assert_eq!(c.next(failure(None), true), CallStep::Done(failure(None)));
    }

    #[test]
    fn a_reply_without_a_schema_is_taken_as_it_is() {
        let (mut c, _) = CallLoop::start("p", 1, None, u64::MAX);
        let reply = CallOutcome::replied("anything");
        assert_eq!(c.next(reply.clone(), false), CallStep::Done(reply));
    }

    #[test]
    fn a_reply_off_its_schema_is_repaired_quoting_the_original_prompt() {
        let (mut c, _) = CallLoop::start("report", 2, Some(schema()), u64::MAX);
        let CallStep::Call(repair) = c.next(CallOutcome::replied(r#"{"ok": "yes"}"#), false) else {
            panic!("a repair is asked for")
        };
        assert!(repair.contains("report") && repair.contains(r#"{"ok": "yes"}"#), "{repair}");
        // The repair's own failure is retried with the repair prompt, attempts afresh.
        assert_eq!(c.next(failure(None), false), CallStep::Call(repair.clone()));
        let CallStep::Call(second) = c.next(CallOutcome::replied("no json"), false) else {
            panic!("a second repair")
        };
        assert!(second.contains("report") && !second.contains(r#""yes""#), "quotes the latest");
        let CallStep::Done(end) = c.next(CallOutcome::replied("[]"), false) else {
            panic!("no third repair")
        };
        assert!(!end.ok && end.error.unwrap().contains("after 2 repairs"));
        assert_eq!(c.repairs(), REPAIRS_MAX);
    }

    #[test]
    fn a_matching_reply_is_normalized() {
        let (mut c, _) = CallLoop::start("p", 1, Some(schema()), u64::MAX);
        let CallStep::Done(end) =
            c.next(CallOutcome::replied("```json\n{\"ok\": true}\n```"), false)
        else {
            panic!("done")
        };
        assert_eq!(end.text.as_deref(), Some(r#"{"ok":true}"#));
    }

    fn took(mut o: CallOutcome, ms: u64, cost: u64) -> CallOutcome {
        o.elapsed_ms = Some(ms);
        o.usage =
            Some(crate::work::adapter::Usage { cost_micro_usd: Some(cost), ..Default::default() });
        o
    }

    #[test]
    fn all_tries_share_the_calls_time_and_their_usage_is_summed() {
        let up = || failure(Some(FailureClass::Upstream));
        let (mut c, _) = CallLoop::start("p", 5, None, 1000);
        assert_eq!(c.next(took(up(), 600, 1), false), CallStep::Call("p".into()));
        assert_eq!(c.remaining_ms(), 400, "the next try gets what is left");
        let note = c.retry_note(&up());
        assert_eq!((note["try"].as_u64(), note["class"].as_str()), (Some(1), Some("upstream")));
        let CallStep::Done(end) = c.next(took(up(), 400, 2), false) else {
            panic!("the budget is spent: no third try, though attempts remain")
        };
        assert_eq!(end.class, Some(FailureClass::Upstream), "never charged");
        assert_eq!(end.usage.unwrap().cost_micro_usd, Some(3), "both tries' cost is kept");
    }

    #[test]
    fn a_call_killed_with_its_run_is_not_tried_again() {
        let (mut c, _) = CallLoop::start("p", 5, None, u64::MAX);
        let stopped = CallOutcome { stopped: true, ..failure(Some(FailureClass::Upstream)) };
        assert!(matches!(c.next(stopped, false), CallStep::Done(_)));
    }

    proptest! {
        /// However the calls go, the loop ends, never makes more than
        /// `max_attempts * (REPAIRS_MAX + 1)` calls, and never calls again after the run is
        /// over or after a missing program.
        #[test]
        fn the_loop_is_bounded(
            max_attempts in 0u32..5,
            replies in proptest::collection::vec((0u8..4, any::<bool>()), 1..64),
        ) {
            let (mut c, mut step) = CallLoop::start("p", max_attempts, Some(schema()), u64::MAX);
            let mut calls = 0u32;
            for (kind, cancelled) in replies.iter().cycle() {
                let CallStep::Call(_) = step else { break };
                calls += 1;
                prop_assert!(calls <= max_attempts.max(1) * (REPAIRS_MAX + 1));
                let outcome = match kind {
                    0 => failure(None),
                    1 => failure(Some(FailureClass::Environment)),
                    2 => CallOutcome::replied(r#"{"ok": 1}"#),
                    _ => CallOutcome::replied(r#"{"ok": true}"#),
                };
                let hopeless = *kind == 1 || *cancelled;
                step = c.next(outcome, *cancelled);
                if hopeless {
                    prop_assert!(matches!(step, CallStep::Done(_)));
                }
            }
            prop_assert!(matches!(step, CallStep::Done(_)));
        }
    }
}
