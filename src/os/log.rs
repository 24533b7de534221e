//! Messages for the user (stderr) and the `--log` file, formatted into a
//! fixed buffer on the stack: logging never allocates, so it is allowed in
//! the supervision loop.
//!
//! stderr gets `ckptrun: message`; warnings and errors always, the rest
//! only with `--verbose`. The log file gets every line, as
//! `2026-11-22T15:49:34.123Z ckptrun[PID]: message`, opened with O_APPEND
//! so lines from successive runs in one sandbox follow each other.

use core::fmt::{self, Write};
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};

use crate::os::error::Error;
use crate::os::sys;

/// The longest line written; longer messages are cut (and end in `...`).
const LINE_MAX: usize = 1024;

/// Bytes shown as text without allocating (a name may be any bytes):
/// what is not UTF-8 shows as `?`.
pub struct Lossy<'a>(pub &'a [u8]);

impl fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            for _ in chunk.invalid() {
                f.write_str("?")?;
            }
        }
        Ok(())
    }
}

pub struct Log {
    file: Option<OwnedFd>,
    verbose: bool,
}

impl Log {
    /// A log that writes to stderr only (before the options are known).
    pub fn stderr_only() -> Self {
        Self {
            file: None,
            verbose: false,
        }
    }

    /// Opens `path` for appending (close-on-exec: the job never sees it).
    pub fn open(path: Option<&OsStr>, verbose: bool) -> Result<Self, Error> {
        let file = match path {
            None => None,
            Some(path) => Some(
                rustix::fs::open(
                    path,
                    OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o644),
                )
                .map_err(|e| Error::os(path.display(), e))?,
            ),
        };
        Ok(Self { file, verbose })
    }

    /// Progress: start, restart-from, signals, checkpoints, exit.
    pub fn info(&self, args: fmt::Arguments<'_>) {
        self.emit(args, self.verbose);
    }

    /// Where a helper's messages go that ckptrun expects and the user need
    /// not see (DMTCP refusing a checkpoint asked for again while one is
    /// under way): a copy of the log file, else /dev/null; close-on-exec.
    pub fn sink(&self) -> Result<OwnedFd, Error> {
        match &self.file {
            Some(file) => {
                rustix::io::fcntl_dupfd_cloexec(file, 3).map_err(|e| Error::os("the --log file", e))
            }
            None => rustix::fs::open(
                c"/dev/null",
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| Error::os("/dev/null", e)),
        }
    }

    /// Something the user must see even without `--verbose`.
    pub fn warn(&self, args: fmt::Arguments<'_>) {
        self.emit(args, true);
    }

    fn emit(&self, args: fmt::Arguments<'_>, to_stderr: bool) {
        if to_stderr {
            let mut line = Line::new();
            let _ = write!(line, "ckptrun: {args}");
            line.finish();
            let _ = sys::write_all(rustix::stdio::stderr(), line.bytes());
        }
        if let Some(file) = &self.file {
            let mut line = Line::new();
            let _ = write!(
                line,
                "{} ckptrun[{}]: {args}",
                Timestamp::now(),
                rustix::process::getpid().as_raw_nonzero()
            );
            line.finish();
            let _ = sys::write_all(file.as_fd(), line.bytes());
        }
    }
}

/// A line being built in a fixed buffer; text past the end is dropped.
struct Line {
    buf: heapless::Vec<u8, LINE_MAX>,
    cut: bool,
}

impl Line {
    fn new() -> Self {
        Self {
            buf: heapless::Vec::new(),
            cut: false,
        }
    }

    /// Ends the line with a newline, marking a cut with `...`.
    fn finish(&mut self) {
        if self.cut {
            self.buf.truncate(LINE_MAX - 4);
            let _ = self.buf.extend_from_slice(b"...");
        }
        if self.buf.is_full() {
            self.buf.pop();
        }
        let _ = self.buf.push(b'\n');
    }

    fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.capacity() - self.buf.len();
        let take = s.len().min(room);
        let _ = self.buf.extend_from_slice(&s.as_bytes()[..take]);
        self.cut |= take < s.len();
        Ok(())
    }
}

/// Wall-clock time in UTC, shown as ISO 8601 with milliseconds.
struct Timestamp {
    secs: i64,
    millis: u32,
}

impl Timestamp {
    fn now() -> Self {
        let (secs, nanos) = sys::realtime();
        Self {
            secs,
            millis: nanos / 1_000_000,
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.secs.div_euclid(86_400);
        let secs = self.secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            self.millis
        )
    }
}

/// Year, month, day of the proleptic Gregorian calendar for a count of
/// days since 1970-01-01 (the well-known era-based conversion).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        let t = Timestamp {
            secs: 1_795_362_574,
            millis: 7,
        };
        assert_eq!(t.to_string(), "2026-11-22T15:49:34.007Z");
    }

    #[test]
    fn long_lines_are_cut_not_overflowed() {
        let mut line = Line::new();
        let long = "x".repeat(5000);
        let _ = write!(line, "{long}");
        line.finish();
        assert_eq!(line.bytes().len(), LINE_MAX);
        assert!(line.bytes().ends_with(b"...\n"));
    }
}
