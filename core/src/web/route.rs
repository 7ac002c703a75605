//! The addresses of `harn web`: what each path names, read from the path alone. An id in a
//! path is an [`Id`] or the path names nothing, so no page or action is ever asked about a
//! name that could not be a record's.

use crate::ids::Id;

/// What a path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Goals, the items' states, approvals waiting, harnesses.
    Overview,
    /// Every work item, a page at a time.
    Items,
    /// One work item and what a person may do with it.
    Item(Id),
    /// One goal and its graph.
    Goal(Id),
    /// One run as it goes (as `harn run follow`).
    Run(Id),
    /// One run's proof and its attested diff, file by file.
    Proof(Id),
    /// Every approval.
    Approvals,
    /// Every harness.
    Harnesses,
    /// One harness: its ledger, its log and, for a terminal harness, its screen.
    Harness(Id),
    /// The one-time login.
    Login,
    /// The style sheet.
    Style,
    /// A person's decision about an item.
    ItemAction(Id, ItemAction),
    /// A ruling on an approval: `true` approves.
    Rule(Id, bool),
    /// Restart a harness.
    Restart(Id),
}

/// What a person may do with an item from the web.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemAction {
    /// Accept its proof (`harn work accept`).
    Accept,
    /// Send it back with feedback (`harn work reject --feedback`).
    Reject,
    /// Run its next attempt (`harn work run`): a ready item, or a run resumed after a ruling.
    Run,
    /// Retry a blocked item (`harn work retry`).
    Retry,
    /// Land an accepted item (`harn work land`).
    Land,
}

impl ItemAction {
    /// The `harn work` verb that takes this decision.
    pub fn verb(self) -> &'static str {
        match self {
            ItemAction::Accept => "accept",
            ItemAction::Reject => "reject",
            ItemAction::Run => "run",
            ItemAction::Retry => "retry",
            ItemAction::Land => "land",
        }
    }
}

/// What `path` names for `method` (`GET`/`HEAD` read, `POST` acts), if anything.
pub fn route(method: &str, path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    let id = |s: &str| Id::new(s).ok();
    let read = matches!(method, "GET" | "HEAD");
    if read {
        return Some(match parts.as_slice() {
            [""] => Route::Overview,
            ["items"] => Route::Items,
            ["items", i] => Route::Item(id(i)?),
            ["goals", g] => Route::Goal(id(g)?),
            ["runs", r] => Route::Run(id(r)?),
            ["runs", r, "proof"] => Route::Proof(id(r)?),
            ["approvals"] => Route::Approvals,
            ["harnesses"] => Route::Harnesses,
            ["harnesses", h] => Route::Harness(id(h)?),
            ["login"] => Route::Login,
            ["style.css"] => Route::Style,
            _ => return None,
        });
    }
    if method != "POST" {
        return None;
    }
    Some(match parts.as_slice() {
        ["items", i, verb] => {
            let action = match *verb {
                "accept" => ItemAction::Accept,
                "reject" => ItemAction::Reject,
                "run" => ItemAction::Run,
                "retry" => ItemAction::Retry,
                "land" => ItemAction::Land,
                _ => return None,
            };
            Route::ItemAction(id(i)?, action)
        }
        ["approvals", a, "approve"] => Route::Rule(id(a)?, true),
        ["approvals", a, "deny"] => Route::Rule(id(a)?, false),
        ["harnesses", h, "restart"] => Route::Restart(id(h)?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_page_and_action_has_its_path() {
        let i = Id::new("fix-the-parser").unwrap();
        assert_eq!(route("GET", "/"), Some(Route::Overview));
        assert_eq!(route("GET", "/items/fix-the-parser"), Some(Route::Item(i.clone())));
        assert_eq!(route("HEAD", "/runs/wf-1/proof"), Some(Route::Proof(Id::new("wf-1").unwrap())));
        assert_eq!(
            route("POST", "/items/fix-the-parser/reject"),
            Some(Route::ItemAction(i, ItemAction::Reject))
        );
        assert_eq!(
            route("POST", "/approvals/ap-1/deny"),
            Some(Route::Rule(Id::new("ap-1").unwrap(), false))
        );
    }

    #[test]
    fn nothing_else_is_named() {
        for (m, p) in [
            ("GET", "/items/../x"),
            ("GET", "/items/a b"),
            ("GET", "items"),
            ("POST", "/items/a"),
            ("GET", "/items/a/accept"),
            ("POST", "/items/a/delete"),
            ("PUT", "/items/a/accept"),
            ("GET", "/goals/"),
            ("GET", "/items/.."),
            ("GET", "/items/-x"),
            ("POST", "/items/-x/accept"),
            ("POST", "/approvals/../approve"),
        ] {
            assert_eq!(route(m, p), None, "{m} {p}");
        }
    }
}
