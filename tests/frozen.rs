//! The workflow that runs is the workflow that was frozen: each run executes its own copy of
//! the frozen bytes, so a file swapped back and forth under the frozen path never runs its
//! other content, a shell workflow and a JavaScript module alike. The real binary in real
//! directories.

use crate::cli::{harn_at, text};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Swaps `path` between `a` and `b` (each written whole and renamed into place) until stopped.
fn swap_loop(path: &Path, a: &str, b: &str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (path, a, b) = (path.to_owned(), a.to_owned(), b.to_owned());
    std::thread::spawn(move || {
        let temp = path.with_extension("swap");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        let mut n = 0u64;
        while !stop.load(Ordering::SeqCst) {
            std::fs::write(&temp, if n.is_multiple_of(2) { &b } else { &a }).unwrap();
            std::fs::set_permissions(&temp, std::fs::Permissions::clone(&mode)).unwrap();
            std::fs::rename(&temp, &path).unwrap();
            n += 1;
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
        std::fs::write(&path, &a).unwrap();
    })
}

/// Runs attempts of `w` (retrying after each failure) while the workflow file is swapped,
/// until `attempts` workflows have run; returns what they wrote to `ran.log`.
fn run_while_swapped(root: &Path, workflow: &str, a: &str, b: &str, attempts: usize) -> String {
    let path = root.join(workflow);
    std::fs::write(&path, a).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let create =
        ["work", "create", "w", workflow, "--id", "w", "--objective", "o", "--max-attempts", "100"];
    let out = harn_at(root, &create);
    assert!(out.status.success(), "{}", text(&out));
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = swap_loop(&path, a, b, stop.clone());
    let ran = || std::fs::read_to_string(root.join("ran.log")).unwrap_or_default();
    let (mut tries, mut refused) = (0, 0);
    while ran().lines().count() < attempts && tries < attempts * 20 {
        let shown = crate::cli::json(&harn_at(root, &["work", "show", "w", "--json"]));
        let verb = if shown["projection"]["next_action"] == "run" { "run" } else { "retry" };
        let out = harn_at(root, &["work", verb, "w"]);
        let said = text(&out);
        // Refused before anything was recorded, or a run whose copy could not be made from
        // the frozen bytes (never started, uncharged): either way the frozen digest held.
        if said.contains("changed since the work item was frozen")
            || said.contains("is not the workflow the work item froze")
        {
            refused += 1;
        } else {
            assert!(said.contains("failed"), "{said}");
        }
        tries += 1;
    }
    stop.store(true, Ordering::SeqCst);
    swapper.join().unwrap();
    assert!(refused > 0, "the swap loop never hit a start: {tries} tries");
    std::fs::read_to_string(root.join("ran.log")).unwrap_or_default()
}

#[test]
fn a_swapped_shell_workflow_never_runs_its_other_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let body = |tag: &str| {
        format!(
            "#!/bin/sh\nread start\necho {tag} >> \"$HARN_WORKFLOW.ran\"\necho {tag} >> ran.log\n\
             echo '{{\"op\":\"result\",\"ok\":false,\"error\":\"again\"}}'\nexit 1\n"
        )
    };
    let ran = run_while_swapped(root, "wf.sh", &body("frozen"), &body("other"), 30);
    assert_eq!(ran.lines().count(), 30, "{ran}");
    assert!(ran.lines().all(|l| l == "frozen"), "the other bytes ran: {ran}");
    // The copy finds where the frozen file lives.
    let beside = std::fs::read_to_string(root.join("wf.sh.ran")).unwrap();
    assert_eq!(beside.lines().count(), 30, "{beside}");
}

#[test]
fn a_swapped_javascript_module_never_runs_its_other_bytes_and_its_siblings_still_import() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join("helper.mjs"), "export const where = 'beside';\n").unwrap();
    let body = |tag: &str| {
        format!(
            "import {{ appendFileSync }} from 'node:fs';\nimport {{ where }} from './helper.mjs';\n\
             export default async () => {{ appendFileSync('ran.log', '{tag} ' + where + '\\n'); \
             throw new Error('again'); }};\n"
        )
    };
    let ran = run_while_swapped(root, "wf.mjs", &body("frozen"), &body("other"), 8);
    assert_eq!(ran.lines().count(), 8, "{ran}");
    assert!(ran.lines().all(|l| l == "frozen beside"), "the other bytes ran: {ran}");
    // Every run that started names the sibling it imported, with its digest.
    let runs = std::fs::read_dir(root.join(".harnery/workflows")).unwrap().flatten();
    let transcripts: Vec<String> = runs
        .filter_map(|r| std::fs::read_to_string(r.path().join("transcript.jsonl")).ok())
        .filter(|t| t.contains("\"run.start\""))
        .collect();
    assert_eq!(transcripts.len(), 8);
    for t in &transcripts {
        assert!(t.contains("helper.mjs (sha256 "), "{t}");
    }
}
