//! Structured agent replies: the output contract appended to a prompt that carries a JSON
//! schema, the extraction of the one JSON value a reply holds, its check against the schema,
//! and the repair prompt that asks for a corrected value.
//!
//! The check covers the keywords structured replies use (`type`, `properties`, `required`,
//! `additionalProperties`, `items`, `enum`, `const`, `minItems`, `maxItems`, `minLength`,
//! `maxLength`, `minimum`, `maximum`); other keywords are annotations and are not enforced.

use serde_json::Value;

/// Repair attempts after a reply that does not match its schema.
pub const REPAIRS_MAX: u32 = 2;
/// Longest rejected reply quoted back in a repair prompt.
pub(crate) const QUOTE_MAX: usize = 16_000;
/// Most problems reported for one value.
const PROBLEMS_MAX: usize = 20;

/// The prompt with its output contract: the reply must be one JSON value matching `schema`.
pub(crate) fn with_contract(prompt: &str, schema: &Value) -> String {
    let schema = serde_json::to_string_pretty(schema).expect("JSON values serialize");
    format!(
        "{prompt}\n\n## Output contract\n\nReply with exactly one JSON value that matches this \
         JSON schema, and nothing else:\n\n```json\n{schema}\n```\n"
    )
}

/// The reply's JSON value checked against `schema`, or the problems found.
pub(crate) fn check_reply(reply: &str, schema: &Value) -> Result<Value, Vec<String>> {
    let value = extract(reply)?;
    let mut problems = Vec::new();
    check(&value, schema, "$", &mut problems);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems)
    }
}

/// The one JSON value of a reply: the whole reply, or (tolerating one leading sentence or a
/// code fence) the value that starts at the first `{` or `[` and runs to the end.
fn extract(reply: &str) -> Result<Value, Vec<String>> {
    let trimmed = reply.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Ok(v);
    }
    let unfenced = trimmed.trim_end_matches("```").trim_end();
    let start = unfenced.find(['{', '[']);
    if let Some(v) = start.and_then(|s| serde_json::from_str(&unfenced[s..]).ok()) {
        return Ok(v);
    }
    Err(vec!["the reply is not one JSON value".into()])
}

/// The prompt of a repair attempt: the original, the rejected reply and what is wrong.
pub(crate) fn repair_prompt(prompt: &str, rejected: &str, problems: &[String]) -> String {
    let mut quoted = rejected;
    if quoted.len() > QUOTE_MAX {
        let mut end = QUOTE_MAX;
        while !quoted.is_char_boundary(end) {
            end -= 1;
        }
        quoted = &quoted[..end];
    }
    let list: String = problems.iter().map(|p| format!("- {p}\n")).collect();
    format!(
        "{prompt}\n\n## Your previous reply was rejected\n\n```\n{quoted}\n```\n\nProblems:\n\
         {list}\nReply again with one complete replacement JSON value that fixes every problem."
    )
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, want: &str) -> bool {
    let have = type_of(v);
    have == want || (want == "number" && have == "integer")
}

fn check(v: &Value, schema: &Value, at: &str, problems: &mut Vec<String>) {
    if problems.len() >= PROBLEMS_MAX {
        return;
    }
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            problems.push(format!("{at}: no value is allowed here"));
        }
        return;
    };
    let mut push = |p: String| problems.push(format!("{at}: {p}"));
    match s.get("type") {
        Some(Value::String(t)) if !has_type(v, t) => {
            return push(format!("expected {t}, found {}", type_of(v)));
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| has_type(v, t)) => {
            return push(format!(
                "expected one of {}, found {}",
                Value::Array(ts.clone()),
                type_of(v)
            ));
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        if !options.contains(v) {
            push(format!("{v} is not one of {}", Value::Array(options.clone())));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            push(format!("expected {c}"));
        }
    }
    let bound = |key: &str| s.get(key).and_then(Value::as_f64);
    if let Some(n) = v.as_f64() {
        if bound("minimum").is_some_and(|m| n < m) {
            push(format!("{n} is below the minimum {}", s["minimum"]));
        }
        if bound("maximum").is_some_and(|m| n > m) {
            push(format!("{n} is above the maximum {}", s["maximum"]));
        }
    }
    let count = |key: &str| s.get(key).and_then(Value::as_u64);
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if count("minLength").is_some_and(|m| len < m) {
            push(format!("shorter than {} characters", s["minLength"]));
        }
        if count("maxLength").is_some_and(|m| len > m) {
            push(format!("longer than {} characters", s["maxLength"]));
        }
    }
    if let Some(items) = v.as_array() {
        let len = items.len() as u64;
        if count("minItems").is_some_and(|m| len < m) {
            push(format!("fewer than {} items", s["minItems"]));
        }
        if count("maxItems").is_some_and(|m| len > m) {
            push(format!("more than {} items", s["maxItems"]));
        }
        if let Some(item_schema) = s.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item, item_schema, &format!("{at}[{i}]"), problems);
            }
        }
    }
    if let Some(fields) = v.as_object() {
        check_object(fields, s, at, problems);
    }
}

