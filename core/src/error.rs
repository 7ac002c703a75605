//! The core's error types above the format level: a field that fails validation
//! ([`FieldError`]), what a read or a write of the durable records can come to
//! ([`RecordError`]): the filesystem refused, a record does not parse (its file and line), a
//! record parses but breaks a rule (its file), or the request itself is refused; and a machine
//! whose own state breaks one of its invariants ([`InvariantError`]). Each prints as the
//! message an operator reads; callers that only report it turn it into a `String`.

use crate::env::FsError;

/// A validation failure naming the field it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field, dotted for nested ones (`acceptance[2]`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Why a read or a write of the durable records failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// The filesystem refused a call (it names the path).
    Fs(FsError),
    /// A record does not parse.
    Parse {
        /// The file, as shown to the operator.
        file: String,
        /// The line, when the parser knows it.
        line: Option<usize>,
        /// What the parser said.
        detail: String,
    },
    /// A record parses but breaks a rule of its format or of its history.
    Invalid {
        /// The file, as shown to the operator.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// The request is refused as it stands (the item exists, an id is bad, the history says
    /// no, the input does not hold).
    Refused(String),
}

impl RecordError {
    /// A refusal.
    pub fn refused(detail: impl Into<String>) -> RecordError {
        RecordError::Refused(detail.into())
    }

    /// A record in `file` that does not parse, at `line` when the parser knows it.
    pub fn parse(
        file: impl Into<String>,
        line: Option<usize>,
        detail: impl std::fmt::Display,
    ) -> RecordError {
        RecordError::Parse { file: file.into(), line, detail: detail.to_string() }
    }

    /// A rule broken by the record in `file`.
    pub fn invalid(file: impl Into<String>, detail: impl std::fmt::Display) -> RecordError {
        RecordError::Invalid { file: file.into(), detail: detail.to_string() }
    }

    /// The file a parse or rule error is about, if any.
    pub fn file(&self) -> Option<&str> {
        match self {
            RecordError::Fs(e) => Some(e.path.as_str()),
            RecordError::Parse { file, .. } | RecordError::Invalid { file, .. } => Some(file),
            RecordError::Refused(_) => None,
        }
    }
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Fs(e) => write!(f, "{e}"),
            RecordError::Parse { file, line: Some(line), detail } => {
                write!(f, "{file}:{line}: {detail}")
            }
            RecordError::Parse { file, line: None, detail }
            | RecordError::Invalid { file, detail } => write!(f, "{file}: {detail}"),
            RecordError::Refused(detail) => write!(f, "{detail}"),
        }
    }
}

impl std::error::Error for RecordError {}

impl From<FsError> for RecordError {
    fn from(e: FsError) -> RecordError {
        RecordError::Fs(e)
    }
}

impl From<crate::journal::JournalError> for RecordError {
    fn from(e: crate::journal::JournalError) -> RecordError {
        let line = usize::try_from(e.line).ok();
        RecordError::Parse { file: e.path, line, detail: e.reason.to_string() }
    }
}

impl From<crate::journal::JournalOpenError> for RecordError {
    fn from(e: crate::journal::JournalOpenError) -> RecordError {
        match e {
            crate::journal::JournalOpenError::Fs(e) => RecordError::Fs(e),
            crate::journal::JournalOpenError::Corrupt(e) => e.into(),
        }
    }
}

impl From<RecordError> for String {
    fn from(e: RecordError) -> String {
        e.to_string()
    }
}

/// A machine's own state breaks one of its invariants: a bug in the core, which the
/// simulator, the fuzzers and debug builds look for after every step. Never damage, a
/// refusal or an IO fault: nothing on disk or in a request can cause it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvariantError {
    /// The invariant broken, in words naming what breaks it (a harness, a goal).
    pub detail: String,
}

impl InvariantError {
    /// A broken invariant, in words.
    pub fn new(detail: impl Into<String>) -> InvariantError {
        InvariantError { detail: detail.into() }
    }
}

impl std::fmt::Display for InvariantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for InvariantError {}

impl From<InvariantError> for String {
    fn from(e: InvariantError) -> String {
        e.to_string()
    }
}

impl From<FieldError> for String {
    fn from(e: FieldError) -> String {
        e.to_string()
    }
}
