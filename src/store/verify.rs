//! Verification and damage: how a generation is found intact, and what
//! happens to one that is not.
//!
//! - Before any restart the chosen generation is checked in full against
//!   its manifest (see `manifest`), by a child process while this one
//!   makes the restart's copies of it (see `restore`): on two cores the
//!   check then costs little beside the copy. A compressed file the
//!   copies take is expanded once, by them, and its hash checked from
//!   that (`check_preparing`).
//! - A damaged generation is never restored: the newest intact one below
//!   it is, and stderr says what was lost (`newest_intact`). Its slot is
//!   marked damaged, so the next commits replace it first.
//! - With none intact, the start refuses (exit 125), or with
//!   `--fresh-if-damaged` sets the damaged ones aside in the scratch
//!   directory (`damaged.NN`) and starts afresh (`none_intact`).
//! - A generation a restart failed from (`--restart-grace`) is moved to
//!   the scratch's `failed`, an empty file in its slot (`set_failed_aside`).

use core::fmt;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;

use crate::os::beside::{self, Beside};
use crate::os::error::Error;
use crate::os::log::Log;
use crate::store::archive::{self, Bad};
use crate::store::generation::{self, Failed, Meta, at};
use crate::store::manifest::{self, Fold};
use crate::store::restore::{Prepared, Restore};
use crate::store::scratch::{FAILED, Scratch, damaged_name};
use crate::store::slots::Slots;
use crate::store::table::SlotSet;

/// What the start does when no generation in the store is intact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDamage {
    /// Refuse to start (exit 125): the user decides.
    Refuse,
    /// Keep the damaged generations aside and start as a first start
    /// (`--fresh-if-damaged`).
    StartAfresh,
}

/// Why a generation cannot be restored.
enum Damage {
    Archive(Bad),
    NoManifest,
    /// The member whose data is at this offset in the archive: its path
    /// (4 KiB wide) is read again only to be said (`Why`), not carried
    /// from frame to frame.
    Member(u64),
    Missing,
}

/// A damaged generation, open, and why: what is said of it.
struct Why(Damage, OwnedFd);

impl fmt::Display for Why {
    #[inline(never)] // A large frame (the archive's walk): only when said.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Damage::Archive(bad) => write!(f, "{bad}"),
            Damage::NoManifest => f.write_str("its manifest is missing"),
            Damage::Member(offset) => {
                // Found in a child (see `Beside`): the walk is not the
                // supervisor's; here when no child answers.
                let file = self.1.as_fd();
                let mut path = [0u8; archive::PATH_MAX];
                // None found: an empty path (said below).
                let find = |p: &mut [u8]| archive::path_at(file, *offset, p).unwrap_or(0);
                let len =
                    beside::bytes(&mut path, |p| Some(find(p))).unwrap_or_else(|| find(&mut path));
                match path.get(..len) {
                    Some(path) if !path.is_empty() => {
                        let path = crate::os::log::Lossy(path);
                        write!(f, "member {path} does not match its checksum")
                    }
                    _ => f.write_str("a member does not match its checksum"),
                }
            }
            Damage::Missing => f.write_str("members its manifest lists are missing"),
        }
    }
}

/// What verifying a generation found.
enum Check {
    Intact,
    /// Written by an older ckptrun (store 1), without checksums.
    Unverified,
    Damaged(Damage),
}

impl Check {
    /// As a child sends it: intact `[0, 0]`, unverified `[1, 0]`, damaged
    /// `[2 + why, detail]` (see `received`).
    fn sent(&self) -> [u64; 2] {
        match self {
            Check::Intact => [0, 0],
            Check::Unverified => [1, 0],
            Check::Damaged(Damage::Archive(bad)) => [2, generation::encode(*bad)],
            Check::Damaged(Damage::NoManifest) => [3, 0],
            Check::Damaged(Damage::Member(offset)) => [4, *offset],
            Check::Damaged(Damage::Missing) => [5, 0],
        }
    }

    /// What `sent` sent.
    fn received([what, detail]: [u64; 2]) -> Self {
        match what {
            0 => Check::Intact,
            1 => Check::Unverified,
            2 => Check::Damaged(Damage::Archive(generation::decode(detail))),
            3 => Check::Damaged(Damage::NoManifest),
            4 => Check::Damaged(Damage::Member(detail)),
            _ => Check::Damaged(Damage::Missing),
        }
    }
}

/// `check`, in a child beside ckptrun (`Beside`): the walks, the
/// expansions and the hashing buffer (128 KiB) are then the child's pages
/// and the code only children run, never the supervisor's (how-it-works.md,
/// "Memory"). Here, as before, when no child answers.
fn check_beside(file: BorrowedFd, meta: &Meta) -> Check {
    Beside::or_here(|| check(file, meta), |c| c.sent(), Check::received)
}

