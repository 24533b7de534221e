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

/// Writes generation `g`: its description (`extra`: more `key value`
/// lines after the tag's), then what `fill` adds, then its manifest; into
/// the slot the table picks (read by the caller just before). Returns
/// that slot.
///
/// Room: the generation the slot held is removed first (freed by a child
/// beside the copy), unless it is the newest intact one (`--keep 0`), so
/// that a commit needs room for the working copy, the K generations kept
/// and the new one: K+2 copies. On a full disk it takes the room of the
/// oldest generation left but the newest intact, saying so, and tries
/// again.
pub fn write(
    (slots, scratch, tag): (&mut Slots, &Scratch, &Tag),
    (g, extra): (u64, &[u8]),
    freeing: Freeing,
    fill: Fill,
    log: &Log,
) -> Result<u32, Failed> {
    let slot = slots.next_slot();
    let newest_kept = is_newest_intact(slots, slot);
    let mut freed = match newest_kept {
        true => None,
        false => remove(slots, slot, log),
    };
    let built = build_making_room((slots, scratch, tag), (g, extra), fill, &mut freed, log);
    // The newest intact generation (--keep 0) stays until the rename
    // replaces it; then it is freed beside.
    let mut held = None;
    let done = built.and_then(|()| {
        if newest_kept {
            held = hold_replaced(slots, slot);
        }
        rustix::fs::renameat(scratch.dir(), BUILDING, slots.dir(), slots.file(slot).c())
            .map_err(at("rename the archive into its slot"))?;
        rustix::fs::fsync(slots.dir()).map_err(at("fsync the store's directory"))
    });
    for name in [BUILDING, SUMS] {
        let _ = rustix::fs::unlinkat(scratch.dir(), name, rustix::fs::AtFlags::empty());
    }
    let children = held.map(Held::let_go).into_iter().chain(freed);
    for child in children {
        match (&done, freeing) {
            (Ok(()), Freeing::Leave) => {}
            _ => drop(child.result()),
        }
    }
    done?;
    if newest_kept && slots.place(slot) == Place::Older {
        // The replaced copy in `.NAME/older`; the next start removes it
        // if this cannot.
        let _ = rustix::fs::unlinkat(
            slots.dir_of(Place::Older),
            slots.file(slot).c(),
            AtFlags::empty(),
        );
    }
    slots.table_mut().committed(slot, g);
    Ok(slot)
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
    (g, extra): (u64, &[u8]),
    fill: Fill,
    freed: &mut Option<Beside>,
    log: &Log,
) -> Result<(), Failed> {
    loop {
        let built = build(scratch, tag, g, extra, &mut *fill);
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
        if let Some(child) = remove(slots, slot, log) {
            let _ = child.result();
        }
    }
}

/// Removes slot `slot`'s file (whatever it held); a large one's blocks are
/// freed by a child beside the commit, returned to be waited for.
fn remove(slots: &mut Slots, slot: u32, log: &Log) -> Option<Beside> {
    let (dir, name) = (slots.dir_of(slots.place(slot)), slots.file(slot));
    let file = rustix::fs::openat(dir, name.c(), tree::read_flags(), Mode::empty()).ok();
    if let Err(e) = rustix::fs::unlinkat(dir, name.c(), AtFlags::empty()) {
        if e != Errno::NOENT {
            log.warn(format_args!(
                "{}: cannot remove it: {}",
                slots.at(slot),
                crate::os::sys::strerror(e)
            ));
            return None;
        }
    }
    slots.table_mut().removed(slot);
    let big = file
        .as_ref()
        .and_then(|f| rustix::fs::fstat(f).ok())
        .is_some_and(|st| st.st_size >= 1 << 20);
    match (file, big) {
        (Some(file), true) => Beside::hold(file).map(Held::let_go),
        _ => None,
    }
}

/// The generation a commit is about to replace in `slot`, held by a
/// child (`Beside::hold`): freeing its blocks and pages (some 40 ms for
/// 256 MiB on ext4) is then not in the commit's path.
fn hold_replaced(slots: &Slots, slot: u32) -> Option<Held> {
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

/// The archive of generation `g` as the scratch's `building`, fsync'd.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn build(scratch: &Scratch, tag: &Tag, g: u64, extra: &[u8], fill: Fill) -> Result<(), Failed> {
    let create = OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let out = rustix::fs::openat(
        scratch.dir(),
        BUILDING,
        OFlags::WRONLY | create,
        Mode::from_raw_mode(0o644),
    )
    .map_err(at("create the archive"))?;
    let sums = rustix::fs::openat(
        scratch.dir(),
        SUMS,
        OFlags::RDWR | create,
        Mode::RUSR | Mode::WUSR,
    )
    .map_err(at("create the manifest"))?;
    let mut meta = Description::new(g, tag)?;
    meta.push(extra)?;
    let mut w = Writer::new(out.as_fd(), sums.as_fd());
    w.bytes(META, 0o644, &meta)
        .and_then(|()| fill(&mut w))
        .and_then(|()| w.finish())
        .map_err(at("write the archive"))?;
    rustix::fs::fsync(&out).map_err(at("fsync the archive"))
}
