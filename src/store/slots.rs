//! The slot table: the files `NAME.0` .. `NAME.K` at the top of the job's
//! sandbox (`--keep K`), each holding one generation or none (an empty
//! file), what each holds, and where the next generation goes.
//!
//! How a generation is chosen:
//! - a commit's number is one past every generation in the store, damaged
//!   ones included (`next_number`), and it goes to an empty slot, else to
//!   one holding no intact generation, else replaces the oldest
//!   (`next_slot`): never the newest intact generation, unless `--keep 0`;
//! - a restart takes the newest generation that verifies (see `verify`),
//!   walking down from the newest (`below`).
//!
//! Every slot file there is (`NAME.K` for any K up to MAX_KEEP) is read,
//! so `--keep` may change between runs. The table is read at a start and
//! once per commit, and kept up to date by what this run writes. Nothing
//! here allocates after `Slots::new`.

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
use crate::store::generation::{Failed, Meta, at, read_meta};

/// The most older generations `--keep` may ask for.
pub const MAX_KEEP: u32 = 64;
const ALL: usize = MAX_KEEP as usize + 1;

/// A set of slots, by number (0 to MAX_KEEP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotSet(u128);

impl SlotSet {
    pub fn insert(&mut self, slot: u32) {
        self.0 |= 1 << slot;
    }

    pub fn remove(&mut self, slot: u32) {
        self.0 &= !(1 << slot);
    }

    pub fn contains(self, slot: u32) -> bool {
        self.0 & (1 << slot) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Its slots, in order.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..=MAX_KEEP).filter(move |&s| self.contains(s))
    }
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
    /// Slots in use: keep + 1.
    count: u32,
    /// What each slot held when last read or written. Boxed (made
    /// before the job starts): a kilobyte less in every frame holding a
    /// store.
    states: Box<[SlotState; ALL]>,
    /// Slots found damaged at this start: the next commits replace them
    /// first.
    damaged: SlotSet,
}

impl Slots {
    /// The table of the store `name` with `keep` older generations, not
    /// yet read.
    pub fn new(name: Name, keep: u32) -> Self {
        Self {
            name,
            count: keep + 1,
            states: Box::new([SlotState::Absent; ALL]),
            damaged: SlotSet::default(),
        }
    }

    pub fn name(&self) -> &Name {
        &self.name
    }

