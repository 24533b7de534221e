//! Committed checkpoints: the generations of a self-checkpointing job's
//! files (`--mode self`) or of DMTCP's images (`--mode dmtcp`).
//!
//! Each generation is one archive file (see `archive`) at the top of the
//! job's sandbox, because that is all HTCondor carries: on eviction, and
//! on an exit with the checkpoint code, it uploads the sandbox's new and
//! changed top-level files, never a directory. The store `NAME` is the
//! files `NAME.0` to `NAME.K` (`--keep K` older generations, default 1):
//! generation N is written to `NAME.(N mod K+1)`, replacing the oldest, so
//! a commit adds one changed file to what HTCondor uploads and the spool
//! never holds more than K+1. An empty slot file holds no generation.
//! Every slot is created at the first start, so that a submit file may
//! list them all.
//!
//! - Commit: the archive is written in the scratch directory `.NAME`,
//!   fsync'd, renamed over its slot, and the directory fsync'd. The
//!   rename is the commit: an interruption at any instant leaves every
//!   committed generation as it was.
//! - Restore (self mode): before each start, each working path
//!   (`--ckpt PATH`) is replaced by a private copy of the newest
//!   generation, built beside it and swapped in (rename for a file,
//!   renameat2(RENAME_EXCHANGE) for a directory, so the job never sees a
//!   half-restored path). The copy is not fsync'd: it is rebuilt from the
//!   store before every start, so a crash cannot leave one that is used.
//! - First start: generation 0 holds the working paths as the job was
//!   given them, its starting state (not a checkpoint).
//!
//! `.NAME` is scratch, and is locked (flock) while ckptrun runs: one run
//! per store. Everything after `open` works on descriptors and fixed
//! buffers and does not allocate.

use core::fmt;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{CWD, FileType, Mode, OFlags, RawDir, RenameFlags, SeekFrom};
use rustix::io::Errno;

use crate::archive::{self, Bad, Writer, decimal};
use crate::ckptfile::dir_of;
use crate::error::Error;
use crate::log::Log;
use crate::tree::{self, Fingerprint};

/// The most `--ckpt` paths one job may have.
pub const MAX_CKPTS: usize = 16;
/// The most older generations `--keep` may ask for.
pub const MAX_KEEP: u32 = 64;

/// In the scratch directory: an archive being written, a generation a
/// restart failed from, and whatever a protocol extracts to restart.
const BUILDING: &CStr = c"building";
const FAILED: &CStr = c"failed";
pub const RESTORE: &CStr = c"restore";

/// The first member of every generation: what it is.
const META: &[u8] = b".ckptrun";
/// The most a generation's description may hold.
pub const META_MAX: usize = 8192;

/// A generation's description being written, at most META_MAX bytes, on
/// the stack.
pub struct Description(heapless::Vec<u8, META_MAX>);

impl Description {
    pub fn new() -> Self {
        Self(heapless::Vec::new())
    }

    pub fn push(&mut self, part: &[u8]) -> Result<(), Failed> {
        self.0
            .extend_from_slice(part)
            .map_err(|_| at("describe the generation")(Errno::NAMETOOLONG))
    }
}

impl std::ops::Deref for Description {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

pub struct Store {
    /// NAME as the user gave it, for messages.
    pub shown: OsString,
    /// The directory holding the slots.
    parent: OwnedFd,
    /// NAME's last component.
    base: CString,
    /// `.NAME`, locked.
    scratch: OwnedFd,
    /// Slots in use: keep + 1.
    slots: u32,
    pub ckpts: Vec<Ckpt>,
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

pub fn at(step: &'static str) -> impl Fn(Errno) -> Failed {
    move |errno| Failed { step, errno }
}

/// How the job's files get into a generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// The job has exited: after the commit its working paths are
    /// removed (the next start restores them), so that HTCondor does not
    /// upload them beside the generation.
    Move,
    /// The job runs on: they stay.
    Copy,
}

/// A slot's file name, `NAME.K`, NUL-terminated, on the stack.
struct SlotName {
    bytes: [u8; 272],
}

impl SlotName {
    fn new(base: &CStr, slot: u32) -> Self {
        let mut bytes = [0u8; 272];
        let base = base.to_bytes();
        let mut len = base.len().min(255);
        bytes[..len].copy_from_slice(&base[..len]);
        bytes[len] = b'.';
        len += 1;
        let mut digits = [0u8; 20];
        let d = decimal(&mut digits, u64::from(slot));
        bytes[len..len + d.len()].copy_from_slice(d);
        Self { bytes }
    }

