//! Validated identifiers: the only strings allowed to become path components under `.harnery/`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smol_str::SmolStr;
use std::fmt;

/// Longest identifier accepted, in bytes.
pub(crate) const ID_MAX_LEN: usize = 64;

/// A name of a harness, a goal, a work item or a profile. ASCII letters, digits, `.`, `_` and
/// `-` (capitals allowed, as the reference tool allows them); 1 to [`ID_MAX_LEN`] bytes; does not start with `.` and never contains `..`, so it
/// can never name a parent, a hidden file or another directory; does not start with `-`, so
/// it never reads as an option where a command line takes it.
///
/// Ids are copied into every event, effect and projection that names something, so the text
/// is kept inline when short (up to 23 bytes) and shared when longer: a copy never allocates.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(SmolStr);

/// Why a string was refused as an identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdError {
    /// The string is empty.
    Empty,
    /// The string is longer than [`ID_MAX_LEN`] bytes.
    TooLong(usize),
    /// The string holds a character outside `[A-Za-z0-9._-]`.
    BadChar(char),
    /// The string starts with `.` or contains `..`.
    Dots,
    /// The string starts with `-`.
    LeadingDash,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdError::Empty => write!(f, "an id may not be empty"),
            IdError::TooLong(n) => write!(f, "an id may be at most {ID_MAX_LEN} bytes, not {n}"),
            IdError::BadChar(c) => {
                write!(f, "an id may hold only letters, digits, '.', '_' and '-', not {c:?}")
            }
            IdError::Dots => write!(f, "an id may not start with '.' or contain '..'"),
            IdError::LeadingDash => {
                write!(f, "an id may not start with '-' (it would read as an option)")
            }
        }
    }
}

impl std::error::Error for IdError {}

impl Id {
    /// Validates `s` and wraps it.
    pub fn new(s: &str) -> Result<Id, IdError> {
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if s.len() > ID_MAX_LEN {
            return Err(IdError::TooLong(s.len()));
        }
        // One pass over the bytes for the common case; the characters are decoded only to
        // name a bad one.
        if !s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
            let bad = s.chars().find(|c| !is_id_char(*c)).expect("a byte outside the set");
            return Err(IdError::BadChar(bad));
        }
        if s.starts_with('.') || s.as_bytes().windows(2).any(|pair| pair == b"..") {
            return Err(IdError::Dots);
        }
        if s.starts_with('-') {
            return Err(IdError::LeadingDash);
        }
        Ok(Id(SmolStr::new(s)))
    }

    /// The validated text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// The longest slug [`readable`] makes from a title, so a generated id stays a column wide.
pub(crate) const SLUG_MAX_LEN: usize = 24;

/// A short, readable id for something titled `title`: its words, lowercased, joined by `-`
/// and cut at a word boundary within [`SLUG_MAX_LEN`] (`"Fix the parser!"` → `fix-the-parser`),
/// with `-2`, `-3` … after it while `taken` says the id is in use. `None` when the title has
/// no ASCII letter or digit, or it and its 98 numbered forms are taken: the caller falls back
/// to a stamp.
pub fn readable(title: &str, mut taken: impl FnMut(&str) -> bool) -> Option<Id> {
    let lowered = title.to_ascii_lowercase();
    let words = lowered.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty());
    let mut slug = String::new();
    for word in words {
        let extra = if slug.is_empty() { word.len() } else { word.len() + 1 };
        if slug.len() + extra > SLUG_MAX_LEN {
            if slug.is_empty() {
                slug.push_str(&word[..SLUG_MAX_LEN]);
            }
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(word);
    }
    if slug.is_empty() {
        return None;
    }
    let candidates = std::iter::once(slug.clone()).chain((2..100).map(|n| format!("{slug}-{n}")));
    let free = candidates.into_iter().find(|c| !taken(c))?;
    Id::new(&free).ok()
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// An id is looked up by its text (ordered as its text is, so maps keyed by ids agree).
impl std::borrow::Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Id {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Id, IdError> {
        Id::new(s)
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Reads an id from the text the parser already holds, without a string of its own first.
impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an id")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Id, E> {
                Id::new(v).map_err(E::custom)
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_readable_id_is_the_titles_words_cut_short_and_numbered_when_taken() {
        let none = |_: &str| false;
        let id = |t: &str| super::readable(t, none).map(|i| i.as_str().to_owned());
        assert_eq!(id("Fix the parser!").as_deref(), Some("fix-the-parser"));
        assert_eq!(id("  Parser  ").as_deref(), Some("parser"));
        assert_eq!(
            id("Make the tokenizer handle tabs and spaces").as_deref(),
            Some("make-the-tokenizer"),
            "cut at a word within 24 bytes"
        );
        assert_eq!(id("Supercalifragilisticexpialidocious").unwrap().len(), 24);
        assert_eq!(id("…"), None);
        assert_eq!(id(""), None);
        let taken = |s: &str| s == "parser" || s == "parser-2";
        assert_eq!(super::readable("Parser", taken).unwrap().as_str(), "parser-3");
        assert_eq!(super::readable("Parser", |_: &str| true), None);
    }

    use super::*;

    #[test]
    fn accepts_plain_names() {
        for s in ["a", "agent-1", "watch.tests", "x_y", "0"] {
            assert_eq!(Id::new(s).unwrap().as_str(), s);
        }
    }

    #[test]
    fn refuses_anything_that_could_escape_a_directory() {
        assert_eq!(Id::new(""), Err(IdError::Empty));
        assert_eq!(Id::new("a/b"), Err(IdError::BadChar('/')));
        assert_eq!(Id::new("..").unwrap_err(), IdError::Dots);
        assert_eq!(Id::new(".hidden").unwrap_err(), IdError::Dots);
        assert_eq!(Id::new("a..b").unwrap_err(), IdError::Dots);
        assert_eq!(Id::new("-rf").unwrap_err(), IdError::LeadingDash);
        assert!(Id::new("a-b").is_ok(), "a dash inside is fine");
        assert_eq!(Id::new("Fix-Parser").map(|i| i.to_string()), Ok("Fix-Parser".into()));
        assert_eq!(Id::new("é"), Err(IdError::BadChar('é')));
        assert_eq!(Id::new("a\0"), Err(IdError::BadChar('\0')));
        assert_eq!(Id::new(&"a".repeat(65)), Err(IdError::TooLong(65)));
        assert!(Id::new(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<Id>("\"ok\"").is_ok());
        assert!(serde_json::from_str::<Id>("\"../x\"").is_err());
    }
}
