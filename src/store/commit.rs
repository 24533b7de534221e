//! The commit: a generation written whole into the scratch directory
//! (`building`, its manifest built in `sums`), fsync'd, renamed over its
//! slot, and the directory fsync'd. The rename is the commit: an
//! interruption at any instant leaves every committed generation as it
//! was, and a failure removes what it wrote at once, so a full disk gets
//! its room back. The generation replaced is freed by a child, out of the
//! commit's path.

use std::os::fd::AsFd;

use rustix::fs::{Mode, OFlags};

use crate::os::beside::{Beside, Held};
use crate::os::tree;
use crate::store::generation::{Description, Failed, META, Tag, at};
use crate::store::scratch::{BUILDING, SUMS, Scratch};
use crate::store::slots::Slots;
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
pub fn write(
    slots: &mut Slots,
    scratch: &Scratch,
    tag: &Tag,
    (g, extra): (u64, &[u8]),
    freeing: Freeing,
    fill: Fill,
) -> Result<u32, Failed> {
    let slot = slots.next_slot();
    let name = slots.file(slot);
    let mut held = None;
    let done = build(scratch, tag, g, extra, fill).and_then(|()| {
        held = hold_replaced(slots, slot);
        rustix::fs::renameat(scratch.dir(), BUILDING, slots.dir(), name.c())
            .map_err(at("rename the archive into its slot"))?;
        rustix::fs::fsync(slots.dir()).map_err(at("fsync the store's directory"))
    });
    for name in [BUILDING, SUMS] {
        let _ = rustix::fs::unlinkat(scratch.dir(), name, rustix::fs::AtFlags::empty());
    }
    if let Some(child) = held.map(Held::let_go) {
        match (&done, freeing) {
            (Ok(()), Freeing::Leave) => {}
            _ => drop(child.result()),
        }
    }
    done?;
    slots.committed(slot, g);
    Ok(slot)
}

/// The generation a commit is about to replace in `slot`, held by a
/// child (`Beside::hold`): freeing its blocks and pages (some 40 ms for
/// 256 MiB on ext4) is then not in the commit's path.
fn hold_replaced(slots: &Slots, slot: u32) -> Option<Held> {
    let file = rustix::fs::openat(
        slots.dir(),
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
