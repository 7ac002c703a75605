//! An attested diff as a page shows it: the text of `git diff` cut into files, each line
//! classed as added, removed, a hunk's header, a file's header or context. The text is a run's
//! and is only ever escaped into the page (the templates escape every value).

/// One file of a diff.
pub struct FileDiff {
    /// Its path (the new one, when it moved).
    pub name: String,
    /// Each line with its class (`add`, `del`, `hunk`, `meta`, `ctx`).
    pub lines: Vec<(&'static str, String)>,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
}

/// Cuts `text` (a `git diff`) into files.
pub fn files(text: &str) -> Vec<FileDiff> {
    let mut out: Vec<FileDiff> = Vec::new();
    let mut in_hunk = false;
    for line in text.lines() {
        if let Some(names) = line.strip_prefix("diff --git ") {
            // A first guess only: a name holding ` b/` makes the header ambiguous, so the
            // `+++`/`---` lines below (one name each) replace it when the file has them.
            let name = names.rsplit_once(" b/").map_or(names, |(_, b)| b).to_owned();
            out.push(FileDiff { name, lines: Vec::new(), added: 0, removed: 0 });
            in_hunk = false;
        }
        let Some(file) = out.last_mut() else { continue };
        if !in_hunk {
            match (line.strip_prefix("+++ b/"), line.strip_prefix("--- a/")) {
                (Some(new), _) => file.name = new.to_owned(),
                (None, Some(old)) => file.name = old.to_owned(), // Replaced by `+++` unless deleted.
                _ => {}
            }
        }
        let class = if line.starts_with("@@") {
            in_hunk = true;
            "hunk"
        } else if !in_hunk {
            "meta"
        } else if line.starts_with('+') {
            file.added += 1;
            "add"
        } else if line.starts_with('-') {
            file.removed += 1;
            "del"
        } else {
            "ctx"
        };
        file.lines.push((class, super::shown::shown(line)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_is_cut_into_files_and_its_lines_classed() {
        let text = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n\
                    @@ -1 +1,2 @@\n-old\n+new\n+<script>x</script>\n ctx\n\
                    diff --git a/b b/c\nsimilarity index 90%\n";
        let f = files(text);
        assert_eq!(f.len(), 2);
        assert_eq!((f[0].name.as_str(), f[0].added, f[0].removed), ("a.txt", 2, 1));
        assert_eq!(f[0].lines[2], ("meta", "--- a/a.txt".to_owned()), "a header, not a removal");
        assert_eq!(f[0].lines[4].0, "hunk");
        assert_eq!(f[0].lines.last().unwrap().0, "ctx");
        assert_eq!(f[1].name, "c");
        // A name holding ` b/` is read from the `+++` line, and a bidi override is shown.
        let text =
            "diff --git a/evil.sh b/README.md b/evil.sh b/README.md\n--- a/evil.sh b/README.md\n\
                    +++ b/evil.sh b/README.md\n@@ -1 +1 @@\n-x\n+y \u{202e}hs.live\n";
        let f = files(text);
        assert_eq!(f[0].name, "evil.sh b/README.md");
        assert_eq!(f[0].lines.last().unwrap().1, "+y <U+202E>hs.live");
    }
}
