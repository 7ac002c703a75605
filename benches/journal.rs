//! Journal reading throughput: harn's verifying reader (checksums, seqs, typed header) against a
//! bare serde_json parse of the same lines, the baseline it should stay within 70% of.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use harn_core::journal::{encode_line_into, parse};
use harn_core::time::WallTime;
use serde_json::{json, Value};
use std::hint::black_box;

/// Bodies shaped like the events harn journals: attempts, proofs, child exits, notes.
fn body(i: u64) -> Value {
    let work = format!("work-{:03}", i % 97);
    match i % 4 {
        0 => json!({
            "kind": "attempt_started", "work": work, "attempt": i % 5 + 1, "agent": "agent-2",
            "workflow": "implement", "deadline_ms": 3_600_000,
            "digest": "sha256:9f2c41d0b7a5e3f8c6d1a4b2e0f9c8d7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1",
        }),
        1 => json!({
            "kind": "attempt_finished", "work": work, "attempt": i % 5 + 1,
            "outcome": "proof_accepted", "duration_ms": 41_250 + i,
            "proof": {"tests_passed": 412, "tests_failed": 0,
                      "commands": ["cargo test --workspace", "cargo clippy -- -D warnings"]},
        }),
        2 => json!({
            "kind": "child_exited", "harness": "watch-tests", "pid": 40_000 + i,
            "status": {"code": 1}, "restarts": i % 7, "backoff_ms": 2_000 << (i % 5),
        }),
        _ => json!({
            "kind": "note", "work": work,
            "text": "rebased onto main; 3 files changed, waiting for review of \"login flow\"\n",
        }),
    }
}

/// About 2 MiB of journal.
fn journal() -> Vec<u8> {
    let mut out = Vec::new();
    let mut seq = 1;
    while out.len() < 2 << 20 {
        let ts = WallTime(1_767_225_600_000 + seq as i64 * 250);
        encode_line_into(&mut out, seq, ts, &body(seq));
        seq += 1;
    }
    out
}

fn journal_read(c: &mut Criterion) {
    let bytes = journal();
    let mut group = c.benchmark_group("journal_read");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("harn_parse", |b| {
        b.iter(|| parse("events.jsonl", black_box(&bytes)).unwrap())
    });
    // Keeps every value, as the reader does, so both pay the same allocation and drop costs.
    group.bench_function("serde_json_parse_only", |b| {
        b.iter(|| {
            black_box(&bytes)
                .split(|&c| c == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| serde_json::from_slice::<Value>(line).unwrap())
                .collect::<Vec<Value>>()
        })
    });
    group.finish();
}

criterion_group!(benches, journal_read);
criterion_main!(benches);
