//! Exit codes and the one way a verb reports a failure: 0 done, 1 the operation failed,
//! 2 bad input or usage. A verb returns an [`Exit`]: its exit code, or a [`Failure`] that
//! `cli::run_args` prints once. Every command module uses these; none needs the command line.

/// Exit code: the operation failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: bad input or usage.
pub const EXIT_USAGE: i32 = 2;

/// Why a verb failed: the exit code and what to tell the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// [`EXIT_FAILED`], [`EXIT_USAGE`] or another nonzero code.
    pub code: i32,
    /// The message, printed once as `harn: MESSAGE`.
    pub message: String,
}

impl Failure {
    /// A failure with this code and message.
    pub fn new(code: i32, message: impl std::fmt::Display) -> Failure {
        Failure { code, message: message.to_string() }
    }

    /// The operation failed ([`EXIT_FAILED`]).
    pub fn failed(message: impl std::fmt::Display) -> Failure {
        Failure::new(EXIT_FAILED, message)
    }
}

/// What a verb comes to: the exit code it ends with (0, or a code that is an answer, such as
/// a check that found something), or the failure to report.
pub type Exit = Result<i32, Failure>;

/// The failure `code`, `message` as the `Err` of any result, for `return fail(…)`.
pub fn fail<T>(code: i32, message: impl std::fmt::Display) -> Result<T, Failure> {
    Err(Failure::new(code, message))
}

/// Prints a failure the way every verb does, once, and gives the exit code.
pub fn report(exit: Exit) -> i32 {
    match exit {
        Ok(code) => code,
        Err(f) => {
            errln!("harn: {}", f.message);
            f.code
        }
    }
}

/// How a listing ends: 0, or 1 when an entry could not be read (each was named already).
pub fn listed(errors: &[impl std::fmt::Display]) -> Exit {
    Ok(if errors.is_empty() { 0 } else { EXIT_FAILED })
}
