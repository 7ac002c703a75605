//! Who holds the other end of a TCP connection made on this machine: its socket in the
//! kernel's table (`/proc/net/tcp`, `/proc/net/tcp6`) and the processes that hold it, or,
//! when a holder cannot be looked into, every process that cannot.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Where the other end of a connection was found.
#[derive(Debug, PartialEq, Eq)]
pub enum Holders {
    /// Not in this network namespace's table: another machine, or another namespace.
    NotHere,
    /// In the table, but closed already by whoever made it (inode 0): nobody may say who.
    Closed,
    /// The processes holding the socket.
    Found(Vec<u32>),
    /// In the table, but held by none of the processes we may look into: one of `unseen`
    /// (the processes whose descriptors we may not read) holds it.
    Unseen(Vec<u32>),
}

/// The processes holding the socket whose local end is `theirs` and whose remote end is our
/// `port` (at whichever of our addresses it reached).
pub fn holders(theirs: SocketAddr, port: u16) -> Holders {
    let table =
        |name: &str| std::fs::read_to_string(format!("/proc/net/{name}")).unwrap_or_default();
    let inode = find_inode(&table("tcp"), theirs, port)
        .or_else(|| find_inode(&table("tcp6"), theirs, port));
    let Some(inode) = inode else { return Holders::NotHere };
    if inode == 0 {
        return Holders::Closed;
    }
    let wanted = format!("socket:[{inode}]");
    let (mut found, mut unseen) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir("/proc") else { return Holders::Unseen(unseen) };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            unseen.push(pid);
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| l.as_os_str().as_encoded_bytes() == wanted.as_bytes())
        });
        if holds {
            found.push(pid);
        }
    }
    if found.is_empty() {
        Holders::Unseen(unseen)
    } else {
        Holders::Found(found)
    }
}

/// The processes listening on TCP port `port` of this network namespace (any address).
pub fn listeners(port: u16) -> Vec<u32> {
    let mut inodes = Vec::new();
    for name in ["tcp", "tcp6"] {
        let table = std::fs::read_to_string(format!("/proc/net/{name}")).unwrap_or_default();
        for line in table.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let listening = *state == "0A";
            if listening && parse_address(local).is_some_and(|a| a.port() == port) {
                inodes.extend(inode.parse::<u64>().ok().filter(|i| *i != 0));
            }
        }
    }
    if inodes.is_empty() {
        return Vec::new();
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| {
                wanted.iter().any(|w| l.as_os_str().as_encoded_bytes() == w.as_bytes())
            })
        });
        if holds {
            found.push(pid);
        }
    }
    found
}

/// True when a `harn web` of this machine listens on TCP port `port` (a process named `harn`
/// whose arguments hold the verb `web`).
pub fn harn_web_on(port: u16) -> bool {
    listeners(port).into_iter().any(|pid| {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
        let mut args = cmdline.split(|b| *b == 0);
        let program = args.next().unwrap_or_default();
        let harn = program.rsplit(|b| *b == b'/').next() == Some(b"harn".as_slice());
        harn && args.any(|a| a == b"web")
    })
}

/// The inode of the socket in `table` (the text of `/proc/net/tcp` or `tcp6`) whose local
/// address is `local` and whose remote port is `port`.
pub fn find_inode(table: &str, local: SocketAddr, port: u16) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (l, r, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
        let ours = parse_address(r).is_some_and(|a| a.port() == port);
        let theirs = parse_address(l).is_some_and(|a| same_end(a, local));
        (ours && theirs).then(|| inode.parse().ok()).flatten()
    })
}

/// Two ends are the same when their ports are, and their addresses once an IPv4-mapped IPv6
/// address is taken as the IPv4 address it maps.
fn same_end(a: SocketAddr, b: SocketAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && plain(a.ip()) == plain(b.ip())
}

/// An address as the kernel's table prints it: the address's 32-bit words in hexadecimal, each
/// as the machine stores it, then `:` and the port in hexadecimal.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two lines as a little-endian machine's kernel prints them: 127.0.0.1:40000 connected to
    // 127.0.0.1:8080, and the listening socket.
    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0
   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 222 1 0 20 4 30 10 -1
";

    #[test]
    #[cfg(target_endian = "little")]
    fn a_connection_is_found_by_both_its_ends() {
        let theirs: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let ours: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(find_inode(TABLE, theirs, ours.port()), Some(222));
        assert_eq!(find_inode(TABLE, ours, theirs.port()), None, "the other direction is ours");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:40000".parse().unwrap();
        assert_eq!(find_inode(TABLE, mapped, ours.port()), Some(222));
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn an_ipv6_address_is_read_word_by_word() {
        let a = parse_address("00000000000000000000000001000000:1F90").unwrap();
        assert_eq!(a, "[::1]:8080".parse().unwrap());
        assert_eq!(parse_address("zz:1"), None);
        assert_eq!(parse_address("0100007F"), None);
    }

    #[test]
    fn a_socket_its_maker_closed_is_told_apart() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, theirs) = listener.accept().unwrap();
        drop(client);
        assert_eq!(holders(theirs, listener.local_addr().unwrap().port()), Holders::Closed);
    }

    #[test]
    fn this_process_holds_its_own_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, theirs) = listener.accept().unwrap();
        assert_eq!(theirs, client.local_addr().unwrap());
        match holders(theirs, listener.local_addr().unwrap().port()) {
            Holders::Found(pids) => assert!(pids.contains(&std::process::id()), "{pids:?}"),
            other => panic!("{other:?}"),
        }
    }
}
