//! Text from outside harn (agents, workflows, titles, logs) made safe to print on a terminal:
//! every control character that could move the cursor, retitle the window, write the
//! clipboard (OSC 52) or reorder what is shown is replaced with a visible stand-in. Newlines
//! and tabs stay. JSON output needs none of this: its strings escape control characters.

use std::borrow::Cow;

/// True for a character a terminal would act on rather than show: C0 controls but newline
/// and tab, DEL, C1 controls, and the Unicode bidirectional overrides and isolates.
pub fn is_control(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// `s` with every [`is_control`] character shown instead of acted on: `^[` for ESC (caret
/// notation for C0 and DEL), `<U+009B>` for the others. Borrowed when nothing needed it.
pub fn neutralize(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !is_control(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            c => out.push_str(&format!("<U+{:04X}>", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// `bytes` without the terminal's escape sequences a program writes to draw (colours,
/// cursor moves, titles): CSI (`ESC [` … a final byte), OSC and the other strings (`ESC ]`,
/// `ESC P`, `ESC X`, `ESC ^`, `ESC _` … BEL or `ESC \\`), and `ESC`, intermediates, a final
/// byte (`ESC ( B`, `ESC 7`); a carriage
/// return is dropped too. What is left is the text, for [`neutralize_bytes`] to make safe.
pub fn strip_escapes(bytes: &[u8]) -> Cow<'_, [u8]> {
    if !bytes.iter().any(|&b| b == 0x1b || b == b'\r') {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'\r', _) | (0x1b, None) => i += 1,
            (0x1b, Some(b'[')) => {
                i += 2;
                while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
                i += 1;
            }
            (0x1b, Some(b']' | b'P' | b'X' | b'^' | b'_')) => {
                i += 2;
                while i < bytes.len() {
                    if bytes[i] == 0x07 {
                        i += 1;
                        break;
                    }
                    if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'\\') {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            }
            // ESC, intermediates (`(`, `#` …), a final byte: `ESC ( B`, `ESC 7`, `ESC =`.
            (0x1b, Some(_)) => {
                i += 1;
                while i < bytes.len() && (0x20..=0x2f).contains(&bytes[i]) {
                    i += 1;
                }
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// [`neutralize`] over bytes that may not be UTF-8 (a log, a chunk of one): control bytes and
/// the UTF-8 encodings of the other [`is_control`] characters are shown, everything else is
/// kept byte for byte, so a multibyte character cut at a chunk boundary is not damaged.
pub fn neutralize_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    // The UTF-8 length of the control character starting at `i`, if one does.
    let control_at = |i: usize| -> Option<usize> {
        match bytes[i..] {
            [b'\n' | b'\t', ..] => None,
            [b, ..] if b < 0x20 || b == 0x7f => Some(1),
            [0xc2, b, ..] if (0x80..=0x9f).contains(&b) => Some(2),
            [0xe2, 0x80, b, ..] if (0xaa..=0xae).contains(&b) => Some(3),
            [0xe2, 0x81, b, ..] if (0xa6..=0xa9).contains(&b) => Some(3),
            _ => None,
        }
    };
    if !(0..bytes.len()).any(|i| control_at(i).is_some()) {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        match control_at(i) {
            None => {
                out.push(bytes[i]);
                i += 1;
            }
            Some(n) => {
                let c = std::str::from_utf8(&bytes[i..i + n]).ok().and_then(|s| s.chars().next());
                out.extend_from_slice(neutralize(&c.unwrap_or('\u{fffd}').to_string()).as_bytes());
                i += n;
            }
        }
    }
    Cow::Owned(out)
}

/// A span of `ms` milliseconds for people: in the largest whole unit that divides it (`4 h`,
/// `90 min`, `30 s`), else in milliseconds (`1500 ms`).
pub fn duration_words(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] =
        [(86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s")];
    match UNITS.iter().find(|(size, _)| ms > 0 && ms.is_multiple_of(*size)) {
        Some((size, unit)) => format!("{} {unit}", ms / size),
        None => format!("{ms} ms"),
    }
}

/// A measured span for people: to the whole second from a second up (`90 s`, `5 min`), as
/// [`duration_words`] says it.
pub(crate) fn measured_words(ms: u64) -> String {
    duration_words(if ms >= 1_000 { ms - ms % 1_000 } else { ms })
}

/// `n` and the noun, in the plural unless `n` is 1: `1 cycle`, `2 cycles`.
pub fn count(n: u64, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        /// Whatever a program writes, what is left holds no escape and no carriage return.
        #[test]
        fn nothing_left_can_draw(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let left = super::strip_escapes(&bytes);
            proptest::prop_assert!(!left.contains(&0x1b) && !left.contains(&b'\r'));
            proptest::prop_assert!(left.len() <= bytes.len());
        }
    }

    #[test]
    fn a_terminals_drawing_is_stripped_to_its_text() {
        use super::strip_escapes;
        let drawn = b"\x1b[2J\x1b[1;1H\x1b[31mred\x1b[0m and \x1b]0;title\x07plain\x1b(B\r";
        assert_eq!(&*strip_escapes(drawn), b"red and plain");
        assert_eq!(&*strip_escapes(b"no escapes"), b"no escapes");
        assert_eq!(&*strip_escapes(b"cut \x1b[3"), b"cut ");
        assert_eq!(&*strip_escapes(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), b"link");
    }

    #[test]
    fn durations_and_counts_read_as_words() {
        assert_eq!(super::duration_words(14_400_000), "4 h");
        assert_eq!(super::duration_words(5_400_000), "90 min");
        assert_eq!(super::duration_words(30_000), "30 s");
        assert_eq!(super::duration_words(1_500), "1500 ms");
        assert_eq!(super::duration_words(0), "0 ms");
        assert_eq!(super::duration_words(172_800_000), "2 d");
        assert_eq!(super::measured_words(90_437), "90 s");
        assert_eq!(super::measured_words(300_020), "5 min");
        assert_eq!(super::measured_words(700), "700 ms");
        assert_eq!(super::count(1, "cycle", "cycles"), "1 cycle");
        assert_eq!(super::count(50, "cycle", "cycles"), "50 cycles");
    }

    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_acted_on() {
        assert_eq!(neutralize("plain\ttext\n"), "plain\ttext\n");
        assert!(matches!(neutralize("plain"), Cow::Borrowed(_)));
        assert_eq!(neutralize("\u{1b}[2J\u{1b}]0;owned\u{7}"), "^[[2J^[]0;owned^G");
        assert_eq!(neutralize("\u{1b}]52;c;ZXZpbA==\u{1b}\\"), "^[]52;c;ZXZpbA==^[\\");
        assert_eq!(neutralize("a\rb\u{7f}"), "a^Mb^?");
        assert_eq!(neutralize("\u{9b}31m"), "<U+009B>31m");
        assert_eq!(neutralize("abc\u{202e}fed"), "abc<U+202E>fed");
        assert_eq!(neutralize("é ✓"), "é ✓");
    }

    #[test]
    fn bytes_are_neutralized_like_text_and_kept_otherwise() {
        let raw = "ok \u{1b}]52;c;eA==\u{7} \u{9b} \u{202e} é\n".as_bytes();
        assert_eq!(
            &*neutralize_bytes(raw),
            neutralize(std::str::from_utf8(raw).unwrap()).as_bytes()
        );
        let cut = &"é".as_bytes()[..1]; // Half a character: kept as it is.
        assert_eq!(&*neutralize_bytes(cut), cut);
    }

    proptest::proptest! {
        #[test]
        fn nothing_a_terminal_acts_on_survives(s in ".*") {
            let shown = neutralize(&s);
            proptest::prop_assert!(!shown.chars().any(is_control));
            let bytes = neutralize_bytes(s.as_bytes()).into_owned();
            proptest::prop_assert_eq!(bytes, shown.as_bytes().to_vec());
        }
    }
}
