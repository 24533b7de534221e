//! Committed checkpoints: the generations of a self-checkpointing job's
//! files (`--mode self`) or of another mode's (dmtcp mode's images), kept
//! so that no interruption can lose or tear one, and none is restored
//! unless it verifies.
//!
//! Each generation is one archive file (see `archive`) at the top of the
//! job's sandbox, because that is all HTCondor carries: on eviction, and
//! on an exit with the checkpoint code, it uploads the sandbox's new and
//! changed top-level files, never a directory. The store `NAME` is the
//! files `NAME.0` to `NAME.K` (`--keep K` older generations, default 1),
//! so the spool never holds more than K+1. Its rooms:
//!
//! - `slots`: the slot table, what each slot holds and where the next
//!   generation goes (how a generation is chosen);
//! - `scratch`: `.NAME`, the scratch directory, locked while ckptrun runs;
//! - `generation`: a generation's description (`.ckptrun`), its tag (the
//!   mode that wrote it);
//! - `commit`: one generation written, fsync'd and renamed over its slot;
//! - `verify`: the check before any restart, and what happens to a
//!   damaged generation (how damage is handled);
//! - `restore` and `working`: the restart's copy, made beside the check
//!   and put in place once it is found intact; the `--ckpt` paths;
//! - `kept`: the in-place restart, the working copy kept unchanged
//!   between a commit and the next start in the same sandbox;
//! - `archive`, `writer`, `manifest`: the archive's format and reader, its
//!   writer, and its checksums.
//!
//! The store knows no mode: a mode hands it a `Tag`, the `--ckpt` paths
//! it restores, and (dmtcp mode) an `Extract` for the rest. The first
//! start makes generation 0 of the paths as the job was given them, its
//! starting state, not a checkpoint. Everything after `open` works on
//! descriptors and fixed buffers and does not allocate.

pub mod archive;
pub mod commit;
pub mod generation;
pub mod hash;
pub mod kept;
pub mod manifest;
pub mod pack;
pub mod restore;
pub mod scratch;
pub mod slots;
pub mod table;
pub mod verify;
pub mod working;
pub mod writer;

