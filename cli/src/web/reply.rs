//! An answer of `harn web`: a page, plain words, or a redirect after an action; and the
//! headers every answer carries (no script, no frame, no sniffing, no cache, no referrer to
//! another site: a page holds a run's words, and the login's address once held its key).

/// An answer about to be sent.
pub struct Reply {
    status: u16,
    body: Vec<u8>,
    kind: &'static str,
    location: Option<String>,
    cookie: Option<String>,
}

impl Reply {
    /// A page.
    pub fn html(status: u16, html: String) -> Reply {
        Reply::with(status, html.into_bytes(), "text/html; charset=utf-8")
    }

    /// Plain words (a refusal: no page, no session's token in it).
    pub fn text(status: u16, text: String) -> Reply {
        Reply::with(status, format!("{text}\n").into_bytes(), "text/plain; charset=utf-8")
    }

    /// After an action: see `location` (POST, then GET).
    pub fn see(location: String) -> Reply {
        Reply { location: Some(location), ..Reply::with(303, Vec::new(), "text/plain") }
    }

    /// The style sheet.
    pub fn style(css: &str) -> Reply {
        Reply::with(200, css.as_bytes().to_vec(), "text/css; charset=utf-8")
    }

    /// A redirect to `/` that sets the session's cookie (a login).
    pub fn logged_in(cookie: String) -> Reply {
        Reply { cookie: Some(cookie), ..Reply::see("/".into()) }
    }

    fn with(status: u16, body: Vec<u8>, kind: &'static str) -> Reply {
        Reply { status, body, kind, location: None, cookie: None }
    }
}

impl Reply {
    /// The answer as the server sends it, with the headers every answer carries.
    pub fn into_response(self) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
        let reply = self;
        let header =
            |k: &str, v: &str| tiny_http::Header::from_bytes(k, v).expect("a valid header");
        let mut r = tiny_http::Response::from_data(reply.body)
            .with_status_code(reply.status)
            .with_header(header("Content-Type", reply.kind))
            .with_header(header(
                "Content-Security-Policy",
                "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             base-uri 'none'; frame-ancestors 'none'",
            ))
            .with_header(header("X-Content-Type-Options", "nosniff"))
            .with_header(header("X-Frame-Options", "DENY"))
            // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null`
            // with a form's POST, and the door could not tell the server's own pages from any
            // other. No other site is ever sent the address of a page.
            .with_header(header("Referrer-Policy", "same-origin"))
            .with_header(header("Cache-Control", "no-store"));
        if let Some(l) = &reply.location {
            r = r.with_header(header("Location", l));
        }
        if let Some(c) = &reply.cookie {
            r = r.with_header(header("Set-Cookie", c));
        }
        r
    }
}
