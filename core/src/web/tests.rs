//! The door's rules, one by one, and as properties over any request.

use super::*;
use proptest::prelude::*;

const AT: &str = "127.0.0.1:8080";

fn door() -> Door {
    let mut d = Door::new(AT, &["localhost:8080".into()], "k".repeat(32));
    let s = Session { id: "s".repeat(32), token: "t".repeat(32) };
    d.log_in(&"k".repeat(32), s).unwrap();
    d
}

fn asked(method: &'static str, path: &'static str) -> Asked<'static> {
    Asked {
        method,
        path,
        host: Some(AT),
        origin: None,
        fetch_site: None,
        cookie: Some("harn_session=ssssssssssssssssssssssssssssssss"),
        peer: Peer::Outside,
    }
}

fn status(v: &Admission) -> u16 {
    match v {
        Admission::Refused { status, .. } => *status,
        _ => 200,
    }
}

#[test]
fn a_logged_in_read_is_answered() {
    assert_eq!(door().admit(&asked("GET", "/")), Admission::Read(0));
    let other = Asked { host: Some("LOCALHOST:8080"), ..asked("GET", "/items") };
    assert_eq!(door().admit(&other), Admission::Read(0));
}

#[test]
fn a_contained_peer_is_refused_whatever_it_carries() {
    let a = Asked { peer: Peer::Contained("a run's cgroup".into()), ..asked("GET", "/") };
    assert_eq!(status(&door().admit(&a)), 403);
    let a = Asked { peer: Peer::Unknown("no owner".into()), ..asked("GET", "/login") };
    assert_eq!(status(&door().admit(&a)), 403);
}

#[test]
fn a_foreign_host_is_refused_even_for_the_login() {
    for path in ["/", "/login", "/style.css"] {
        let a = Asked { host: Some("evil.example:8080"), ..asked("GET", path) };
        assert_eq!(status(&door().admit(&a)), 421);
    }
    let a = Asked { host: None, ..asked("GET", "/") };
    assert_eq!(status(&door().admit(&a)), 421);
}

#[test]
fn a_foreign_origin_is_refused() {
    let a = Asked { origin: Some("http://evil.example"), ..asked("GET", "/") };
    assert_eq!(status(&door().admit(&a)), 403);
    let a = Asked { origin: Some("null"), ..asked("POST", "/items/a/accept") };
    assert_eq!(status(&door().admit(&a)), 403);
    let a = Asked { origin: Some("https://127.0.0.1:8080"), ..asked("POST", "/x") };
    assert_eq!(status(&door().admit(&a)), 403, "another scheme is another origin");
}

#[test]
fn a_change_needs_this_origin_and_a_same_origin_fetch() {
    assert_eq!(status(&door().admit(&asked("POST", "/x"))), 403, "no Origin");
    let a = Asked { origin: Some("http://127.0.0.1:8080"), ..asked("POST", "/x") };
    assert_eq!(door().admit(&a), Admission::Change(0));
    let a = Asked { fetch_site: Some("same-site"), ..a };
    assert_eq!(status(&door().admit(&a)), 403);
}

#[test]
fn without_a_session_only_the_public_paths_are_answered() {
    let a = Asked { cookie: None, ..asked("GET", "/login") };
    assert_eq!(door().admit(&a), Admission::Public);
    let a = Asked { cookie: Some("harn_session=forged"), ..asked("GET", "/") };
    assert_eq!(status(&door().admit(&a)), 401);
    let a = Asked { cookie: Some("other=1; harn_session=ssssssssssssssssssssssssssssssss"), ..a };
    assert_eq!(door().admit(&a), Admission::Read(0));
    // Another server of this host set a cookie of the same name, sent first.
    let a = Asked {
        cookie: Some("harn_session=x; harn_session=ssssssssssssssssssssssssssssssss"),
        ..a
    };
    assert_eq!(door().admit(&a), Admission::Read(0));
}

#[test]
fn the_login_key_works_once() {
    let mut d = Door::new(AT, &[], "key".into());
    let s = |n: &str| Session { id: n.into(), token: format!("t{n}") };
    assert!(d.log_in("wrong", s("a")).is_err());
    assert!(d.log_in("key", s("b")).is_ok());
    assert_eq!(d.log_in("key", s("c")).unwrap_err(), LoginRefused::Spent);
    assert!(d.token_ok(0, "tb"));
    assert!(!d.token_ok(0, "tc") && !d.token_ok(1, "tb"));
}

#[test]
fn other_methods_are_refused() {
    assert_eq!(status(&door().admit(&asked("PUT", "/"))), 405);
    assert_eq!(status(&door().admit(&asked("DELETE", "/"))), 405);
}

proptest! {
    /// Whatever a request carries, a change is admitted only with this server's Host and
    /// Origin, from outside every run, with the session's cookie; and a request with another
    /// Host is never answered.
    #[test]
    fn nothing_changes_without_every_proof(
        method in prop::sample::select(vec!["GET", "POST", "HEAD", "PUT"]),
        host in prop::option::of(prop::sample::select(vec![AT, "localhost:8080", "evil:8080", ""])),
        origin in prop::option::of(prop::sample::select(vec![
            "http://127.0.0.1:8080", "http://evil:8080", "null", "http://localhost:8080",
        ])),
        site in prop::option::of(prop::sample::select(vec!["same-origin", "cross-site", "none"])),
        cookie in prop::option::of(prop::sample::select(vec![
            "harn_session=ssssssssssssssssssssssssssssssss", "harn_session=x", "",
        ])),
        contained in any::<bool>(),
    ) {
        let peer = if contained { Peer::Contained("x".into()) } else { Peer::Outside };
        let a = Asked { method, path: "/x", host, origin, fetch_site: site, cookie, peer };
        let v = door().admit(&a);
        let named = host.is_some_and(|h| h == AT || h == "localhost:8080");
        if !named || contained {
            let refused = matches!(v, Admission::Refused { .. });
            prop_assert!(refused, "{:?}", v);
        }
        if let Admission::Change(_) = v {
            prop_assert_eq!(method, "POST");
            let wanted = format!("http://{}", host.unwrap_or_default());
            prop_assert!(origin == Some(wanted.as_str()), "{:?}", origin);
            prop_assert!(site.is_none_or(|s| s == "same-origin"));
            prop_assert!(cookie.is_some_and(|c| c.ends_with("ssss")));
        }
    }
}