use core::fmt;
use std::ffi::{CStr, OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use rustix::fs::CWD;

pub use self::commit::Take;
pub use self::pack::Packing;
pub use self::slots::{Publish, slot_paths};
pub use self::table::MAX_KEEP;
pub use self::verify::OnDamage;
pub use self::working::MAX_CKPTS;

use self::commit::Freeing;
use self::generation::{Failed, Generation, Meta, Tag, at};
use self::kept::Kept;
use self::restore::{Extract, Restore};
use self::scratch::Scratch;
use self::slots::{Name, Slots};
use self::working::{WorkingCopy, check_apart, cstring};
use crate::os::dir::dir_of;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::tree;

/// How the options want a store kept.
#[derive(Clone, Copy)]
pub struct Options {
    /// `--keep`: older generations kept.
    pub keep: u32,
    pub on_damage: OnDamage,
    pub publish: Publish,
    /// `--return-store`: a successful end returns the newest generation
    /// too, as a failed one does.
    pub return_store: bool,
    /// `--no-compress`: every file stored as it is.
    pub packing: Packing,
}

pub struct Store {
    slots: Slots,
    scratch: Scratch,
    tag: Tag,
    work: WorkingCopy,
    return_store: bool,
    packing: Packing,
    /// This start found no generation: no store (it made one), or
    /// slots that hold nothing.
    found_none: bool,
}

/// What `Store::open` made of the store for this start.
pub enum Opened {
    /// A new store: generation 0 is the working paths as they were given.
    Created,
    /// No slot holds a generation: a fresh start, the working paths (an
    /// uncommitted checkpoint) set aside.
    Empty,
    /// No generation is intact, and `--fresh-if-damaged`: the damaged
    /// ones are set aside, generation 0 is made anew.
    Afresh,
    /// The working copy the last commit kept is generation `g`, as
    /// committed: moved back into place, not copied (see `kept`).
    InPlace(u64),
    /// The newest intact generation, verified, its copy put in place.
    /// Its description (8 KiB) is on the heap (before the job starts): on
    /// the stack it would widen every frame it passes through, `main`'s
    /// too.
    Restored(Generation),
}

impl Opened {
    /// The checkpoint the job restarts from: a generation from 1 on
    /// (generation 0 is the starting state).
    pub fn checkpoint(&self) -> Option<u64> {
        match self {
            Opened::InPlace(g) => Some(*g),
            Opened::Restored(g) => Some(g.number),
            _ => None,
        }
        .filter(|&g| g >= 1)
    }
}

/// A start: the store opened, and the working copy made ready.
impl Store {
    /// Opens (or, on a first start, creates) the store `name` for the
    /// mode `tag`, locks it, cleans up what an interruption left, and
    /// makes the working paths (and whatever `extract` takes) a private
    /// copy of the newest intact generation. A generation 0 it makes has
    /// `first` (parts of `key value` lines, as `commit_dir`'s `extra`) in
    /// its description. Runs before the job starts.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    pub fn open(
        (name, paths): (&OsStr, &[OsString]),
        options: Options,
        (tag, first): (Tag, &[&[u8]]),
        extract: Option<&mut dyn Extract>,
        log: &Log,
    ) -> Result<(Self, Opened), Error> {
        let mut store = Self::lock(name, paths, options, tag)?;
        let fail = |f: Failed| Error::usage(name.display(), f);
        store.scratch.clean(log).map_err(fail)?;
        store.work.clean().map_err(fail)?;
        if !store.slots.any().map_err(fail)? {
            store.warn_other_stores(log);
            kept::discard(store.scratch.dir())
                .map_err(at("remove the kept working copy"))
                .map_err(fail)?;
            store.create(first, log).map_err(fail)?;
            store.found_none = true;
            return Ok((store, Opened::Created));
        }
        store.slots.fill().map_err(fail)?;
        store.slots.check_readable(log).map_err(fail)?;
        store.check_tag()?;
        if let Some(g) = kept::reuse(&store.work, &store.slots, &store.scratch, log) {
            store.arrange(log);
            return Ok((store, Opened::InPlace(g)));
        }
        let opened = store.restore((options.on_damage, first), extract, log)?;
        Ok((store, opened))
    }

    /// Checks the options, opens the store's directory and scratch, and
    /// takes its lock.
    fn lock(name: &OsStr, paths: &[OsString], options: Options, tag: Tag) -> Result<Self, Error> {
        let work = WorkingCopy::new(paths)?;
        let as_path = Path::new(name);
        let base = match crate::os::dir::last_name(name) {
            Some(b) if b.len() <= 240 => b,
            _ => {
                return Err(Error::usage(
                    name.display(),
                    "--store needs a file name (at most 240 bytes), not a path ending in /, . or ..",
                ));
            }
        };
        check_apart(as_path, base, paths)?;
        let parent_path = dir_of(as_path);
        let dir = tree::open_named_dir(CWD, &cstring(parent_path.as_os_str())?)
            .map_err(|e| Error::os(parent_path.display(), e))?;
        let name = Name {
            shown: name.to_os_string(),
            dir,
            base: cstring(base)?,
        };
        let scratch = Scratch::lock(&name)?;
        let older = scratch
            .older()
            .map_err(|e| Error::os(scratch.path().display(), e))?;
        Ok(Self {
            slots: Slots::new(name, options.keep, older, options.publish),
            scratch,
            tag,
            work,
            return_store: options.return_store,
            packing: options.packing,
            found_none: false,
        })
    }

    /// The newest intact generation restored; else the working paths set
    /// aside, or the damaged generations too (`none_intact`).
    fn restore(
        &mut self,
        (on_damage, first): (OnDamage, &[&[u8]]),
        extract: Option<&mut dyn Extract>,
        log: &Log,
    ) -> Result<Opened, Error> {
        let shown = self.slots.name().shown.clone();
        let fail = |f: Failed| Error::usage(shown.display(), f);
        let mut restore = Restore::new(&mut self.work, extract, &self.scratch);
        let mut meta = Meta::boxed();
        let newest = verify::newest_intact(&mut self.slots, None, (&mut restore, &mut meta), log)
            .map_err(fail)?;
        // The stack the search used, handed back before more is
        // allocated: the two are never held at once.
        crate::os::stack::release();
        let owner = (self.tag.owner)(&meta);
        match newest {
            // Intact, but of a mode this ckptrun does not know.
            Some((number, _, _)) if owner != Some(self.tag.name) => {
                restore.unprepare();
                Err(self.other_mode(&self.slots.of(number), owner))
            }
            Some((number, file, prepared)) => {
                restore
                    .put_in_place(file.as_fd(), &meta, prepared, log)
                    .map_err(fail)?;
                self.say_restored(number, log);
                self.arrange(log);
                Ok(Opened::Restored(Generation { number, file, meta }))
            }
            None if self.slots.damaged().is_empty() => {
                restore.set_aside(log).map_err(fail)?;
                self.arrange(log);
                self.found_none = true;
                Ok(Opened::Empty)
            }
            None => {
                verify::none_intact(&mut self.slots, &self.scratch, &restore, on_damage, log)?;
                self.arrange(log);
                self.create(first, log).map_err(fail)?;
                Ok(Opened::Afresh)
            }
        }
    }

    /// The slot files where HTCondor should find them (see `slots`): a
    /// failure only costs an upload, and is said.
    fn arrange(&mut self, log: &Log) {
        let done = self.slots.arrange();
        self.say(done, log);
    }

    /// A step that only costs an upload if it fails: said, not fatal.
    #[inline(never)]
    fn say(&self, done: Result<(), Failed>, log: &Log) {
        if let Err(f) = done {
            log.warn(format_args!("{}: {f}", self.name()));
        }
    }

    fn say_restored(&self, g: u64, log: &Log) {
        if !self.work.is_empty() {
            log.info(format_args!(
                "working copy restored from generation {g} ({})",
                self.slots.of(g)
            ));
        }
    }

    /// A store whose newest generation is another mode's is refused. One
    /// that names no mode this ckptrun knows is left to the restore, which
    /// refuses it only if it is intact: a damaged name is damage.
    fn check_tag(&self) -> Result<(), Error> {
        let Some(slot) = self.slots.newest().and_then(|g| self.slots.find(g)) else {
            return Ok(());
        };
        let mut meta = Meta::boxed();
        if self.slots.open(slot, &mut meta).is_err() {
            return Ok(());
        }
        match (self.tag.owner)(&meta) {
            Some(owner) if owner != self.tag.name => {
                Err(self.other_mode(&self.slots.at(slot), Some(owner)))
            }
            _ => Ok(()),
        }
    }

    fn other_mode(&self, slot: &dyn fmt::Display, owner: Option<&str>) -> Error {
        Error::usage(
            self.name(),
            format_args!(
                "{slot} holds a checkpoint of --mode {}, not --mode {}: run with that mode, \
                 or give another --store",
                owner.unwrap_or("(unknown)"),
                self.tag.name
            ),
        )
    }

    /// At a first start: another store beside this one may be this job's
    /// under an older --store, or another job's (jobs sharing a
    /// directory, as under Slurm): say it is not used, and how to use it
    /// if it is this job's.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    fn warn_other_stores(&self, log: &Log) {
        let base = &self.slots.name().base;
        let mut said = false;
        let _ = tree::each_entry(self.slots.dir(), c".", 0, |dir, name| {
            let other = match name.to_bytes().strip_prefix(b".") {
                Some(o) if !said && !o.is_empty() && o != base.to_bytes() => o,
                _ => return Ok(()),
            };
            // Its first slot at the top, or the directory of older
            // generations its scratch holds (its newest may be in any slot).
            let exists = |head: &[u8], tail: &[u8]| {
                let mut path = heapless::Vec::<u8, 260>::new();
                path.extend_from_slice(head).is_ok()
                    && path.extend_from_slice(tail).is_ok()
                    && CStr::from_bytes_with_nul(&path).is_ok_and(|p| tree::stat(dir, p).is_ok())
            };
            if exists(other, b".0\0") || exists(name.to_bytes(), b"/older\0") {
                said = true;
                let other = String::from_utf8_lossy(other);
                log.warn(format_args!(
                    "{}: a new store; the store {other} beside it ({other}.0 ..) is not used: \
                     if it is this job's, give --store {other} to restart from it",
                    self.name()
                ));
            }
            Ok(())
        });
    }

    /// The first start: generation 0, the working paths as they are (and
    /// with `Publish::All` every other slot empty).
    fn create(&mut self, first: &[&[u8]], log: &Log) -> Result<(), Failed> {
        self.slots.scan(None)?;
        let work = &self.work;
        let rooms = (&mut self.slots, &self.scratch, &self.tag);
        let fill = &mut |w: &mut writer::Writer| work.pack(w, None);
        let slot = commit::write(rooms, (0, first, self.packing), Freeing::Wait, fill, log)?;
        self.slots.fill()?;
        log.info(format_args!(
            "created {}: generation 0 is the job's starting state",
            self.slots.at(slot)
        ));
        Ok(())
    }
}

