//! The store's scratch directory, `.NAME` beside the slots: where a
//! commit builds its archive, where the older generations are kept out of
//! HTCondor's uploads (`older`, see `slots`), where a damaged or failed
//! generation is set aside, where a mode's files are extracted for a
//! restart, and where the working copy is kept for an in-place restart
//! (see `kept`). HTCondor never uploads a directory, so nothing here
//! travels. It is locked
//! (flock) while ckptrun runs: one run per store.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;

use crate::os::dir::dir_of;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::tree;
use crate::store::generation::{Failed, at};
use crate::store::slots::Name;

/// The archive being written.
pub const BUILDING: &CStr = c"building";
/// The manifest of the archive being written.
pub const SUMS: &CStr = c"sums";
/// The generation a restart failed from (`--restart-grace`).
pub const FAILED: &CStr = c"failed";
/// What a mode extracts from a generation to restart from it.
pub const RESTORE: &CStr = c"restore";
/// The slot files kept out of HTCondor's uploads (see `slots`).
const OLDER: &CStr = c"older";
/// `older` once the job has ended well (see `retire`).
const ENDED: &CStr = c"ended";

pub struct Scratch {
    dir: OwnedFd,
    /// Its name, `.NAME`, in the slots' directory.
    name: CString,
    /// Its path (relative if NAME is), for messages.
    path: PathBuf,
}

impl Scratch {
    /// Opens (making it if need be) the scratch directory of the store
    /// `name` and takes its lock; refuses an older ckptrun's store.
    pub fn lock(name: &Name) -> Result<Self, Error> {
        let shown = name.shown.display();
        match tree::stat(name.dir.as_fd(), &name.base) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                return Err(Error::usage(
                    shown,
                    "is a directory: a store of an older ckptrun (generations in directories); \
                     this one keeps them in the files NAME.0, NAME.1, ...: move it away, or name another --store",
                ));
            }
            _ => {}
        }
        let mut dot = b".".to_vec();
        dot.extend_from_slice(name.base.to_bytes());
        let path = dir_of(std::path::Path::new(&name.shown)).join(OsStr::from_bytes(&dot));
        let dot = CString::new(dot).map_err(|_| Error::os(path.display(), Errno::INVAL))?;
        let dir = open(name.dir.as_fd(), &dot).map_err(|e| Error::os(path.display(), e))?;
        // One run per store: another would commit into it or clean its
        // scratch. Held until ckptrun exits (the descriptor is
        // close-on-exec: no child keeps it).
        rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| match e {
                Errno::WOULDBLOCK => Error::usage(shown, "is in use by another ckptrun"),
                e => Error::os(shown, e),
            },
        )?;
        Ok(Self {
            dir,
            name: dot,
            path,
        })
    }

    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Its path (relative if NAME is).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Removes what an interrupted commit or restart left.
    pub fn clean(&self, log: &Log) -> Result<(), Failed> {
        for name in [BUILDING, SUMS, RESTORE, ENDED] {
            if tree::stat(self.dir(), name).is_ok() {
                tree::remove(self.dir(), name).map_err(at("remove scratch"))?;
                log.info(format_args!(
                    "removed {}/{}: left by an interrupted run",
                    self.path.display(),
                    name.to_string_lossy()
                ));
            }
        }
        Ok(())
    }

    /// `older`, where slot files HTCondor must not upload are kept (made
    /// if need be).
    pub fn older(&self) -> rustix::io::Result<OwnedFd> {
        open(self.dir(), OLDER)
    }

    /// The job has ended well, and every generation is in `older`: they
    /// are removed, so that no later run in this directory resumes a job
    /// that has ended. First `older` is renamed, one atomic step after
    /// which no start finds a generation (and `clean` removes what an
    /// interruption leaves); then it goes.
    pub fn retire(&self) -> Result<(), Failed> {
        rustix::fs::renameat(self.dir(), OLDER, self.dir(), ENDED)
            .and_then(|()| rustix::fs::fsync(self.dir()))
            .map_err(at("retire the generations"))?;
        tree::remove(self.dir(), ENDED).map_err(at("remove the generations"))
    }

    /// Removes `.NAME` (`parent` holds it) if nothing is left in it: a
    /// generation set aside as damaged or failed stays, as the warning
    /// that set it aside said, and so does whatever else is there (a
    /// `.NAME` of the user's own, say, before ckptrun used it).
    pub fn remove_if_empty(&self, parent: BorrowedFd) -> Result<(), Failed> {
        match rustix::fs::unlinkat(parent, &self.name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOTEMPTY | Errno::EXIST) => Ok(()),
            Err(e) => Err(at("remove the store's directory")(e)),
        }
    }

    /// Makes `name` here a new, empty directory of ckptrun's own.
    pub fn fresh_dir(&self, name: &CStr) -> rustix::io::Result<OwnedFd> {
        tree::remove(self.dir(), name)?;
        rustix::fs::mkdirat(self.dir(), name, Mode::from_raw_mode(0o700))?;
        tree::open_dir(self.dir(), name)
    }
}

/// `damaged.NN`: where the damaged generation of slot NN is set aside.
pub fn damaged_name(slot: u32) -> [u8; 11] {
    let mut name = *b"damaged.00\0";
    name[8] = b'0' + (slot / 10) as u8;
    name[9] = b'0' + (slot % 10) as u8;
    name
}

/// Opens (creating it if need be) the directory `name` in `parent`: a
/// directory of our own, never a symlink.
fn open(parent: BorrowedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    tree::open_dir(parent, name)
}
