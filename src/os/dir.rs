//! The directories ckptrun writes into, checked before the job starts.

use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Access, Mode, OFlags};

use crate::os::error::Error;
use crate::os::sys::strerror;

/// The last name in `path` as written: none if it ends in `/`, `.` or
/// `..`. Not `Path::file_name`, which takes `a/.` for `a`.
pub fn last_name(path: &OsStr) -> Option<&OsStr> {
    match path.as_bytes().rsplit(|&b| b == b'/').next() {
        None | Some(b"" | b"." | b"..") => None,
        Some(name) => Some(OsStr::from_bytes(name)),
    }
}

/// The directory holding `path`: its parent, or `.` for a bare name.
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Checks that files can be created beside `path` (in its directory, or
/// the working directory), before the job starts: `what` names them in
/// the error, `cannot write WHAT there: WHY`.
pub fn check_dir_writable(path: &Path, what: &str) -> Result<(), Error> {
    let dir = dir_of(path);
    rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK).map_err(|e| {
        Error::usage(
            dir.display(),
            format!("cannot write {what} there: {}", strerror(e)),
        )
    })
}

/// `path` with its components put together again: no `.`, no doubled or
/// trailing `/`. Out of line, so out of dmtcp mode's segment, which on
/// i686 has no room for the components' code (build.rs).
#[inline(never)]
pub fn normalized(path: &Path) -> PathBuf {
    path.components().collect()
}

/// `path` with every symlink in it resolved, as realpath(3) gives it: the
/// name the kernel gives the file once opened (`/proc/self/fd/N` of an
/// `O_PATH` descriptor). musl's realpath walks each component in user
/// space: 1.2 KB of code on i686 for a check made once at the start.
///
/// An errno, not an `io::Error`: formatting one links std's table of
/// error kinds' names (1 KB on i686).
pub fn real_path(path: &Path) -> rustix::io::Result<PathBuf> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO))
}