/// Commits, and the fall-back of a restart that failed.
impl Store {
    /// Commits the working paths as the next generation; returns its
    /// number. See `commit` for why an interruption at any instant is
    /// safe; with `Take::Move` the paths are kept for an in-place restart
    /// (see `kept`).
    pub fn commit(&mut self, take: Take, log: &Log) -> Result<u64, Failed> {
        self.slots.scan(None)?;
        let g = self.slots.next_number();
        kept::discard(self.scratch.dir()).map_err(at("remove the kept working copy"))?;
        let kept = match take {
            Take::Move => Kept::take(&self.work, &self.scratch, log),
            Take::Copy => None,
        };
        let freeing = match take {
            Take::Move => Freeing::Leave,
            Take::Copy => Freeing::Wait,
        };
        let work = &self.work;
        let from = kept.as_ref().map(Kept::dir);
        let rooms = (&mut self.slots, &self.scratch, &self.tag);
        let written = commit::write(
            rooms,
            (g, &[], self.packing),
            freeing,
            &mut |w| work.pack(w, from),
            log,
        );
        // A commit while the job runs goes on supervising after it: the
        // stack the archive's writing used is handed back, whatever came
        // of it.
        crate::os::stack::release();
        let slot = match written {
            Ok(slot) => slot,
            Err(f) => {
                if let Some(kept) = kept {
                    kept.undo(&self.work, &self.scratch, log);
                }
                return Err(f);
            }
        };
        self.committed(g, slot, log);
        match kept {
            Some(kept) => kept.seal(&self.slots, &self.scratch, (g, slot), &self.work, log),
            None if take == Take::Move => self.work.remove_committed(log),
            None => {}
        }
        Ok(g)
    }

