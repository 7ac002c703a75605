//! Text a run or an agent wrote (a diff, evidence, a transcript, a screen, a title), made
//! safe to show: what would reorder or hide it is shown instead, and the templates escape the
//! rest.

/// Text a run or an agent wrote, as a page shows it: every character that would reorder or
/// hide what is shown (controls, bidirectional overrides and marks, zero-width characters)
/// replaced with a visible `<U+XXXX>`, so a diff reads as the bytes it holds. The template
/// escapes what is left.
pub fn shown(text: &str) -> String {
    let hiding = |c: char| matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{061c}' | '\u{feff}');
    let text = harn_core::text::neutralize(text);
    if !text.chars().any(hiding) {
        return text.into_owned();
    }
    text.chars()
        .map(|c| if hiding(c) { format!("<U+{:04X}>", c as u32) } else { c.to_string() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_would_reorder_or_hide_text_is_shown() {
        assert_eq!(shown("plain <b>"), "plain <b>");
        assert_eq!(shown("a\u{202e}b\u{200b}c\u{1b}[2J"), "a<U+202E>b<U+200B>c^[[2J");
    }
}