    pub fn dir(&self) -> BorrowedFd<'_> {
        self.name.dir.as_fd()
    }

    /// Slot `slot`'s file name.
    pub fn file(&self, slot: u32) -> SlotName {
        SlotName::new(&self.name.base, slot)
    }

    /// Whether any slot file (of any `--keep`) exists.
    pub fn any(&self) -> Result<bool, Failed> {
        let mut any = false;
        self.each_slot(|_| any = true)?;
        Ok(any)
    }

    /// Calls `f` with each slot file there is, by its number.
    fn each_slot(&self, mut f: impl FnMut(u32)) -> Result<(), Failed> {
        let base = self.name.base.to_bytes();
        tree::each_name(self.dir(), |name| {
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
                Some(slot) if slot <= u64::from(MAX_KEEP) => f(slot as u32),
                _ => {}
            }
            Ok(())
        })
        .map_err(at("read the directory"))
    }

    /// Reads what each slot holds. A slot that is not whole is marked
    /// bad, and said in the log when one is given.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    pub fn scan(&mut self, log: Option<&Log>) -> Result<(), Failed> {
        let mut found = SlotSet::default();
        self.each_slot(|slot| found.insert(slot))?;
        *self.states = [SlotState::Absent; ALL];
        for slot in found.iter() {
            let name = self.file(slot);
            let file =
                match rustix::fs::openat(self.dir(), name.c(), tree::read_flags(), Mode::empty()) {
                    Ok(file) => file,
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(at("open a slot")(e)),
                };
            self.states[slot as usize] = match read_meta(file.as_fd()) {
                Ok(Some(meta)) => SlotState::Generation(meta.generation().unwrap_or(0)),
                Ok(None) => SlotState::Empty,
                Err(bad) => {
                    if let Some(log) = log {
                        log.warn(format_args!("{}: {bad}; ignored", self.at(slot)));
                    }
                    SlotState::Bad
                }
            };
        }
        Ok(())
    }

    /// Creates every slot of this `--keep` that is missing, empty, so that
    /// a submit file may list them all.
    pub fn fill(&mut self) -> Result<(), Failed> {
        self.scan(None)?;
        let mut missing = SlotSet::default();
        for slot in 0..self.count {
            if self.states[slot as usize] == SlotState::Absent {
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

    /// Makes slot `slot` an empty file (no generation). The caller
    /// fsyncs the directory.
    pub fn empty_slot(&mut self, slot: u32) -> Result<(), Failed> {
        rustix::fs::openat(
            self.dir(),
            self.file(slot).c(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map(drop)
        .map_err(at("create an empty slot"))?;
        self.states[slot as usize] = SlotState::Empty;
        Ok(())
    }

    fn generations(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0u32..)
            .zip(self.states.iter())
            .filter_map(|(slot, s)| match s {
                SlotState::Generation(g) => Some((*g, slot)),
                _ => None,
            })
    }

    pub fn newest(&self) -> Option<u64> {
        self.generations().map(|(g, _)| g).max()
    }

    /// The slot holding generation `g`.
    pub fn find(&self, g: u64) -> Option<u32> {
        self.generations().find(|&(n, _)| n == g).map(|(_, s)| s)
    }

    /// The newest generation older than `g` (any, with `None`), and its
    /// slot.
    pub fn below(&self, g: Option<u64>) -> Option<(u64, u32)> {
        self.generations()
            .filter(|&(n, _)| g.is_none_or(|g| n < g))
            .max_by_key(|&(n, _)| n)
    }

    /// The slots whose file is not a whole archive.
    pub fn bad(&self) -> SlotSet {
        let mut bad = SlotSet::default();
        for (slot, s) in (0u32..).zip(self.states.iter()) {
            if *s == SlotState::Bad {
                bad.insert(slot);
            }
        }
        bad
    }

    /// The number the next generation gets: past every generation in the
    /// store, damaged ones included.
    pub fn next_number(&self) -> u64 {
        self.newest().map_or(1, |n| n + 1)
    }

    /// The slot the next generation goes to, among this `--keep`'s: an
    /// empty one, else one that holds no intact generation, else the
    /// oldest. Never the newest intact generation's, unless `--keep 0`.
    pub fn next_slot(&self) -> u32 {
        let state = |s: u32| self.states[s as usize];
        let ours = || 0..self.count;
        ours()
            .find(|&s| matches!(state(s), SlotState::Absent | SlotState::Empty))
            .or_else(|| ours().find(|&s| state(s) == SlotState::Bad || self.damaged.contains(s)))
            .or_else(|| {
                ours().min_by_key(|&s| match state(s) {
                    SlotState::Generation(g) => g,
                    _ => 0,
                })
            })
            .unwrap_or(0)
    }

    pub fn damaged(&self) -> SlotSet {
        self.damaged
    }

    pub fn mark_damaged(&mut self, slots: SlotSet) {
        self.damaged = self.damaged.union(slots);
    }

    /// The damaged slots were set aside: none is left.
    pub fn forget_damaged(&mut self) {
        for slot in self.damaged.iter() {
            self.states[slot as usize] = SlotState::Absent;
        }
        self.damaged = SlotSet::default();
    }

    /// Generation `g` was renamed into slot `slot`.
    pub fn committed(&mut self, slot: u32, g: u64) {
        self.states[slot as usize] = SlotState::Generation(g);
        self.damaged.remove(slot);
    }

    /// Slot `slot`'s archive, open for reading, and its description.
    pub fn open(&self, slot: u32) -> Result<(OwnedFd, Meta), Failed> {
        let file = rustix::fs::openat(
            self.dir(),
            self.file(slot).c(),
            tree::read_flags(),
            Mode::empty(),
        )
        .map_err(at("open the generation"))?;
        match read_meta(file.as_fd()) {
            Ok(Some(meta)) => Ok((file, meta)),
            Err(Bad::Io(e)) => Err(at("read the generation")(e)),
            _ => Err(at("read the generation")(Errno::IO)),
        }
    }

    /// What stat says of slot `slot`'s file.
    pub fn stat(&self, slot: u32) -> rustix::io::Result<Stat> {
        tree::stat(self.dir(), self.file(slot).c())
    }

    /// Slot `slot`'s file as a path, for messages.
    pub fn at(&self, slot: u32) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a Name, SlotName);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let dir = dir_of(Path::new(&self.0.shown));
                if dir.as_os_str() != "." && !dir.as_os_str().is_empty() {
                    write!(f, "{}/", dir.display())?;
                }
                write!(f, "{}", self.1)
            }
        }
        Shown(&self.name, self.file(slot))
    }

    /// `NAME.0 .. NAME.K`, for messages.
    pub fn all_shown(&self) -> impl fmt::Display + '_ {
        struct Shown<'a>(&'a OsString, u32);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.1 {
                    0 => write!(f, "{}.0", self.0.display()),
                    last => write!(f, "{0}.0 .. {0}.{last}", self.0.display()),
                }
            }
        }
        Shown(&self.name.shown, self.count - 1)
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
        Shown(&self.name.shown, self.find(g))
    }
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

    #[test]
    fn a_slot_set_holds_what_went_in() {
        let mut set = SlotSet::default();
        assert!(set.is_empty());
        set.insert(0);
        set.insert(64);
        set.insert(7);
        set.remove(7);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 64]);
        assert!(set.contains(64) && !set.contains(7));
    }
}
