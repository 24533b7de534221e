//! Committed checkpoints: the generations of a self-checkpointing job's
//! files (`--mode self`) or of DMTCP's images (`--mode dmtcp`).
//!
//! Each generation is one archive file (see `archive`) at the top of the
//! job's sandbox, because that is all HTCondor carries: on eviction, and
//! on an exit with the checkpoint code, it uploads the sandbox's new and
//! changed top-level files, never a directory. The store `NAME` is the
//! files `NAME.0` to `NAME.K` (`--keep K` older generations, default 1):
//! a generation goes to an empty slot, else to one holding a damaged
//! generation, else replaces the oldest, so a commit adds one changed
//! file to what HTCondor uploads and the spool never holds more than K+1.
//! Generations are found by reading the slots, so `--keep` may change
//! between runs. An empty slot file holds no generation. Every slot is
//! created at the first start (and when `--keep` grows), so that a submit
//! file may list them all.
//!
//! - Commit: the archive, its manifest last (see `manifest`), is written
//!   in the scratch directory `.NAME` (one copy in the kernel, checksummed
//!   beside it by a child: see `archive`), fsync'd, renamed over its slot,
//!   and the directory fsync'd. The rename is the commit: an interruption
//!   at any instant leaves every committed generation as it was; a
//!   failure removes what it wrote at once. The generation replaced is
//!   freed by a child (`hold_replaced`).
//! - Verify: before any restart, the chosen generation is checked in full
//!   against its manifest (by a child, while the copy is made); a damaged
//!   one is never restored (the newest intact one is, and stderr says
//!   what was lost).
//! - Restore (self mode): before each start, each working path
//!   (`--ckpt PATH`) is replaced by a private copy of the generation,
//!   built beside it and renamed into place once the generation is found
//!   intact. The copy is not fsync'd: it is rebuilt from the store before
//!   every start, so a crash cannot leave one that is used.
//! - In place (self mode): a commit made after the job ended moves the
//!   working paths into `.NAME/kept`, and the next start moves them back
//!   instead of restoring, if they are provably the newest generation as
//!   committed (see `kept`).
//! - First start: generation 0 holds the working paths as the job was
//!   given them, its starting state (not a checkpoint).
//!
//! `.NAME` is scratch, and is locked (flock) while ckptrun runs: one run
//! per store. Everything after `open` works on descriptors and fixed
//! buffers and does not allocate.

pub mod archive;
pub mod kept;
pub mod manifest;
pub mod writer;

use core::fmt;
use std::cell::Cell;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

use self::archive::Bad;
use self::writer::Writer;
use crate::os::beside::{Beside, Held};
use crate::os::decimal;
use crate::os::dir::dir_of;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::tree::{self, Fingerprint};

/// The most `--ckpt` paths one job may have.
pub const MAX_CKPTS: usize = 16;
/// The most older generations `--keep` may ask for.
pub const MAX_KEEP: u32 = 64;

/// In the scratch directory: an archive being written, a generation a
/// restart failed from, and whatever a protocol extracts to restart.
const BUILDING: &CStr = c"building";
/// In the scratch directory: the manifest of the archive being written.
const SUMS: &CStr = c"sums";
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
    /// Whose generations it holds.
    holder: Holder,
    /// Slots found damaged at this start, by number: the next commits
    /// replace them first.
    damaged: Cell<u128>,
    /// dmtcp mode: the generation whose images `.NAME/restore` holds.
    restore_holds: Cell<Option<u64>>,
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
        let why = crate::os::sys::strerror(self.errno);
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
        let d = decimal::write(&mut digits, u64::from(slot));
        bytes[len..len + d.len()].copy_from_slice(d);
        Self { bytes }
    }

    fn c(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.bytes).unwrap_or(c"")
    }
}

impl fmt::Display for SlotName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Shown after the job started: without allocating.
        crate::os::log::Lossy(self.c().to_bytes()).fmt(f)
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

/// Which mode's job a store holds; each generation says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    SelfCkpt,
    Dmtcp,
}

impl Holder {
    fn name(self) -> &'static str {
        match self {
            Holder::SelfCkpt => "self",
            Holder::Dmtcp => "dmtcp",
        }
    }

    /// The mode a generation's description names; a store 1 generation
    /// (an older ckptrun's) names none, and is dmtcp's if it has images.
    fn of(meta: &Meta) -> Option<Self> {
        match meta.get(b"mode") {
            Some(b"self") => Some(Holder::SelfCkpt),
            Some(b"dmtcp") => Some(Holder::Dmtcp),
            Some(_) => None,
            None if meta.get(b"images-dir").is_some() => Some(Holder::Dmtcp),
            None => Some(Holder::SelfCkpt),
        }
    }
}

/// What a start does when no generation in the store is intact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDamage {
    /// Refuse to start (exit 125): the user decides.
    Refuse,
    /// Keep the damaged generations aside and start as a first start
    /// (`--fresh-if-damaged`).
    StartAfresh,
}

/// What one slot file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Absent,
    Empty,
    /// Cut off, or not an archive ckptrun wrote.
    Bad,
    Generation(u64),
}

/// Every slot a store may have (any `--keep`), by number.
struct Slots([SlotState; MAX_KEEP as usize + 1]);

