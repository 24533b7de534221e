//! The images directory, where DMTCP writes a checkpoint: `DIR/ckptrun.ID`
//! (`--images-dir DIR`, default /tmp). It must be a real directory at a
//! path that is the same on every node: DMTCP saves copies of some files
//! (open but deleted ones; as root, glibc's gconv-modules.cache) beside
//! the images and records them by absolute path, and a restarted process
//! records its checkpoint directory with symlinks resolved.
//!
//! A checkpoint is complete when the coordinator has written its restart
//! script (after every image) and no image is still a `.temp`; DMTCP
//! 4.2.0's `dmtcp_command` returns before that, so ckptrun looks. Nothing
//! here allocates but `make` and `new_name`, before the job starts.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::os::error::Error;
use crate::os::{sys, tree};

/// The last thing the coordinator writes for a checkpoint.
const RESTART_SCRIPT: &CStr = c"dmtcp_restart_script.sh";

/// A DMTCP image: a top-level `ckpt_*.dmtcp`.
pub fn is_image(path: &[u8]) -> bool {
    path.starts_with(b"ckpt_") && path.ends_with(b".dmtcp") && !path.contains(&b'/')
}

/// The copies of saved files DMTCP keeps beside an image:
/// `ckpt_*_files/`, by the first component of their path.
pub fn is_saved_files(path: &[u8]) -> bool {
    let top = path.split(|&b| b == b'/').next().unwrap_or(b"");
    top.starts_with(b"ckpt_") && top.ends_with(b"_files")
}

pub struct ImagesDir {
    dir: OwnedFd,
    /// Its path, as the system calls take it.
    at: CString,
}

impl ImagesDir {
    /// The images directory at `at`, ready: a real directory of our own,
    /// empty, made (mode 0700) in `--images-dir`, which must exist; one
    /// that exists must be ours and not a symlink (/tmp is shared).
    pub fn make(at: PathBuf) -> Result<Self, Error> {
        let fail = |e: Errno| Error::os(at.display(), e);
        let c_at = CString::new(at.as_os_str().as_bytes()).map_err(|_| fail(Errno::INVAL))?;
        match rustix::fs::mkdir(&*c_at, Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(Errno::NOENT) => {
                let dir = at.parent().unwrap_or(&at);
                return Err(Error::usage(
                    format_args!("--images-dir {}", dir.display()),
                    "no such directory (DMTCP's images go there; it must exist on every node)",
                ));
            }
            Err(Errno::EXIST) => {
                let st = rustix::fs::lstat(&*c_at).map_err(fail)?;
                let ours = st.st_uid == rustix::process::geteuid().as_raw();
                if FileType::from_raw_mode(st.st_mode) != FileType::Directory || !ours {
                    return Err(Error::usage(
                        at.display(),
                        "exists and is not a directory of ckptrun's (this user's)",
                    ));
                }
            }
            Err(e) => return Err(fail(e)),
        }
        let dir = rustix::fs::open(
            &*c_at,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(fail)?;
        tree::empty(dir.as_fd()).map_err(fail)?;
        Ok(Self { dir, at: c_at })
    }

    /// `ckptrun.` and 16 random hex digits: a new images directory's name.
    pub fn new_name() -> Result<OsString, Error> {
        let mut bytes = [0u8; 8];
        let fail = |e| Error::os("/dev/urandom", e);
        let flags = OFlags::RDONLY | OFlags::CLOEXEC;
        let urandom = rustix::fs::open(c"/dev/urandom", flags, Mode::empty()).map_err(fail)?;
        if sys::read_fill(&urandom, &mut bytes).map_err(fail)? < bytes.len() {
            return Err(Error::usage("/dev/urandom", "ends early"));
        }
        Ok(format!("ckptrun.{:016x}", u64::from_be_bytes(bytes)).into())
    }

    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Its path.
    pub fn at(&self) -> &Path {
        Path::new(OsStr::from_bytes(self.at.to_bytes()))
    }

    /// Removes what it holds.
    pub fn empty(&self) -> rustix::io::Result<()> {
        tree::empty(self.dir())
    }

    /// Empties and removes it.
    pub fn remove(&self) {
        let _ = self.empty();
        let _ = rustix::fs::rmdir(&*self.at);
    }

    /// What it shows of a checkpoint: complete (the restart script the
    /// coordinator writes last, at least one non-empty `ckpt_*.dmtcp`, and
    /// no image still being written), images being written (`*.temp`)
    /// and none written yet, an image written but the checkpoint not
    /// complete, or nothing.
    pub fn look(&self) -> Look {
        let images = self.dir();
        // Follows the symlink: its target must be there too.
        let script = rustix::fs::statat(images, RESTART_SCRIPT, AtFlags::empty()).is_ok();
        let (mut found, mut shown, mut temp) = (0, false, false);
        let listed = each_name(images, |name| {
            let name_bytes = name.to_bytes();
            temp |= name_bytes.ends_with(b".temp");
            let image = is_image(name_bytes);
            shown |= image;
            if script
                && image
                && rustix::fs::statat(images, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_size > 0
                })
            {
                found += 1;
            }
        });
        match (listed && script && !temp && found > 0, temp, shown) {
            (true, _, _) => Look::Complete,
            (false, true, false) => Look::Writing,
            (false, _, true) => Look::Written,
            (false, false, false) => Look::Nothing,
        }
    }
}

/// What an images directory shows (`ImagesDir::look`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Look {
    Complete,
    /// DMTCP is writing images, and none is written yet: the whole
    /// computation is frozen.
    Writing,
    /// An image written, the checkpoint not complete yet: a process
    /// resumes as soon as its own image is written, others may still be
    /// writing theirs.
    Written,
    Nothing,
}

/// Calls `f` with each name in `dir`; whether it could list it all.
fn each_name(dir: BorrowedFd, mut f: impl FnMut(&CStr)) -> bool {
    tree::each_name(dir, |name| {
        f(name);
        Ok(())
    })
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names() {
        assert!(is_image(b"ckpt_foo_4a1b-40000-5f2a.dmtcp"));
        assert!(!is_image(b"ckpt_foo_4a1b.dmtcp.temp"));
        assert!(!is_image(b"dmtcp_restart_script.sh"));
        assert!(is_saved_files(b"ckpt_foo_4a1b-40000-5f2a_files/x"));
        assert!(!is_saved_files(b"ckpt_foo.dmtcp"));
    }

    /// Frozen (`Writing`) only until the first image is written: its
    /// process may run on while another still writes its own.
    #[test]
    fn writing_ends_with_the_first_image_written() {
        let dir = crate::os::temp_dir::TempDir::new("images-look");
        let images = ImagesDir::make(dir.join("ckptrun.0")).unwrap();
        let at = |name: &str| images.at().join(name);
        assert!(images.look() == Look::Nothing);
        std::fs::write(at("ckpt_a_1.dmtcp.temp"), b"a").unwrap();
        std::fs::write(at("ckpt_b_2.dmtcp.temp"), b"b").unwrap();
        assert!(images.look() == Look::Writing);
        std::fs::rename(at("ckpt_a_1.dmtcp.temp"), at("ckpt_a_1.dmtcp")).unwrap();
        assert!(images.look() == Look::Written);
        std::fs::rename(at("ckpt_b_2.dmtcp.temp"), at("ckpt_b_2.dmtcp")).unwrap();
        assert!(images.look() == Look::Written);
        std::fs::write(at("dmtcp_restart_script.sh"), b"#!/bin/sh\n").unwrap();
        assert!(images.look() == Look::Complete);
    }
}
