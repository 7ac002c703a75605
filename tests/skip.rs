//! A test that needs what a machine may lack (root, a writable cgroup v2 hierarchy, a tmpfs
//! mount, Landlock, git, bash) says so when it cannot run, on the terminal past the test
//! runner's capture, and passes; unless `HARN_REQUIRE_CAPABILITIES=1`, which `.ci/run` sets
//! on a machine that has them all: there a missing capability fails the test, so CI never
//! passes one silently.

use std::io::Write;

/// Says that the calling test (or its part) did not run, and why; fails it where every
/// capability is required.
pub fn skip(why: impl std::fmt::Display) {
    if std::env::var_os("HARN_REQUIRE_CAPABILITIES").is_some_and(|v| v == "1") {
        panic!("HARN_REQUIRE_CAPABILITIES=1, and this machine lacks what the test needs: {why}");
    }
    let name = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ = writeln!(std::io::stderr(), "SKIPPED {name}: {why}");
}