impl Slots {
    fn generations(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0u32..).zip(&self.0).filter_map(|(slot, s)| match s {
            SlotState::Generation(g) => Some((*g, slot)),
            _ => None,
        })
    }

    fn newest(&self) -> Option<u64> {
        self.generations().map(|(g, _)| g).max()
    }

    fn find(&self, g: u64) -> Option<u32> {
        self.generations().find(|&(n, _)| n == g).map(|(_, s)| s)
    }

    /// The newest generation older than `g` (any, with `None`).
    fn below(&self, g: Option<u64>) -> Option<(u64, u32)> {
        self.generations()
            .filter(|&(n, _)| g.is_none_or(|g| n < g))
            .max_by_key(|&(n, _)| n)
    }
}

/// Why a generation cannot be restored.
// Large, on the stack on purpose: it may be made after the job started,
// when nothing allocates.
#[allow(clippy::large_enum_variant)]
enum Damage {
    Archive(Bad),
    NoManifest,
    Member(archive::PathBuf),
    Missing,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Archive(bad) => write!(f, "{bad}"),
            Damage::NoManifest => f.write_str("its manifest is missing"),
            Damage::Member(path) => write!(f, "member {path} does not match its checksum"),
            Damage::Missing => f.write_str("members its manifest lists are missing"),
        }
    }
}

/// Whether a commit waits for the generation it replaced to be freed (see
/// `Store::hold_replaced`), or leaves that to its child: when the job has
/// ended and ckptrun exits next, nothing needs to wait for it.
#[derive(Clone, Copy)]
enum Freeing {
    Wait,
    Leave,
}

/// A DMTCP image: a top-level `ckpt_*.dmtcp` member of a dmtcp mode
/// generation.
pub fn is_image(path: &[u8]) -> bool {
    path.starts_with(b"ckpt_") && path.ends_with(b".dmtcp") && !path.contains(&b'/')
}

/// The working paths' copies of a generation, made beside them: which
/// paths it holds (bit i for the i-th `--ckpt`), or why they could not be.
type Prepared = Result<u32, Failed>;

/// What verifying a generation found.
// Large, on the stack on purpose: it may be made after the job started,
// when nothing allocates.
#[allow(clippy::large_enum_variant)]
enum Check {
    Intact,
    /// Written by an older ckptrun (store 1), without checksums.
    Unverified,
    Damaged(Damage),
}

/// Verifies the generation in `file`, described by `meta`.
fn check(file: BorrowedFd, meta: &Meta) -> Check {
    let old = meta.get(b"ckptrun store") == Some(b"1");
    match manifest::verify(file) {
        Ok(manifest::Verdict::Intact) => Check::Intact,
        Ok(manifest::Verdict::NoManifest) if old => Check::Unverified,
        Ok(manifest::Verdict::NoManifest) => Check::Damaged(Damage::NoManifest),
        Ok(manifest::Verdict::Damaged(Some(path))) => Check::Damaged(Damage::Member(path)),
        Ok(manifest::Verdict::Damaged(None)) => Check::Damaged(Damage::Missing),
        Err(bad) => Check::Damaged(Damage::Archive(bad)),
    }
}

impl Store {
    /// Opens (or, on a first start, creates) the store, locks it, cleans
    /// up what an interruption left, and makes the working paths a private
    /// copy of the newest intact generation. Returns the store and the
    /// generation the working paths now hold a copy of (none on a first
    /// start, which made generation 0 of the paths as they are, or with
    /// no generation, when any working path was set aside). Runs before
    /// the job starts.
    // Out of line: its large buffers stay off the stack of every caller
    // (a frame is touched whole at entry), so supervising costs no memory.
    #[inline(never)]
    pub fn open(
        name: &OsStr,
        paths: &[OsString],
        keep: u32,
        holder: Holder,
        on_damage: OnDamage,
        log: &Log,
    ) -> Result<(Self, Option<u64>), Error> {
        let store = Self::lock(name, paths, keep, holder)?;
        store.clean_scratch(log).map_err(|f| store.error(f))?;
        if !store.any_slot().map_err(|f| store.error(f))? {
            store.warn_other_stores(log);
            kept::discard(store.scratch())
                .map_err(at("remove the kept working copy"))
                .map_err(|f| store.error(f))?;
            store.create(log).map_err(|f| store.error(f))?;
            return Ok((store, None));
        }
        store.fill_slots().map_err(|f| store.error(f))?;
        store.check_holder()?;
        if let Some(g) = store.reuse_kept(log) {
            return Ok((store, Some(g)));
        }
        let newest = store.newest_intact(None, log).map_err(|f| store.error(f))?;
        let chosen = match newest {
            Some((g, file, prepared)) => {
                store
                    .restore_from(g, file.as_fd(), prepared, log)
                    .map_err(|f| store.error(f))?;
                Some(g)
            }
            None if store.damaged.get() == 0 => {
                for c in &store.ckpts {
                    c.set_aside(log).map_err(|f| store.error(f))?;
                }
                None
            }
            None => {
                store.none_intact(on_damage, log)?;
                None
            }
        };
        Ok((store, chosen))
    }

    /// Checks the options, opens the store's directory and scratch, and
    /// takes its lock.
    fn lock(name: &OsStr, paths: &[OsString], keep: u32, holder: Holder) -> Result<Self, Error> {
        let shown = name.to_os_string();
        let ckpts = Ckpt::all(paths)?;
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
        let scratch = lock_scratch(name, parent.as_fd(), parent_path, &base)?;
        Ok(Self {
            shown,
            parent,
            base,
            scratch,
            slots: keep + 1,
            holder,
            damaged: Cell::new(0),
            restore_holds: Cell::new(None),
            ckpts,
        })
    }

