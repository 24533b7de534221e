//! Errors as values: what failed, why, and the exit code that says so.
//!
//! ckptrun's own exit codes follow coreutils `env` and `timeout`: 125 when
//! ckptrun itself failed (bad usage, a checkpoint path it cannot use, a
//! refused personality), 126 when PROGRAM was found but could not be
//! executed, 127 when it was not found.

use core::fmt;

/// ckptrun itself failed.
pub const LAUNCHER_FAILED: u8 = 125;
/// PROGRAM was found but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// PROGRAM was not found.
pub const NOT_FOUND: u8 = 127;

/// One line for the user, `what: why`, and the exit code.
#[derive(Debug)]
pub struct Error {
    pub what: String,
    pub why: String,
    pub code: u8,
}

impl Error {
    /// A usage or configuration error (exit 125).
    pub fn usage(what: impl fmt::Display, why: impl fmt::Display) -> Self {
        Self {
            what: what.to_string(),
            why: why.to_string(),
            code: LAUNCHER_FAILED,
        }
    }

    /// A failed system call on `what` (exit 125).
    pub fn os(what: impl fmt::Display, errno: rustix::io::Errno) -> Self {
        Self::usage(what, crate::sys::strerror(errno.raw_os_error()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}