fn check_object(
    fields: &serde_json::Map<String, Value>,
    s: &serde_json::Map<String, Value>,
    at: &str,
    problems: &mut Vec<String>,
) {
    let properties = s.get("properties").and_then(Value::as_object);
    for name in s.get("required").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = name.as_str() {
            if !fields.contains_key(name) {
                problems.push(format!("{at}: missing required field {name:?}"));
            }
        }
    }
    for (name, value) in fields {
        let path = format!("{at}.{name}");
        match (properties.and_then(|p| p.get(name)), s.get("additionalProperties")) {
            (Some(sub), _) => check(value, sub, &path, problems),
            (None, Some(Value::Bool(false))) => {
                problems.push(format!("{path}: not allowed (no such property)"));
            }
            (None, Some(extra)) => check(value, extra, &path, problems),
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict_schema() -> Value {
        json!({
            "type": "object",
            "required": ["verdict", "findings"],
            "additionalProperties": false,
            "properties": {
                "verdict": {"enum": ["pass", "fail"]},
                "findings": {"type": "array", "maxItems": 2, "items": {"type": "string", "minLength": 1}},
                "score": {"type": "number", "minimum": 0, "maximum": 1}
            }
        })
    }

    #[test]
    fn a_matching_reply_passes_even_after_a_leading_sentence_or_fence() {
        let s = verdict_schema();
        let body = r#"{"verdict":"pass","findings":[],"score":1}"#;
        assert!(check_reply(body, &s).is_ok());
        assert!(check_reply(&format!("Here it is: {body}"), &s).is_ok());
        assert!(check_reply(&format!("```json\n{body}\n```"), &s).is_ok());
    }

    #[test]
    fn every_problem_is_named_with_its_path() {
        let s = verdict_schema();
        let bad = r#"{"verdict":"maybe","findings":["", "b", "c"],"score":2,"extra":true}"#;
        let problems = check_reply(bad, &s).unwrap_err();
        let text = problems.join("\n");
        for needle in [
            "$.verdict: \"maybe\" is not one of",
            "$.findings: more than 2 items",
            "$.findings[0]: shorter than 1",
            "$.score: 2 is above the maximum",
            "$.extra: not allowed",
        ] {
            assert!(text.contains(needle), "{needle} in {text}");
        }
        let missing = check_reply("{}", &s).unwrap_err();
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert_eq!(check_reply("no json here", &s).unwrap_err().len(), 1);
        assert!(check_reply("[1]", &json!({"type":"object"})).unwrap_err()[0]
            .contains("expected object"));
    }

    #[test]
    fn integers_are_numbers_and_types_may_be_listed() {
        assert!(check_reply("3", &json!({"type":"number"})).is_ok());
        assert!(check_reply("3.5", &json!({"type":"integer"})).is_err());
        assert!(check_reply("null", &json!({"type":["string","null"]})).is_ok());
    }

    #[test]
    fn the_repair_prompt_quotes_a_bounded_reply_and_the_problems() {
        let long = "x".repeat(QUOTE_MAX + 100);
        let p = repair_prompt("do it", &long, &["$.a: missing".into()]);
        assert!(p.starts_with("do it"));
        assert!(p.contains("- $.a: missing"));
        assert!(p.len() < QUOTE_MAX + 400);
        assert!(with_contract("do it", &json!({"type":"object"})).contains("\"type\": \"object\""));
    }
}