    /// The newest generation (older than `below`, if given) that is
    /// intact, verified in full, its archive open for reading, and the
    /// working paths' copies of it made beside them (see
    /// `check_preparing`). Each damaged one on the way is said on stderr
    /// and marked damaged.
    // Out of line: its large buffers stay off the stack of every caller
    // (a frame is touched whole at entry), so supervising costs no memory.
    #[inline(never)]
    fn newest_intact(
        &self,
        below: Option<u64>,
        log: &Log,
    ) -> Result<Option<(u64, OwnedFd, Prepared)>, Failed> {
        let slots = self.scan(Some(log))?;
        let mut bad = (0u32..)
            .zip(&slots.0)
            .filter(|(_, s)| **s == SlotState::Bad)
            .fold(0u128, |m, (slot, _)| m | 1 << slot);
        let mut newer = below;
        // The damaged generation last seen, said once the next is known.
        let mut pending: Option<(u64, u32, Damage)> = None;
        while let Some((g, slot)) = slots.below(newer) {
            newer = Some(g);
            let (file, meta) = self.open_slot(slot)?;
            let (verdict, prepared) = self.check_preparing(file.as_fd(), &meta);
            if let Check::Damaged(why) = verdict {
                self.unprepare();
                bad |= 1 << slot;
                if let Some(older) = pending.replace((g, slot, why)) {
                    self.say_damaged(older, None, log);
                }
                continue;
            }
            match pending.take() {
                Some(damaged) => self.say_damaged(damaged, Some((g, slot)), log),
                None if matches!(verdict, Check::Unverified) => log.warn(format_args!(
                    "{}: generation {g} was written by an older ckptrun, without checksums: restored unverified",
                    self.at(&SlotName::new(&self.base, slot))
                )),
                None => {}
            }
            self.damaged.set(self.damaged.get() | bad);
            return Ok(Some((g, file, prepared)));
        }
        if let Some(damaged) = pending {
            self.say_damaged(damaged, None, log);
        }
        self.damaged.set(self.damaged.get() | bad);
        Ok(None)
    }

    /// One line on stderr for a damaged generation, and the one restored
    /// instead, if any: the user must learn that work was lost.
    fn say_damaged(&self, (g, slot, why): (u64, u32, Damage), then: Option<(u64, u32)>, log: &Log) {
        let name = SlotName::new(&self.base, slot);
        match then {
            Some((older, at)) => log.warn(format_args!(
                "{}: generation {g} is damaged ({why}): restarting from generation {older} ({}), \
                 the job's work after it is lost",
                self.at(&name),
                self.at(&SlotName::new(&self.base, at))
            )),
            None => log.warn(format_args!(
                "{}: generation {g} is damaged ({why}); it is not restored",
                self.at(&name)
            )),
        }
    }

    /// No generation is intact: refuse, or set the damaged ones aside in
    /// the scratch directory and start as a first start.
    fn none_intact(&self, on_damage: OnDamage, log: &Log) -> Result<(), Error> {
        let scratch = self.scratch_path();
        if on_damage == OnDamage::Refuse {
            return Err(Error::usage(
                self.shown.display(),
                format_args!(
                    "no intact generation to restart from: the job's checkpoints are damaged; \
                     to start it afresh, run with --fresh-if-damaged (or remove {}.*)",
                    self.shown.display()
                ),
            ));
        }
        let damaged = self.damaged.get();
        for slot in (0..=MAX_KEEP).filter(|s| damaged & (1 << s) != 0) {
            let name = SlotName::new(&self.base, slot);
            let mut aside = *b"damaged.00\0";
            aside[8] = b'0' + (slot / 10) as u8;
            aside[9] = b'0' + (slot % 10) as u8;
            let aside = CStr::from_bytes_with_nul(&aside).unwrap_or(c"damaged");
            rustix::fs::renameat(&self.parent, name.c(), &self.scratch, aside)
                .map_err(|e| self.error(at("set a damaged generation aside")(e)))?;
        }
        self.damaged.set(0);
        for c in &self.ckpts {
            c.set_aside(log).map_err(|f| self.error(f))?;
        }
        log.warn(format_args!(
            "{}: starting afresh (--fresh-if-damaged); the damaged generations are kept in {}",
            self.shown.display(),
            scratch.display()
        ));
        self.create(log).map_err(|f| self.error(f))
    }

    /// A store whose newest generation is another mode's is refused.
    fn check_holder(&self) -> Result<(), Error> {
        let slots = self.scan(None).map_err(|f| self.error(f))?;
        let Some(slot) = slots.newest().and_then(|g| slots.find(g)) else {
            return Ok(());
        };
        let Ok((_, meta)) = self.open_slot(slot) else {
            return Ok(());
        };
        match Holder::of(&meta) {
            Some(h) if h == self.holder => Ok(()),
            h => Err(Error::usage(
                self.shown.display(),
                format_args!(
                    "{} holds a checkpoint of --mode {}, not --mode {}: run with that mode, \
                     or give another --store",
                    self.at(&SlotName::new(&self.base, slot)),
                    h.map_or("(unknown)", Holder::name),
                    self.holder.name()
                ),
            )),
        }
    }

