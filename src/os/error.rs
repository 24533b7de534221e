//! Errors as values: what failed, why, and the exit code that says so.
//!
//! ckptrun's own exit codes: 120-123 say what went wrong with a
//! checkpoint; the rest follow coreutils `timeout` and `env`: 124 when the
//! job did not checkpoint in time, 125 when ckptrun itself failed (bad
//! usage, a checkpoint path it cannot use, a refused personality), 126
//! when PROGRAM was found but could not be executed, 127 when it was not
//! found.

use core::fmt;

/// condor: the job stopped on SIGTSTP instead of checkpointing: it is
/// not condor_compile'd. ckptrun ended it.
pub const NOT_CHECKPOINTABLE: u8 = 120;
/// condor: the job died by SIGUSR2 but wrote no checkpoint during this
/// run. self: it reported a checkpoint that is missing, empty, or not
/// written during this run (since the start or the last commit).
pub const NO_CHECKPOINT: u8 = 121;
/// The job itself ended the way a checkpoint is reported to HTCondor.
pub const CODE_COLLISION: u8 = 122;
/// self: the checkpoint could not be committed (the previous one is kept).
pub const COMMIT_FAILED: u8 = 123;
/// The job did not checkpoint and exit within the time it had.
pub const NO_ANSWER: u8 = 124;
/// ckptrun itself failed.
pub const LAUNCHER_FAILED: u8 = 125;
/// PROGRAM was found but could not be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// PROGRAM was not found.
pub const NOT_FOUND: u8 = 127;

/// Every code ckptrun gives its own verdicts; a checkpoint code may not be
/// one of them.
pub const RESERVED_CODES: [u8; 8] = [
    NOT_CHECKPOINTABLE,
    NO_CHECKPOINT,
    CODE_COLLISION,
    COMMIT_FAILED,
    NO_ANSWER,
    LAUNCHER_FAILED,
    CANNOT_EXECUTE,
    NOT_FOUND,
];

/// One line for the user, `what: why`, and the exit code. Boxed: a
/// `Result<_, Error>` is then one pointer wide, which every `?` moves.
#[derive(Debug)]
pub struct Error(Box<Shown>);

/// What an `Error` says.
#[derive(Debug)]
pub struct Shown {
    pub what: String,
    pub why: String,
    pub code: u8,
}

impl core::ops::Deref for Error {
    type Target = Shown;

    fn deref(&self) -> &Shown {
        &self.0
    }
}

impl Error {
    /// A usage or configuration error (exit 125).
    pub fn usage(what: impl fmt::Display, why: impl fmt::Display) -> Self {
        Self::new(&what, &why, LAUNCHER_FAILED)
    }

    /// A failed system call on `what` (exit 125).
    pub fn os(what: impl fmt::Display, errno: rustix::io::Errno) -> Self {
        Self::new(&what, &crate::os::sys::strerror(errno), LAUNCHER_FAILED)
    }

    /// `what: why`, exit `code`. Not generic, and not inlined: the many
    /// call sites share one copy of the formatting (a size matter).
    #[inline(never)]
    pub fn new(what: &dyn fmt::Display, why: &dyn fmt::Display, code: u8) -> Self {
        Self(Box::new(Shown {
            what: what.to_string(),
            why: why.to_string(),
            code,
        }))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}
