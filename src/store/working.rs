//! The working copy: the paths the job writes its checkpoint to
//! (`--ckpt PATH`, a file or a directory each), what a commit reads and a
//! restart gives back.
//!
//! A restart builds each path's copy of the generation beside it
//! (`PATH.ckptrun-new`) while the generation is verified, and renames it
//! into place only once it is found intact (`put_in_place`): whatever the
//! last run left there, torn or not, is never what the job reads. A path
//! with no committed generation behind it is an uncommitted, perhaps
//! torn, checkpoint: it is kept as `PATH.uncommitted` and the job starts
//! without it (`set_aside`). The copies are not fsync'd: they are rebuilt
//! from the store before every start, so a crash cannot leave one that is
//! used. Nothing here allocates after `WorkingCopy::new`.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::CWD;
use rustix::io::Errno;

use crate::os::beside::Beside;
use crate::os::dir::dir_of;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::tree::{self, Fingerprint};
use crate::store::archive::{self, Bad};
use crate::store::generation::{Failed, at};
use crate::store::manifest::Fold;
use crate::store::writer::Writer;

/// The most `--ckpt` paths one job may have.
pub const MAX_CKPTS: usize = 16;

/// One working path the job writes its checkpoint to.
pub struct Ckpt {
    /// As the user gave it.
    pub path: OsString,
    /// The directory holding it, and its name there (also its name in
    /// each generation).
    parent: OwnedFd,
    name: CString,
    /// Beside it: a restore being built, the path being swapped out, and
    /// an uncommitted leftover set aside.
    new: CString,
    old: CString,
    aside: CString,
}

/// The `--ckpt` paths, and which of them the copy being prepared holds.
pub struct WorkingCopy {
    ckpts: Vec<Ckpt>,
    /// Bit i: the prepared copy holds the i-th path.
    held: u32,
}

impl WorkingCopy {
    /// Every --ckpt PATH, each with a name of its own.
    pub fn new(paths: &[OsString]) -> Result<Self, Error> {
        let ckpts = paths.iter().map(Ckpt::new).collect::<Result<Vec<_>, _>>()?;
        for (i, c) in ckpts.iter().enumerate() {
            if ckpts[..i].iter().any(|o| o.name == c.name) {
                return Err(Error::usage(
                    c.path.display(),
                    "has the same name as another --ckpt; generations keep each by its name",
                ));
            }
        }
        Ok(Self { ckpts, held: 0 })
    }

    pub fn paths(&self) -> &[Ckpt] {
        &self.ckpts
    }

    pub fn is_empty(&self) -> bool {
        self.ckpts.is_empty()
    }

    /// Their names, as each generation holds them.
    pub fn names(&self) -> impl Iterator<Item = &CStr> + Clone {
        self.ckpts.iter().map(|c| c.name.as_c_str())
    }

    /// Removes the copies a restart or a swap left beside the paths.
    pub fn clean(&self) -> Result<(), Failed> {
        for c in &self.ckpts {
            for name in [&c.new, &c.old] {
                tree::remove(c.parent.as_fd(), name).map_err(at("remove scratch"))?;
            }
        }
        Ok(())
    }

