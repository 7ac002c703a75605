//! `harn web` with the real binary over HTTP on loopback: a review taken from the web (reject
//! with feedback, the next attempt started from the page receives it, accept, land), each
//! decision in the item's history with the web actor; a parked run approved and resumed; and
//! the door: a process inside a run's cgroup refused, a foreign `Host` or `Origin` refused, a
//! change without the session's token refused, the login key good once, a proof's `<script>`
//! shown as text, a listen address other machines reach refused unless asked for.

use crate::cli::{harn_at as harn, harn_bin, json, text};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `harn web`, stopped when dropped.
pub struct Server {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The login address it printed.
    pub login: String,
}

impl Server {
    /// Starts `harn web` on `root`, on a free port of 127.0.0.1, as the leader of a process
    /// group of its own (as a shell's job is).
    pub fn start(root: &Path) -> Server {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(harn_bin())
            .process_group(0)
            .args(["web", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let login = line.trim().to_owned();
        assert!(login.starts_with("http://127.0.0.1:"), "{login:?}");
        let port = login["http://127.0.0.1:".len()..].split('/').next().unwrap().parse().unwrap();
        Server { child, port, login }
    }

    /// The `Host` this server answers to.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Logs in with the printed address; the session's cookie.
    pub fn log_in(&self) -> String {
        let path = &self.login[format!("http://{}", self.host()).len()..];
        let r = get(self.port, path, &[("Host", &self.host())]);
        assert_eq!(r.status, 303, "{r:?}");
        let cookie = r.header("set-cookie").expect("a cookie");
        cookie.split(';').next().unwrap().to_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer: its status, headers and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    head: String,
    pub body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// One HTTP/1.1 request on a connection of its own.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Answer { status, head: head.to_owned(), body: body.to_owned() }
}

fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Answer {
    request(port, "GET", path, headers, "")
}

/// A person's browser: a session on a server.
struct Person<'a> {
    server: &'a Server,
    cookie: String,
}

impl Person<'_> {
    fn get(&self, path: &str) -> Answer {
        let host = self.server.host();
        get(self.server.port, path, &[("Host", &host), ("Cookie", &self.cookie)])
    }

    /// The session's token, as a page's forms carry it.
    fn token(&self) -> String {
        let page = self.get("/").body;
        let at = page.find("name=\"token\" value=\"").map(|i| i + 20);
        match at {
            Some(i) => page[i..i + 32].to_owned(),
            None => {
                let page = self.get("/approvals").body;
                let i = page.find("name=\"token\" value=\"").expect("a form") + 20;
                page[i..i + 32].to_owned()
            }
        }
    }

    /// Posts a form from a page of this server, with the session's token.
    fn post(&self, path: &str, fields: &[(&str, &str)]) -> Answer {
        let (host, origin) = (self.server.host(), format!("http://{}", self.server.host()));
        let mut body = form_token(&self.page_token());
        for (k, v) in fields {
            body.push_str(&format!("&{k}={}", encode(v)));
        }
        let headers = [
            ("Host", host.as_str()),
            ("Origin", origin.as_str()),
            ("Sec-Fetch-Site", "same-origin"),
            ("Cookie", self.cookie.as_str()),
        ];
        request(self.server.port, "POST", path, &headers, &body)
    }

    /// The token from an item page's form (every page of a session carries the same one).
    fn page_token(&self) -> String {
        for path in ["/items/it", "/approvals", "/harnesses/x"] {
            let page = self.get(path).body;
            if let Some(i) = page.find("name=\"token\" value=\"") {
                return page[i + 20..i + 52].to_owned();
            }
        }
        self.token()
    }
}

fn form_token(t: &str) -> String {
    format!("token={t}")
}

fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A git repository with `wf.sh`, run under `--isolation worktree`: it keeps the start line's
/// feedback in `feedback.txt` beside the root, appends a line holding `<script>` to `a.txt`,
/// commits it, and cites the feedback in its evidence.
pub fn review_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let git = |args: &[&str]| {
        let out = Command::new("git").arg("-C").arg(r).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.email", "ana@example.com"]);
    git(&["config", "user.name", "Ana"]);
    std::fs::write(r.join("a.txt"), "first\n").unwrap();
    let wf = r.join("wf.sh");
    std::fs::write(
        &wf,
        r#"#!/bin/bash
read -r start
feedback=$(printf '%s' "$start" | python3 -c 'import json,sys; print(" | ".join(f["text"] for f in json.load(sys.stdin)["attempt"].get("feedback", [])))')
echo "attempt line <script>alert(1)</script> ${feedback}" >> a.txt
git add a.txt && git commit -q -m "the attempt's change"
python3 - "$feedback" <<'PY'
import json, sys
fb = sys.argv[1] or "none"
print(json.dumps({"op": "evidence", "kind": "review", "status": "passed",
                  "label": "feedback received: " + fb, "summary": "<script>alert(2)</script>",
                  "acceptance_ids": ["accept-1"]}))
print(json.dumps({"op": "result", "ok": True, "summary": "done"}))
PY
"#,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&wf).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wf, perms).unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "init"]);
    let create = [
        "work",
        "create",
        "It",
        "wf.sh",
        "--id",
        "it",
        "--objective",
        "do it",
        "--accept",
        "the change is reviewed",
    ];
    let out = harn(r, &create);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

fn state(r: &Path) -> Value {
    json(&harn(r, &["work", "show", "it", "--json"]))["projection"].clone()
}

fn wait_for_state(r: &Path, wanted: &str) -> Value {
    let started = Instant::now();
    loop {
        let p = state(r);
        if p["state"] == wanted {
            return p;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "never {wanted}: {p}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn history(r: &Path) -> String {
    text(&harn(r, &["work", "show", "it"]))
}

#[test]
fn a_review_from_the_web_reaches_the_next_attempt_and_lands_with_the_web_actor() {
    let dir = review_root();
    let r = dir.path();
    let out = harn(r, &["work", "run", "it", "--isolation", "worktree"]);
    assert!(out.status.success(), "{}", text(&out));
    let server = Server::start(r);
    let person = Person { server: &server, cookie: server.log_in() };
    let page = person.get("/items/it");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("Reject with feedback"), "{}", page.body);

    // Words beginning `--` are words, never an option of the verb they go to.
    let words = "--actor=mallory keep the tabs & the <spaces>";
    let said = person.post("/items/it/reject", &[("feedback", words)]);
    assert_eq!(said.status, 303, "{said:?}");
    assert_eq!(state(r)["state"], "ready");
    let said = person.post("/items/it/run", &[]);
    assert_eq!(said.status, 303, "{said:?}");
    wait_for_state(r, "in_review");
    let proof = person.get(&format!("/runs/{}/proof", state(r)["latest_run_id"].as_str().unwrap()));
    assert!(
        proof.body.contains(
            "feedback received: --actor=mallory keep the tabs &#38; the &#60;spaces&#62;"
        ),
        "the next attempt received the words: {}",
        proof.body
    );
    assert!(proof.body.contains("the commit holds exactly the attested diff"), "{}", proof.body);

    assert_eq!(person.post("/items/it/accept", &[("reason", "answers the review")]).status, 303);
    assert_eq!(state(r)["state"], "succeeded");
    assert_eq!(person.post("/items/it/land", &[]).status, 303);
    assert_eq!(state(r)["landed"], true, "{}", history(r));
    let h = history(r);
    let rejected = "sent back with feedback: --actor=mallory keep the tabs";
    for done in [rejected, "attempt 2 started", "accepted", "landed"] {
        let mut lines =
            h.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()));
        let line = lines.find(|l| l.contains(done)).unwrap_or_else(|| panic!("{done}: {h}"));
        assert!(line.contains("web:"), "{done} by the web actor: {line}");
    }
    let main = Command::new("git").arg("-C").arg(r).args(["show", "main:a.txt"]).output().unwrap();
    assert!(String::from_utf8_lossy(&main.stdout).contains("keep the tabs"), "landed on main");
}

#[test]
fn a_proof_a_run_wrote_is_shown_as_text() {
    let dir = review_root();
    let r = dir.path();
    assert!(harn(r, &["work", "run", "it", "--isolation", "worktree"]).status.success());
    let server = Server::start(r);
    let person = Person { server: &server, cookie: server.log_in() };
    let run = state(r)["latest_run_id"].as_str().unwrap().to_owned();
    for path in [format!("/runs/{run}/proof"), format!("/runs/{run}"), "/items/it".into()] {
        let page = person.get(&path);
        assert_eq!(page.status, 200, "{path}: {page:?}");
        assert!(!page.body.contains("<script"), "{path} renders a run's <script>: {}", page.body);
        let csp = page.header("content-security-policy").unwrap();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(page.header("x-frame-options").as_deref(), Some("DENY"));
    }
    let proof = person.get(&format!("/runs/{run}/proof")).body;
    assert!(proof.contains("&#60;script&#62;alert(1)&#60;/script&#62;"), "the diff: {proof}");
    assert!(proof.contains("&#60;script&#62;alert(2)&#60;/script&#62;"), "the evidence: {proof}");
}

#[test]
fn the_door_refuses_foreign_names_origins_and_forged_changes() {
    let dir = review_root();
    let r = dir.path();
    assert!(harn(r, &["work", "run", "it", "--isolation", "worktree"]).status.success());
    let server = Server::start(r);
    let (port, host) = (server.port, server.host());
    // Nothing without a session but the login and the style sheet.
    assert_eq!(get(port, "/", &[("Host", &host)]).status, 401);
    assert_eq!(get(port, "/login?key=0123", &[("Host", &host)]).status, 403);
    // DNS rebinding: a name the server was not given, even with the right key.
    let path = &server.login[format!("http://{host}").len()..];
    assert_eq!(get(port, path, &[("Host", &format!("evil.example:{port}"))]).status, 421);
    let cookie = server.log_in();
    assert_eq!(get(port, path, &[("Host", &host)]).status, 403, "the key works once");
    // Nothing a run may read holds it.
    let key = path.rsplit('=').next().unwrap();
    let mut stack = vec![r.join(".harnery")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                assert!(!String::from_utf8_lossy(&bytes).contains(key), "{}", p.display());
            }
        }
    }
    let person = Person { server: &server, cookie: cookie.clone() };
    assert_eq!(person.get("/").status, 200);
    assert_eq!(get(port, "/", &[("Host", "localhost.evil:1"), ("Cookie", &cookie)]).status, 421);
    let token = person.page_token();
    let body = format!("token={token}");
    let post = |headers: &[(&str, &str)]| request(port, "POST", "/items/it/accept", headers, &body);
    let origin = format!("http://{host}");
    // Another site's page posting with the person's cookie.
    let foreign = post(&[("Host", &host), ("Origin", "http://evil.example"), ("Cookie", &cookie)]);
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let no_origin = post(&[("Host", &host), ("Cookie", &cookie)]);
    assert_eq!(no_origin.status, 403, "{no_origin:?}");
    let cross = [
        ("Host", &*host),
        ("Origin", &*origin),
        ("Sec-Fetch-Site", "cross-site"),
        ("Cookie", &*cookie),
    ];
    assert_eq!(post(&cross).status, 403);
    let forged = request(
        port,
        "POST",
        "/items/it/accept",
        &[("Host", &host), ("Origin", &origin), ("Cookie", &cookie)],
        "token=00000000000000000000000000000000",
    );
    assert_eq!(forged.status, 403, "{forged:?}");
    assert_eq!(state(r)["state"], "in_review", "nothing was accepted");
    // The same request with the session's token is the person's.
    let ok = post(&[("Host", &host), ("Origin", &origin), ("Cookie", &cookie)]);
    assert_eq!(ok.status, 303, "{ok:?}");
    assert_eq!(state(r)["state"], "succeeded");
}

