//! In-place restarts: the working copy kept, unchanged, between a commit
//! and the next start in the same sandbox, so that start need not copy.
//!
//! When the job has exited after reporting its checkpoint (`Take::Move`),
//! the commit moves each working path into `.NAME/kept/` (a rename: the
//! scratch directory is never uploaded by HTCondor), reads it there into
//! the generation, and then writes `.NAME/kept.record`: what a start will
//! see if nothing changed since. The next start streams that description
//! again from what is there and compares it with the record byte for
//! byte; only if they are equal does it rename the kept paths back
//! instead of restoring them from the generation. The record holds:
//!
//! - the boot (`/proc/sys/kernel/random/boot_id`): the kept copy is never
//!   fsync'd, so after a crash it may not hold what was read from it;
//! - the newest generation's number, its slot, and the slot file's
//!   device, inode, size, mtime and ctime: the kept copy stands for that
//!   generation only, as it was written;
//! - the `--ckpt` names, and every inode below them in walk order: name,
//!   device, inode, mode, size, mtime and ctime to the nanosecond, as
//!   git's index records a clean file (binary, some 70 bytes a file).
//!
//! A write, a rename, a new or removed file, a change of mode or of times
//! sets the ctime of an inode or of its directory to the current time,
//! which no one can set back. The commit reads the kept copy only once
//! the clock has passed every ctime in it, and checks after the read that
//! the tree is as before: so a change made during or after the read gives
//! a ctime the description does not hold, and the start restores from the
//! generation as it always did.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode, OFlags, Stat};
use rustix::io::{Errno, Result};

use crate::os::log::Log;
use crate::os::tree;
use crate::store::generation::at;
use crate::store::scratch::Scratch;
use crate::store::slots::Slots;
use crate::store::working::{Ckpt, WorkingCopy};

/// In the scratch directory: the kept working paths, by their names.
const DIR: &CStr = c"kept";
/// In the scratch directory: what the kept copy must look like.
const RECORD: &CStr = c"kept.record";
/// The record being written, renamed to RECORD once whole.
const RECORD_NEW: &CStr = c"kept.record-new";

const MAGIC: &[u8] = b"ckptrun kept 2\n";
const BUF: usize = 4096;

/// A record being written, or being compared with what is there now:
/// the same bytes go in either way.
struct Record {
    file: OwnedFd,
    check: bool,
    buf: [u8; BUF],
    len: usize,
    same: bool,
}

impl Record {
    /// A new record (RECORD_NEW), opening with this boot; none where the
    /// boot cannot be known.
    fn create(scratch: BorrowedFd) -> Result<Option<Self>> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC;
        Self::open(scratch, RECORD_NEW, flags, false)?.begin()
    }

    /// The rest of the new record (RECORD_NEW), after what is there.
    fn append(scratch: BorrowedFd) -> Result<Self> {
        Self::open(scratch, RECORD_NEW, OFlags::WRONLY | OFlags::APPEND, false)
    }

    /// The record `name`, to compare with; none if there is none.
    fn check(scratch: BorrowedFd, name: &CStr) -> Result<Option<Self>> {
        match Self::open(scratch, name, OFlags::RDONLY, true) {
            Err(Errno::NOENT) => Ok(None),
            other => other?.begin(),
        }
    }

    fn open(scratch: BorrowedFd, name: &CStr, flags: OFlags, check: bool) -> Result<Self> {
        let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY;
        Ok(Self {
            file: rustix::fs::openat(scratch, name, flags, Mode::RUSR | Mode::WUSR)?,
            check,
            buf: [0; BUF],
            len: 0,
            same: true,
        })
    }

    fn begin(mut self) -> Result<Option<Self>> {
        let mut boot = [0u8; 64];
        let Some(id) = boot_id(&mut boot) else {
            return Ok(None);
        };
        self.put(MAGIC)?;
        self.put(id)?;
        Ok(Some(self))
    }

    fn put(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let n = bytes.len().min(BUF - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == BUF {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let data = &self.buf[..self.len];
        if self.check {
            let mut there = [0u8; BUF];
            let got = crate::os::sys::read_fill(&self.file, &mut there[..data.len()])?;
            self.same &= there[..got] == *data;
        } else {
            crate::os::sys::write_all(&self.file, data)?;
        }
        self.len = 0;
        Ok(())
    }

    /// Every inode of `names` in the directory `dir` (each present or
    /// not); returns the latest ctime among them.
    fn tree<'a>(
        &mut self,
        dir: BorrowedFd,
        names: impl Iterator<Item = &'a CStr>,
    ) -> Result<(i64, i64)> {
        let mut newest = (i64::MIN, 0);
        for name in names {
            self.put(name.to_bytes_with_nul())?;
            let st = match tree::stat(dir, name) {
                Err(Errno::NOENT) => continue,
                other => other?,
            };
            tree::each_inode(dir, name, &st, 0, &mut |inode| match inode {
                tree::Inode::Found(name, st) => {
                    newest = newest.max(ctime(st));
                    self.put(name.to_bytes_with_nul())?;
                    self.put(&fields(st))
                }
                // The end of a directory: its entries cannot pass for a
                // sibling's.
                tree::Inode::DirEnd => self.put(b"/"),
            })?;
        }
        Ok(newest)
    }

    /// The generation the kept copy stands for: its number, its slot and
    /// the slot file as it is.
    fn generation(&mut self, g: u64, slot: u32, file: &Stat) -> Result<()> {
        self.put(&g.to_le_bytes())?;
        self.put(&slot.to_le_bytes())?;
        self.put(&fields(file))
    }

    /// Ends it: whether what went in is what the record holds, to its
    /// last byte (always true when writing).
    fn finish(mut self) -> Result<bool> {
        self.flush()?;
        if self.check {
            let mut more = [0u8; 1];
            self.same &= crate::os::sys::read_fill(&self.file, &mut more)? == 0;
        }
        Ok(self.same)
    }
}

