//! The slot files: `NAME.0` .. `NAME.K` (`--keep K`), each holding one
//! generation or none (an empty file), what the table (see `table`) says
//! of them, read, written and moved.
//!
//! Where they are is what HTCondor uploads. It carries the sandbox's
//! top-level files that changed since the sandbox was filled, at every
//! checkpoint exit and eviction, and keeps in its spool the last copy of
//! each name it received, whatever becomes of the file later. So with
//! `Publish::Newest` (the default) the top of the sandbox holds only the
//! generation this run committed last: a start moves the generations it
//! finds there into `.NAME/older` (they are in the spool already: they
//! came from it, or a checkpoint exit uploaded them before HTCondor
//! restarted the job in place), and each commit moves the one it follows
//! there too. Each upload then carries one generation, and the spool
//! still holds K+1. With `Publish::All` (a submit file that lists the
//! slots, which HTCondor would miss) every slot stays at the top.

use core::fmt;
use std::ffi::{CStr, CString, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::os::decimal;
use crate::os::dir::dir_of;
use crate::os::log::{Log, Lossy};
use crate::os::tree;
use crate::store::archive::Bad;
use crate::store::generation::{Failed, Meta, at, read_meta, read_number};
use crate::store::table::{MAX_KEEP, Place, SlotSet, SlotState, Table};

/// Which slot files stay at the top of the sandbox, where HTCondor
/// uploads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// The generation this run committed last, and emptied slots (whose
    /// empty file must replace a damaged one in HTCondor's spool).
    Newest,
    /// Every slot: the submit file lists them (`transfer_output_files`,
    /// `transfer_checkpoint_files`), and HTCondor holds a job whose
    /// listed file is missing.
    All,
}

/// A slot's file name, `NAME.K`, NUL-terminated, on the stack.
pub struct SlotName {
    bytes: [u8; 272],
}

impl SlotName {
    pub fn new(base: &CStr, slot: u32) -> Self {
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

    pub fn c(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.bytes).unwrap_or(c"")
    }
}

impl fmt::Display for SlotName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Shown after the job started: without allocating.
        Lossy(self.c().to_bytes()).fmt(f)
    }
}

/// The store's name: NAME as the user gave it (for messages), the
/// directory holding its slots, and NAME's last component.
pub struct Name {
    pub shown: OsString,
    pub dir: OwnedFd,
    pub base: CString,
}

pub struct Slots {
    name: Name,
    /// `.NAME/older`.
    older: OwnedFd,
    publish: Publish,
    table: Table,
    /// Slots with a file in both places: the one in `.NAME/older` is the
    /// generation a commit replaced at the top, and not yet removed.
    stale: SlotSet,
}

/// The table's answers, read through the slot files' room.
impl std::ops::Deref for Slots {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.table
    }
}

impl Slots {
    /// The slot files of the store `name` with `keep` older generations,
    /// the older ones in `older`; not yet read.
    pub fn new(name: Name, keep: u32, older: OwnedFd, publish: Publish) -> Self {
        Self {
            name,
            older,
            publish,
            table: Table::new(keep),
            stale: SlotSet::default(),
        }
    }

    pub fn name(&self) -> &Name {
        &self.name
    }

    pub fn publish(&self) -> Publish {
        self.publish
    }