    /// Commits, as the next generation, every entry of the directory
    /// `dir` under its own name, with `extra` (the parts of more `key
    /// value` lines: they are put together in the child that writes the
    /// archive) in its description; returns its number.
    pub fn commit_dir(
        &mut self,
        dir: BorrowedFd,
        extra: &[&[u8]],
        log: &Log,
    ) -> Result<u64, Failed> {
        self.slots.scan(None)?;
        let g = self.slots.next_number();
        let rooms = (&mut self.slots, &self.scratch, &self.tag);
        let fill = &mut |w: &mut writer::Writer| {
            tree::each_name(dir, |name| w.tree(dir, name, name.to_bytes()))
        };
        let written = commit::write(rooms, (g, extra, self.packing), Freeing::Wait, fill, log);
        crate::os::stack::release();
        let slot = written?;
        self.committed(g, slot, log);
        Ok(g)
    }

    /// Generation `g` is committed into `slot`: said, and the one it
    /// follows kept out of HTCondor's uploads (see `slots`).
    fn committed(&mut self, g: u64, slot: u32, log: &Log) {
        log.info(format_args!(
            "committed generation {g} to {}",
            self.slots.of(g)
        ));
        let done = self.slots.after_commit(slot);
        self.say(done, log);
    }

    /// The job has ended for good: after a failed end (or any, with
    /// `--return-store`) the newest generation goes back with the
    /// outputs (see `slots`); after a successful one its generations are
    /// removed (`Scratch::retire`): the job is done, and a new run in this
    /// directory starts afresh. But where a transfer list names the slots
    /// (`Publish::All`): they stay, as HTCondor needs them.
    pub fn at_end(&mut self, failed: bool, log: &Log) {
        let returned = failed || self.return_store;
        let retire = !returned && self.slots.publish() == Publish::Newest;
        let done = self.slots.at_end(returned).and_then(|()| match retire {
            true => self.retire(),
            false => Ok(()),
        });
        match done {
            Ok(()) if retire => log.info(format_args!(
                "the job has ended well: its generations removed"
            )),
            done => self.say(done, log),
        }
    }

