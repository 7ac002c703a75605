//! Exit codes and the one way a verb reports a failure: 0 done, 1 the operation failed,
//! 2 bad input or usage. Every command module uses these; none needs the command line.

/// Exit code: the operation failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: bad input or usage.
pub const EXIT_USAGE: i32 = 2;

/// Prints an error the way every verb does and returns the exit code.
pub fn fail(code: i32, message: impl std::fmt::Display) -> i32 {
    errln!("harn: {message}");
    code
}
