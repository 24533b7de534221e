//! The checkpoint file of a condor_compile'd job: whether there is one to
//! restart from, the stale `FILE.tmp` a checkpoint cut off mid-write
//! leaves, and whether the job wrote a new one during this run.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use rustix::fs::{Access, FileType, Stat};
use rustix::io::Errno;

use crate::error::Error;
use crate::log::Log;

pub struct CkptFile {
    /// As the user (or the default) gave it; passed to the job as is.
    pub path: OsString,
    c_path: CString,
    c_tmp: CString,
}

/// What a fresh start finds at FILE.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// A checkpoint to restart from.
    Image,
    /// Nothing there yet.
    Absent,
    /// An empty file, as a placeholder listed in transfer_input_files
    /// would be: treated as absent.
    Empty,
}

/// FILE's identity at start, to tell whether the job wrote it since.
#[derive(Clone, Copy)]
pub struct Snapshot(Option<Identity>);

#[derive(Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl CkptFile {
    pub fn new(path: OsString) -> Result<Self, Error> {
        let nul = |_| Error::usage(path.display(), "contains a NUL byte");
        let c_path = CString::new(path.as_bytes()).map_err(nul)?;
        let mut tmp = path.clone().into_vec();
        tmp.extend_from_slice(b".tmp");
        let c_tmp = CString::new(tmp).map_err(nul)?;
        Ok(Self {
            path,
            c_path,
            c_tmp,
        })
    }

    /// The default checkpoint file: PROGRAM exactly as given plus `.ckpt`,
    /// which is also the checkpoint library's own default.
    pub fn default_for(program: &OsStr) -> OsString {
        let mut path = program.to_os_string();
        path.push(".ckpt");
        path
    }

    fn tmp_display(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.c_tmp.as_bytes())
    }

    /// Checks that a checkpoint can be written where FILE is, removes a
    /// stale FILE.tmp, and says what is at FILE now.
    pub fn prepare(&self, log: &Log) -> Result<Found, Error> {
        let shown = self.path.display();
        check_dir_writable(Path::new(&self.path), "checkpoints")?;
        self.remove_stale_tmp(log)?;
        match rustix::fs::stat(&self.c_path) {
            Err(Errno::NOENT) => Ok(Found::Absent),
            Err(e) => Err(Error::os(shown, e)),
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                Err(Error::usage(shown, "is a directory, not a checkpoint file"))
            }
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
                Err(Error::usage(shown, "is not a regular file"))
            }
            Ok(st) if st.st_size == 0 => Ok(Found::Empty),
            Ok(_) => Ok(Found::Image),
        }
    }

    /// A FILE.tmp left over is a checkpoint the job never finished: the
    /// job only renames a complete one to FILE. Removing it (the link, not
    /// what a symlink points to) keeps it from being transferred or
    /// mistaken for progress.
    fn remove_stale_tmp(&self, log: &Log) -> Result<(), Error> {
        let st = match rustix::fs::lstat(&self.c_tmp) {
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(Error::os(self.tmp_display(), e)),
            Ok(st) => st,
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile | FileType::Symlink => {}
            FileType::Directory => {
                let why = "is a directory; the job could not write its checkpoint";
                return Err(Error::usage(self.tmp_display(), why));
            }
            _ => {
                let why = "is not a regular file; ckptrun will not remove it";
                return Err(Error::usage(self.tmp_display(), why));
            }
        }
        rustix::fs::unlink(&self.c_tmp).map_err(|e| Error::os(self.tmp_display(), e))?;
        log.info(format_args!(
            "removed stale {} ({} bytes): a checkpoint cut off mid-write",
            self.tmp_display(),
            st.st_size
        ));
        Ok(())
    }

    /// FILE's identity now. Does not allocate.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot(
            rustix::fs::stat(&self.c_path)
                .ok()
                .map(|st| Identity::of(&st)),
        )
    }

    /// Whether FILE now holds a non-empty regular file that was not there,
    /// as it is, at `before`. A job replaces FILE by renaming FILE.tmp
    /// over it, which gives it a new inode and ctime. Does not allocate.
    pub fn written_since(&self, before: Snapshot) -> bool {
        let Ok(st) = rustix::fs::stat(&self.c_path) else {
            return false;
        };
        let fresh = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_size > 0;
        fresh && before.0 != Some(Identity::of(&st))
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
            format!("cannot write {what} there: {}", why(e)),
        )
    })
}

impl Identity {
    fn of(st: &Stat) -> Self {
        Self {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime, st.st_ctime_nsec as i64),
        }
    }
}

fn why(e: Errno) -> &'static str {
    crate::sys::strerror(e.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ckptrun-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn default_is_program_plus_ckpt() {
        assert_eq!(CkptFile::default_for(OsStr::new("./a.out")), "./a.out.ckpt");
    }

    #[test]
    fn detects_a_rename_over_the_file() {
        let dir = scratch("rename");
        let file = dir.join("ck");
        std::fs::write(&file, b"old").unwrap();
        let ck = CkptFile::new(file.clone().into_os_string()).unwrap();
        let before = ck.snapshot();
        assert!(!ck.written_since(before));
        std::fs::write(dir.join("ck.tmp"), b"new").unwrap();
        std::fs::rename(dir.join("ck.tmp"), &file).unwrap();
        assert!(ck.written_since(before));
        std::fs::write(&file, b"").unwrap();
        assert!(!ck.written_since(before), "an empty file is no checkpoint");
    }

    #[test]
    fn stale_tmp_symlink_is_removed_not_followed() {
        let dir = scratch("symlink");
        let target = dir.join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("ck.tmp")).unwrap();
        let ck = CkptFile::new(dir.join("ck").into_os_string()).unwrap();
        assert_eq!(ck.prepare(&Log::stderr_only()).unwrap(), Found::Absent);
        assert!(std::fs::symlink_metadata(dir.join("ck.tmp")).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    }
}
