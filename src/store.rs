//! Committed checkpoints of a self-checkpointing job (`--mode self`), and
//! of DMTCP's images (`--mode dmtcp`, which has no working paths: DMTCP
//! writes into a scratch directory of the store that a commit renames
//! into the next generation; see `adopt`).
//!
//! The job writes its checkpoint to its working paths (`--ckpt PATH`),
//! in place and non-atomically if it likes. ckptrun keeps the truth in the
//! store (`--store DIR`): each complete generation is a directory
//! `DIR/gen.NNNNNNNNNN` holding every working path by its base name.
//!
//! - Commit: build `DIR/.building` (the job's files moved or copied in,
//!   each fsync'd), fsync it, rename it to the next `gen.N`, fsync DIR.
//!   The rename is the commit: an interruption at any instant leaves the
//!   previous generation as it was, and at worst a `.building` that the
//!   next start removes. Generations beyond `--keep` are retired by a
//!   rename to `.trash` before they are removed.
//! - Restore: before the job starts, each working path is replaced by a
//!   private copy of the newest generation (cloned where the filesystem
//!   allows), built beside it and swapped in: rename for a file,
//!   renameat2(RENAME_EXCHANGE) for a directory, so the job never sees a
//!   half-restored path. Where the filesystem has no RENAME_EXCHANGE, the
//!   old path is renamed away first (a moment with no path at all, which a
//!   crash would leave for the next start to restore).
//! - First start (no DIR): the store is built under a temporary name with
//!   generation 0 holding the paths as the job was given them, then
//!   renamed to DIR. Generation 0 is the starting state, not a checkpoint.
//!
//! Names in DIR starting with `.` are scratch. Everything after `open`
//! works on descriptors and fixed names and does not allocate.

use core::fmt;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{CWD, FileType, Mode, RawDir, RenameFlags, SeekFrom};
use rustix::io::Errno;

use crate::ckptfile::dir_of;
use crate::error::Error;
use crate::log::Log;
use crate::tree::{self, Fingerprint};

/// The most `--ckpt` paths one job may have.
pub const MAX_CKPTS: usize = 16;
/// The most older generations `--keep` may ask for.
pub const MAX_KEEP: u32 = 64;

const BUILDING: &CStr = c".building";
const TRASH: &CStr = c".trash";

pub struct Store {
    /// DIR as the user gave it, for messages.
    pub shown: OsString,
    dir: OwnedFd,
    pub ckpts: Vec<Ckpt>,
    keep: u32,
}

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

/// A failed step of a commit or restore, for one line in the log.
#[derive(Clone, Copy, Debug)]
pub struct Failed {
    pub step: &'static str,
    pub errno: Errno,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = crate::sys::strerror(self.errno.raw_os_error());
        write!(f, "{}: {why}", self.step)
    }
}

fn at(step: &'static str) -> impl Fn(Errno) -> Failed {
    move |errno| Failed { step, errno }
}

/// How the job's files get into a generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// The job has exited: move them (fsync, rename). Restore copies
    /// them back before the next start.
    Move,
    /// The job runs on: copy them.
    Copy,
}

/// `gen.` and ten digits, NUL-terminated, on the stack.
struct GenName([u8; 15]);

impl GenName {
    fn new(n: u64) -> Self {
        let mut name = *b"gen.0000000000\0";
        let mut n = n;
        for digit in name[4..14].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
        Self(name)
    }

    fn c(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.0).expect("one NUL, at the end")
    }

    fn parse(name: &CStr) -> Option<u64> {
        let digits = name.to_bytes().strip_prefix(b"gen.")?;
        if digits.len() != 10 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(digits.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
    }
}