/// Renames the new record over the old. Not fsync'd: after a crash the
/// boot differs anyway.
fn seal(scratch: BorrowedFd) -> Result<()> {
    rustix::fs::renameat(scratch, RECORD_NEW, scratch, RECORD)
}

/// Writes a new record of the tree `names` in `kept` once it has settled:
/// the coarse clock (the one the kernel dates inodes by) past every ctime
/// in it, waited for if need be (a clock tick at most). Any later change
/// then gives a ctime the record does not hold. False if the tree keeps
/// changing, or the boot cannot be known.
fn record_settled<'a>(
    scratch: BorrowedFd,
    kept: BorrowedFd,
    names: impl Iterator<Item = &'a CStr> + Clone,
) -> Result<bool> {
    for _ in 0..100 {
        let Some(now) = crate::os::sys::coarse_realtime() else {
            return Ok(false);
        };
        let Some(mut record) = Record::create(scratch)? else {
            return Ok(false);
        };
        let newest = record.tree(kept, names.clone())?;
        record.finish()?;
        if newest < now {
            return Ok(true);
        }
        crate::os::sys::pause_for(Duration::from_millis(1));
    }
    Ok(false)
}

// The time fields are i64 or u64 on x86_64 but i32 or u32 on i686.
#[allow(clippy::unnecessary_cast)]
fn ctime(st: &Stat) -> (i64, i64) {
    (st.st_ctime as i64, st.st_ctime_nsec as i64)
}