    /// After a successful end: the generations removed (see `Scratch`),
    /// and the kept working copy; then `.NAME` if nothing else is in it.
    fn retire(&self) -> Result<(), Failed> {
        self.scratch.retire()?;
        kept::discard(self.scratch.dir()).map_err(at("remove the kept working copy"))?;
        self.scratch.remove_if_empty(self.slots.dir())
    }

    /// Generation `bad` would not restart: sets it aside (see `verify`)
    /// and restores the newest intact generation before it, verified
    /// once. Returns that one; none (nothing changed) when there is no
    /// intact one from 1 on (generation 0 is the starting state, not a
    /// checkpoint).
    pub fn fall_back(&mut self, bad: u64, log: &Log) -> Result<Option<u64>, Failed> {
        let mut restore = Restore::new(&mut self.work, None, &self.scratch);
        let mut meta = Meta::new();
        let Some((g, file, prepared)) =
            verify::newest_intact(&mut self.slots, Some(bad), (&mut restore, &mut meta), log)?
        else {
            return Ok(None);
        };
        if g == 0 {
            restore.unprepare();
            return Ok(None);
        }
        verify::set_failed_aside(&mut self.slots, &self.scratch, bad)?;
        log.warn(format_args!(
            "kept generation {bad} as {}/failed; falling back to generation {}",
            self.scratch.path().display(),
            g
        ));
        restore.put_in_place(file.as_fd(), &meta, prepared, log)?;
        self.say_restored(g, log);
        Ok(Some(g))
    }

    /// The working paths.
    pub fn work(&self) -> &WorkingCopy {
        &self.work
    }

    /// Whether this start found no generation at all: no store, or one
    /// whose slots hold nothing (HTCondor's placeholders, say).
    pub fn found_none(&self) -> bool {
        self.found_none
    }

    /// NAME as the user gave it, for messages.
    pub fn name(&self) -> impl fmt::Display + '_ {
        self.slots.name().shown.display()
    }

    /// The slot file generation `g` is in, for messages.
    pub fn slot_of(&self, g: u64) -> impl fmt::Display + '_ {
        self.slots.of(g)
    }

    /// The scratch directory `.NAME`.
    pub fn scratch(&self) -> BorrowedFd<'_> {
        self.scratch.dir()
    }

    /// Its path (relative if NAME is).
    pub fn scratch_path(&self) -> &Path {
        self.scratch.path()
    }
}
