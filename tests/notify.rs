//! Notices with the real binary: an item entering review posts one notice to a webhook
//! receiver on loopback, with the root, the item and the command to type; a command channel
//! gets the message as its last argument and the notice on stdin; a receiver that fails is
//! retried after its backoff; the service killed with SIGKILL in the middle of a delivery
//! delivers it once its next sweep runs, under the same key; a reviewer's feedback reaches the
//! next attempt's start line; bad channels are refused naming the field.

use crate::cli::{harn_at as harn, json, text};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the receiver got: its `Idempotency-Key` and its JSON body, and whether it
/// was answered 2xx.
#[derive(Clone, Debug)]
pub struct Got {
    pub key: String,
    pub body: Value,
    pub answered: bool,
}

/// What the receiver does with the next requests.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// 200.
    Take,
    /// 500.
    Fail,
    /// Reads the request and never answers (a deliverer killed mid-delivery).
    Hang,
}

/// A webhook receiver on 127.0.0.1, on a thread.
pub struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
    mode: Arc<Mutex<Mode>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let mode = Arc::new(Mutex::new(Mode::Take));
        let (g, m) = (got.clone(), mode.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (g, m) = (g.clone(), m.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let (mut length, mut key) = (0usize, String::new());
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if lower.starts_with("idempotency-key:") {
                            key = line["idempotency-key:".len()..].trim().to_owned();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let mode = *m.lock().unwrap();
                    let answered = mode == Mode::Take;
                    g.lock().unwrap().push(Got { key, body, answered });
                    let status = match mode {
                        Mode::Take => "200 OK",
                        Mode::Fail => "500 Internal Server Error",
                        Mode::Hang => {
                            std::thread::sleep(Duration::from_secs(3600));
                            return;
                        }
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = stream.write_all(answer.as_bytes());
                });
            }
        });
        Receiver { port, got, mode }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Waits (at most `limit`) until `n` requests came.
    pub fn wait_for(&self, n: usize, limit: Duration) -> Vec<Got> {
        let until = Instant::now() + limit;
        while self.got().len() < n && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.got()
    }
}

