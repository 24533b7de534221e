//! The commit: a generation written whole into the scratch directory
//! (`building`, its manifest built in `sums`), fsync'd, renamed into its
//! slot at the top of the sandbox, and the directory fsync'd. The rename
//! is the commit: an interruption at any instant leaves the newest intact
//! generation as it was (and every other, but the one the commit
//! replaces, which goes first to make room), and a failure removes what
//! it wrote at once, so a full disk gets its room back. What is replaced
//! is freed by a child, out of the commit's path.

use std::os::fd::AsFd;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::os::beside::{Beside, Held};
use crate::os::log::Log;
use crate::os::tree;
use crate::store::generation::{Description, Failed, META, Tag, at};
use crate::store::pack::Packing;
use crate::store::scratch::{BUILDING, SUMS, Scratch};
use crate::store::slots::Slots;
use crate::store::table::Place;
use crate::store::writer::Writer;

/// How the job's files get into a generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// The job has exited: after the commit its working paths are
    /// removed (the next start restores them, or moves them back: see
    /// `kept`), so that HTCondor does not upload them beside the
    /// generation.
    Move,
    /// The job runs on: they stay.
    Copy,
}

/// Whether a commit waits for the generation it replaced to be freed, or
/// leaves that to its child: when the job has ended and ckptrun exits
/// next, nothing needs to wait for it.
#[derive(Clone, Copy)]
pub enum Freeing {
    Wait,
    Leave,
}

/// What a commit adds to the archive after the description.
pub type Fill<'a> = &'a mut dyn FnMut(&mut Writer) -> rustix::io::Result<()>;

/// Writes generation `g`: its description (`extra`: the parts of more
/// `key value` lines after the tag's), then what `fill` adds (compressed
/// as `packing` says), then its manifest; into the slot the table picks
/// (read by the caller just before). Returns that slot.
///
/// Room: the generation the slot held is removed first (freed by a child
/// beside the copy), unless it is the newest intact one (`--keep 0`), so
/// that a commit needs room for the working copy, the K generations kept
/// and the new one: K+2 copies. On a full disk it takes the room of the
/// oldest generation left but the newest intact, saying so, and tries
/// again.
pub fn write(
    (slots, scratch, tag): (&mut Slots, &Scratch, &Tag),
    (g, extra, packing): (u64, &[&[u8]], Packing),
    freeing: Freeing,
    fill: Fill,
    log: &Log,
) -> Result<u32, Failed> {
    // A description too long fails here, before a generation goes; and
    // a slot that cannot be read may hold any generation: none goes.
    Description::fits(g, tag, extra)?;
    slots.check_readable(log)?;
    let slot = slots.next_slot();
    let newest_kept = is_newest_intact(slots, slot);
    let mut replaced = hold(slots, slot);
    let mut freed = None;
    if !newest_kept {
        remove(slots, slot);
        freed = replaced.take().map(Held::let_go);
    }
    let built = build_making_room(
        (slots, scratch, tag),
        (g, extra, packing),
        fill,
        &mut freed,
        log,
    );
    let done = built.and_then(|()| rename_into((slots, scratch), (g, slot), log));
    for name in [BUILDING, SUMS] {
        let _ = rustix::fs::unlinkat(scratch.dir(), name, AtFlags::empty());
    }
    // The newest intact generation (--keep 0) stays until the rename
    // replaces it (a copy in `.NAME/older` goes after it, once the
    // rename is durable: else the next start does it); then it is freed
    // beside.
    if newest_kept && matches!(done, Ok(true)) && slots.place(slot) == Place::Older {
        remove(slots, slot);
    }
    for child in freed.into_iter().chain(replaced.map(Held::let_go)) {
        match (&done, freeing) {
            (Ok(_), Freeing::Leave) => {}
            _ => drop(child.result()),
        }
    }
    if done.is_err() {
        // The slots removed to make room: where a transfer list names
        // them (`Publish::All`), HTCondor holds a job whose listed file
        // is missing, so they come back empty. At worst the next start
        // does it.
        let _ = slots.fill();
    }
    done?;
    slots.table_mut().committed(slot, g);
    Ok(slot)
}

/// Renames the archive built into `slot`: the commit, of an archive
/// already fsync'd. Whether the directory's fsync after it worked too: if
/// not, the generation is committed all the same, only less sure to
/// outlive a crash of the machine (said).
fn rename_into(
    (slots, scratch): (&Slots, &Scratch),
    (g, slot): (u64, u32),
    log: &Log,
) -> Result<bool, Failed> {
    rustix::fs::renameat(scratch.dir(), BUILDING, slots.dir(), slots.file(slot).c())
        .map_err(at("rename the archive into its slot"))?;
    let synced = rustix::fs::fsync(slots.dir());
    if let Err(e) = synced {
        log.warn(format_args!(
            "{}: generation {g} committed, but the store's directory could not be \
             fsync'd ({}): a crash of the machine may lose it",
            slots.at(slot),
            crate::os::sys::strerror(e)
        ));
    }
    Ok(synced.is_ok())
}

