//! How a DMTCP restart gets its images: from the store's newest intact
//! generation (generation 1 on; generation 0 is the starting state).
//!
//! - While the store verifies the generation, its images (its top-level
//!   `ckpt_*.dmtcp` members) are extracted into the store's scratch
//!   (`.NAME/restore`, see `Images`): `dmtcp_restart` reads them there.
//! - Its description says where they were written (`images-dir`): the
//!   restart writes its images there again, and there DMTCP's copies of
//!   saved files (`ckpt_*_files/`) are put back, by the absolute paths it
//!   recorded (`Restart::unpack`).
//! - A restart in another working directory is refused while the old one
//!   still exists (DMTCP would reopen the job's files there), and
//!   `--stdout`/`--stderr` are cut back to their size at the checkpoint.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use rustix::io::Errno;

use super::images::{is_image, is_saved_files};
use crate::os::decimal;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::sys;
use crate::store::generation::{Failed, Generation, Meta};
use crate::store::manifest::Fold;
use crate::store::restore::{self, Extract};

/// dmtcp_restart's own failures, and a restart that did not complete.
pub const RESTART_FAILED: u8 = 99;

/// What dmtcp mode restores of a generation besides the working paths
/// (it has none): its images.
pub struct Images;

impl Extract for Images {
    fn wants(&self, meta: &Meta) -> bool {
        meta.generation() != Some(0)
    }

    fn takes(&self, path: &[u8]) -> bool {
        is_image(path)
    }

    /// In a child (see `extract_where`).
    fn extract(
        &mut self,
        file: BorrowedFd,
        into: BorrowedFd,
        expanded: &mut Fold,
    ) -> Result<(), Failed> {
        restore::extract_where(file, into, is_image, expanded)
    }
}

/// A committed generation to restart from, as its description says.
pub struct Restart {
    pub generation: u64,
    /// The generation's archive, and its slot's name for messages.
    file: OwnedFd,
    pub slot: String,
    /// Where its images were written.
    pub images_at: PathBuf,
}

impl Restart {
    /// Reads generation `g`'s description (in `slot`); checks that the
    /// restart will find the job's files where they were; cuts
    /// `--stdout`/`--stderr` back to their size at the checkpoint.
    /// Generation 0 records their sizes too, and has no images: the job
    /// starts again as it first did, its outputs cut back, and no
    /// restart (`None`).
    pub fn prepare(
        g: Generation,
        slot: String,
        cwd: &Path,
        outputs: &[Option<OwnedFd>; 2],
        log: &Log,
    ) -> Result<Option<Self>, Error> {
        let images_at = match g.number {
            0 => None,
            _ => Some(Self::images_at(&g, &slot, cwd)?),
        };
        let keys = [
            (&b"stdout-size"[..], "--stdout"),
            (b"stderr-size", "--stderr"),
        ];
        for ((key, which), fd) in keys.into_iter().zip(outputs) {
            let size = g.meta.get(key).and_then(decimal::parse);
            if let (Some(size), Some(fd)) = (size, fd) {
                cut_back(fd.as_fd(), size, which, log);
            }
        }
        Ok(images_at.map(|images_at| Self {
            generation: g.number,
            file: g.file,
            slot,
            images_at,
        }))
    }

    /// Where generation `g`'s images were written, once it is known that
    /// DMTCP will find the job's files where they were.
    fn images_at(g: &Generation, slot: &str, cwd: &Path) -> Result<PathBuf, Error> {
        let meta = &g.meta;
        let path = |key: &[u8]| {
            meta.get(key)
                .filter(|v| v.starts_with(b"/"))
                .map(|v| PathBuf::from(OsStr::from_bytes(v)))
        };
        let images_at = path(b"images-dir").ok_or_else(|| {
            Error::usage(
                slot,
                "generation has no images-dir: not a --mode dmtcp store",
            )
        })?;
        // Both from getcwd(3): compared byte for byte (Path's comparison,
        // by components, is 400 bytes of this segment's code on i686).
        if let Some(then) = path(b"cwd")
            && then.as_os_str() != cwd.as_os_str()
            && then.is_dir()
        {
            // DMTCP reopens the job's files by their absolute paths, and
            // only where one is gone by its path under the working
            // directory: it would write into the old directory.
            return Err(Error::usage(
                slot,
                format_args!(
                    "generation {} was checkpointed in {}, which still exists: DMTCP would \
                     reopen the job's files there, not in {}; restart there, or move it away",
                    g.number,
                    then.display(),
                    cwd.display()
                ),
            ));
        }
        Ok(images_at)
    }

    /// Puts the generation's saved file copies back in the images
    /// directory `images` (where DMTCP recorded them); returns the paths
    /// of its images, extracted into `restore_at` (see `Images`).
    pub fn unpack(&self, images: BorrowedFd, restore_at: &Path) -> Result<Vec<OsString>, Error> {
        let fail = |f: &dyn std::fmt::Display| Error::usage(&self.slot, f);
        let file = self.file.as_fd();
        // In a child, as `Images::extract`. Verified with the
        // generation: their hashes are not needed.
        restore::extract_where(file, images, is_saved_files, &mut Fold::default())
            .map_err(|f| fail(&f))?;
        let found = images_in(restore_at)
            .map_err(|e| fail(&format_args!("restore: {}", sys::strerror(e))))?;
        if found.is_empty() {
            return Err(fail(&"holds no ckpt_*.dmtcp image"));
        }
        Ok(found)
    }
}

/// The images `Images` extracted into `restore_at` (exactly the
/// generation's `ckpt_*.dmtcp` members), sorted.
fn images_in(restore_at: &Path) -> Result<Vec<OsString>, Errno> {
    let c = std::ffi::CString::new(restore_at.as_os_str().as_bytes()).map_err(|_| Errno::INVAL)?;
    let dir = crate::os::tree::open_dir(rustix::fs::CWD, &c)?;
    let mut found = Vec::new();
    crate::os::tree::each_name(dir.as_fd(), |name| {
        if is_image(name.to_bytes()) {
            found.push(
                restore_at
                    .join(OsStr::from_bytes(name.to_bytes()))
                    .into_os_string(),
            );
        }
        Ok(())
    })?;
    found.sort_unstable();
    Ok(found)
}

/// `--stdout` or `--stderr` back to `size`, its size when the checkpoint
/// was committed: what the job wrote after it will be written again.
fn cut_back(fd: BorrowedFd, size: u64, which: &str, log: &Log) {
    let Ok(st) = rustix::fs::fstat(fd) else {
        return;
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return;
    }
    let now = st.st_size as u64;
    if now < size {
        log.warn(format_args!(
            "{which} holds {now} bytes, less than the {size} it held at the generation restarted from"
        ));
        return;
    }
    if now == size {
        return;
    }
    match rustix::fs::ftruncate(fd, size) {
        Ok(()) => log.info(format_args!(
            "{which} cut back from {now} to {size} bytes, its size at the generation restarted from"
        )),
        Err(e) => log.warn(format_args!(
            "{which}: cannot cut it back to its size at the generation restarted from: {}",
            sys::strerror(e)
        )),
    }
}