/// A root whose workflow connects to the web server at the port in `port.txt` from inside its
/// run, and cites the status it got.
#[test]
fn a_process_inside_a_run_is_refused() {
    if !Path::new("/bin/bash").exists() {
        return crate::skip::skip("bash is needed for /dev/tcp");
    }
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    let wf = r.join("wf.sh");
    std::fs::write(
        &wf,
        r#"#!/bin/bash
read -r start
port=$(cat port.txt)
exec 3<>/dev/tcp/127.0.0.1/$port
printf 'GET /style.css HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' "$port" >&3
answer=$(tr -d '\r"' <&3 | tr '\n' ' ')
echo "{\"op\":\"evidence\",\"kind\":\"probe\",\"status\":\"passed\",\"label\":\"$answer\"}"
echo '{"op":"result","ok":true,"summary":"probed"}'
"#,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&wf).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wf, perms).unwrap();
    let server = Server::start(r);
    std::fs::write(r.join("port.txt"), server.port.to_string()).unwrap();
    // From outside every run, the style sheet is public.
    assert_eq!(get(server.port, "/style.css", &[("Host", &server.host())]).status, 200);
    let probe = |id: &str, network: &str| {
        let out = harn(r, &["work", "create", id, "wf.sh", "--id", id, "--objective", "o"]);
        assert!(out.status.success(), "{}", text(&out));
        let out = harn(r, &["work", "run", id, "--network", network, "--json"]);
        let doc = json(&out);
        let run = doc["run_id"].as_str().map(str::to_owned).unwrap_or_else(|| {
            json(&harn(r, &["work", "show", id, "--json"]))["projection"]["latest_run_id"]
                .as_str()
                .unwrap()
                .to_owned()
        });
        json(&harn(r, &["run", "show", &run, "--json"]))
    };
    // Under its network policy a run reaches no web view: by default not at all, and not
    // through harn's proxy even when its policy names the port.
    let shown = probe("by-default", "adapters");
    let label = shown["proof"]["evidence"][0]["label"].as_str().unwrap_or("").to_owned();
    assert!(!label.contains("HTTP"), "a run reached the web: {label:?}");
    let named = format!("127.0.0.1:{}", server.port);
    let shown = probe("named", &named);
    let label = shown["proof"]["evidence"][0]["label"].as_str().unwrap_or("").to_owned();
    assert!(!label.contains("HTTP/1.1 200") && !label.contains("text/css"), "{label:?}");
    let refused = shown["network_refused"].as_array().cloned().unwrap_or_default();
    assert!(refused.iter().any(|x| x["port"] == server.port), "{shown}");
    // With the machine's network, the web's own door refuses it.
    let shown = probe("open", "open");
    let label = shown["proof"]["evidence"][0]["label"].as_str().unwrap_or("").to_owned();
    assert!(label.contains("403"), "a run's process is refused: {label:?} ({shown})");
    assert!(
        label.contains("a run's cgroup") || label.contains("a user namespace not ours"),
        "refused for where it runs, not for want of a place: {label:?}"
    );
    let held = shown["proof"]["containment"]["holding"].as_str().unwrap_or("").to_owned();
    if held != "cgroup" {
        crate::skip::skip(format!("runs are held by {held:?}, not a cgroup"));
    }
}

#[test]
fn a_parked_run_is_approved_and_resumed_from_the_web() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/ship.sh"), r.join("wf.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), r.join("harness.sh")).unwrap();
    std::fs::copy(examples.join("policy.json"), r.join("policy.json")).unwrap();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    let config = r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#;
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    let create = ["work", "create", "Ship", "wf.sh", "--objective", "add the flag", "--id", "it"];
    assert!(harn(r, &create).status.success());
    let run = ["work", "run", "it", "--harness", "scripted", "--policy", "policy.json"];
    assert_eq!(harn(r, &run).status.code(), Some(1), "parked");
    assert_eq!(state(r)["state"], "awaiting_approval");
    let server = Server::start(r);
    let person = Person { server: &server, cookie: server.log_in() };
    let page = person.get("/approvals").body;
    let id = approval_id(&page);
    assert!(page.contains("pending"), "{page}");
    let said = person.post(&format!("/approvals/{id}/approve"), &[("reason", "push is fine")]);
    assert_eq!(said.status, 303, "{said:?}");
    let approvals = json(&harn(r, &["approval", "show", &id, "--json"]));
    assert!(approvals.to_string().contains("web:"), "ruled by the web actor: {approvals}");
    let item = person.get("/items/it").body;
    assert!(item.contains("Resume the run"), "{item}");
    assert_eq!(person.post("/items/it/run", &[]).status, 303);
    wait_for_state(r, "in_review");
    // Sent back, the next attempt would need the policy file the web cannot name: it is not
    // offered, and asked for anyway it is refused, so no attempt runs without its policy.
    assert_eq!(person.post("/items/it/reject", &[("feedback", "push less")]).status, 303);
    let item = person.get("/items/it").body;
    assert!(!item.contains("Run the next attempt"), "{item}");
    assert!(item.contains("a policy file, which the web cannot give again"), "{item}");
    assert_eq!(person.post("/items/it/run", &[]).status, 303);
    let item = person.get("/items/it").body;
    assert!(item.contains("refused: its latest attempt ran with a policy file"), "{item}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(state(r)["state"], "ready", "no attempt started");
}