/// Verifies the generation in `file`, described by `meta`.
fn check(file: BorrowedFd, meta: &Meta) -> Check {
    check_but(file, meta, None, &mut Fold::default())
}

/// `check`, but the compressed members `elsewhere` takes are left to
/// the caller, their listed hashes summed into `listed` (see
/// `manifest::verify`).
fn check_but(
    file: BorrowedFd,
    meta: &Meta,
    elsewhere: Option<&dyn manifest::Elsewhere>,
    listed: &mut Fold,
) -> Check {
    match manifest::verify(file, elsewhere, listed) {
        Ok(manifest::Verdict::Intact) => Check::Intact,
        Ok(manifest::Verdict::NoManifest) if meta.is_store_1() => Check::Unverified,
        Ok(manifest::Verdict::NoManifest) => Check::Damaged(Damage::NoManifest),
        Ok(manifest::Verdict::Damaged(Some(offset))) => Check::Damaged(Damage::Member(offset)),
        Ok(manifest::Verdict::Damaged(None)) => Check::Damaged(Damage::Missing),
        Err(bad) => Check::Damaged(Damage::Archive(bad)),
    }
}

/// The newest generation (older than `below`, if given) that is intact,
/// verified in full, with its copies made (see `restore`) beside the
/// check. Each damaged one on the way is said on stderr and its slot
/// marked damaged.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
pub fn newest_intact(
    slots: &mut Slots,
    below: Option<u64>,
    (restore, meta): (&mut Restore<'_, '_>, &mut Meta),
    log: &Log,
) -> Result<Option<(u64, OwnedFd, Prepared)>, Failed> {
    slots.scan(Some(log))?;
    slots.check_readable(log)?;
    let mut bad = slots.bad();
    let mut newer = below;
    // The damaged generation last seen, said once the next is known.
    let mut pending: Option<(u64, u32, Why)> = None;
    // A generation that could not be read: the search stops there.
    let mut unread = None;
    while let Some((g, slot)) = slots.below(newer) {
        newer = Some(g);
        let file = slots.open(slot, meta)?;
        let (verdict, prepared) = check_preparing(file.as_fd(), meta, restore);
        if let Check::Damaged(why) = verdict {
            restore.unprepare();
            if let Damage::Archive(Bad::Io(e)) = why {
                unread = Some((slot, e));
                break;
            }
            bad.insert(slot);
            if let Some(older) = pending.replace((g, slot, Why(why, file))) {
                say_damaged(slots, older, None, log);
            }
            continue;
        }
        match pending.take() {
            Some(damaged) => say_damaged(slots, damaged, Some((g, slot)), log),
            None if matches!(verdict, Check::Unverified) => log.warn(format_args!(
                "{}: generation {g} was written by an older ckptrun, without checksums: restored unverified",
                slots.at(slot)
            )),
            None => {}
        }
        slots.table_mut().mark_damaged(bad);
        return Ok(Some((g, file, prepared)));
    }
    if let Some(damaged) = pending {
        say_damaged(slots, damaged, None, log);
    }
    if let Some((slot, e)) = unread {
        return Err(crate::store::slots::unread(&slots.at(slot), e, log));
    }
    slots.table_mut().mark_damaged(bad);
    Ok(None)
}

/// Verifies generation `file` in a child process (`Beside`) while this
/// one makes the restart's copies of it. The compressed members the
/// copies take are expanded once, by the copy: the child checks their
/// lines but for the hash, and sums the hashes listed (`Fold`); the copy
/// sums the hashes of what it expanded and wrote. The generation is
/// intact if the child found the rest intact and the sums agree. Where
/// they do not, or the copy was not made whole, or the child gives no
/// verdict, the whole check is made again (in a child too); and copies
/// whose sum was not the listed one are not used, whatever that check
/// says: they are made again (see `Restore::put_in_place`).
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn check_preparing(file: BorrowedFd, meta: &Meta, restore: &mut Restore) -> (Check, Prepared) {
    if !restore.wants(meta) {
        let prepared = Prepared {
            made: Ok(()),
            listed: None,
        };
        // Only verified: in a child too.
        let verdict = check_beside(file, meta);
        return (verdict, prepared);
    }
    let beside = Beside::<2>::start(|| {
        let mut listed = Fold::default();
        let verdict = check_but(file, meta, Some(&(&*restore, meta)), &mut listed);
        Some([verdict.sent()[0], listed.0])
    });
    let mut expanded = Fold::default();
    let mut made = restore.prepare(file, meta, &mut expanded);
    let answer = beside.and_then(Beside::result);
    let told = answer.map(|[what, listed]| (Check::received([what, 0]), Fold(listed)));
    let listed = match told {
        Some((Check::Intact, listed)) => Some(listed),
        _ => None,
    };
    let verdict = match told {
        Some((Check::Intact, _)) if made.is_ok() && listed == Some(expanded) => Check::Intact,
        Some((Check::Unverified, _)) => Check::Unverified,
        // Damaged (why is found again, by the whole check), a member
        // that expanded to other bytes than its manifest lists, or no
        // verdict.
        _ => check_beside(file, meta),
    };
    if made.is_ok() && listed.is_some_and(|listed| listed != expanded) {
        made = Err(at("restore (the copy does not match its checksums)")(
            Errno::IO,
        ));
    }
    (verdict, Prepared { made, listed })
}

