//! The rules of `harn web`'s door: which requests it answers, for whom, and which may change
//! anything. The shell reads the request and the peer; everything decided is here, as a pure
//! function of what it read and the door's sessions (docs/decisions/0016).
//!
//! A web server over harn's records is a door to a person's authority, so: a request from a
//! process inside a run's or a harness's cgroup is refused whatever it carries; the `Host` must
//! name this server (a page of another site cannot reach it through a name it controls, DNS
//! rebinding); a change must come from a page of this server (`Origin`, `Sec-Fetch-Site`) and
//! carry the token of its session; and a session is made only by the one-time login key the
//! person's terminal showed, whose secrets live in the server's memory alone.

pub mod route;

/// Who is at the other end of a connection, as the shell found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A process outside every run and harness of this machine, or another machine.
    Outside,
    /// A process inside a run's or a harness's cgroup, or in a user namespace not ours.
    Contained(String),
    /// A process the shell could not place (its socket or owner not found).
    Unknown(String),
}

/// One request, as far as the door looks at it.
#[derive(Clone, Debug)]
pub struct Asked<'a> {
    /// `GET`, `POST` …
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The `Host` header.
    pub host: Option<&'a str>,
    /// The `Origin` header.
    pub origin: Option<&'a str>,
    /// The `Sec-Fetch-Site` header.
    pub fetch_site: Option<&'a str>,
    /// The `Cookie` header.
    pub cookie: Option<&'a str>,
    /// Who asks.
    pub peer: Peer,
}

/// What the door decided about a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Not answered, with the status and the reason shown.
    Refused {
        /// The HTTP status.
        status: u16,
        /// Why, in a sentence.
        why: String,
    },
    /// A public resource (the style sheet, the login): answered without a session.
    Public,
    /// A read by the session at this index.
    Read(usize),
    /// A change asked by the session at this index: answered only when its form carries the
    /// session's token ([`Door::token_ok`]).
    Change(usize),
}

/// A logged-in browser: the cookie's value and the token its forms carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The cookie's value.
    pub id: String,
    /// The token every change of this session carries.
    pub token: String,
}

/// Why a login was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginRefused {
    /// The key is not the one the server printed.
    WrongKey,
    /// The key was used already.
    Spent,
}

/// The name of the session cookie.
pub const COOKIE: &str = "harn_session";

/// The paths served without a session.
const PUBLIC: &[&str] = &["/login", "/style.css"];

/// The door of one server: the names it answers to, its login key (until used) and its
/// sessions.
#[derive(Clone, Debug)]
pub struct Door {
    /// The `host:port` authorities this server is reached by, lowercase.
    authorities: Vec<String>,
    /// The one-time login key, until a browser used it.
    login: Option<String>,
    /// The sessions made by logging in.
    sessions: Vec<Session>,
}

impl Door {
    /// A door for a server listening on `authority` (`127.0.0.1:8080`), also reached as
    /// `others` (`localhost:8080`), whose one-time login key is `login`.
    pub fn new(authority: &str, others: &[String], login: String) -> Door {
        let mut authorities = vec![authority.to_ascii_lowercase()];
        authorities.extend(others.iter().map(|a| a.to_ascii_lowercase()));
        Door { authorities, login: Some(login), sessions: Vec::new() }
    }

    /// Decides whether `asked` is answered, and as what.
    pub fn admit(&self, asked: &Asked<'_>) -> Admission {
        let refused = |status, why: String| Admission::Refused { status, why };
        match &asked.peer {
            Peer::Outside => {}
            Peer::Contained(why) => {
                return refused(403, format!("refused: the request comes from {why}"));
            }
            Peer::Unknown(why) => {
                return refused(403, format!("refused: who asks cannot be told ({why})"));
            }
        }
        let host = asked.host.map(str::to_ascii_lowercase);
        if !host.as_ref().is_some_and(|h| self.authorities.contains(h)) {
            let named = asked.host.unwrap_or("(none)");
            return refused(421, format!("refused: Host {named:?} is not this server's name"));
        }
        let host = host.unwrap_or_default();
        if let Some(origin) = asked.origin {
            if !same_origin(origin, &host) {
                return refused(403, format!("refused: a request from another site ({origin:?})"));
            }
        }
        let change = match asked.method {
            "GET" | "HEAD" => false,
            "POST" => true,
            other => return refused(405, format!("refused: method {other}")),
        };
        if change {
            // A change must show it comes from a page of this server: a browser always sends
            // `Origin` with a form's POST, and a script elsewhere cannot forge it.
            if asked.origin.is_none() {
                return refused(403, "refused: a change without an Origin".into());
            }
            if asked.fetch_site.is_some_and(|s| s != "same-origin") {
                return refused(403, "refused: a change from another site".into());
            }
        }
        if !change && PUBLIC.contains(&asked.path) {
            return Admission::Public;
        }
        let Some(at) = asked.cookie.and_then(|c| self.session_of(c)) else {
            return refused(
                401,
                "not logged in: open the login address `harn web` printed in its terminal".into(),
            );
        };
        if change {
            Admission::Change(at)
        } else {
            Admission::Read(at)
        }
    }

    /// Logs a browser in with the one-time key `key`, making `fresh` its session; the key is
    /// spent only when it matched.
    pub fn log_in(&mut self, key: &str, fresh: Session) -> Result<&Session, LoginRefused> {
        match &self.login {
            Some(login) if same(login, key) => {
                self.login = None;
                self.sessions.push(fresh);
                Ok(self.sessions.last().expect("just pushed"))
            }
            Some(_) => Err(LoginRefused::WrongKey),
            None => Err(LoginRefused::Spent),
        }
    }

    /// True when `token` is the token of the session at `at`.
    pub fn token_ok(&self, at: usize, token: &str) -> bool {
        self.sessions.get(at).is_some_and(|s| same(&s.token, token))
    }

    /// The session at `at`.
    pub fn session(&self, at: usize) -> Option<&Session> {
        self.sessions.get(at)
    }

    /// The index of the session whose id the `Cookie` header carries. Every `harn_session`
    /// in it is tried: cookies are not kept apart by port, so another server on the same
    /// host may have set one of that name too, and its value must not hide ours.
    fn session_of(&self, cookie: &str) -> Option<usize> {
        cookie.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            if name != COOKIE {
                return None;
            }
            self.sessions.iter().position(|s| same(&s.id, value))
        })
    }
}

/// True when `origin` (`http://host:port`) is this server as `host` names it.
fn same_origin(origin: &str, host: &str) -> bool {
    origin.to_ascii_lowercase().strip_prefix("http://").is_some_and(|o| o == host)
}

/// Compares two secrets in a time that depends on their lengths only.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
