//! How the daemon's systemd unit names and quotes things: the unit is named after its root
//! (escaped as `systemd-escape --path` does), so two repositories' daemons never share a unit,
//! and every path it writes is escaped for the line it is on (specifiers, variables, quotes).

/// `path` escaped as a unit-name component, as `systemd-escape --path` does: slashes trimmed
/// and made dashes, bytes other than ASCII letters, digits, `:`, `_` and `.` (and a leading
/// `.`) written `\xNN`. The root directory is `-`.
pub fn escape_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return "-".into();
    }
    let mut out = String::new();
    for (i, b) in parts.join("/").bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'.') => {
                out.push(b as char)
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// Longest escaped root kept whole in a unit name (names may have 255 bytes).
const NAME_ROOT_MAX: usize = 200;

/// The unit name of the harness daemon of `root`: `harn-harness-<escaped root>.service`, or,
/// for a root too long to spell out, its last component and a digest of the whole.
pub fn unit_name(root: &str) -> String {
    named("harn-harness", root)
}

/// The unit name of the supervisor service of `root`: `harn-service-<escaped root>.service`,
/// shortened as [`unit_name`] is.
pub fn service_unit_name(root: &str) -> String {
    named("harn-service", root)
}

fn named(prefix: &str, root: &str) -> String {
    let escaped = escape_path(root);
    if escaped.len() <= NAME_ROOT_MAX {
        return format!("{prefix}-{escaped}.service");
    }
    let last = root.rsplit('/').find(|p| !p.is_empty()).unwrap_or("root");
    let mut short = escape_path(last);
    short.truncate(64);
    let digest = crate::hash::sha256_hex(root.as_bytes());
    format!("{prefix}-{short}-{}.service", &digest[..12])
}

/// One word of an `Exec…=` line: `%` and `$` doubled (no specifier or variable expansion),
/// quoted when it holds whitespace, a quote or a backslash.
pub fn exec_word(word: &str) -> String {
    let literal = word.replace('%', "%%").replace('$', "$$");
    if literal.chars().any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\')) {
        format!("\"{}\"", literal.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        literal
    }
}

/// A path on a plain setting line (`WorkingDirectory=`): `%` doubled; the rest is literal.
pub fn path_value(path: &str) -> String {
    path.replace('%', "%%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_escaped_as_systemd_escape_does() {
        // Each pair checked against `systemd-escape --path`.
        assert_eq!(escape_path("/tmp/ua/a b%c$d"), "tmp-ua-a\\x20b\\x25c\\x24d");
        assert_eq!(escape_path("/.x/-y_z:w"), "\\x2ex-\\x2dy_z:w");
        assert_eq!(escape_path("/"), "-");
        assert_eq!(escape_path("/srv//repo/"), "srv-repo");
    }

    #[test]
    fn two_roots_never_share_a_unit_and_long_roots_stay_named() {
        assert_ne!(unit_name("/srv/a"), unit_name("/srv/b"));
        assert_eq!(unit_name("/srv/a"), "harn-harness-srv-a.service");
        let long = format!("/{}/repo", "d".repeat(300));
        let name = unit_name(&long);
        assert!(name.len() < 255 && name.starts_with("harn-harness-repo-"), "{name}");
        assert_ne!(name, unit_name(&format!("/{}/repo", "e".repeat(300))));
        assert_eq!(service_unit_name("/srv/a"), "harn-service-srv-a.service");
        assert!(service_unit_name(&long).starts_with("harn-service-repo-"));
    }

    #[test]
    fn exec_words_expand_nothing() {
        assert_eq!(exec_word("/usr/bin/harn"), "/usr/bin/harn");
        assert_eq!(exec_word("/a b/%c$d"), "\"/a b/%%c$$d\"");
        assert_eq!(exec_word("q\"x"), "\"q\\\"x\"");
        assert_eq!(path_value("/a b/%c$d"), "/a b/%%c$d");
    }
}
