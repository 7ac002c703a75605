//! The only way out of a run's network namespace: an HTTP proxy harn runs outside the run, on
//! a Unix socket in the segment's temporary directory, which the run's forwarder (inside its
//! namespace, on `127.0.0.1`) relays to. It lets through exactly what the run's frozen
//! network policy allows (`harn_core::work::network::Allowed`): `CONNECT host:port` and
//! plain `GET http://host:port/…` requests, each endpoint checked, and never to a `harn web`
//! of this machine; it refuses the rest with 403 and remembers each refusal for the run's
//! transcript. Bounded: a request's head is at most 16 KiB, read within 30 s, and at most
//! 256 connections are open at once.

use harn_core::work::network::Allowed;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The name of the proxy's socket in the segment's temporary directory.
pub const SOCKET: &str = ".harn-proxy.sock";

/// Most bytes of a request's head.
const HEAD_MAX: usize = 16 * 1024;

/// Most connections open at once.
const OPEN_MAX: usize = 256;

/// A connection the proxy refused: where to, and how many times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The host asked for.
    pub host: String,
    /// The port.
    pub port: u16,
    /// How many times.
    pub times: u32,
}

/// A running proxy; it stops when dropped.
pub struct Proxy {
    /// Its socket.
    pub path: PathBuf,
    refused: Arc<Mutex<Vec<Refused>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Starts a proxy for `allowed` on a socket in `dir`.
    pub fn start(dir: &Path, allowed: Allowed) -> std::io::Result<Proxy> {
        let path = dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let refused = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (refused.clone(), stop.clone());
        let allowed = Arc::new(allowed);
        let open = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                if open.load(Ordering::Relaxed) >= OPEN_MAX {
                    continue;
                }
                open.fetch_add(1, Ordering::Relaxed);
                let (allowed, refused, open) = (allowed.clone(), r.clone(), open.clone());
                std::thread::spawn(move || {
                    serve(conn, &allowed, &refused);
                    open.fetch_sub(1, Ordering::Relaxed);
                });
            }
        });
        Ok(Proxy { path, refused, stop })
    }

    /// What it refused so far.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so it sees the stop.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One connection: reads the request's head, checks where it goes, then relays.
fn serve(mut conn: UnixStream, allowed: &Allowed, refused: &Mutex<Vec<Refused>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Some((head, rest)) = read_head(&mut conn) else { return };
    let text = String::from_utf8_lossy(&head).into_owned();
    let line = text.lines().next().unwrap_or_default().to_owned();
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let connect = method.eq_ignore_ascii_case("CONNECT");
    let endpoint = match connect {
        true => split_authority(target, 443),
        false => target
            .strip_prefix("http://")
            .and_then(|t| split_authority(t.split('/').next().unwrap_or(""), 80)),
    };
    let Some((host, port)) = endpoint else {
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
        return;
    };
    if !allowed.allows(&host, port) || is_harn_web(&host, port) {
        note(refused, &host, port);
        let body = format!("harn: {host}:{port} is not in this run's network policy\n");
        let reply = format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(reply.as_bytes());
        return;
    }
    let upstream = (host.as_str(), port).to_socket_addrs().ok().and_then(|mut addrs| {
        addrs.find_map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(30)).ok())
    });
    let Some(mut upstream) = upstream else {
        let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n");
        return;
    };
    let _ = conn.set_read_timeout(None);
    if connect {
        if conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
            return;
        }
    } else {
        // The request goes on in origin form: the path, not the whole URL.
        let path = target.strip_prefix("http://").and_then(|t| t.find('/').map(|i| &t[i..]));
        let first =
            format!("{method} {} {}", path.unwrap_or("/"), words.next().unwrap_or("HTTP/1.1"));
        let after = &head[line.len()..];
        if upstream.write_all(first.as_bytes()).and_then(|()| upstream.write_all(after)).is_err() {
            return;
        }
    }
    if !rest.is_empty() && upstream.write_all(&rest).is_err() {
        return;
    }
    relay(conn, upstream);
}

/// Copies both ways until both sides are done.
fn relay(conn: UnixStream, upstream: TcpStream) {
    let (Ok(mut c2), Ok(mut u2)) = (conn.try_clone(), upstream.try_clone()) else { return };
    let up = std::thread::spawn(move || {
        let mut conn = conn;
        let mut upstream = upstream;
        let _ = std::io::copy(&mut conn, &mut upstream);
        let _ = upstream.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut u2, &mut c2);
    let _ = c2.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// The request's head (through its blank line) and whatever came after it, or `None` when
/// it is too long, too slow, or cut.
fn read_head(conn: &mut UnixStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((buf, rest));
        }
        if buf.len() > HEAD_MAX {
            return None;
        }
    }
}

/// `host:port` (or `[v6]:port`; `default` when there is no port), host lowercase.
fn split_authority(text: &str, default: u16) -> Option<(String, u16)> {
    let text = text.rsplit_once('@').map_or(text, |(_, a)| a);
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((host.to_ascii_lowercase(), port));
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Some((host.to_ascii_lowercase(), port.parse().ok()?)),
        None if !text.is_empty() => Some((text.to_ascii_lowercase(), default)),
        None => None,
    }
}

fn note(refused: &Mutex<Vec<Refused>>, host: &str, port: u16) {
    let mut list = refused.lock().unwrap_or_else(|e| e.into_inner());
    match list.iter_mut().find(|r| r.host == host && r.port == port) {
        Some(r) => r.times = r.times.saturating_add(1),
        None => list.push(Refused { host: host.to_owned(), port, times: 1 }),
    }
}

/// True when `host`:`port` is this machine's loopback and a `harn web` listens there: a run
/// never reaches a person's review through the proxy, whatever its policy lists (the web's
/// own door would see the proxy, a process outside the run).
fn is_harn_web(host: &str, port: u16) -> bool {
    let loopback = host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback() || a.is_unspecified());
    if !loopback {
        return false;
    }
    crate::os::tcp_peer::harn_web_on(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_with_their_default_port() {
        assert_eq!(
            split_authority("Api.Example.com:8443", 443),
            Some(("api.example.com".into(), 8443))
        );
        assert_eq!(split_authority("example.com", 80), Some(("example.com".into(), 80)));
        assert_eq!(split_authority("[::1]:9", 80), Some(("::1".into(), 9)));
        assert_eq!(split_authority("u:p@h:1", 80), Some(("h".into(), 1)));
        assert_eq!(split_authority("h:x", 80), None);
    }
}