impl Store {
    /// Opens (or, on a first start, creates) the store, cleans up scratch
    /// an interruption left, and makes the working paths a private copy of
    /// the newest generation. Returns the store and the generation the
    /// working paths now hold a copy of (none on a first start, which
    /// made generation 0 of the paths as they are, or with no generation,
    /// when any working path was set aside). Runs before the job starts.
    pub fn open(
        dir: &OsStr,
        paths: &[OsString],
        keep: u32,
        log: &Log,
    ) -> Result<(Self, Option<u64>), Error> {
        let shown = dir.to_os_string();
        let ckpts = paths.iter().map(Ckpt::new).collect::<Result<Vec<_>, _>>()?;
        for (i, c) in ckpts.iter().enumerate() {
            if ckpts[..i].iter().any(|o| o.name == c.name) {
                return Err(Error::usage(
                    c.path.display(),
                    "has the same name as another --ckpt; generations keep each by its name",
                ));
            }
        }
        check_apart(dir, paths)?;
        let c_dir = cstring(dir)?;
        let created = match rustix::fs::stat(&c_dir) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => false,
            Ok(_) => return Err(Error::usage(dir.display(), "is not a directory")),
            Err(Errno::NOENT) => true,
            Err(e) => return Err(Error::os(dir.display(), e)),
        };
        let store = if created {
            Self::create(&shown, &c_dir, ckpts, keep)?
        } else {
            let fd = tree::open_named_dir(CWD, &c_dir).map_err(|e| Error::os(dir.display(), e))?;
            Self {
                shown,
                dir: fd,
                ckpts,
                keep,
            }
        };
        // One run per store: another would commit into it, clean its
        // scratch, or take its coordinator for a stale one. Held until
        // ckptrun exits (the descriptor is close-on-exec: no child keeps it).
        rustix::fs::flock(
            &store.dir,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        )
        .map_err(|e| match e {
            Errno::WOULDBLOCK => Error::usage(dir.display(), "is in use by another ckptrun"),
            e => Error::os(dir.display(), e),
        })?;
        store.clean_scratch(log).map_err(|f| store.error(f))?;
        if created {
            log.info(format_args!(
                "created {} with generation 0: the job's starting state",
                dir.display()
            ));
            return Ok((store, None));
        }
        let newest = store.newest().map_err(|f| store.error(f))?;
        match newest {
            Some(g) => store.restore(g, log).map_err(|f| store.error(f))?,
            None => {
                for c in &store.ckpts {
                    c.set_aside(log).map_err(|f| store.error(f))?;
                }
            }
        }
        Ok((store, newest))
    }

    /// Builds DIR with generation 0 under a temporary name, then renames
    /// it into place: a DIR that exists is always complete.
    fn create(shown: &OsStr, c_dir: &CStr, ckpts: Vec<Ckpt>, keep: u32) -> Result<Self, Error> {
        let mut tmp = c_dir.to_bytes().to_vec();
        tmp.extend_from_slice(b".ckptrun-new");
        let tmp = CString::new(tmp).expect("no NUL: made from a CString");
        let fail = |e| Error::os(shown.display(), e);
        tree::remove(CWD, &tmp).map_err(fail)?;
        rustix::fs::mkdir(&tmp, Mode::from_raw_mode(0o755)).map_err(fail)?;
        let fd = tree::open_dir(CWD, &tmp).map_err(fail)?;
        let store = Self {
            shown: shown.to_os_string(),
            dir: fd,
            ckpts,
            keep,
        };
        store.build(Take::Copy, 0).map_err(|f| store.error(f))?;
        rustix::fs::rename(&tmp, c_dir).map_err(fail)?;
        sync_parent(Path::new(shown)).map_err(fail)?;
        Ok(store)
    }

    fn error(&self, f: Failed) -> Error {
        Error::usage(self.shown.display(), f)
    }

    /// Removes what an interrupted commit, prune or restore left.
    fn clean_scratch(&self, log: &Log) -> Result<(), Failed> {
        for name in [BUILDING, TRASH] {
            if tree::stat(self.dir.as_fd(), name).is_ok() {
                tree::remove(self.dir.as_fd(), name).map_err(at("remove scratch"))?;
                log.info(format_args!(
                    "removed {}/{}: left by an interrupted commit",
                    self.shown.display(),
                    name.to_string_lossy()
                ));
            }
        }
        for c in &self.ckpts {
            for name in [&c.new, &c.old] {
                tree::remove(c.parent.as_fd(), name).map_err(at("remove scratch"))?;
            }
        }
        Ok(())
    }

    /// The newest complete generation.
    pub fn newest(&self) -> Result<Option<u64>, Failed> {
        let mut newest = None;
        self.each_generation(|g| newest = newest.max(Some(g)))?;
        Ok(newest)
    }

    /// The newest generation older than `g`.
    pub fn before(&self, g: u64) -> Result<Option<u64>, Failed> {
        let mut found = None;
        self.each_generation(|n| {
            if n < g {
                found = found.max(Some(n));
            }
        })?;
        Ok(found)
    }

    fn each_generation(&self, mut f: impl FnMut(u64)) -> Result<(), Failed> {
        self.each_name(|name| {
            if let Some(g) = GenName::parse(name) {
                f(g);
            }
        })
    }

    /// DIR itself.
    pub fn dir(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// `gen.N`, for a path into generation `g`.
    pub fn generation_name(g: u64) -> OsString {
        OsStr::from_bytes(GenName::new(g).c().to_bytes()).to_os_string()
    }

    /// Makes `name` (a scratch name, starting with `.`) a new empty
    /// directory in DIR, removing whatever an earlier run left there.
    pub fn fresh_scratch(&self, name: &CStr) -> Result<(), Failed> {
        let dir = self.dir.as_fd();
        tree::remove(dir, name).map_err(at("remove scratch"))?;
        rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)).map_err(at("create scratch"))
    }

    /// Commits the scratch directory `name`, complete, as the next
    /// generation: everything in it fsync'd, then renamed to `gen.N` and
    /// DIR fsync'd, as `commit` does with `.building`. Returns N.
    pub fn adopt(&self, name: &CStr, log: &Log) -> Result<u64, Failed> {
        let dir = self.dir.as_fd();
        let g = self.newest()?.map_or(1, |n| n + 1);
        tree::sync(dir, name).map_err(at("fsync the checkpoint"))?;
        rustix::fs::renameat(dir, name, dir, GenName::new(g).c())
            .map_err(at("rename it into the next generation"))?;
        rustix::fs::fsync(dir).map_err(at("fsync the store"))?;
        self.committed(g, log);
        Ok(g)
    }

    /// Calls `f` with the name of every entry in the store.
    fn each_name(&self, mut f: impl FnMut(&CStr)) -> Result<(), Failed> {
        rustix::fs::seek(&self.dir, SeekFrom::Start(0)).map_err(at("read the store"))?;
        let mut buf = [MaybeUninit::uninit(); 4096];
        let mut entries = RawDir::new(&self.dir, &mut buf);
        while let Some(entry) = entries.next() {
            f(entry.map_err(at("read the store"))?.file_name());
        }
        Ok(())
    }

    /// Replaces every working path with a private copy of generation `g`;
    /// a path `g` does not hold is set aside.
    pub fn restore(&self, g: u64, log: &Log) -> Result<(), Failed> {
        let gen_dir =
            tree::open_dir(self.dir.as_fd(), GenName::new(g).c()).map_err(at("open generation"))?;
        for c in &self.ckpts {
            match tree::stat(gen_dir.as_fd(), &c.name) {
                Err(Errno::NOENT) => {
                    c.set_aside(log)?;
                    continue;
                }
                Err(e) => return Err(at("read generation")(e)),
                Ok(_) => {}
            }
            let parent = c.parent.as_fd();
            tree::remove(parent, &c.new).map_err(at("restore"))?;
            tree::copy(gen_dir.as_fd(), &c.name, parent, &c.new).map_err(at("restore (copy)"))?;
            c.swap_in().map_err(at("restore (swap in)"))?;
            rustix::fs::fsync(parent).map_err(at("restore (fsync)"))?;
        }
        if self.ckpts.is_empty() {
            return Ok(());
        }
        log.info(format_args!(
            "working copy restored from {}/{}",
            self.shown.display(),
            GenName::new(g).c().to_string_lossy()
        ));
        Ok(())
    }

    /// What each working path looks like now, into `out` (one per path).
    pub fn fingerprints(&self, out: &mut [Option<Fingerprint>]) {
        for (c, slot) in self.ckpts.iter().zip(out) {
            *slot = tree::fingerprint(c.parent.as_fd(), &c.name).ok().flatten();
        }
    }

    /// Commits the working paths as the next generation; returns its
    /// number. See the module's notes for why an interruption at any
    /// instant is safe.
    pub fn commit(&self, take: Take, log: &Log) -> Result<u64, Failed> {
        let g = self.newest()?.map_or(1, |n| n + 1);
        self.build(take, g)?;
        self.committed(g, log);
        Ok(g)
    }

    /// Builds generation `g` from the working paths (those that exist):
    /// in `.building`, each fsync'd, then renamed to `gen.g`, DIR fsync'd.
    fn build(&self, take: Take, g: u64) -> Result<(), Failed> {
        let dir = self.dir.as_fd();
        tree::remove(dir, BUILDING).map_err(at("remove scratch"))?;
        rustix::fs::mkdirat(dir, BUILDING, Mode::from_raw_mode(0o755))
            .map_err(at("create .building"))?;
        let building = tree::open_dir(dir, BUILDING).map_err(at("open .building"))?;
        for c in &self.ckpts {
            let parent = c.parent.as_fd();
            match tree::stat(parent, &c.name) {
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(at("look at the checkpoint")(e)),
                Ok(_) => {}
            }
            if take == Take::Move {
                tree::sync(parent, &c.name).map_err(at("fsync the checkpoint"))?;
                match rustix::fs::renameat(parent, &c.name, &building, &c.name) {
                    Ok(()) => continue,
                    // The store is on another filesystem: copy instead.
                    Err(Errno::XDEV) => {}
                    Err(e) => return Err(at("move the checkpoint into the store")(e)),
                }
            }
            tree::copy(parent, &c.name, building.as_fd(), &c.name)
                .map_err(at("copy the checkpoint into the store"))?;
        }
        rustix::fs::fsync(&building).map_err(at("fsync .building"))?;
        rustix::fs::renameat(dir, BUILDING, dir, GenName::new(g).c())
            .map_err(at("rename .building"))?;
        rustix::fs::fsync(dir).map_err(at("fsync the store"))
    }

    /// Generation `g` is committed: says so, and prunes. A failure to
    /// prune is logged, not the commit's (`g` is there and complete).
    fn committed(&self, g: u64, log: &Log) {
        log.info(format_args!(
            "committed {}/{}",
            self.shown.display(),
            GenName::new(g).c().to_string_lossy()
        ));
        if let Err(f) = self.prune(log) {
            log.warn(format_args!(
                "{}: removing older generations failed: {f}; the next commit tries again",
                self.shown.display()
            ));
        }
    }

    /// Retires generations beyond the newest and `keep` older ones.
    fn prune(&self, log: &Log) -> Result<(), Failed> {
        let Some(mut oldest_kept) = self.newest()? else {
            return Ok(());
        };
        for _ in 0..self.keep {
            match self.before(oldest_kept)? {
                Some(g) => oldest_kept = g,
                None => return Ok(()),
            }
        }
        while let Some(g) = self.before(oldest_kept)? {
            self.retire(GenName::new(g).c())?;
            log.info(format_args!(
                "removed {}/{} (--keep {})",
                self.shown.display(),
                GenName::new(g).c().to_string_lossy(),
                self.keep
            ));
        }
        Ok(())
    }

    /// Renames `name` to `.trash` (so a half-removed generation is never
    /// mistaken for a whole one), then removes it.
    fn retire(&self, name: &CStr) -> Result<(), Failed> {
        let dir = self.dir.as_fd();
        tree::remove(dir, TRASH).map_err(at("remove scratch"))?;
        rustix::fs::renameat(dir, name, dir, TRASH).map_err(at("retire a generation"))?;
        rustix::fs::fsync(dir).map_err(at("fsync the store"))?;
        tree::remove(dir, TRASH).map_err(at("remove a retired generation"))
    }

    /// Generation `bad` would not restart: keeps it as `failed.gen.N` (the
    /// only one kept) and restores the one before it. Returns that one.
    pub fn fall_back(&self, bad: u64, log: &Log) -> Result<Option<u64>, Failed> {
        let Some(previous) = self.before(bad)? else {
            return Ok(None);
        };
        let dir = self.dir.as_fd();
        let mut failed = *b"failed.gen.0000000000\0";
        failed[7..21].copy_from_slice(&GenName::new(bad).0[..14]);
        let failed = CStr::from_bytes_with_nul(&failed).expect("one NUL, at the end");
        self.remove_failed()?;
        rustix::fs::renameat(dir, GenName::new(bad).c(), dir, failed)
            .map_err(at("set the failed generation aside"))?;
        rustix::fs::fsync(dir).map_err(at("fsync the store"))?;
        log.warn(format_args!(
            "kept {}/{}; falling back to {}",
            self.shown.display(),
            failed.to_string_lossy(),
            GenName::new(previous).c().to_string_lossy()
        ));
        self.restore(previous, log)?;
        Ok(Some(previous))
    }

    fn remove_failed(&self) -> Result<(), Failed> {
        // At most one is kept, so one pass finds it; its name is copied
        // out of the directory buffer before it is retired.
        let mut found = [0u8; 32];
        self.each_name(|name| {
            let name = name.to_bytes_with_nul();
            if name.starts_with(b"failed.gen.") && name.len() <= found.len() {
                found[..name.len()].copy_from_slice(name);
            }
        })?;
        match CStr::from_bytes_until_nul(&found) {
            Ok(name) if !name.is_empty() => self.retire(name),
            _ => Ok(()),
        }
    }
}

