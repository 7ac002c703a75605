//! One request answered: who asks and what it carries read from the connection and its
//! headers, put to the door (`harn_core::web`), then the page read or the action taken. Every
//! answer forbids scripts, frames, sniffing, caching and referrers to other sites (`reply`): a page holds a run's
//! words, and its address once held the login key.

use super::reply::Reply;
use super::{act, pages, peer, Web};
use harn_core::ids::Id;
use harn_core::web::route::{route, ItemAction, Route};
use harn_core::web::{Admission, Asked, LoginRefused, Peer, Session, COOKIE};
use std::io::Read as _;
use std::sync::Arc;

/// Largest form body read.
const BODY_LIMIT: u64 = 64 * 1024;

/// Answers `request`.
pub fn answer(web: &Arc<Web>, mut request: tiny_http::Request) {
    let reply = decide(web, &mut request);
    let _ = request.respond(reply.into_response());
}

fn decide(web: &Arc<Web>, request: &mut tiny_http::Request) -> Reply {
    let header = |name: &'static str| {
        request.headers().iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str().to_owned())
    };
    let (host, origin, site, cookie) =
        (header("Host"), header("Origin"), header("Sec-Fetch-Site"), header("Cookie"));
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let method = request.method().as_str().to_owned();
    let mut asked = Asked {
        method: &method,
        path,
        host: host.as_deref(),
        origin: origin.as_deref(),
        fetch_site: site.as_deref(),
        cookie: cookie.as_deref(),
        peer: Peer::Outside,
    };
    let admit = |asked: &Asked<'_>| web.door.lock().unwrap_or_else(|p| p.into_inner()).admit(asked);
    // What a request carries is judged first, as if from outside: one refused for that is
    // refused before the cost of placing its sender (any site may send them by the hundred).
    let mut verdict = admit(&asked);
    if !matches!(verdict, Admission::Refused { .. }) {
        asked.peer = match request.remote_addr() {
            Some(theirs) => peer::place(*theirs, web.listen.port()),
            None => Peer::Unknown("no address".into()),
        };
        if asked.peer != Peer::Outside {
            verdict = admit(&asked);
        }
    }
    let named = route(&method, path);
    match verdict {
        Admission::Refused { status, why } => Reply::text(status, why),
        Admission::Public => match named {
            Some(Route::Style) => Reply::style(STYLE),
            Some(Route::Login) => log_in(web, query),
            _ => Reply::text(404, "no such page".into()),
        },
        Admission::Read(session) => match named {
            Some(route) => pages::read(web, session, route, query),
            None => pages::message(web, session, 404, format!("no page at {path}")),
        },
        Admission::Change(session) => {
            let form = match read_form(request) {
                Ok(form) => form,
                Err(e) => return Reply::text(400, e),
            };
            let door = web.door.lock().unwrap_or_else(|p| p.into_inner());
            if !form.get("token").is_some_and(|t| door.token_ok(session, t)) {
                return Reply::text(
                    403,
                    "refused: the form does not carry this session's token".into(),
                );
            }
            drop(door);
            match named {
                Some(route) => change(web, session, route, &form),
                None => pages::message(web, session, 404, format!("nothing to do at {path}")),
            }
        }
    }
}

/// The style sheet, kept with the templates.
const STYLE: &str = include_str!("../../templates/web/style.css");

fn log_in(web: &Arc<Web>, query: &str) -> Reply {
    let key: String = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "key")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let fresh = match (super::secret(), super::secret()) {
        (Ok(id), Ok(token)) => Session { id, token },
        (Err(e), _) | (_, Err(e)) => return Reply::text(500, format!("/dev/urandom: {e}")),
    };
    let mut door = web.door.lock().unwrap_or_else(|p| p.into_inner());
    match door.log_in(&key, fresh) {
        Ok(session) => {
            // HttpOnly: no script reads it; SameSite=Lax: a link from elsewhere opens a page
            // logged in, but no other site's form or script posts with it.
            let cookie = format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Lax", session.id);
            Reply::logged_in(cookie)
        }
        Err(LoginRefused::WrongKey) => {
            Reply::text(403, "this login key is not the one `harn web` printed".into())
        }
        Err(LoginRefused::Spent) => Reply::text(
            403,
            "the login address was used already: restart `harn web` for another".into(),
        ),
    }
}

