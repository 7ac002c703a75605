//! Validated identifiers: the only strings allowed to become path components under `.harnery/`.

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// Longest identifier accepted, in bytes.
pub const ID_MAX_LEN: usize = 64;

/// A name of a harness, a goal, a work item or a profile. ASCII letters, digits, `.`, `_` and
/// `-` (capitals allowed, as the reference tool allows them); 1 to [`ID_MAX_LEN`] bytes; does not start with `.` and never contains `..`, so it
/// can never name a parent, a hidden file or another directory; does not start with `-`, so
/// it never reads as an option where a command line takes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Id(String);

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
        if let Some(c) = s.chars().find(|c| !is_id_char(*c)) {
            return Err(IdError::BadChar(c));
        }
        if s.starts_with('.') || s.contains("..") {
            return Err(IdError::Dots);
        }
        if s.starts_with('-') {
            return Err(IdError::LeadingDash);
        }
        Ok(Id(s.to_owned()))
    }

    /// The validated text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
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

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        let s = String::deserialize(d)?;
        Id::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
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