impl Ckpt {
    fn new(path: &OsString) -> Result<Self, Error> {
        let p = Path::new(path);
        let name = match p.file_name() {
            Some(n) if !path.as_bytes().ends_with(b"/") => n,
            _ => {
                return Err(Error::usage(
                    path.display(),
                    "--ckpt needs a file or directory name, not a path ending in / or ..",
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
                    crate::sys::strerror(e.raw_os_error())
                ),
            )
        })?;
        crate::ckptfile::check_dir_writable(p, "checkpoints")?;
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

    /// The working path's (device, inode), if it exists.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let st = tree::stat(self.parent.as_fd(), &self.name).ok()?;
        Some((st.st_dev, st.st_ino))
    }

    /// Moves the restored copy at `new` into place at `name`.
    fn swap_in(&self) -> Result<(), Errno> {
        let parent = self.parent.as_fd();
        let target = match tree::stat(parent, &self.name) {
            Err(Errno::NOENT) => {
                return rustix::fs::renameat(parent, &self.new, parent, &self.name);
            }
            other => other?,
        };
        let incoming = tree::stat(parent, &self.new)?;
        let is_dir =
            |st: &rustix::fs::Stat| FileType::from_raw_mode(st.st_mode) == FileType::Directory;
        if !is_dir(&target) && !is_dir(&incoming) {
            // rename(2) replaces a file atomically.
            return rustix::fs::renameat(parent, &self.new, parent, &self.name);
        }
        match rustix::fs::renameat_with(
            parent,
            &self.new,
            parent,
            &self.name,
            RenameFlags::EXCHANGE,
        ) {
            Ok(()) => tree::remove(parent, &self.new),
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                // No RENAME_EXCHANGE here: move the old one away first.
                rustix::fs::renameat(parent, &self.name, parent, &self.old)?;
                rustix::fs::renameat(parent, &self.new, parent, &self.name)?;
                tree::remove(parent, &self.old)
            }
            Err(e) => Err(e),
        }
    }

    /// A working path with no committed generation behind it is an
    /// uncommitted (perhaps torn) checkpoint: it is kept, as
    /// `PATH.uncommitted`, but the job does not get it.
    fn set_aside(&self, log: &Log) -> Result<(), Failed> {
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
/// would overwrite the store, or a commit copy the store into itself.
fn check_apart(store: &OsStr, paths: &[OsString]) -> Result<(), Error> {
    let store_at = resolved(Path::new(store));
    for path in paths {
        let path_at = resolved(Path::new(path));
        if store_at.starts_with(&path_at) || path_at.starts_with(&store_at) {
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

/// `path` with symlinks resolved, as far as it exists.
fn resolved(path: &Path) -> std::path::PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(_), Some(name)) => resolved(dir_of(path)).join(name),
        _ => path.to_path_buf(),
    }
}

fn cstring(s: &OsStr) -> Result<CString, Error> {
    CString::new(s.as_bytes()).map_err(|_| Error::usage(s.display(), "contains a NUL byte"))
}

/// fsyncs the directory holding `path`, so that a rename there is durable.
fn sync_parent(path: &Path) -> Result<(), Errno> {
    let parent = CString::new(dir_of(path).as_os_str().as_bytes()).map_err(|_| Errno::INVAL)?;
    rustix::fs::fsync(tree::open_named_dir(CWD, &parent)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_names() {
        assert_eq!(GenName::new(42).c(), c"gen.0000000042");
        assert_eq!(GenName::parse(c"gen.0000000042"), Some(42));
        for bad in [c"gen.42", c"gen.00000000x2", c".gen.0000000042", c"gen."] {
            assert_eq!(GenName::parse(bad), None, "{bad:?}");
        }
    }
}