/// An inode's identity, kind, size and times, as bytes.
#[allow(clippy::unnecessary_cast)]
fn fields(st: &Stat) -> [u8; 64] {
    let values = [
        st.st_dev as u64,
        st.st_ino as u64,
        st.st_mode as u64,
        st.st_size as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec as u64,
        st.st_ctime as u64,
        st.st_ctime_nsec as u64,
    ];
    let mut out = [0u8; 64];
    for (chunk, v) in out.chunks_exact_mut(8).zip(values) {
        chunk.copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// The kernel's id of this boot, into `buf`: 36 characters.
fn boot_id(buf: &mut [u8; 64]) -> Option<&[u8]> {
    let file = rustix::fs::open(
        c"/proc/sys/kernel/random/boot_id",
        tree::read_flags(),
        Mode::empty(),
    )
    .ok()?;
    let len = crate::os::sys::read_fill(&file, buf).ok()?;
    let id = buf[..len].strip_suffix(b"\n")?;
    (id.len() == 36).then_some(id)
}

/// Removes the kept copy and its records, if any.
pub fn discard(scratch: BorrowedFd) -> Result<()> {
    for name in [RECORD, RECORD_NEW] {
        match rustix::fs::unlinkat(scratch, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e),
        }
    }
    tree::remove(scratch, DIR)
}

/// `.NAME/kept`, made empty.
fn make(scratch: BorrowedFd) -> Result<OwnedFd> {
    discard(scratch)?;
    rustix::fs::mkdirat(scratch, DIR, Mode::RWXU)?;
    tree::open_dir(scratch, DIR)
}

/// `.NAME/kept`, if it is there.
fn open(scratch: BorrowedFd) -> Result<Option<OwnedFd>> {
    match tree::open_dir(scratch, DIR) {
        Err(Errno::NOENT) => Ok(None),
        other => other.map(Some),
    }
}

/// The working copy a commit made after the job ended (`Take::Move`)
/// moved into `.NAME/kept`, and read from there into the generation.
pub struct Kept {
    dir: OwnedFd,
    /// Whether its record could be written once it had settled.
    settled: Result<bool>,
}

impl Kept {
    /// Moves every working path into `.NAME/kept` and records them; none
    /// (each path back where it was) if one cannot be moved, such as a
    /// path on another filesystem: the commit then reads them where they
    /// are.
    pub fn take(work: &WorkingCopy, scratch: &Scratch, log: &Log) -> Option<Self> {
        let dir = make(scratch.dir()).ok()?;
        for (i, c) in work.paths().iter().enumerate() {
            match rustix::fs::renameat(c.parent(), c.name(), &dir, c.name()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => {
                    log.info(format_args!(
                        "{}: {}: not kept, the next start copies it",
                        c.path.display(),
                        crate::os::sys::strerror(e)
                    ));
                    move_back(dir.as_fd(), &work.paths()[..i], scratch, log);
                    let _ = discard(scratch.dir());
                    return None;
                }
            }
        }
        let settled = record_settled(scratch.dir(), dir.as_fd(), work.names());
        Some(Self { dir, settled })
    }

    /// Where the paths are now, for the commit to read.
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// The commit failed: the paths go back at once.
    pub fn undo(self, work: &WorkingCopy, scratch: &Scratch, log: &Log) {
        move_back(self.dir(), work.paths(), scratch, log);
        let _ = discard(scratch.dir());
    }

    /// The commit of generation `g` into `slot` is done: seals the record
    /// if the paths are still as it holds them.
    pub fn seal(
        self,
        slots: &Slots,
        scratch: &Scratch,
        (g, slot): (u64, u32),
        work: &WorkingCopy,
        log: &Log,
    ) {
        let recorded = self.settled == Ok(true)
            && seal_record(slots, scratch, self.dir(), (g, slot), work) == Ok(true);
        log.info(format_args!(
            "working copy {}",
            if recorded {
                "kept for an in-place restart"
            } else {
                "changed while committed: the next start copies it"
            }
        ));
    }
}

/// Moves `ckpts` from `kept` back to their working paths.
fn move_back(kept: BorrowedFd, ckpts: &[Ckpt], scratch: &Scratch, log: &Log) {
    for c in ckpts {
        match rustix::fs::renameat(kept, c.name(), c.parent(), c.name()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => log.warn(format_args!(
                "{}: cannot move it back from {}/kept: {}",
                c.path.display(),
                scratch.path().display(),
                crate::os::sys::strerror(e)
            )),
        }
    }
}

/// Checks that the kept paths are as the new record holds them (so as
/// they were before the commit read them), then adds the generation
/// (its number and slot) and seals it. Whether it did.
fn seal_record(
    slots: &Slots,
    scratch: &Scratch,
    kept: BorrowedFd,
    (g, slot): (u64, u32),
    work: &WorkingCopy,
) -> Result<bool> {
    let Some(mut check) = Record::check(scratch.dir(), RECORD_NEW)? else {
        return Ok(false);
    };
    check.tree(kept, work.names())?;
    if !check.finish()? {
        return Ok(false);
    }
    let slot_file = slots.stat(slot)?;
    let mut rest = Record::append(scratch.dir())?;
    rest.generation(g, slot, &slot_file)?;
    rest.finish()?;
    seal(scratch.dir())?;
    Ok(true)
}

/// The working copy kept at the last commit, moved back into place if
/// it is exactly the newest generation as committed: that generation's
/// number. Otherwise it is removed (any path the restore would miss moved
/// back first), and none.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
pub fn reuse(work: &WorkingCopy, slots: &Slots, scratch: &Scratch, log: &Log) -> Option<u64> {
    let kept = open(scratch.dir()).ok()??;
    let found = kept_generation(work, slots, scratch, kept.as_fd());
    let moved = match found {
        Some(_) => move_kept_back(work, kept.as_fd(), log),
        None => false,
    };
    if found.is_none() || moved {
        log.info(format_args!(
            "kept working copy {}",
            match found {
                Some(_) => "is the newest generation as committed: moved back, not copied",
                None => "is not the newest generation as committed: restoring from it",
            }
        ));
    }
    if found.is_none() {
        // Back where it was, for the restore to treat as any working
        // copy: replaced, or kept as PATH.uncommitted (a commit that was
        // interrupted leaves it here).
        for c in work.paths() {
            if matches!(tree::stat(c.parent(), c.name()), Err(Errno::NOENT)) {
                let _ = rustix::fs::renameat(&kept, c.name(), c.parent(), c.name());
            }
        }
    }
    let _ = discard(scratch.dir());
    found.filter(|_| moved)
}

/// Moves each kept path back over its working path (a path the kept
/// copy lacks is set aside); whether all went back.
fn move_kept_back(work: &WorkingCopy, kept: BorrowedFd, log: &Log) -> bool {
    for c in work.paths() {
        let back = match tree::stat(kept, c.name()) {
            Err(Errno::NOENT) => c.set_aside(log),
            _ => tree::remove(c.parent(), c.name())
                .and_then(|()| rustix::fs::renameat(kept, c.name(), c.parent(), c.name()))
                .map_err(at("move the kept working copy back")),
        };
        if let Err(f) = back {
            log.warn(format_args!(
                "{}: {f}; restoring from the generation",
                c.path.display()
            ));
            return false;
        }
    }
    true
}

/// The newest generation, if `kept` is exactly it as committed.
fn kept_generation(
    work: &WorkingCopy,
    slots: &Slots,
    scratch: &Scratch,
    kept: BorrowedFd,
) -> Option<u64> {
    let mut check = Record::check(scratch.dir(), RECORD).ok()??;
    let g = slots.newest()?;
    let slot = slots.find(g)?;
    let slot_file = slots.stat(slot).ok()?;
    check.tree(kept, work.names()).ok()?;
    check.generation(g, slot, &slot_file).ok()?;
    check.finish().ok()?.then_some(g)
}
