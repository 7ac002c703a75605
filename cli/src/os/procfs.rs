//! What `/proc` shows, read here and nowhere else: our user's other processes with their
//! environments (how a harness daemon finds an earlier daemon's children, and a run host
//! what a run left, where no cgroup holds them), a process's group, user namespace and
//! cgroup, this boot's id, our open descriptors, the mounts and the listening Unix sockets.

use std::os::unix::fs::MetadataExt;

/// Our pid and every ancestor's, up to init.
pub fn ancestors() -> Vec<u32> {
    let mut chain = vec![std::process::id()];
    while chain.len() < 64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", chain[chain.len() - 1]))
            .unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        match ppid {
            Some(p) if p > 1 => chain.push(p),
            _ => break,
        }
    }
    chain
}

/// The session of `pid` (`/proc/PID/stat`'s sixth field), if it is alive.
pub fn session_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(3)?.parse().ok()
}

/// Every process of our user but us and our ancestors (whoever started us may carry the
/// same markers), with the variables of its environment for `pick` to choose from. Another
/// user's process is never taken for ours, whatever its environment says.
pub fn ours_where<T>(mut pick: impl FnMut(&[&[u8]]) -> Option<T>) -> Vec<(u32, T)> {
    let ancestors = ancestors();
    let uid = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if ancestors.contains(&pid) || entry.metadata().map_or(true, |m| m.uid() != uid) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
        if let Some(t) = pick(&vars) {
            found.push((pid, t));
        }
    }
    found
}

/// The process group of `pid` (`/proc/PID/stat`'s fifth field), if it is alive.
/// True while a process `pid` exists (a zombie included).
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

pub fn group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
}

/// The user namespace of `pid` (ours when `None`), as the link `/proc/PID/ns/user` names it.
pub fn user_namespace(pid: Option<u32>) -> Option<std::path::PathBuf> {
    let who = pid.map_or_else(|| "self".to_owned(), |p| p.to_string());
    std::fs::read_link(format!("/proc/{who}/ns/user")).ok()
}

/// The cgroup v2 path of `pid` (`/proc/PID/cgroup`'s `0::` line), if it is alive.
pub fn cgroup_of(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("0::").map(str::to_owned))
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), empty when unknown.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// How many descriptors this process has open, counted in `/proc/self/fd` (the directory's
/// own descriptor among them).
pub fn open_descriptors() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// This process's mount table (`/proc/self/mountinfo`).
pub fn mountinfo() -> Option<String> {
    std::fs::read_to_string("/proc/self/mountinfo").ok()
}

/// The machine's Unix sockets (`/proc/net/unix`).
pub fn unix_sockets() -> Option<String> {
    std::fs::read_to_string("/proc/net/unix").ok()
}

/// True when `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        }
    }
}

/// This machine's host name, as the kernel keeps it.
pub fn hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(name.trim().to_owned())
}