/// One line on stderr for a damaged generation, and the one restored
/// instead, if any: the user must learn that work was lost.
fn say_damaged(
    slots: &Slots,
    (g, slot, why): (u64, u32, Why),
    then: Option<(u64, u32)>,
    log: &Log,
) {
    match then {
        Some((older, at)) => log.warn(format_args!(
            "{}: generation {g} is damaged ({why}): restarting from generation {older} ({}), \
             the job's work after it is lost",
            slots.at(slot),
            slots.at(at)
        )),
        None => log.warn(format_args!(
            "{}: generation {g} is damaged ({why}); it is not restored",
            slots.at(slot)
        )),
    }
}

/// No generation is intact: refuse, or set the damaged ones aside in the
/// scratch directory and the working paths beside them, for a first
/// start.
pub fn none_intact(
    slots: &mut Slots,
    scratch: &Scratch,
    restore: &Restore<'_, '_>,
    on_damage: OnDamage,
    log: &Log,
) -> Result<(), Error> {
    let name = slots.name().shown.clone();
    let shown = || name.display();
    if on_damage == OnDamage::Refuse {
        return Err(Error::usage(
            shown(),
            format_args!(
                "no intact generation to restart from: the job's checkpoints are damaged; \
                 to start it afresh, run with --fresh-if-damaged (or remove {}.*)",
                shown()
            ),
        ));
    }
    let damaged: SlotSet = slots.damaged();
    for slot in damaged.iter() {
        let aside = damaged_name(slot);
        let aside = CStr::from_bytes_with_nul(&aside).unwrap_or(c"damaged");
        let from = slots.dir_of(slots.place(slot));
        rustix::fs::renameat(from, slots.file(slot).c(), scratch.dir(), aside)
            .map_err(|e| Error::usage(shown(), at("set a damaged generation aside")(e)))?;
    }
    slots.table_mut().forget_damaged();
    restore
        .set_aside(log)
        .map_err(|f| Error::usage(shown(), f))?;
    log.warn(format_args!(
        "{}: starting afresh (--fresh-if-damaged); the damaged generations are kept in {}",
        shown(),
        scratch.path().display()
    ));
    Ok(())
}

/// Moves generation `bad` to the scratch's `failed` (the only one kept
/// there), and leaves an empty file in its slot, which HTCondor then
/// uploads over the bad one.
pub fn set_failed_aside(slots: &mut Slots, scratch: &Scratch, bad: u64) -> Result<(), Failed> {
    slots.scan(None)?;
    let slot = slots
        .find(bad)
        .ok_or(at("find the generation")(Errno::NOENT))?;
    let from = slots.dir_of(slots.place(slot));
    rustix::fs::renameat(from, slots.file(slot).c(), scratch.dir(), FAILED)
        .map_err(at("set the failed generation aside"))?;
    slots.empty_slot(slot)?;
    rustix::fs::fsync(slots.dir()).map_err(at("fsync the store's directory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_crosses_from_a_child_whole_with_its_reason() {
        let checks = [
            Check::Intact,
            Check::Unverified,
            Check::Damaged(Damage::Archive(Bad::Torn)),
            Check::Damaged(Damage::Archive(Bad::Malformed)),
            Check::Damaged(Damage::Archive(Bad::Io(Errno::IO))),
            Check::Damaged(Damage::NoManifest),
            Check::Damaged(Damage::Member(12 << 12)),
            Check::Damaged(Damage::Missing),
        ];
        let sent: Vec<[u64; 2]> = checks.iter().map(Check::sent).collect();
        for (i, s) in sent.iter().enumerate() {
            assert_eq!(Check::received(*s).sent(), *s);
            assert!(!sent[..i].contains(s), "{s:?} sent twice");
        }
    }
}