/// A form's fields, from a `application/x-www-form-urlencoded` body of at most
/// [`BODY_LIMIT`] bytes.
fn read_form(
    request: &mut tiny_http::Request,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut body = Vec::new();
    request
        .as_reader()
        .take(BODY_LIMIT + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("reading the form: {e}"))?;
    if body.len() as u64 > BODY_LIMIT {
        return Err(format!("a form of more than {BODY_LIMIT} bytes"));
    }
    Ok(form_urlencoded::parse(&body).into_owned().collect())
}

/// Takes the decision `route` names, as the CLI takes it, and sends the person back to the
/// page it concerns with what it came to.
fn change(
    web: &Arc<Web>,
    session: usize,
    route: Route,
    form: &std::collections::BTreeMap<String, String>,
) -> Reply {
    let field = |name: &str| form.get(name).map(|s| s.trim()).filter(|s| !s.is_empty());
    let actor = format!("--actor={}", web.actor);
    let reason = field("reason").map(|r| format!("--reason={r}"));
    let words = |parts: &[&str], more: Option<String>| {
        let mut w: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
        w.push(actor.clone());
        w.extend(more);
        w
    };
    let (back, said) = match route {
        Route::ItemAction(id, action) => {
            let verb = action.verb();
            let said = match action {
                ItemAction::Accept | ItemAction::Land => {
                    act::verb(web, &words(&["work", verb, id.as_str()], reason))
                }
                ItemAction::Reject => match field("feedback") {
                    None => Err("a rejection needs feedback: what the next attempt must do".into()),
                    Some(f) => act::verb(
                        web,
                        &words(&["work", "reject", id.as_str()], Some(format!("--feedback={f}"))),
                    ),
                },
                ItemAction::Run | ItemAction::Retry => match again(web, &id) {
                    Ok(options) => {
                        let mut w = words(&["work", verb, id.as_str()], None);
                        w.extend(options);
                        act::start(web, session, &id, &w)
                    }
                    Err(why) => Err(format!("{why}: run it from a terminal with those options")),
                },
            };
            (format!("/items/{id}"), said)
        }
        Route::Rule(id, approve) => {
            let verb = if approve { "approve" } else { "deny" };
            let said = act::verb(web, &words(&["approval", verb, id.as_str()], reason));
            ("/approvals".to_owned(), said)
        }
        Route::Restart(name) => {
            let w = ["harness", "restart", name.as_str(), "--no-block"].map(str::to_owned);
            (format!("/harnesses/{name}"), act::verb(web, &w))
        }
        _ => return pages::message(web, session, 404, "nothing to do here".into()),
    };
    web.say(
        session,
        match said {
            Ok(text) if text.is_empty() => "done".into(),
            Ok(text) => text,
            Err(e) => format!("refused: {e}"),
        },
    );
    Reply::see(back)
}

/// The options of item `id`'s next attempt from the web ([`act::again`]); none for a parked
/// run, which resumes with what it froze, or for a first attempt.
fn again(web: &Web, id: &Id) -> Result<Vec<String>, String> {
    let mut store = crate::os::store::Store::new(&web.root);
    let item = store.read(id, &mut Default::default()).map_err(|e| e.to_string())?;
    if item.projection.next_action == harn_core::work::NextAction::Resume {
        return Ok(Vec::new());
    }
    match item.projection.latest_run_id.as_ref().map(|r| store.run_records(r)) {
        None => Ok(Vec::new()),
        Some(Ok((Some(m), _))) => act::again(&m, &web.root),
        Some(Ok((None, _))) => Err("its latest run has no manifest".into()),
        Some(Err(e)) => Err(e.to_string()),
    }
}