    fn c(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.bytes).unwrap_or(c"")
    }
}

impl fmt::Display for SlotName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.c().to_string_lossy())
    }
}

/// A generation's description (the `.ckptrun` member): `key value`
/// lines, read into a fixed buffer.
pub struct Meta {
    buf: [u8; META_MAX],
    len: usize,
}

impl Meta {
    /// The value of `key`, if the description has it.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.buf[..self.len]
            .split(|&b| b == b'\n')
            .find_map(|line| {
                let rest = line.strip_prefix(key)?;
                rest.strip_prefix(b" ")
            })
    }

    fn generation(&self) -> Option<u64> {
        let digits = self.get(b"generation")?;
        if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(digits.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
    }
}

/// Reads the description of the archive `file`, and checks the archive
/// is whole. `None` for an empty slot.
fn read_meta(file: BorrowedFd) -> Result<Option<Meta>, Bad> {
    if rustix::fs::fstat(file)?.st_size == 0 {
        return Ok(None);
    }
    let mut meta = Meta {
        buf: [0; META_MAX],
        len: 0,
    };
    let mut first = true;
    archive::each_member(file, |m| {
        if first {
            first = false;
            let fits = m.size as usize <= META_MAX;
            if m.path.as_bytes() != META || m.kind != archive::Kind::File || !fits {
                return Err(Bad::Malformed);
            }
            meta.len = m.size as usize;
            archive::read_at(file, &mut meta.buf[..meta.len], m.offset)?;
        }
        Ok(true)
    })?;
    if first || meta.generation().is_none() {
        return Err(Bad::Malformed);
    }
    Ok(Some(meta))
}

