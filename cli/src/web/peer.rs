//! Who asks: the process at the other end of a request's connection, placed inside or outside
//! the runs and harnesses of this machine, by its cgroup and its user namespace, as the
//! harness daemon's socket places its peers.

use crate::os::procfs::{cgroup_of, user_namespace};
use crate::os::tcp_peer::{holders, Holders};
use harn_core::web::Peer;
use std::net::SocketAddr;

/// Places the process that connected from `theirs` to our `port`.
pub fn place(theirs: SocketAddr, port: u16) -> Peer {
    let theirs = SocketAddr::new(theirs.ip().to_canonical(), theirs.port());
    match holders(theirs, port) {
        // Not a socket of this network namespace: another machine, when it came from one.
        Holders::NotHere if !theirs.ip().is_loopback() => Peer::Outside,
        Holders::NotHere => Peer::Unknown("its socket is not in this machine's table".into()),
        // A request sent and its socket closed at once: whoever sent it cannot be told, so
        // it is not answered (a run could otherwise send a blind request and go).
        Holders::Closed => Peer::Unknown("its socket was closed before it could be placed".into()),
        Holders::Found(pids) => match pids.iter().find_map(|&p| contained(p)) {
            Some(why) => Peer::Contained(why),
            None => Peer::Outside,
        },
        // A process we may not look into holds it (a non-dumpable one such as an SSH
        // server's session, or another user's): if any such process is contained, it may be
        // the one, so the request is refused.
        Holders::Unseen(pids) => match pids.iter().find_map(|&p| contained(p)) {
            Some(why) => Peer::Unknown(format!(
                "its holder cannot be looked into, and one such process is in {why}"
            )),
            None => Peer::Outside,
        },
    }
}

/// Where `pid` is contained, if it is: a run's cgroup, a harness's cgroup, or a user
/// namespace not ours (a contained run's, where no cgroup holds it).
fn contained(pid: u32) -> Option<String> {
    if let Some(cgroup) = cgroup_of(pid) {
        if cgroup.contains("/harn-work-") {
            return Some(format!("a run's cgroup (process {pid})"));
        }
        if cgroup.split('/').any(is_harness_base) {
            return Some(format!("a harness's cgroup (process {pid})"));
        }
    }
    match (user_namespace(Some(pid)), user_namespace(None)) {
        (Some(theirs), Some(ours)) if theirs != ours => {
            Some(format!("a user namespace not ours (process {pid})"))
        }
        _ => None,
    }
}

/// True for the harness daemon's cgroup directory of a root: `harn-` and 16 hex digits.
fn is_harness_base(name: &str) -> bool {
    name.strip_prefix("harn-")
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_bases_are_told_from_other_names() {
        assert!(is_harness_base("harn-0123456789abcdef"));
        assert!(!is_harness_base("harn-work-0123456789abcdef"));
        assert!(!is_harness_base("harn-0123"));
    }

    #[test]
    fn this_process_is_outside() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, theirs) = listener.accept().unwrap();
        // Unless the tests themselves run inside a harness or a run.
        if contained(std::process::id()).is_none() {
            assert_eq!(place(theirs, listener.local_addr().unwrap().port()), Peer::Outside);
        }
    }
}
