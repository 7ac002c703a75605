//! Smoke test of the built binary. Its presence also makes `cargo test --workspace` build the
//! `harn` binary that the workspace's integration tests run.

use std::process::Command;

#[test]
fn help_and_version_work() {
    let out = Command::new(env!("CARGO_BIN_EXE_harn")).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("sim"));
    let out = Command::new(env!("CARGO_BIN_EXE_harn")).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("harn "));
}