    /// At a first start: another store beside this one is likely this
    /// job's under an older --store; say that it is ignored.
    // Out of line: its large buffers stay off the stack of every caller
    // (a frame is touched whole at entry), so supervising costs no memory.
    #[inline(never)]
    fn warn_other_stores(&self, log: &Log) {
        let mut said = false;
        let _ = tree::each_entry(self.parent.as_fd(), c".", 0, |dir, name| {
            let other = match name.to_bytes().strip_prefix(b".") {
                Some(o) if !said && !o.is_empty() && o != self.base.to_bytes() => o,
                _ => return Ok(()),
            };
            let mut first = heapless::Vec::<u8, 260>::new();
            let _ = first.extend_from_slice(other);
            if first.extend_from_slice(b".0\0").is_err() {
                return Ok(());
            }
            let is_store =
                CStr::from_bytes_with_nul(&first).is_ok_and(|first| tree::stat(dir, first).is_ok());
            if is_store {
                said = true;
                let other = String::from_utf8_lossy(other);
                log.warn(format_args!(
                    "{}: a new store; the store {other} beside it ({other}.0 ..) is ignored: \
                     give --store {other} to restart from it",
                    self.shown.display()
                ));
            }
            Ok(())
        });
    }

    /// The first start: generation 0, the working paths as they are, and
    /// every other slot empty.
    fn create(&self, log: &Log) -> Result<(), Failed> {
        self.write(0, b"", Freeing::Wait, &mut |w| self.pack_ckpts(w, None))?;
        self.fill_slots()?;
        log.info(format_args!(
            "created {}: generation 0 is the job's starting state",
            self.slots_shown()
        ));
        Ok(())
    }

    /// Creates every slot of this `--keep` that is missing, empty, so
    /// that a submit file may list them all.
    fn fill_slots(&self) -> Result<(), Failed> {
        let slots = self.scan(None)?;
        let mut made = false;
        for slot in 0..self.slots {
            if slots.0[slot as usize] == SlotState::Absent {
                self.empty_slot(slot)?;
                made = true;
            }
        }
        if made {
            rustix::fs::fsync(&self.parent).map_err(at("fsync the store's directory"))?;
        }
        Ok(())
    }

    /// The slot the next generation goes to, among this `--keep`'s: an
    /// empty one, else one that holds no intact generation, else the
    /// oldest. Never the newest intact generation's, unless `--keep 0`.
    fn next_slot(&self, slots: &Slots) -> u32 {
        let damaged = self.damaged.get();
        let ours = || 0..self.slots;
        ours()
            .find(|&s| matches!(slots.0[s as usize], SlotState::Absent | SlotState::Empty))
            .or_else(|| {
                ours().find(|&s| slots.0[s as usize] == SlotState::Bad || damaged & (1 << s) != 0)
            })
            .or_else(|| {
                ours().min_by_key(|&s| match slots.0[s as usize] {
                    SlotState::Generation(g) => g,
                    _ => 0,
                })
            })
            .unwrap_or(0)
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

    /// A slot file's path, for messages.
    fn at<'a>(&'a self, name: &'a SlotName) -> impl fmt::Display + 'a {
        struct Shown<'a>(&'a Store, &'a SlotName);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let dir = dir_of(Path::new(&self.0.shown));
                if dir.as_os_str() != "." && !dir.as_os_str().is_empty() {
                    write!(f, "{}/", dir.display())?;
                }
                write!(f, "{}", self.1)
            }
        }
        Shown(self, name)
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