/// Whether `slot` holds the newest intact generation.
fn is_newest_intact(slots: &Slots, slot: u32) -> bool {
    slots.newest_intact().is_some_and(|(_, s)| s == slot)
}

/// Builds the archive; on a full disk, once what is being freed is, and
/// then once for each generation removed to make room (the oldest first,
/// never the newest intact), tries again.
fn build_making_room(
    (slots, scratch, tag): (&mut Slots, &Scratch, &Tag),
    what: (u64, &[&[u8]], Packing),
    fill: Fill,
    freed: &mut Option<Beside>,
    log: &Log,
) -> Result<(), Failed> {
    loop {
        let built = build_beside((scratch, tag), what, &mut *fill);
        let full = built.is_err_and(|f| matches!(f.errno, Errno::NOSPC | Errno::DQUOT));
        if !full {
            return built;
        }
        if let Some(child) = freed.take() {
            let _ = child.result();
            continue;
        }
        let Some((spare, slot)) = slots.spare() else {
            return built;
        };
        log.warn(format_args!(
            "{}: the disk is full: generation {spare} ({}) removed to make room",
            slots.name().shown.display(),
            slots.at(slot)
        ));
        remove(slots, slot);
    }
}

/// Removes slot `slot`'s file, wherever it is (whatever it held: its
/// blocks are freed here, unless a child holds it). A file that cannot be
/// removed stays, and costs only room.
fn remove(slots: &mut Slots, slot: u32) {
    let dir = slots.dir_of(slots.place(slot));
    let _ = rustix::fs::unlinkat(dir, slots.file(slot).c(), AtFlags::empty());
    slots.table_mut().removed(slot);
}

/// The file in `slot`, if large, held by a child (`Beside::hold`):
/// freeing its blocks and pages (some 40 ms for 256 MiB on ext4) is then
/// not in the commit's path.
fn hold(slots: &Slots, slot: u32) -> Option<Held> {
    let file = rustix::fs::openat(
        slots.dir_of(slots.place(slot)),
        slots.file(slot).c(),
        tree::read_flags(),
        Mode::empty(),
    )
    .ok()?;
    let size = rustix::fs::fstat(&file).ok()?.st_size;
    (size >= 1 << 20).then(|| Beside::hold(file)).flatten()
}

/// The steps `build` can fail at, as its child names them (the last one
/// for any other).
const STEPS: [&str; 6] = [
    "create the archive",
    "create the manifest",
    "describe the generation",
    "fsync the archive",
    UNSTORABLE,
    "write the archive",
];

/// The step a --ckpt path that is no file, directory or link fails.
const UNSTORABLE: &str = "store a FIFO, socket or device under a --ckpt path";

/// `build`, in a child beside ckptrun (`Beside`): the frames of the
/// archive's writer (paths, pax records, the description: some 100 KiB
/// of stack) are then the child's pages, never the supervisor's
/// (how-it-works.md, "Memory"). Here, as before, when no child gives an
/// answer (none can be made, or it dies): `building` is made anew.
fn build_beside(
    rooms: (&Scratch, &Tag),
    what: (u64, &[&[u8]], Packing),
    fill: Fill,
) -> Result<(), Failed> {
    Beside::or_here(
        || build(rooms, what, &mut *fill),
        |done| Failed::sent(&done, &STEPS),
        |sent| Failed::received(sent, &STEPS),
    )
}

/// The archive of generation `g` as the scratch's `building`, fsync'd.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn build(
    (scratch, tag): (&Scratch, &Tag),
    (g, extra, packing): (u64, &[&[u8]], Packing),
    fill: Fill,
) -> Result<(), Failed> {
    let create = OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    // Read too: a file compressed by two processes has the second one's
    // frames moved within the archive (`pack`).
    let out = rustix::fs::openat(
        scratch.dir(),
        BUILDING,
        OFlags::RDWR | create,
        Mode::from_raw_mode(0o644),
    )
    .map_err(at("create the archive"))?;
    let scratch_file = |name, step| {
        rustix::fs::openat(
            scratch.dir(),
            name,
            OFlags::RDWR | create,
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(at(step))
    };
    let sums = scratch_file(SUMS, "create the manifest")?;
    let mut meta = Description::new(g, tag)?;
    for part in extra {
        meta.push(part)?;
    }
    let mut w = Writer::new(out.as_fd(), sums.as_fd(), packing);
    w.bytes(META, 0o644, &meta)
        .and_then(|()| fill(&mut w))
        .and_then(|()| w.finish())
        .map_err(|e| match e {
            // What `Writer::tree_at` refuses: not checkpoint data.
            Errno::OPNOTSUPP => at(UNSTORABLE)(e),
            _ => at("write the archive")(e),
        })?;
    rustix::fs::fsync(&out).map_err(at("fsync the archive"))
}