/// Ctrl-C in the terminal of `harn web` signals its process group: an attempt started from
/// the web is not in it, and runs to its end.
#[test]
fn an_attempt_started_from_the_web_outlives_the_server() {
    let dir = review_root();
    let r = dir.path();
    let slow = r.join("slow.sh");
    std::fs::write(&slow, "#!/bin/sh\nread -r start\nsleep 2\necho '{\"op\":\"result\",\"ok\":true,\"summary\":\"slow\"}'\n").unwrap();
    let mut perms = std::fs::metadata(&slow).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&slow, perms).unwrap();
    let create = ["work", "create", "Slow", "slow.sh", "--id", "slow", "--objective", "o"];
    assert!(harn(r, &create).status.success());
    let server = Server::start(r);
    let person = Person { server: &server, cookie: server.log_in() };
    let token = {
        let page = person.get("/items/slow").body;
        let i = page.find("name=\"token\" value=\"").expect("a form") + 20;
        page[i..i + 32].to_owned()
    };
    let (host, origin) = (server.host(), format!("http://{}", server.host()));
    let headers = [("Host", &*host), ("Origin", &*origin), ("Cookie", &*person.cookie)];
    let said = request(server.port, "POST", "/items/slow/run", &headers, &format!("token={token}"));
    assert_eq!(said.status, 303, "{said:?}");
    let started = Instant::now();
    while json(&harn(r, &["work", "show", "slow", "--json"]))["projection"]["state"] != "running" {
        assert!(started.elapsed() < Duration::from_secs(20), "never running");
        std::thread::sleep(Duration::from_millis(50));
    }
    let group = rustix::process::Pid::from_raw(server.child.id() as i32).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).unwrap();
    let p = {
        let started = Instant::now();
        loop {
            let p = json(&harn(r, &["work", "show", "slow", "--json"]))["projection"].clone();
            if p["state"] != "running" {
                break p;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "still running: {p}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(p["state"], "in_review", "the attempt ran to its end: {p}");
}

fn approval_id(page: &str) -> String {
    let at = page.find("/approvals/").expect("an approval's form") + "/approvals/".len();
    page[at..].split('/').next().unwrap().to_owned()
}

#[test]
fn a_listen_address_other_machines_reach_is_refused_unless_asked_for() {
    let dir = review_root();
    let out = Command::new(harn_bin())
        .args(["web", "--listen", "0.0.0.0:0", "--root"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--not-loopback"), "{}", text(&out));
    let out = Command::new(harn_bin())
        .args(["web", "--root"])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