    /// The slot file generation `g` is in, for messages.
    pub fn slot_of(&self, g: u64) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a Store, Option<u32>);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.1 {
                    Some(slot) => write!(f, "{}.{slot}", self.0.shown.display()),
                    None => write!(f, "{}", self.0.shown.display()),
                }
            }
        }
        let slot = self.scan(None).ok().and_then(|s| s.find(g));
        Shown(self, slot)
    }

    /// Removes what an interrupted commit or restart left.
    fn clean_scratch(&self, log: &Log) -> Result<(), Failed> {
        for name in [BUILDING, SUMS, RESTORE] {
            if tree::stat(self.scratch.as_fd(), name).is_ok() {
                tree::remove(self.scratch.as_fd(), name).map_err(at("remove scratch"))?;
                log.info(format_args!(
                    "removed {}/{}: left by an interrupted run",
                    self.scratch_shown(),
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
        let base = self.base.to_bytes();
        tree::each_name(self.parent.as_fd(), |name| {
            let digits = name
                .to_bytes()
                .strip_prefix(base)
                .and_then(|r| r.strip_prefix(b"."));
            let slot = match digits {
                Some([d]) if d.is_ascii_digit() => u32::from(d - b'0'),
                Some([a, b]) if *a != b'0' && a.is_ascii_digit() && b.is_ascii_digit() => {
                    u32::from(a - b'0') * 10 + u32::from(b - b'0')
                }
                _ => return Ok(()),
            };
            if slot <= MAX_KEEP {
                f(slot);
            }
            Ok(())
        })
        .map_err(at("read the directory"))
    }

    /// What each slot holds. A slot that is not whole is marked bad, and
    /// said in the log when one is given.
    // Out of line: its large buffers stay off the stack of every caller
    // (a frame is touched whole at entry), so supervising costs no memory.
    #[inline(never)]
    fn scan(&self, log: Option<&Log>) -> Result<Slots, Failed> {
        let mut slots = Slots([SlotState::Absent; MAX_KEEP as usize + 1]);
        let mut found = 0u128;
        self.each_slot(|slot| found |= 1 << slot)?;
        for slot in (0..=MAX_KEEP).filter(|s| found & (1 << s) != 0) {
            let name = SlotName::new(&self.base, slot);
            let file =
                match rustix::fs::openat(&self.parent, name.c(), tree::read_flags(), Mode::empty())
                {
                    Ok(file) => file,
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(at("open a slot")(e)),
                };
            slots.0[slot as usize] = match read_meta(file.as_fd()) {
                Ok(Some(meta)) => SlotState::Generation(meta.generation().unwrap_or(0)),
                Ok(None) => SlotState::Empty,
                Err(bad) => {
                    if let Some(log) = log {
                        log.warn(format_args!("{}: {bad}; ignored", self.at(&name)));
                    }
                    SlotState::Bad
                }
            };
        }
        Ok(slots)
    }

    /// Slot `slot`'s archive, open for reading, and its description.
    fn open_slot(&self, slot: u32) -> Result<(OwnedFd, Meta), Failed> {
        let name = SlotName::new(&self.base, slot);
        let file = rustix::fs::openat(&self.parent, name.c(), tree::read_flags(), Mode::empty())
            .map_err(at("open the generation"))?;
        match read_meta(file.as_fd()) {
            Ok(Some(meta)) => Ok((file, meta)),
            Err(Bad::Io(e)) => Err(at("read the generation")(e)),
            _ => Err(at("read the generation")(Errno::IO)),
        }
    }

    /// Generation `g`'s archive, open for reading, and its description.
    pub fn generation(&self, g: u64) -> Result<(OwnedFd, Meta), Failed> {
        let slot = self.scan(None)?.find(g);
        let slot = slot.ok_or(at("find the generation")(Errno::NOENT))?;
        let (file, meta) = self.open_slot(slot)?;
        match meta.generation() {
            Some(n) if n == g => Ok((file, meta)),
            _ => Err(at("read the generation")(Errno::IO)),
        }
    }

    /// The scratch directory `.NAME`.
    pub fn scratch(&self) -> BorrowedFd<'_> {
        self.scratch.as_fd()
    }

    /// Its path, for messages: as `scratch_path`, without allocating.
    fn scratch_shown(&self) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a Store);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let dir = dir_of(Path::new(&self.0.shown));
                let base = crate::os::log::Lossy(self.0.base.to_bytes());
                write!(f, "{}/.{base}", dir.display())
            }
        }
        Shown(self)
    }

    /// Its path (relative if NAME is).
    pub fn scratch_path(&self) -> std::path::PathBuf {
        let mut name = OsString::from(".");
        name.push(OsStr::from_bytes(self.base.to_bytes()));
        dir_of(Path::new(&self.shown)).join(name)
    }

    /// Writes generation `g`: its description (`extra`: more `key value`
    /// lines), then what `fill` adds, then its manifest, in the scratch
    /// directory; fsyncs it and renames it over its slot; fsyncs the
    /// directory. Whatever fails, what it wrote in the scratch directory
    /// is removed at once: a full disk gets its room back.
    fn write(
        &self,
        g: u64,
        extra: &[u8],
        freeing: Freeing,
        fill: &mut dyn FnMut(&mut Writer) -> rustix::io::Result<()>,
    ) -> Result<u32, Failed> {
        let slot = self.next_slot(&self.scan(None)?);
        let name = SlotName::new(&self.base, slot);
        let mut held = None;
        let done = self.build(g, extra, fill).and_then(|()| {
            held = self.hold_replaced(&name);
            rustix::fs::renameat(&self.scratch, BUILDING, &self.parent, name.c())
                .map_err(at("rename the archive into its slot"))?;
            rustix::fs::fsync(&self.parent).map_err(at("fsync the store's directory"))
        });
        for name in [BUILDING, SUMS] {
            let _ = rustix::fs::unlinkat(&self.scratch, name, rustix::fs::AtFlags::empty());
        }
        if let Some(child) = held.map(Held::let_go) {
            match (&done, freeing) {
                (Ok(()), Freeing::Leave) => {}
                _ => drop(child.result()),
            }
        }
        done?;
        self.damaged.set(self.damaged.get() & !(1 << slot));
        Ok(slot)
    }

    /// The generation a commit is about to replace in slot `name`, held
    /// by a child (`Beside::hold`): freeing its blocks and pages (some
    /// 40 ms for 256 MiB on ext4) is then not in the commit's path.
    fn hold_replaced(&self, name: &SlotName) -> Option<Held> {
        let file =
            rustix::fs::openat(&self.parent, name.c(), tree::read_flags(), Mode::empty()).ok()?;
        let size = rustix::fs::fstat(&file).ok()?.st_size;
        (size >= 1 << 20).then(|| Beside::hold(file)).flatten()
    }

    /// The archive of generation `g` as `.NAME/building`, fsync'd.
    // Out of line: its large buffers stay off the stack of every caller
    // (a frame is touched whole at entry), so supervising costs no memory.
    #[inline(never)]
    fn build(
        &self,
        g: u64,
        extra: &[u8],
        fill: &mut dyn FnMut(&mut Writer) -> rustix::io::Result<()>,
    ) -> Result<(), Failed> {
        let scratch = self.scratch.as_fd();
        let create = OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let out = rustix::fs::openat(
            scratch,
            BUILDING,
            OFlags::WRONLY | create,
            Mode::from_raw_mode(0o644),
        )
        .map_err(at("create the archive"))?;
        let sums = rustix::fs::openat(
            scratch,
            SUMS,
            OFlags::RDWR | create,
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(at("create the manifest"))?;
        let mut meta = Description::new();
        let mut digits = [0u8; 20];
        for part in [
            &b"ckptrun store 2\ngeneration "[..],
            decimal::write(&mut digits, g),
            b"\nmode ",
            self.holder.name().as_bytes(),
            b"\n",
            extra,
        ] {
            meta.push(part)?;
        }
        let mut w = Writer::new(out.as_fd(), sums.as_fd());
        w.bytes(META, 0o644, &meta)
            .and_then(|()| fill(&mut w))
            .and_then(|()| w.finish())
            .map_err(at("write the archive"))?;
        rustix::fs::fsync(&out).map_err(at("fsync the archive"))
    }

    /// Each working path that exists, under its name: from where it is,
    /// or from `kept` (see `kept`) where it was moved to.
    fn pack_ckpts(&self, w: &mut Writer, kept: Option<BorrowedFd>) -> rustix::io::Result<()> {
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

    /// Commits the working paths as the next generation; returns its
    /// number. See the module's notes for why an interruption at any
    /// instant is safe.
    pub fn commit(&self, take: Take, log: &Log) -> Result<u64, Failed> {
        let g = self.next()?;
        kept::discard(self.scratch()).map_err(at("remove the kept working copy"))?;
        if take == Take::Move {
            if let Some(kept) = self.move_to_kept(log) {
                return self.commit_kept(g, kept.as_fd(), log);
            }
        }
        let freeing = match take {
            Take::Move => Freeing::Leave,
            Take::Copy => Freeing::Wait,
        };
        self.write(g, b"", freeing, &mut |w| self.pack_ckpts(w, None))?;
        self.committed(g, log);
        if take == Take::Move {
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
        Ok(g)
    }

    /// Moves every working path into `.NAME/kept`; none (each back where
    /// it was) if one cannot be, such as a path on another filesystem.
    fn move_to_kept(&self, log: &Log) -> Option<OwnedFd> {
        let kept = kept::make(self.scratch()).ok()?;
        for (i, c) in self.ckpts.iter().enumerate() {
            match rustix::fs::renameat(&c.parent, &c.name, &kept, &c.name) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => {
                    log.info(format_args!(
                        "{}: {}: not kept, the next start copies it",
                        c.path.display(),
                        crate::os::sys::strerror(e)
                    ));
                    self.move_back(kept.as_fd(), &self.ckpts[..i], log);
                    let _ = kept::discard(self.scratch());
                    return None;
                }
            }
        }
        Some(kept)
    }

    /// Moves `ckpts` from `kept` back to their working paths.
    fn move_back(&self, kept: BorrowedFd, ckpts: &[Ckpt], log: &Log) {
        for c in ckpts {
            match rustix::fs::renameat(kept, &c.name, &c.parent, &c.name) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => log.warn(format_args!(
                    "{}: cannot move it back from {}/kept: {}",
                    c.path.display(),
                    self.scratch_shown(),
                    crate::os::sys::strerror(e)
                )),
            }
        }
    }

    /// Commits generation `g` from the working paths moved into `kept`,
    /// and describes them (see `kept`) so that the next start may move
    /// them back instead of copying. If the commit fails they are moved
    /// back at once.
    fn commit_kept(&self, g: u64, kept: BorrowedFd, log: &Log) -> Result<u64, Failed> {
        let names = self.ckpts.iter().map(|c| c.name.as_c_str());
        let settled = kept::record_settled(self.scratch(), kept, names.clone());
        let slot = match self.write(g, b"", Freeing::Leave, &mut |w| {
            self.pack_ckpts(w, Some(kept))
        }) {
            Ok(slot) => slot,
            Err(f) => {
                self.move_back(kept, &self.ckpts, log);
                let _ = kept::discard(self.scratch());
                return Err(f);
            }
        };
        self.committed(g, log);
        let recorded = settled == Ok(true) && self.seal_record(kept, g, slot, names) == Ok(true);
        log.info(format_args!(
            "working copy {}",
            if recorded {
                "kept for an in-place restart"
            } else {
                "changed while committed: the next start copies it"
            }
        ));
        Ok(g)
    }

    /// Checks that the kept paths are as the new record holds them (so as
    /// they were before the commit read them), then adds the generation
    /// and seals it. Whether it did.
    fn seal_record<'a>(
        &self,
        kept: BorrowedFd,
        g: u64,
        slot: u32,
        names: impl Iterator<Item = &'a CStr>,
    ) -> rustix::io::Result<bool> {
        let Some(mut check) = kept::Record::check(self.scratch(), kept::RECORD_NEW)? else {
            return Ok(false);
        };
        check.tree(kept, names)?;
        if !check.finish()? {
            return Ok(false);
        }
        let slot_file = tree::stat(self.parent.as_fd(), SlotName::new(&self.base, slot).c())?;
        let mut rest = kept::Record::append(self.scratch())?;
        rest.generation(g, slot, &slot_file)?;
        rest.finish()?;
        kept::seal(self.scratch())?;
        Ok(true)
    }

    /// The working copy kept at the last commit, moved back into place if
    /// it is exactly the newest generation as committed (see `kept`):
    /// that generation's number. Otherwise it is removed, and none.
    fn reuse_kept(&self, log: &Log) -> Option<u64> {
        let kept = kept::open(self.scratch()).ok()??;
        let found = self.kept_generation(kept.as_fd());
        if found.is_some() {
            for c in &self.ckpts {
                let back = match tree::stat(kept.as_fd(), &c.name) {
                    Err(Errno::NOENT) => c.set_aside(log),
                    _ => tree::remove(c.parent.as_fd(), &c.name)
                        .and_then(|()| rustix::fs::renameat(&kept, &c.name, &c.parent, &c.name))
                        .map_err(at("move the kept working copy back")),
                };
                if let Err(f) = back {
                    log.warn(format_args!(
                        "{}: {f}; restoring from the generation",
                        c.path.display()
                    ));
                    let _ = kept::discard(self.scratch());
                    return None;
                }
            }
        }
        log.info(format_args!(
            "kept working copy {}",
            match found {
                Some(_) => "is the newest generation as committed: moved back, not copied",
                None => "is not the newest generation as committed: restoring from it",
            }
        ));
        if found.is_none() {
            // Back where it was, for the restore to treat as any working
            // copy: replaced, or kept as PATH.uncommitted (a commit that
            // was interrupted leaves it here).
            for c in &self.ckpts {
                if matches!(tree::stat(c.parent.as_fd(), &c.name), Err(Errno::NOENT)) {
                    let _ = rustix::fs::renameat(&kept, &c.name, &c.parent, &c.name);
                }
            }
        }
        let _ = kept::discard(self.scratch());
        found
    }

    /// The newest generation, if `kept` is exactly it as committed.
    fn kept_generation(&self, kept: BorrowedFd) -> Option<u64> {
        let mut check = kept::Record::check(self.scratch(), kept::RECORD).ok()??;
        let slots = self.scan(None).ok()?;
        let g = slots.newest()?;
        let slot = slots.find(g)?;
        let slot_file =
            tree::stat(self.parent.as_fd(), SlotName::new(&self.base, slot).c()).ok()?;
        check
            .tree(kept, self.ckpts.iter().map(|c| c.name.as_c_str()))
            .ok()?;
        check.generation(g, slot, &slot_file).ok()?;
        check.finish().ok()?.then_some(g)
    }

    /// Commits, as the next generation, every entry of the directory
    /// `dir` under its own name, with `extra` in its description; returns
    /// its number.
    pub fn commit_dir(&self, dir: BorrowedFd, extra: &[u8], log: &Log) -> Result<u64, Failed> {
        let g = self.next()?;
        self.write(g, extra, Freeing::Wait, &mut |w| {
            tree::each_name(dir, |name| w.tree(dir, name, name.to_bytes()))
        })?;
        self.committed(g, log);
        Ok(g)
    }

    /// The number the next generation gets: past every generation in the
    /// store, damaged ones included.
    fn next(&self) -> Result<u64, Failed> {
        Ok(self.scan(None)?.newest().map_or(1, |n| n + 1))
    }

    fn committed(&self, g: u64, log: &Log) {
        log.info(format_args!(
            "committed generation {g} to {}",
            self.slot_of(g)
        ));
    }

    /// Verifies generation `file` in a child process (`Beside`) while this
    /// one makes the working paths' copies of it (see `Ckpt::prepare`): on
    /// two cores the check then costs little beside the copy. Nothing the
    /// job has is touched before the verdict. Where the child gives none,
    /// the check is made here.
    // Out of line: its large buffers stay off the stack of every caller
    // (a frame is touched whole at entry), so supervising costs no memory.
    #[inline(never)]
    fn check_preparing(&self, file: BorrowedFd, meta: &Meta) -> (Check, Prepared) {
        let images = self.holder == Holder::Dmtcp && meta.generation() != Some(0);
        if self.ckpts.is_empty() && !images {
            return (check(file, meta), Ok(0));
        }
        let beside = Beside::start(|| {
            Some(match check(file, meta) {
                Check::Intact => 0,
                Check::Unverified => 1,
                Check::Damaged(_) => 2,
            })
        });
        let prepared = self.prepare(file);
        if prepared.is_ok() && self.holder == Holder::Dmtcp {
            self.restore_holds.set(meta.generation());
        }
        let verdict = match beside.and_then(Beside::result) {
            Some(0) => Check::Intact,
            Some(1) => Check::Unverified,
            // Damaged (why is found again here), or no verdict.
            _ => check(file, meta),
        };
        (verdict, prepared)
    }

    /// Each working path's copy of generation `file`, made beside it (see
    /// `Ckpt::prepare`); which paths the generation holds, by index.
    fn prepare(&self, file: BorrowedFd) -> Prepared {
        if self.holder == Holder::Dmtcp {
            self.unprepare();
            return self.prepare_images(file).map(|()| 0);
        }
        let mut held = 0;
        for (i, c) in self.ckpts.iter().enumerate() {
            if c.prepare(file)? {
                held |= 1 << i;
            }
        }
        Ok(held)
    }

    /// Removes the copies `prepare` made.
    fn unprepare(&self) {
        for c in &self.ckpts {
            let _ = tree::remove(c.parent.as_fd(), &c.new);
        }
        if self.restore_holds.take().is_some() {
            let _ = tree::remove(self.scratch(), RESTORE);
        }
    }

    /// dmtcp mode: generation `file`'s images (its top-level
    /// `ckpt_*.dmtcp` members) extracted into `.NAME/restore`, made anew.
    fn prepare_images(&self, file: BorrowedFd) -> Result<(), Failed> {
        let scratch = self.scratch();
        tree::remove(scratch, RESTORE).map_err(at("restore"))?;
        rustix::fs::mkdirat(scratch, RESTORE, Mode::from_raw_mode(0o700)).map_err(at("restore"))?;
        let restore = tree::open_dir(scratch, RESTORE).map_err(at("restore"))?;
        let done = archive::each_member(file, |m| {
            if is_image(m.path.as_bytes()) {
                archive::extract(file, m, restore.as_fd(), m.path.c())?;
            }
            Ok(true)
        });
        match done {
            Ok(()) => Ok(()),
            Err(Bad::Io(e)) => Err(at("restore (extract)")(e)),
            Err(_) => Err(at("restore (extract)")(Errno::IO)),
        }
    }

    /// dmtcp mode: the generation whose images `.NAME/restore` holds,
    /// extracted while it was verified, if any.
    pub fn restore_holds(&self) -> Option<u64> {
        self.restore_holds.get()
    }

    /// Replaces every working path with its copy of generation `g` (its
    /// archive `file`, verified), made beforehand (`prepared`); a path `g`
    /// does not hold is set aside. A copy that could not be made (a full
    /// disk) is made again once every working path is removed.
    fn restore_from(
        &self,
        g: u64,
        file: BorrowedFd,
        prepared: Prepared,
        log: &Log,
    ) -> Result<(), Failed> {
        if self.ckpts.is_empty() {
            return Ok(());
        }
        let held = match prepared {
            Ok(held) => held,
            Err(_) => {
                self.unprepare();
                for c in &self.ckpts {
                    tree::remove(c.parent.as_fd(), &c.name)
                        .map_err(at("restore (remove the working copy)"))?;
                }
                self.prepare(file)?
            }
        };
        for (i, c) in self.ckpts.iter().enumerate() {
            if held & (1 << i) == 0 {
                c.set_aside(log)?;
            } else {
                c.put_in_place()?;
            }
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
    /// HTCondor then uploads over the bad one), and restores the newest
    /// intact generation before it, verified once. Returns that one; none
    /// (nothing changed) when there is no intact one from 1 on
    /// (generation 0 is the starting state, not a checkpoint).
    pub fn fall_back(&self, bad: u64, log: &Log) -> Result<Option<u64>, Failed> {
        let Some((previous, file, prepared)) = self.newest_intact(Some(bad), log)? else {
            return Ok(None);
        };
        if previous == 0 {
            self.unprepare();
            return Ok(None);
        }
        self.set_failed_aside(bad)?;
        log.warn(format_args!(
            "kept generation {bad} as {}/failed; falling back to generation {previous}",
            self.scratch_shown()
        ));
        self.restore_from(previous, file.as_fd(), prepared, log)?;
        Ok(Some(previous))
    }

    /// Moves generation `bad` to `.NAME/failed`, an empty file in its
    /// slot.
    fn set_failed_aside(&self, bad: u64) -> Result<(), Failed> {
        let slot = self
            .scan(None)?
            .find(bad)
            .ok_or(at("find the generation")(Errno::NOENT))?;
        let name = SlotName::new(&self.base, slot);
        rustix::fs::renameat(&self.parent, name.c(), &self.scratch, FAILED)
            .map_err(at("set the failed generation aside"))?;
        self.empty_slot(slot)?;
        rustix::fs::fsync(&self.parent).map_err(at("fsync the store's directory"))
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

/// The store `name` (`base` in `parent`, at `parent_path`): refuses an
/// older ckptrun's store, opens its scratch directory and takes the lock.
fn lock_scratch(
    name: &OsStr,
    parent: BorrowedFd,
    parent_path: &Path,
    base: &CStr,
) -> Result<OwnedFd, Error> {
    match tree::stat(parent, base) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            return Err(Error::usage(
                name.display(),
                "is a directory: a store of an older ckptrun (generations in directories); \
                 this one keeps them in the files NAME.0, NAME.1, ...: move it away, or name another --store",
            ));
        }
        _ => {}
    }
    let scratch = open_scratch(parent, base).map_err(|e| {
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
    Ok(scratch)
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
    /// Every --ckpt PATH, each with a name of its own.
    fn all(paths: &[OsString]) -> Result<Vec<Self>, Error> {
        let ckpts = paths.iter().map(Ckpt::new).collect::<Result<Vec<_>, _>>()?;
        for (i, c) in ckpts.iter().enumerate() {
            if ckpts[..i].iter().any(|o| o.name == c.name) {
                return Err(Error::usage(
                    c.path.display(),
                    "has the same name as another --ckpt; generations keep each by its name",
                ));
            }
        }
        Ok(ckpts)
    }

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

    /// The working path's (device, inode), if it exists.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let st = tree::stat(self.parent.as_fd(), &self.name).ok()?;
        Some((st.st_dev, st.st_ino))
    }

    /// Makes this path's copy of the archive `file` as `new`, beside it
    /// (any earlier `new` removed first); whether the archive holds the
    /// path. The working path is not touched.
    fn prepare(&self, file: BorrowedFd) -> Result<bool, Failed> {
        let name = self.name.to_bytes();
        let parent = self.parent.as_fd();
        tree::remove(parent, &self.new).map_err(at("restore"))?;
        let new = archive::PathBuf::from(self.new.to_bytes()).map_err(at("restore"))?;
        let mut held = false;
        let done = archive::each_member(file, |m| {
            let to = if m.path.as_bytes() == name {
                held = true;
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