    /// Each path that exists, under its name, into a generation: from
    /// where it is, or from `kept`, where a commit moved it (see `kept`).
    pub fn pack(&self, w: &mut Writer, kept: Option<BorrowedFd>) -> rustix::io::Result<()> {
        for c in &self.ckpts {
            let dir = kept.unwrap_or(c.parent.as_fd());
            match tree::stat(dir, &c.name) {
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e),
                Ok(_) => w.tree(dir, &c.name, c.name.to_bytes())?,
            }
        }
        Ok(())
    }

    /// What each path looks like now, into `out` (one per path).
    pub fn fingerprints(&self, out: &mut [Option<Fingerprint>]) {
        for (c, slot) in self.ckpts.iter().zip(out) {
            *slot = tree::fingerprint(c.parent.as_fd(), &c.name).ok().flatten();
        }
    }

    /// Whether a member at `path` in a generation is one of the paths, or
    /// below one: what `prepare` copies.
    pub fn takes(&self, path: &[u8]) -> bool {
        self.ckpts.iter().any(|c| c.part(path).is_some())
    }

    /// Each path's copy of the generation `archive`, made beside it; the
    /// paths themselves are not touched. The hash of each compressed
    /// member, as expanded, goes into `expanded`.
    pub fn prepare(&mut self, archive: BorrowedFd, expanded: &mut Fold) -> Result<(), Failed> {
        self.held = 0;
        for (i, c) in self.ckpts.iter().enumerate() {
            if c.prepare(archive, expanded)? {
                self.held |= 1 << i;
            }
        }
        Ok(())
    }

    /// Removes the copies `prepare` made.
    pub fn unprepare(&self) {
        for c in &self.ckpts {
            let _ = tree::remove(c.parent.as_fd(), &c.new);
        }
    }

    /// Removes every path: room for a copy that could not be made beside
    /// them (a full disk).
    pub fn make_room(&self) -> Result<(), Failed> {
        self.unprepare();
        for c in &self.ckpts {
            tree::remove(c.parent.as_fd(), &c.name)
                .map_err(at("restore (remove the working copy)"))?;
        }
        Ok(())
    }

    /// Replaces each path with its prepared copy; a path the generation
    /// does not hold is set aside.
    pub fn put_in_place(&self, log: &Log) -> Result<(), Failed> {
        for (i, c) in self.ckpts.iter().enumerate() {
            if self.held & (1 << i) == 0 {
                c.set_aside(log)?;
            } else {
                c.put_in_place()?;
            }
        }
        Ok(())
    }

    /// No committed generation stands behind the paths: each is set
    /// aside.
    pub fn set_aside(&self, log: &Log) -> Result<(), Failed> {
        self.ckpts.iter().try_for_each(|c| c.set_aside(log))
    }

    /// Removes the paths once committed, so that HTCondor does not upload
    /// them beside the generation (the next start restores them).
    pub fn remove_committed(&self, log: &Log) {
        for c in &self.ckpts {
            if let Err(e) = tree::remove(c.parent.as_fd(), &c.name) {
                log.warn(format_args!(
                    "{}: cannot remove the committed working copy: {}",
                    c.path.display(),
                    crate::os::sys::strerror(e)
                ));
            }
        }
    }
}

impl Ckpt {
    fn new(path: &OsString) -> Result<Self, Error> {
        let p = Path::new(path);
        let name = match crate::os::dir::last_name(path) {
            Some(n) => n,
            _ => {
                return Err(Error::usage(
                    path.display(),
                    "--ckpt needs a file or directory name, not a path ending in /, . or ..",
                ));
            }
        };
        let parent = dir_of(p);
        let fd = tree::open_named_dir(CWD, &cstring(parent.as_os_str())?).map_err(|e| {
            Error::usage(
                path.display(),
                format_args!(
                    "cannot use its directory {}: {}",
                    parent.display(),
                    crate::os::sys::strerror(e)
                ),
            )
        })?;
        crate::os::dir::check_dir_writable(p, "checkpoints")?;
        let with = |suffix: &str| {
            let mut n = name.as_bytes().to_vec();
            n.extend_from_slice(suffix.as_bytes());
            CString::new(n).expect("no NUL: checked")
        };
        Ok(Self {
            path: path.clone(),
            parent: fd,
            name: cstring(name)?,
            new: with(".ckptrun-new"),
            old: with(".ckptrun-old"),
            aside: with(".uncommitted"),
        })
    }