impl Store {
    /// Opens (or, on a first start, creates) the store, locks it, cleans
    /// up what an interruption left, and makes the working paths a private
    /// copy of the newest generation. Returns the store and the
    /// generation the working paths now hold a copy of (none on a first
    /// start, which made generation 0 of the paths as they are, or with
    /// no generation, when any working path was set aside). Runs before
    /// the job starts.
    pub fn open(
        name: &OsStr,
        paths: &[OsString],
        keep: u32,
        log: &Log,
    ) -> Result<(Self, Option<u64>), Error> {
        let shown = name.to_os_string();
        let ckpts = paths.iter().map(Ckpt::new).collect::<Result<Vec<_>, _>>()?;
        for (i, c) in ckpts.iter().enumerate() {
            if ckpts[..i].iter().any(|o| o.name == c.name) {
                return Err(Error::usage(
                    c.path.display(),
                    "has the same name as another --ckpt; generations keep each by its name",
                ));
            }
        }
        let as_path = Path::new(name);
        let base = match as_path.file_name() {
            Some(b) if !name.as_bytes().ends_with(b"/") && b.len() <= 240 => b,
            _ => {
                return Err(Error::usage(
                    name.display(),
                    "--store needs a file name (at most 240 bytes), not a path ending in / or ..",
                ));
            }
        };
        check_apart(as_path, base, paths)?;
        let parent_path = dir_of(as_path);
        let parent = tree::open_named_dir(CWD, &cstring(parent_path.as_os_str())?)
            .map_err(|e| Error::os(parent_path.display(), e))?;
        let base = cstring(base)?;
        match tree::stat(parent.as_fd(), &base) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                return Err(Error::usage(
                    name.display(),
                    "is a directory: a store of an older ckptrun (generations in directories); \
                     this one keeps them in the files NAME.0, NAME.1, ...: move it away, or name another --store",
                ));
            }
            _ => {}
        }
        let scratch = open_scratch(parent.as_fd(), &base).map_err(|e| {
            Error::os(
                format_args!("{}/.{}", parent_path.display(), base.to_string_lossy()),
                e,
            )
        })?;
        // One run per store: another would commit into it or clean its
        // scratch. Held until ckptrun exits (the descriptor is
        // close-on-exec: no child keeps it).
        rustix::fs::flock(
            &scratch,
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        )
        .map_err(|e| match e {
            Errno::WOULDBLOCK => Error::usage(name.display(), "is in use by another ckptrun"),
            e => Error::os(name.display(), e),
        })?;
        let store = Self {
            shown,
            parent,
            base,
            scratch,
            slots: keep + 1,
            ckpts,
        };
        store.clean_scratch(log).map_err(|f| store.error(f))?;
        if !store.any_slot().map_err(|f| store.error(f))? {
            store.create(log).map_err(|f| store.error(f))?;
            return Ok((store, None));
        }
        let newest = store.newest(log).map_err(|f| store.error(f))?;
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

    /// The first start: generation 0, the working paths as they are, and
    /// every other slot empty.
    fn create(&self, log: &Log) -> Result<(), Failed> {
        self.write(0, b"", |w| self.pack_ckpts(w))?;
        for slot in 1..self.slots {
            self.empty_slot(slot)?;
        }
        rustix::fs::fsync(&self.parent).map_err(at("fsync the store's directory"))?;
        log.info(format_args!(
            "created {}: generation 0 is the job's starting state",
            self.slots_shown()
        ));
        Ok(())
    }

    /// The slot generation `g` is in (or goes to).
    fn slot(&self, g: u64) -> u32 {
        (g % u64::from(self.slots)) as u32
    }

    /// Makes slot `slot` an empty file (no generation). The caller
    /// fsyncs the directory.
    fn empty_slot(&self, slot: u32) -> Result<(), Failed> {
        let name = SlotName::new(&self.base, slot);
        rustix::fs::openat(
            &self.parent,
            name.c(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map(drop)
        .map_err(at("create an empty slot"))
    }

    fn error(&self, f: Failed) -> Error {
        Error::usage(self.shown.display(), f)
    }

    /// `NAME.0 .. NAME.K`, for messages.
    pub fn slots_shown(&self) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a Store);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let last = self.0.slots - 1;
                match last {
                    0 => write!(f, "{}.0", self.0.shown.display()),
                    _ => write!(f, "{0}.0 .. {0}.{last}", self.0.shown.display()),
                }
            }
        }
        Shown(self)
    }

    /// The slot file generation `g` is in (or goes to).
    pub fn slot_of(&self, g: u64) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a Store, u64);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}.{}", self.0.shown.display(), self.0.slot(self.1))
            }
        }
        Shown(self, g)
    }

    /// Removes what an interrupted commit or restart left.
    fn clean_scratch(&self, log: &Log) -> Result<(), Failed> {
        for name in [BUILDING, RESTORE] {
            if tree::stat(self.scratch.as_fd(), name).is_ok() {
                tree::remove(self.scratch.as_fd(), name).map_err(at("remove scratch"))?;
                log.info(format_args!(
                    "removed {}/.{}/{}: left by an interrupted run",
                    dir_of(Path::new(&self.shown)).display(),
                    self.base.to_string_lossy(),
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

    /// Whether any slot file (of any `--keep`) exists.
    fn any_slot(&self) -> Result<bool, Failed> {
        let mut any = false;
        self.each_slot(|_| any = true)?;
        Ok(any)
    }

    /// Calls `f` with each slot file there is (`NAME.K` for any K up to
    /// MAX_KEEP, so that a store written with a larger `--keep` is read
    /// whole), by its number.
    fn each_slot(&self, mut f: impl FnMut(u32)) -> Result<(), Failed> {
        rustix::fs::seek(&self.parent, SeekFrom::Start(0)).map_err(at("read the directory"))?;
        let base = self.base.to_bytes();
        let mut buf = [MaybeUninit::uninit(); 4096];
        let mut entries = RawDir::new(&self.parent, &mut buf);
        while let Some(entry) = entries.next() {
            let entry = entry.map_err(at("read the directory"))?;
            let name = entry.file_name();
            let Some(digits) = name
                .to_bytes()
                .strip_prefix(base)
                .and_then(|r| r.strip_prefix(b"."))
            else {
                continue;
            };
            let slot = match digits {
                [d] if d.is_ascii_digit() => u32::from(d - b'0'),
                [a, b] if *a != b'0' && a.is_ascii_digit() && b.is_ascii_digit() => {
                    u32::from(a - b'0') * 10 + u32::from(b - b'0')
                }
                _ => continue,
            };
            if slot <= MAX_KEEP {
                f(slot);
            }
        }
        Ok(())
    }

    /// Calls `f` with each whole generation in the slots: its number and
    /// its description. A slot that is not whole is logged and skipped.
    fn each_generation(&self, log: &Log, mut f: impl FnMut(u64, &Meta)) -> Result<(), Failed> {
        let mut slots = 0u128;
        self.each_slot(|slot| slots |= 1 << slot)?;
        for slot in (0..=MAX_KEEP).filter(|s| slots & (1 << s) != 0) {
            let name = SlotName::new(&self.base, slot);
            let file =
                match rustix::fs::openat(&self.parent, name.c(), tree::read_flags(), Mode::empty())
                {
                    Ok(file) => file,
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(at("open a slot")(e)),
                };
            match read_meta(file.as_fd()) {
                Ok(Some(meta)) => f(meta.generation().unwrap_or(0), &meta),
                Ok(None) => {}
                Err(Bad::Io(e)) => return Err(at("read a slot")(e)),
                Err(bad) => log.warn(format_args!(
                    "{}/{name}: {bad}; ignored",
                    dir_of(Path::new(&self.shown)).display()
                )),
            }
        }
        Ok(())
    }

    /// The newest whole generation.
    pub fn newest(&self, log: &Log) -> Result<Option<u64>, Failed> {
        let mut newest = None;
        self.each_generation(log, |g, _| newest = newest.max(Some(g)))?;
        Ok(newest)
    }

    /// The newest whole generation older than `g`.
    pub fn before(&self, g: u64, log: &Log) -> Result<Option<u64>, Failed> {
        let mut found = None;
        self.each_generation(log, |n, _| {
            if n < g {
                found = found.max(Some(n));
            }
        })?;
        Ok(found)
    }

    /// Generation `g`'s archive, open for reading, and its description.
    pub fn generation(&self, g: u64) -> Result<(OwnedFd, Meta), Failed> {
        let name = SlotName::new(&self.base, self.slot(g));
        let file = rustix::fs::openat(&self.parent, name.c(), tree::read_flags(), Mode::empty())
            .map_err(at("open the generation"))?;
        let torn = Failed {
            step: "read the generation",
            errno: Errno::IO,
        };
        match read_meta(file.as_fd()) {
            Ok(Some(meta)) if meta.generation() == Some(g) => Ok((file, meta)),
            Err(Bad::Io(e)) => Err(at("read the generation")(e)),
            _ => Err(torn),
        }
    }

    /// The scratch directory `.NAME`.
    pub fn scratch(&self) -> BorrowedFd<'_> {
        self.scratch.as_fd()
    }

    /// Its path (relative if NAME is).
    pub fn scratch_path(&self) -> std::path::PathBuf {
        let mut name = OsString::from(".");
        name.push(OsStr::from_bytes(self.base.to_bytes()));
        dir_of(Path::new(&self.shown)).join(name)
    }

    /// Writes generation `g`: its description (`extra`: more `key value`
    /// lines), then what `fill` adds, in the scratch directory; fsyncs
    /// it and renames it over its slot; fsyncs the directory.
    fn write(
        &self,
        g: u64,
        extra: &[u8],
        fill: impl FnOnce(&mut Writer) -> rustix::io::Result<()>,
    ) -> Result<(), Failed> {
        let scratch = self.scratch.as_fd();
        let out = rustix::fs::openat(
            scratch,
            BUILDING,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o644),
        )
        .map_err(at("create the archive"))?;
        let mut meta = Description::new();
        let mut digits = [0u8; 20];
        for part in [
            &b"ckptrun store 1\ngeneration "[..],
            decimal(&mut digits, g),
            b"\n",
            extra,
        ] {
            meta.push(part)?;
        }
        let mut w = Writer::new(out.as_fd());
        w.bytes(META, 0o644, &meta)
            .and_then(|()| fill(&mut w))
            .and_then(|()| w.finish())
            .map_err(at("write the archive"))?;
        rustix::fs::fsync(&out).map_err(at("fsync the archive"))?;
        let slot = SlotName::new(&self.base, self.slot(g));
        rustix::fs::renameat(scratch, BUILDING, &self.parent, slot.c())
            .map_err(at("rename the archive into its slot"))?;
        rustix::fs::fsync(&self.parent).map_err(at("fsync the store's directory"))
    }

    /// Each working path that exists, under its name.
    fn pack_ckpts(&self, w: &mut Writer) -> rustix::io::Result<()> {
        for c in &self.ckpts {
            match tree::stat(c.parent.as_fd(), &c.name) {
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e),
                Ok(_) => w.tree(c.parent.as_fd(), &c.name, c.name.to_bytes())?,
            }
        }
        Ok(())
    }

    /// Commits the working paths as the next generation; returns its
    /// number. See the module's notes for why an interruption at any
    /// instant is safe.
    pub fn commit(&self, take: Take, log: &Log) -> Result<u64, Failed> {
        let g = self.next(log)?;
        self.write(g, b"", |w| self.pack_ckpts(w))?;
        self.committed(g, log);
        if take == Take::Move {
            for c in &self.ckpts {
                if let Err(e) = tree::remove(c.parent.as_fd(), &c.name) {
                    log.warn(format_args!(
                        "{}: cannot remove the committed working copy: {}",
                        c.path.display(),
                        crate::sys::strerror(e.raw_os_error())
                    ));
                }
            }
        }
        Ok(g)
    }

    /// Commits, as the next generation, every entry of the directory
    /// `dir` under its own name, with `extra` in its description; returns
    /// its number.
    pub fn commit_dir(&self, dir: BorrowedFd, extra: &[u8], log: &Log) -> Result<u64, Failed> {
        let g = self.next(log)?;
        self.write(g, extra, |w| {
            rustix::fs::seek(dir, SeekFrom::Start(0))?;
            let mut buf = [MaybeUninit::uninit(); 4096];
            let mut entries = RawDir::new(dir, &mut buf);
            while let Some(entry) = entries.next() {
                let entry = entry?;
                let name = entry.file_name();
                if !matches!(name.to_bytes(), b"." | b"..") {
                    w.tree(dir, name, name.to_bytes())?;
                }
            }
            Ok(())
        })?;
        self.committed(g, log);
        Ok(g)
    }

    /// The number the next generation gets.
    fn next(&self, log: &Log) -> Result<u64, Failed> {
        Ok(self.newest(log)?.map_or(1, |n| n + 1))
    }

    fn committed(&self, g: u64, log: &Log) {
        log.info(format_args!(
            "committed generation {g} to {}",
            self.slot_of(g)
        ));
    }

    /// Replaces every working path with a private copy of generation `g`;
    /// a path `g` does not hold is set aside.
    pub fn restore(&self, g: u64, log: &Log) -> Result<(), Failed> {
        if self.ckpts.is_empty() {
            return Ok(());
        }
        let (file, _) = self.generation(g)?;
        for c in &self.ckpts {
            let parent = c.parent.as_fd();
            tree::remove(parent, &c.new).map_err(at("restore"))?;
            if !c.extract(file.as_fd())? {
                c.set_aside(log)?;
                continue;
            }
            c.swap_in().map_err(at("restore (swap in)"))?;
        }
        log.info(format_args!(
            "working copy restored from generation {g} ({})",
            self.slot_of(g)
        ));
        Ok(())
    }

    /// What each working path looks like now, into `out` (one per path).
    pub fn fingerprints(&self, out: &mut [Option<Fingerprint>]) {
        for (c, slot) in self.ckpts.iter().zip(out) {
            *slot = tree::fingerprint(c.parent.as_fd(), &c.name).ok().flatten();
        }
    }

    /// Generation `bad` would not restart: moves it to `.NAME/failed`
    /// (the only one kept there), leaves an empty file in its slot (which
    /// HTCondor then uploads over the bad one), and restores the
    /// generation before it. Returns that one.
    pub fn fall_back(&self, bad: u64, log: &Log) -> Result<Option<u64>, Failed> {
        let Some(previous) = self.before(bad, log)? else {
            return Ok(None);
        };
        let slot = SlotName::new(&self.base, self.slot(bad));
        rustix::fs::renameat(&self.parent, slot.c(), &self.scratch, FAILED)
            .map_err(at("set the failed generation aside"))?;
        self.empty_slot(self.slot(bad))?;
        rustix::fs::fsync(&self.parent).map_err(at("fsync the store's directory"))?;
        log.warn(format_args!(
            "kept generation {bad} as {}/.{}/failed; falling back to generation {previous}",
            dir_of(Path::new(&self.shown)).display(),
            self.base.to_string_lossy()
        ));
        self.restore(previous, log)?;
        Ok(Some(previous))
    }
}

/// The slot files of the store `name` with `keep` older generations, as
/// paths: what must travel with the job.
pub fn slot_paths(name: &OsStr, keep: u32) -> Vec<OsString> {
    (0..=keep)
        .map(|slot| {
            let mut path = name.to_os_string();
            path.push(format!(".{slot}"));
            path
        })
        .collect()
}

/// Opens (creating it if need be) the scratch directory `.NAME` in
/// `parent`: a directory of our own, never a symlink.
fn open_scratch(parent: BorrowedFd, base: &CStr) -> rustix::io::Result<OwnedFd> {
    let mut name = Vec::with_capacity(base.to_bytes().len() + 1);
    name.push(b'.');
    name.extend_from_slice(base.to_bytes());
    let name = CString::new(name).map_err(|_| Errno::INVAL)?;
    match rustix::fs::mkdirat(parent, &name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    tree::open_dir(parent, &name)
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

    /// Extracts this path's members of the archive `file` as `new`;
    /// whether the archive holds it.
    fn extract(&self, file: BorrowedFd) -> Result<bool, Failed> {
        let name = self.name.to_bytes();
        let parent = self.parent.as_fd();
        let mut found = false;
        let new = archive::PathBuf::from(self.new.to_bytes()).map_err(at("restore"))?;
        let done = archive::each_member(file, |m| {
            let to = if m.path.as_bytes() == name {
                found = true;
                new.clone()
            } else if let Some(rest) = m.path.below(name) {
                new.joined(rest)?
            } else {
                return Ok(true);
            };
            archive::extract(file, m, parent, to.c())?;
            Ok(true)
        });
        match done {
            Ok(()) => Ok(found),
            Err(Bad::Io(e)) => Err(at("restore (extract)")(e)),
            Err(_) => Err(at("restore (extract)")(Errno::IO)),
        }
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
/// would overwrite a generation, or a commit copy the store into itself.
fn check_apart(store: &Path, base: &OsStr, paths: &[OsString]) -> Result<(), Error> {
    let parent_at = resolved(dir_of(store));
    for path in paths {
        let path_at = resolved(Path::new(path));
        let name = path_at.file_name().map(OsStr::as_bytes).unwrap_or(b"");
        let ours = |n: &[u8]| {
            n.strip_prefix(b".")
                .unwrap_or(n)
                .strip_prefix(base.as_bytes())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"."))
        };
        let beside = path_at.parent() == Some(parent_at.as_path()) && ours(name);
        if parent_at.starts_with(&path_at) || beside {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_names() {
        assert_eq!(SlotName::new(c"ckptrun.store", 0).c(), c"ckptrun.store.0");
        assert_eq!(SlotName::new(c"s", 12).c(), c"s.12");
    }

    #[test]
    fn a_description_gives_its_values() {
        let mut meta = Meta {
            buf: [0; META_MAX],
            len: 0,
        };
        let text = b"ckptrun store 1\ngeneration 42\ncwd /a b\n";
        meta.buf[..text.len()].copy_from_slice(text);
        meta.len = text.len();
        assert_eq!(meta.generation(), Some(42));
        assert_eq!(meta.get(b"cwd"), Some(&b"/a b"[..]));
        assert_eq!(meta.get(b"images-dir"), None);
    }
}