    /// The directory holding the top-level slot files.
    pub fn dir(&self) -> BorrowedFd<'_> {
        self.name.dir.as_fd()
    }

    /// The directory holding slot files in `place`.
    pub fn dir_of(&self, place: Place) -> BorrowedFd<'_> {
        match place {
            Place::Top => self.dir(),
            Place::Older => self.older.as_fd(),
        }
    }

    /// Slot `slot`'s file name.
    pub fn file(&self, slot: u32) -> SlotName {
        SlotName::new(&self.name.base, slot)
    }

    /// Whether any slot file (of any `--keep`) exists, in either place.
    pub fn any(&self) -> Result<bool, Failed> {
        let found = self.found(Place::Top)?.union(self.found(Place::Older)?);
        Ok(!found.is_empty())
    }

    /// The slot files there are in `place`, by number.
    fn found(&self, place: Place) -> Result<SlotSet, Failed> {
        let base = self.name.base.to_bytes();
        let mut found = SlotSet::default();
        tree::each_name(self.dir_of(place), |name| {
            let digits = name
                .to_bytes()
                .strip_prefix(base)
                .and_then(|r| r.strip_prefix(b"."));
            // `NAME.7`, `NAME.12`; not `NAME.07`.
            let slot = match digits {
                Some(d @ [_]) | Some(d @ [b'1'..=b'9', _]) => decimal::parse(d),
                _ => None,
            };
            match slot {
                Some(slot) if slot <= u64::from(MAX_KEEP) => found.insert(slot as u32),
                _ => {}
            }
            Ok(())
        })
        .map_err(at("read the directory"))?;
        Ok(found)
    }

    /// Reads what each slot holds, and where. A slot that is not whole is
    /// marked bad, and said in the log when one is given.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    pub fn scan(&mut self, log: Option<&Log>) -> Result<(), Failed> {
        let top = self.found(Place::Top)?;
        let older = self.found(Place::Older)?;
        self.stale = top.intersection(older);
        self.table.clear();
        for slot in top.union(older).iter() {
            let place = if top.contains(slot) {
                Place::Top
            } else {
                Place::Older
            };
            let state = self.read(slot, place, log)?;
            self.table.set(slot, state, place);
        }
        Ok(())
    }

    /// What slot `slot`'s file in `place` holds. A file that is not a
    /// generation (torn, foreign, a directory, a symbolic link) is ignored,
    /// said; one that cannot be read is marked so (`check_readable`).
    fn read(&self, slot: u32, place: Place, log: Option<&Log>) -> Result<SlotState, Failed> {
        let name = self.file(slot);
        let dir = self.dir_of(place);
        let bad = match rustix::fs::openat(dir, name.c(), tree::read_flags(), Mode::empty()) {
            Err(Errno::NOENT) => return Ok(SlotState::Absent),
            // The name itself is a link (never followed): not ckptrun's.
            Err(Errno::LOOP) => Bad::Malformed,
            Err(e) => return Err(at("open a slot")(e)),
            Ok(file) => match read_number(file.as_fd()) {
                Ok(Some(g)) => return Ok(SlotState::Generation(g)),
                Ok(None) => return Ok(SlotState::Empty),
                Err(Bad::Io(e)) if e != Errno::ISDIR => return Ok(SlotState::Unreadable(e)),
                Err(bad) => bad,
            },
        };
        if let Some(log) = log {
            log.warn(format_args!("{}: {bad}; ignored", self.shown(slot, place)));
        }
        Ok(SlotState::Bad)
    }

    /// Creates every slot of this `--keep` that is missing, empty, at the
    /// top, so that a submit file may list them all (`Publish::All`).
    pub fn fill(&mut self) -> Result<(), Failed> {
        self.scan(None)?;
        if self.publish == Publish::Newest {
            return Ok(());
        }
        let mut missing = SlotSet::default();
        for slot in 0..self.table.count() {
            if self.table.state(slot) == SlotState::Absent {
                missing.insert(slot);
            }
        }
        for slot in missing.iter() {
            self.empty_slot(slot)?;
        }
        if !missing.is_empty() {
            rustix::fs::fsync(self.dir()).map_err(at("fsync the store's directory"))?;
        }
        Ok(())
    }

    /// Makes slot `slot` an empty file (no generation) at the top, which
    /// HTCondor then uploads over what its spool holds. The caller fsyncs
    /// the directory.
    pub fn empty_slot(&mut self, slot: u32) -> Result<(), Failed> {
        rustix::fs::openat(
            self.dir(),
            self.file(slot).c(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map(drop)
        .map_err(at("create an empty slot"))?;
        self.table.set(slot, SlotState::Empty, Place::Top);
        Ok(())
    }

    /// The table, changed through the rooms that write the files.
    pub fn table_mut(&mut self) -> &mut Table {
        &mut self.table
    }

    /// Slot `slot`'s archive, open for reading; its description into
    /// `meta`.
    pub fn open(&self, slot: u32, meta: &mut Meta) -> Result<OwnedFd, Failed> {
        let file = rustix::fs::openat(
            self.dir_of(self.table.place(slot)),
            self.file(slot).c(),
            tree::read_flags(),
            Mode::empty(),
        )
        .map_err(at("open the generation"))?;
        match read_meta(file.as_fd(), meta) {
            Ok(true) => Ok(file),
            Err(Bad::Io(e)) => Err(at("read the generation")(e)),
            _ => Err(at("read the generation")(Errno::IO)),
        }
    }

    /// What stat says of slot `slot`'s file.
    pub fn stat(&self, slot: u32) -> rustix::io::Result<Stat> {
        let dir = self.dir_of(self.table.place(slot));
        tree::stat(dir, self.file(slot).c())
    }

    /// Slot `slot`'s file as a path, for messages.
    pub fn at(&self, slot: u32) -> impl fmt::Display + '_ {
        self.shown(slot, self.table.place(slot))
    }

    /// Slot `slot`'s file in `place` as a path, for messages.
    fn shown(&self, slot: u32, place: Place) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a Name, SlotName, Place);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let dir = dir_of(Path::new(&self.0.shown));
                if dir.as_os_str() != "." && !dir.as_os_str().is_empty() {
                    write!(f, "{}/", dir.display())?;
                }
                if self.2 == Place::Older {
                    write!(f, ".{}/older/", Lossy(self.0.base.to_bytes()))?;
                }
                write!(f, "{}", self.1)
            }
        }
        Shown(&self.name, self.file(slot), place)
    }

    /// The slot file generation `g` is in (NAME.K), for messages.
    pub fn of(&self, g: u64) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a OsString, Option<u32>);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.1 {
                    Some(slot) => write!(f, "{}.{slot}", self.0.display()),
                    None => write!(f, "{}", self.0.display()),
                }
            }
        }
        Shown(&self.name.shown, self.table.find(g))
    }
}