    /// The directory holding it.
    pub fn parent(&self) -> BorrowedFd<'_> {
        self.parent.as_fd()
    }

    /// Its name there.
    pub fn name(&self) -> &CStr {
        &self.name
    }

    /// The working path's (device, inode), if it exists.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let st = tree::stat(self.parent.as_fd(), &self.name).ok()?;
        Some((st.st_dev, st.st_ino))
    }

    /// Where a member at `path` goes below this path: `Some(b"")` for
    /// the path itself, what follows `NAME/` for one below it, none for
    /// one elsewhere.
    fn part<'p>(&self, path: &'p [u8]) -> Option<&'p [u8]> {
        let rest = path.strip_prefix(self.name.to_bytes())?;
        match rest.strip_prefix(b"/") {
            None if rest.is_empty() => Some(rest),
            Some(below) if !below.is_empty() => Some(below),
            _ => None,
        }
    }

    /// Makes this path's copy of the archive `file` as `new`, beside it
    /// (any earlier `new` removed first); whether the archive holds the
    /// path. The working path is not touched. Each compressed member's
    /// hash, as expanded, goes into `expanded`.
    ///
    /// In a child beside ckptrun (`Beside`): the walk over the archive
    /// and the copies' paths (some 70 KiB of stack) then touch the
    /// child's pages, never the supervisor's (how-it-works.md,
    /// "Memory"). Here, as before, when no child gives an answer (none
    /// can be made, or it dies): the copy is made anew.
    fn prepare(&self, file: BorrowedFd, expanded: &mut Fold) -> Result<bool, Failed> {
        const STEPS: [&str; 2] = ["restore", "restore (extract)"];
        let (done, sum) = Beside::or_here(
            || {
                let mut sum = Fold::default();
                (self.prepare_here(file, &mut sum), sum)
            },
            |(done, sum)| {
                let held = done.as_ref().is_ok_and(|&held| held);
                let [step, errno] = Failed::sent(&done.map(drop), &STEPS);
                [step, errno, u64::from(held), sum.0]
            },
            |[step, errno, held, sum]| {
                let done = Failed::received([step, errno], &STEPS).map(|()| held != 0);
                (done, Fold(sum))
            },
        );
        expanded.join(sum);
        done
    }

    /// `prepare`'s work.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    fn prepare_here(&self, file: BorrowedFd, expanded: &mut Fold) -> Result<bool, Failed> {
        let parent = self.parent.as_fd();
        tree::remove(parent, &self.new).map_err(at("restore"))?;
        let new = archive::PathBuf::from(self.new.to_bytes()).map_err(at("restore"))?;
        let mut held = false;
        let done = archive::each_member(file, |m| {
            let to = match self.part(m.path.as_bytes()) {
                None => return Ok(true),
                Some(b"") => {
                    held = true;
                    new.clone()
                }
                Some(rest) => new.joined(rest)?,
            };
            if let Some(hash) = archive::extract(file, m, parent, to.c())? {
                expanded.add(m.offset, hash);
            }
            Ok(true)
        });
        match done {
            Ok(()) => Ok(held),
            Err(Bad::Io(e)) => Err(at("restore (extract)")(e)),
            Err(_) => Err(at("restore (extract)")(Errno::IO)),
        }
    }

    /// Replaces the working path with its copy `new`: removed, then
    /// renamed over, so an interruption never leaves a half-restored path
    /// under its name (the next start restores it again).
    fn put_in_place(&self) -> Result<(), Failed> {
        let parent = self.parent.as_fd();
        tree::remove(parent, &self.name).map_err(at("restore (remove the working copy)"))?;
        rustix::fs::renameat(parent, &self.new, parent, &self.name)
            .map_err(at("restore (rename into place)"))
    }

    /// Keeps the working path, if there is one, as `PATH.uncommitted`:
    /// the job does not get it.
    pub fn set_aside(&self, log: &Log) -> Result<(), Failed> {
        let parent = self.parent.as_fd();
        match tree::stat(parent, &self.name) {
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(at("look at the working copy")(e)),
            Ok(_) => {}
        }
        tree::remove(parent, &self.aside).map_err(at("set aside"))?;
        rustix::fs::renameat(parent, &self.name, parent, &self.aside).map_err(at("set aside"))?;
        log.warn(format_args!(
            "{} has no committed checkpoint behind it; kept as {}.uncommitted, the job starts without it",
            self.path.display(),
            self.path.display()
        ));
        Ok(())
    }
}

