//! The directories ckptrun writes into, checked before the job starts.

use std::path::Path;

use rustix::fs::Access;

use crate::os::error::Error;
use crate::os::sys::strerror;

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