/// Where the slot files are, which is what HTCondor uploads.
impl Slots {
    /// A start's arrangement: a copy a commit left in `.NAME/older` beside
    /// the slot that replaced it is removed; then with `Publish::Newest`
    /// every slot found at the top that holds something moves into
    /// `.NAME/older` (the spool has it), with `Publish::All` every slot
    /// there moves back to the top.
    pub fn arrange(&mut self) -> Result<(), Failed> {
        for slot in self.stale.iter() {
            let name = self.file(slot);
            rustix::fs::unlinkat(self.older.as_fd(), name.c(), rustix::fs::AtFlags::empty())
                .map_err(at("remove a replaced generation"))?;
        }
        self.stale = SlotSet::default();
        match self.publish {
            Publish::Newest => self.move_all(Place::Top, Place::Older),
            Publish::All => self.move_all(Place::Older, Place::Top),
        }
    }

    /// A commit into `slot` is done: with `Publish::Newest`, every other
    /// generation at the top moves into `.NAME/older`, but generation 0,
    /// made by this run's start: the first checkpoint exit uploads it
    /// beside generation 1, so that the spool has one to fall back to.
    pub fn after_commit(&mut self, slot: u32) -> Result<(), Failed> {
        if self.publish == Publish::All {
            return Ok(());
        }
        let mut others = self.table.in_place(Place::Top, false);
        others.remove(slot);
        if let Some(first) = self.table.find(0) {
            others.remove(first);
        }
        for other in others.iter() {
            self.move_to(other, Place::Older)?;
        }
        self.sync_both()
    }

    /// The job's end: with `returned` (a failed end, or `--return-store`)
    /// the newest generation at the top, dated now, so that HTCondor
    /// returns it with the outputs; otherwise none at all (the spool has
    /// them; the submit directory gets the job's outputs only).
    pub fn at_end(&mut self, returned: bool) -> Result<(), Failed> {
        if self.publish == Publish::All {
            return Ok(());
        }
        if !returned {
            return self.move_all(Place::Top, Place::Older);
        }
        let Some(slot) = self.table.newest().and_then(|g| self.table.find(g)) else {
            return Ok(());
        };
        self.move_to(slot, Place::Top)?;
        self.sync_both()?;
        let now = crate::os::sys::realtime();
        let now = rustix::fs::Timespec {
            tv_sec: now.0,
            tv_nsec: now.1.into(),
        };
        let times = rustix::fs::Timestamps {
            last_access: now,
            last_modification: now,
        };
        rustix::fs::utimensat(
            self.dir(),
            self.file(slot).c(),
            &times,
            rustix::fs::AtFlags::empty(),
        )
        .map_err(at("date the returned generation"))
    }

    /// Moves every slot file holding something from `from` to `to`.
    fn move_all(&mut self, from: Place, to: Place) -> Result<(), Failed> {
        let slots = self.table.in_place(from, true);
        for slot in slots.iter() {
            self.move_to(slot, to)?;
        }
        match slots.is_empty() {
            true => Ok(()),
            false => self.sync_both(),
        }
    }

    /// Moves slot `slot`'s file to `place` (replacing what is there).
    fn move_to(&mut self, slot: u32, place: Place) -> Result<(), Failed> {
        let from = self.table.place(slot);
        if from == place {
            return Ok(());
        }
        let name = self.file(slot);
        rustix::fs::renameat(self.dir_of(from), name.c(), self.dir_of(place), name.c())
            .map_err(at("move a slot file"))?;
        self.table.moved(slot, place);
        Ok(())
    }

    /// Fails, saying which, if a slot could not be read (see `unread`).
    pub fn check_readable(&self, log: &Log) -> Result<(), Failed> {
        match self.table.unreadable() {
            Some((slot, e)) => Err(unread(&self.at(slot), e, log)),
            None => Ok(()),
        }
    }

    /// Both slot directories fsync'd: a moved generation is in one.
    fn sync_both(&self) -> Result<(), Failed> {
        rustix::fs::fsync(self.older.as_fd())
            .and_then(|()| rustix::fs::fsync(self.dir()))
            .map_err(at("fsync the store's directories"))
    }
}

/// A slot whose file cannot be read (an I/O error): not damage, so no
/// generation is called damaged or passed over for it. The start stops
/// (exit 125) with nothing set aside: the spool still has the file, and
/// a held job, released, reads it again.
#[inline(never)] // One copy for its callers.
pub fn unread(slot: &dyn fmt::Display, e: Errno, log: &Log) -> Failed {
    log.warn(format_args!(
        "{slot}: cannot be read ({}): no generation is restored or set aside",
        crate::os::sys::strerror(e)
    ));
    at("read a slot")(e)
}

/// The slot files of the store `name` with `keep` older generations, as
/// paths: what must travel with the job.
pub fn slot_paths(name: &std::ffi::OsStr, keep: u32) -> Vec<OsString> {
    (0..=keep)
        .map(|slot| {
            let mut path = name.to_os_string();
            path.push(format!(".{slot}"));
            path
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_names() {
        assert_eq!(SlotName::new(c"ckptrun.store", 0).c(), c"ckptrun.store.0");
        assert_eq!(SlotName::new(c"s", 12).c(), c"s.12");
    }
}
