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
            let name = names.rsplit_once(" b/").map_or(names, |(_, b)| b).to_owned();
            out.push(FileDiff { name, lines: Vec::new(), added: 0, removed: 0 });
            in_hunk = false;
        }
        let Some(file) = out.last_mut() else { continue };
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
        file.lines.push((class, line.to_owned()));
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
    }
}