/// A root whose `notify` is `channels`, with `wf.sh` (which writes its start line into
/// `start.json`) and item `it`.
fn root(channels: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    let config = serde_json::json!({ "notify": channels });
    std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
    let wf = r.join("wf.sh");
    std::fs::write(
        &wf,
        "#!/bin/sh\nread start\necho \"$start\" > start.json\necho '{\"op\":\"result\",\"ok\":true,\"summary\":\"done\"}'\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&wf).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wf, perms).unwrap();
    let out = harn(r, &["work", "create", "It", "wf.sh", "--id", "it", "--objective", "do it"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

fn run_id(r: &Path, id: &str) -> String {
    let doc = json(&harn(r, &["work", "show", id, "--json"]));
    doc["projection"]["latest_run_id"].as_str().unwrap().to_owned()
}

#[test]
fn an_item_entering_review_posts_one_notice_with_the_command_to_type() {
    let hook = Receiver::start();
    let dir = root(serde_json::json!([{ "webhook": hook.url() }]));
    let r = dir.path();
    let out = harn(r, &["work", "run", "it"]);
    assert!(out.status.success(), "{}", text(&out));
    let got = hook.wait_for(1, Duration::from_secs(10));
    assert_eq!(got.len(), 1, "{got:?}");
    let run = run_id(r, "it");
    assert_eq!(got[0].key, format!("review:it:{run}"));
    let words = got[0].body["text"].as_str().unwrap();
    assert!(words.contains(&r.display().to_string()), "names the root: {words}");
    assert!(words.contains("harn work accept it"), "the command to type: {words}");
    assert_eq!(got[0].body["event"], "review");
    // Recorded once: later verbs and sweeps find it delivered.
    let out = harn(r, &["notify", "deliver"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    assert_eq!(listed["notices"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["notices"][0]["deliveries"][0]["state"], "sent", "{listed}");
    assert_eq!(hook.got().len(), 1, "never twice");
}

#[test]
fn a_command_gets_the_message_as_its_last_argument_and_the_notice_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("said");
    let script = format!("printf '%s\\n' \"$1\" > {0}; cat >> {0}", log.display());
    let dir = root(serde_json::json!([
        { "command": ["sh", "-c", script, "notify"], "events": ["test"] },
    ]));
    let r = dir.path();
    let out = harn(r, &["notify", "test"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = std::fs::read_to_string(&log).unwrap();
    let (first, rest) = said.split_once('\n').unwrap();
    assert!(first.contains("a test of the notification channels"), "{said}");
    let body: Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(body["event"], "test");
    // A review is not among the events it wants: nothing is recorded for it.
    assert!(harn(r, &["work", "run", "it"]).status.success());
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    assert_eq!(listed["notices"].as_array().unwrap().len(), 1, "the test only: {listed}");
}

#[test]
fn a_receiver_that_fails_is_retried_after_its_backoff() {
    let hook = Receiver::start();
    hook.set(Mode::Fail);
    let dir = root(serde_json::json!([{ "webhook": hook.url() }]));
    let r = dir.path();
    let out = harn(r, &["work", "run", "it"]);
    assert!(out.status.success(), "a notice never fails its verb: {}", text(&out));
    assert!(text(&out).contains("answered 500"), "{}", text(&out));
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    let d = &listed["notices"][0]["deliveries"][0];
    assert_eq!(
        (d["state"].as_str(), d["delivery"]["failures"].as_u64()),
        (Some("pending"), Some(1)),
        "{listed}"
    );
    hook.set(Mode::Take);
    // Within its backoff nothing is sent; after it, the same key is.
    assert!(harn(r, &["notify", "deliver"]).status.success());
    assert_eq!(hook.got().len(), 1);
    std::thread::sleep(Duration::from_millis(2_100));
    assert!(harn(r, &["notify", "deliver"]).status.success());
    let got = hook.got();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].key, got[1].key);
    assert!(got[1].answered);
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    assert_eq!(listed["notices"][0]["deliveries"][0]["state"], "sent", "{listed}");
}

#[test]
fn the_service_killed_mid_delivery_delivers_the_notice_once_it_runs_again() {
    let hook = Receiver::start();
    hook.set(Mode::Hang);
    let dir = root(serde_json::json!([{ "webhook": hook.url(), "events": ["review"] }]));
    let r = dir.path();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "Do it."}}"#).unwrap();
    let out = harn(r, &["supervisor", "create", "it", "--team", "team.json", "--id", "g"]);
    assert!(out.status.success(), "{}", text(&out));
    let start = ["supervisor", "service", "start", "g", "--wake-interval-ms", "200"];
    let out = harn(r, &start);
    assert!(out.status.success(), "{}", text(&out));
    // The service records the notice and sends it; the receiver reads it and never answers.
    let got = hook.wait_for(1, Duration::from_secs(60));
    assert_eq!(got.len(), 1, "{got:?}");
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    let pid = status["status"]["pid"].as_i64().expect("the service's pid");
    let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).output();
    std::thread::sleep(Duration::from_millis(300));
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    assert_eq!(listed["notices"][0]["deliveries"][0]["state"], "pending", "{listed}");
    hook.set(Mode::Take);
    let out = harn(r, &["supervisor", "service", "start"]);
    assert!(out.status.success(), "{}", text(&out));
    let got = hook.wait_for(2, Duration::from_secs(60));
    let _ = harn(r, &["supervisor", "service", "stop", "--timeout", "10"]);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].key, got[1].key, "the same key: the receiver takes it once");
    assert_eq!(got.iter().filter(|g| g.answered).count(), 1, "answered exactly once");
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    assert_eq!(listed["notices"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["notices"][0]["deliveries"][0]["state"], "sent", "{listed}");
}

#[test]
fn a_reviewers_feedback_reaches_the_next_attempt_with_its_author() {
    let dir = root(serde_json::json!([]));
    let r = dir.path();
    assert!(harn(r, &["work", "run", "it"]).status.success());
    let out = harn(
        r,
        &["work", "reject", "it", "--feedback", "the tabs are still dropped", "--actor", "ana"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ana  sent back with feedback: the tabs are still dropped"),
        "{}",
        text(&out)
    );
    assert!(harn(r, &["work", "run", "it"]).status.success());
    let start: Value =
        serde_json::from_slice(&std::fs::read(r.join("start.json")).unwrap()).unwrap();
    let feedback = &start["attempt"]["feedback"];
    assert_eq!(feedback[0]["by"], "ana", "{start}");
    assert_eq!(feedback[0]["text"], "the tabs are still dropped");
    // The attempt after that one has no feedback left to answer.
    let out = harn(r, &["work", "reopen", "it", "--reason", "again"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(harn(r, &["work", "run", "it"]).status.success());
    let start: Value =
        serde_json::from_slice(&std::fs::read(r.join("start.json")).unwrap()).unwrap();
    assert_eq!(start["attempt"]["feedback"], serde_json::json!([]));
    // Only an item in review is rejected, and never without words.
    let create = ["work", "create", "Other", "wf.sh", "--id", "other", "--objective", "o"];
    assert!(harn(r, &create).status.success());
    let out = harn(r, &["work", "reject", "other", "--feedback", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("only an item in review is rejected"), "{}", text(&out));
    let out = harn(r, &["work", "reject", "it"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn a_harness_the_daemon_gave_up_on_is_told_once_per_give_up() {
    let hook = Receiver::start();
    let dir = root(serde_json::json!([{ "webhook": hook.url(), "events": ["harness_gave_up"] }]));
    let r = dir.path();
    // The daemon's durable state as it leaves it when its restart policy gives up.
    std::fs::create_dir_all(r.join(".harnery/harness")).unwrap();
    let state = |runs: u64| {
        serde_json::json!({"v": 1, "generation": 3, "harnesses": {"watcher": {
            "enabled": true, "pinned": true, "failed": true, "restarts": 4,
            "consecutive_failures": 5, "runs": runs, "reserved_runs": runs,
            "last_exit": {"status": {"code": 3}, "forced": false},
        }}})
        .to_string()
    };
    std::fs::write(r.join(".harnery/harness/state.json"), state(5)).unwrap();
    assert!(harn(r, &["notify", "deliver"]).status.success());
    assert!(harn(r, &["notify", "deliver"]).status.success());
    let got = hook.wait_for(1, Duration::from_secs(10));
    assert_eq!(got.len(), 1, "once: {got:?}");
    assert_eq!(got[0].key, "harness:watcher:5");
    let words = got[0].body["text"].as_str().unwrap();
    assert!(words.contains("5 runs failed in a row, the last exited with code 3"), "{words}");
    assert!(words.contains("harn harness restart watcher"), "{words}");
    // Restarted by a person, it gave up again: a second notice.
    std::fs::write(r.join(".harnery/harness/state.json"), state(11)).unwrap();
    assert!(harn(r, &["notify", "deliver"]).status.success());
    assert_eq!(hook.wait_for(2, Duration::from_secs(10)).len(), 2);
}

#[test]
fn a_service_that_died_without_stopping_is_told_by_the_next_sweep() {
    let hook = Receiver::start();
    let dir = root(serde_json::json!([{ "webhook": hook.url(), "events": ["service_stale"] }]));
    let r = dir.path();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "Do it."}}"#).unwrap();
    let out = harn(r, &["supervisor", "create", "it", "--team", "team.json", "--id", "g"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(r, &["supervisor", "service", "start", "g", "--wake-interval-ms", "200"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    let pid = status["status"]["pid"].as_i64().expect("the service's pid");
    let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).output();
    std::thread::sleep(Duration::from_millis(300));
    // A cron job's `notify deliver` finds it: the service cannot tell of its own death.
    assert!(harn(r, &["notify", "deliver"]).status.success());
    assert!(harn(r, &["notify", "deliver"]).status.success());
    let got = hook.wait_for(1, Duration::from_secs(10));
    assert_eq!(got.len(), 1, "once: {got:?}");
    assert!(got[0].key.starts_with("service:stale:"), "{got:?}");
    let words = got[0].body["text"].as_str().unwrap();
    assert!(words.contains(&format!("(pid {pid}) died without stopping")), "{words}");
    assert!(words.contains("harn supervisor service start"), "{words}");
}

#[test]
fn a_wrong_channel_is_refused_naming_the_field() {
    let dir = root(serde_json::json!([{ "webhook": "http://127.0.0.1:9/" }]));
    let r = dir.path();
    let config = serde_json::json!({ "notify": [{ "webhook": "ftp://x" }] });
    std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
    let out = harn(r, &["notify", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("notify[0].webhook: must be an http:// or https:// URL"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_damaged_outbox_is_set_aside_and_notices_go_on() {
    let hook = Receiver::start();
    let dir = root(serde_json::json!([{ "webhook": hook.url() }]));
    let r = dir.path();
    let out = harn(r, &["work", "run", "it"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(hook.wait_for(1, Duration::from_secs(10)).len(), 1);
    // One garbage line in the middle of the outbox: the notice before it was sent.
    let outbox = r.join(".harnery/notify/outbox.jsonl");
    let mut bytes = std::fs::read(&outbox).unwrap();
    bytes.extend_from_slice(b"garbage\n");
    std::fs::write(&outbox, &bytes).unwrap();
    let out = harn(r, &["fsck", "--json"]);
    assert_eq!(out.status.code(), Some(1), "fsck sees it: {}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = doc["damage"][0]["file"].as_str().unwrap();
    assert!(file.ends_with("outbox.jsonl"), "{doc}");
    // The next notifying command sets it aside, keeps what verifies, and notices go on.
    let out = harn(r, &["notify", "deliver"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("set aside as .harnery/notify/outbox.jsonl.damaged-"),
        "{}",
        text(&out)
    );
    let listed = json(&harn(r, &["notify", "list", "--json"]));
    assert_eq!(listed["notices"][0]["deliveries"][0]["state"], "sent", "kept: {listed}");
    assert_eq!(hook.got().len(), 1, "what was sent is not sent again");
    let out = harn(r, &["work", "reopen", "it", "--reason", "again"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(r, &["work", "run", "it"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("warning"), "{}", text(&out));
    assert_eq!(hook.wait_for(2, Duration::from_secs(10)).len(), 2, "the next notice is sent");
    let out = harn(r, &["fsck"]);
    assert!(out.status.success(), "clean again: {}", text(&out));
    let aside = std::fs::read_dir(r.join(".harnery/notify"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".damaged-"))
        .count();
    assert_eq!(aside, 1, "the damaged bytes are kept as evidence");
}

#[test]
fn a_clock_step_never_makes_a_live_service_stale_nor_silences_its_death() {
    let hook = Receiver::start();
    let dir = root(serde_json::json!([{ "webhook": hook.url(), "events": ["service_stale"] }]));
    let r = dir.path();
    std::fs::write(r.join("team.json"), r#"{"implementer": {"instructions": "Do it."}}"#).unwrap();
    let out = harn(r, &["supervisor", "create", "it", "--team", "team.json", "--id", "g"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(r, &["supervisor", "service", "start", "g", "--wake-interval-ms", "200"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    let pid = status["status"]["pid"].as_i64().expect("the service's pid").to_string();
    assert!(status["status"]["heartbeat_boot"]["at_ms"].as_u64().is_some(), "{status}");
    // Held between two beats, its record as a reader's clock ten minutes ahead sees it: the
    // wall-clock heartbeat ten minutes old, the boot-clock one fresh.
    let signal = |sig: &str| std::process::Command::new("kill").args([sig, &pid]).output();
    signal("-STOP").unwrap();
    let file = r.join(".harnery/supervisor-service/status.json");
    let mut record: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    record["heartbeat_at"] = (record["heartbeat_at"].as_i64().unwrap() - 600_000).into();
    std::fs::write(&file, record.to_string()).unwrap();
    let status = json(&harn(r, &["supervisor", "service", "status", "--json"]));
    assert_eq!(status["liveness"], "running", "{status}");
    assert!(harn(r, &["notify", "deliver"]).status.success());
    assert!(hook.got().is_empty(), "no false alarm: {:?}", hook.got());
    signal("-CONT").unwrap();
    // Its real death is still told.
    signal("-KILL").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(harn(r, &["notify", "deliver"]).status.success());
    let got = hook.wait_for(1, Duration::from_secs(10));
    assert_eq!(got.len(), 1, "one notice, of the death: {got:?}");
    assert!(got[0].key.starts_with("service:stale:"), "{got:?}");
    assert!(got[0].body["text"].as_str().unwrap().contains("died without stopping"), "{got:?}");
}