/// The store and the working paths must not hold one another: the job
/// would overwrite a generation, or a commit copy the store into itself.
pub fn check_apart(store: &Path, base: &OsStr, paths: &[OsString]) -> Result<(), Error> {
    let parent_at = resolved(dir_of(store));
    for path in paths {
        let path_at = resolved(Path::new(path));
        // NAME, NAME.*, .NAME and .NAME.* (a NAME that begins with a dot
        // too: `.st.1` is a slot of `--store .st`).
        let named = |n: &[u8]| {
            n.strip_prefix(base.as_bytes())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"."))
        };
        let ours = |n: &[u8]| named(n) || n.strip_prefix(b".").is_some_and(named);
        // The first name below the store's directory on the way to the
        // path: a slot, the scratch `.NAME/` or anything in it is ours.
        let first = first_below(&path_at, &parent_at);
        if under(&parent_at, &path_at) || first.is_some_and(ours) {
            return Err(Error::usage(
                store.display(),
                format_args!(
                    "--store and --ckpt {} overlap; keep them apart",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `inner` is `outer` or lies under it, both as `resolved` gives
/// them (absolute, without `.`, `..` or `//`): byte for byte up to a `/`.
/// Not `Path::starts_with`, which would take 474 bytes of the
/// supervisor's code (see build.rs) for the components it compares.
fn under(inner: &Path, outer: &Path) -> bool {
    let rest = inner.as_os_str().as_bytes().strip_prefix(trimmed(outer));
    rest.is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

/// The first name after `outer/` in `inner`, if `inner` lies strictly
/// under `outer` (both as `resolved` gives them).
fn first_below<'a>(inner: &'a Path, outer: &Path) -> Option<&'a [u8]> {
    let rest = inner.as_os_str().as_bytes().strip_prefix(trimmed(outer))?;
    rest.strip_prefix(b"/")?.split(|&b| b == b'/').next()
}

/// `path`'s bytes without a trailing `/` (the root's are empty).
fn trimmed(path: &Path) -> &[u8] {
    let bytes = path.as_os_str().as_bytes();
    bytes.strip_suffix(b"/").unwrap_or(bytes)
}

/// `path` with symlinks resolved, as far as it exists.
fn resolved(path: &Path) -> std::path::PathBuf {
    if let Ok(p) = crate::os::dir::real_path(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(_), Some(name)) => resolved(dir_of(path)).join(name),
        _ => path.to_path_buf(),
    }
}

/// A name the user gave, for system calls.
pub fn cstring(s: &OsStr) -> Result<CString, Error> {
    CString::new(s.as_bytes()).map_err(|_| Error::usage(s.display(), "contains a NUL byte"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_is_by_whole_components() {
        let under = |a: &str, b: &str| under(Path::new(a), Path::new(b));
        assert!(under("/a/b", "/a/b"));
        assert!(under("/a/b/c", "/a/b"));
        assert!(under("/a/b/c", "/"));
        assert!(!under("/a/bc", "/a/b"));
        assert!(!under("/a", "/a/b"));
    }

    #[test]
    fn first_below_names_the_first_component_under() {
        let first = |a: &'static str, b: &str| first_below(Path::new(a), Path::new(b));
        assert_eq!(first("/a/b/c", "/a"), Some(&b"b"[..]));
        assert_eq!(first("/a/b", "/a/"), Some(&b"b"[..]));
        assert_eq!(first("/a/b", "/"), Some(&b"a"[..]));
        assert_eq!(first("/a", "/a"), None);
        assert_eq!(first("/ab/c", "/a"), None);
    }
}
