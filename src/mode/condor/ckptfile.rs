//! The checkpoint file of a condor_compile'd job: whether there is one to
//! restart from, the stale `FILE.tmp` a checkpoint cut off mid-write
//! leaves, and whether the job wrote a new one during this run.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::os::beside::Beside;
use crate::os::dir::{check_dir_writable, dir_of};
use crate::os::error::Error;
use crate::os::log::Log;

pub struct CkptFile {
    /// As the user (or the default) gave it; passed to the job as is.
    pub path: OsString,
    c_path: CString,
    c_tmp: CString,
    /// `FILE.xxh3`: FILE's checksum, one `xxhsum -H3` line, written after
    /// each checkpoint ckptrun saw complete; and its temporary name.
    c_sum: CString,
    c_sum_tmp: CString,
}

/// What FILE's checksum says of it, at a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sum {
    /// It matches: FILE is the checkpoint ckptrun saw completed.
    Intact = 0,
    /// There is none (an older ckptrun's checkpoint, a submit file that
    /// transfers FILE alone, or a run that ended without ckptrun seeing
    /// its checkpoint): FILE is restarted from as it is.
    Unknown = 1,
    /// It does not match: FILE is damaged.
    Damaged = 2,
}

/// Which file a checksum's check could not read.
enum Unreadable {
    /// `FILE.xxh3`.
    Sum(Errno),
    /// FILE.
    File(Errno),
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
        let with = |suffix: &[u8]| {
            let mut name = path.clone().into_vec();
            name.extend_from_slice(suffix);
            CString::new(name).map_err(nul)
        };
        Ok(Self {
            c_sum: with(b".xxh3")?,
            c_sum_tmp: with(b".xxh3.tmp")?,
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

    /// FILE's line in `FILE.xxh3`, as `xxhsum -H3 FILE` prints it in
    /// FILE's directory. Does not allocate.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    fn sum_line(&self) -> rustix::io::Result<crate::store::manifest::Line> {
        let file = rustix::fs::open(&self.c_path, crate::os::tree::read_flags(), Mode::empty())?;
        let len = rustix::fs::fstat(&file)?.st_size as u64;
        let hash = crate::store::hash::hash_at(file.as_fd(), 0, len)?;
        let name = Path::new(OsStr::from_bytes(self.c_path.as_bytes()));
        let name = name.file_name().map_or(&[][..], OsStr::as_bytes);
        crate::store::manifest::Line::new(crate::store::archive::Kind::File, name, b"", hash)
    }

    /// After a checkpoint ckptrun saw complete: records FILE's checksum in
    /// `FILE.xxh3` (written beside it, fsync'd, renamed, the directory
    /// fsync'd). Does not allocate. In a child beside ckptrun (`Beside`):
    /// hashing goes through a 128 KiB buffer on the stack, and the
    /// checksum's code is in the segment the supervisor never maps
    /// (build.rs); here, as before, when no child answers.
    pub fn record_sum(&self) -> rustix::io::Result<()> {
        Beside::or_here(
            || self.record_sum_here(),
            |done| [done.err().map_or(0, |e| e.raw_os_error() as u64)],
            |[errno]| match errno {
                0 => Ok(()),
                e => Err(Errno::from_raw_os_error(e as i32)),
            },
        )
    }

    /// `record_sum`'s work.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    fn record_sum_here(&self) -> rustix::io::Result<()> {
        let line = self.sum_line()?;
        let out = rustix::fs::open(
            &self.c_sum_tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o644),
        )?;
        crate::os::sys::write_all(out.as_fd(), line.bytes())?;
        rustix::fs::fsync(&out)?;
        rustix::fs::rename(&self.c_sum_tmp, &self.c_sum)?;
        let dir = dir_of(Path::new(OsStr::from_bytes(self.c_path.as_bytes())));
        let dir = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fsync(&dir)
    }

    /// Before a restart from FILE: checks it against `FILE.xxh3`. One that
    /// matches is then removed (consumed): during the run the job may
    /// checkpoint by itself, and a checksum of the old FILE must never
    /// condemn the new one. The comparison runs in a child, as
    /// `record_sum` does.
    pub fn check_sum(&self) -> Result<Sum, Error> {
        let compared = Beside::or_here(
            || self.compare_here(),
            |compared| match compared {
                Ok(sum) => [sum as u64, 0],
                Err(Unreadable::Sum(e)) => [3, e.raw_os_error() as u64],
                Err(Unreadable::File(e)) => [4, e.raw_os_error() as u64],
            },
            |sent| match sent {
                [3, errno] => Err(Unreadable::Sum(Errno::from_raw_os_error(errno as i32))),
                [4, errno] => Err(Unreadable::File(Errno::from_raw_os_error(errno as i32))),
                [sum, _] => Ok([Sum::Intact, Sum::Unknown, Sum::Damaged]
                    .into_iter()
                    .find(|&s| s as u64 == sum)
                    .unwrap_or(Sum::Damaged)),
            },
        );
        match compared {
            Ok(Sum::Intact) => {
                let _ = rustix::fs::unlink(&self.c_sum);
                Ok(Sum::Intact)
            }
            Ok(sum) => Ok(sum),
            Err(Unreadable::Sum(e)) => {
                let shown = String::from_utf8_lossy(self.c_sum.as_bytes()).into_owned();
                Err(Error::os(shown, e))
            }
            Err(Unreadable::File(e)) => Err(Error::os(self.path.display(), e)),
        }
    }

    /// `check_sum`'s comparison, which removes nothing.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    fn compare_here(&self) -> Result<Sum, Unreadable> {
        let mut recorded = [0u8; 2 * crate::store::archive::PATH_MAX + 64];
        let len = match rustix::fs::open(&self.c_sum, crate::os::tree::read_flags(), Mode::empty())
        {
            Err(Errno::NOENT) => return Ok(Sum::Unknown),
            Err(e) => return Err(Unreadable::Sum(e)),
            Ok(file) => read_some(file.as_fd(), &mut recorded).map_err(Unreadable::Sum)?,
        };
        let line = self.sum_line().map_err(Unreadable::File)?;
        // A differing one is kept: every start refuses FILE until the
        // user decides.
        Ok(match &recorded[..len] == line.bytes() {
            true => Sum::Intact,
            false => Sum::Damaged,
        })
    }

    /// A damaged FILE set aside as `FILE.damaged` (its checksum
    /// removed), for a fresh start.
    pub fn set_damaged_aside(&self) -> Result<OsString, Error> {
        let mut aside = self.path.clone();
        aside.push(".damaged");
        rustix::fs::rename(&self.c_path, aside.as_os_str())
            .map_err(|e| Error::os(self.path.display(), e))?;
        let _ = rustix::fs::unlink(&self.c_sum);
        Ok(aside)
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

/// Reads what fits of `file` into `buf`; how much.
fn read_some(file: BorrowedFd, buf: &mut [u8]) -> rustix::io::Result<usize> {
    let mut len = 0;
    while len < buf.len() {
        match rustix::io::read(file, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp_dir::TempDir;

    #[test]
    fn default_is_program_plus_ckpt() {
        assert_eq!(CkptFile::default_for(OsStr::new("./a.out")), "./a.out.ckpt");
    }

    #[test]
    fn detects_a_rename_over_the_file() {
        let dir = TempDir::new("ckptfile-rename");
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
        let dir = TempDir::new("ckptfile-symlink");
        let target = dir.join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("ck.tmp")).unwrap();
        let ck = CkptFile::new(dir.join("ck").into_os_string()).unwrap();
        assert_eq!(ck.prepare(&Log::stderr_only()).unwrap(), Found::Absent);
        assert!(std::fs::symlink_metadata(dir.join("ck.tmp")).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    }
}
