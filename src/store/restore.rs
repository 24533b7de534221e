//! A restart's copy of a generation, made while the generation is
//! verified (see `verify`) and put in place only once it is found intact:
//! nothing the job has is touched before the verdict.
//!
//! What is copied is what the mode hands the store: the working copy
//! (`--ckpt` paths, see `working`), and whatever else the mode extracts
//! through `Extract` into the scratch's `restore` directory (dmtcp mode:
//! its images, which it knows by name). A copy that could not be made
//! beside what it replaces (a full disk) is made again once the working
//! paths are removed.

use std::os::fd::{AsFd, BorrowedFd};

use rustix::io::Errno;

use crate::os::beside::Beside;
use crate::os::log::Log;
use crate::os::tree;
use crate::store::archive::{self, Bad};
use crate::store::generation::{Failed, Meta, at};
use crate::store::manifest::{self, Fold};
use crate::store::scratch::{RESTORE, Scratch};
use crate::store::working::WorkingCopy;

/// What a mode extracts of the generation it restarts from, beyond the
/// working paths. Called while the generation is verified.
pub trait Extract {
    /// Whether generation `meta` holds anything for it.
    fn wants(&self, meta: &Meta) -> bool;
    /// Whether it extracts the member at `path`: true for exactly the
    /// members `extract` makes (otherwise the sums of `verify` differ,
    /// and every restore pays for the whole check again).
    fn takes(&self, path: &[u8]) -> bool;
    /// Extracts what it needs of the archive `archive` into the empty
    /// directory `into` (the scratch's `restore`); the hash of each
    /// compressed member, as expanded, goes into `expanded`.
    fn extract(
        &mut self,
        archive: BorrowedFd,
        into: BorrowedFd,
        expanded: &mut Fold,
    ) -> Result<(), Failed>;
}

/// The compressed members the copies of a generation expand: the check
/// beside them leaves those to them (see `verify`).
impl manifest::Elsewhere for (&Restore<'_, '_>, &Meta) {
    fn takes(&self, path: &[u8]) -> bool {
        self.0.takes(self.1, path)
    }
}

pub struct Restore<'a, 'e> {
    work: &'a mut WorkingCopy,
    extract: Option<&'e mut dyn Extract>,
    scratch: &'a Scratch,
    /// `restore` holds what `extract` made of the generation prepared.
    extracted: bool,
}

/// The copies of a generation as the check left them: usable, or why
/// not; and, where the check said it, the sum of the hashes the
/// generation's manifest lists for the compressed files they take (see
/// `verify::check_preparing`), which copies made again must give.
pub struct Prepared {
    pub made: Result<(), Failed>,
    pub listed: Option<Fold>,
}

impl<'a, 'e> Restore<'a, 'e> {
    pub fn new(
        work: &'a mut WorkingCopy,
        extract: Option<&'e mut dyn Extract>,
        scratch: &'a Scratch,
    ) -> Self {
        Self {
            work,
            extract,
            scratch,
            extracted: false,
        }
    }

    /// Whether generation `meta` has anything to copy (else it is only
    /// verified).
    pub fn wants(&self, meta: &Meta) -> bool {
        !self.work.is_empty() || self.extract.as_ref().is_some_and(|e| e.wants(meta))
    }

    /// Whether the copies of generation `meta` take its member at `path`
    /// (and so expand it, if it is compressed).
    pub fn takes(&self, meta: &Meta, path: &[u8]) -> bool {
        self.work.takes(path)
            || (self.extract.as_ref()).is_some_and(|e| e.wants(meta) && e.takes(path))
    }

    /// Makes the copies of the generation `archive` (described by `meta`)
    /// beside where they go; the hash of each compressed member, as
    /// expanded, goes into `expanded`.
    pub fn prepare(
        &mut self,
        archive: BorrowedFd,
        meta: &Meta,
        expanded: &mut Fold,
    ) -> Result<(), Failed> {
        if let Some(extract) = self.extract.as_deref_mut()
            && extract.wants(meta)
        {
            let into = self.scratch.fresh_dir(RESTORE).map_err(at("restore"))?;
            self.extracted = true;
            extract.extract(archive, into.as_fd(), expanded)?;
        }
        self.work.prepare(archive, expanded)
    }

    /// Removes the copies `prepare` made: the generation is damaged.
    pub fn unprepare(&mut self) {
        self.work.unprepare();
        if self.extracted {
            let _ = tree::remove(self.scratch.dir(), RESTORE);
            self.extracted = false;
        }
    }

    /// The generation is intact: puts its copies in place; if they are
    /// not usable (`prepared`), makes them again once the working paths
    /// are out of the way, and checks what they expanded to against the
    /// hashes listed, where the check gave them.
    pub fn put_in_place(
        &mut self,
        archive: BorrowedFd,
        meta: &Meta,
        prepared: Prepared,
        log: &Log,
    ) -> Result<(), Failed> {
        if prepared.made.is_err() {
            self.unprepare();
            self.work.make_room()?;
            let mut expanded = Fold::default();
            let remade =
                self.prepare(archive, meta, &mut expanded)
                    .and_then(|()| match prepared.listed {
                        Some(listed) if listed != expanded => Err(copy_differs()),
                        _ => Ok(()),
                    });
            // A copy cut short (a full disk) goes too: it holds room.
            if remade.is_err() {
                self.unprepare();
            }
            remade?;
        }
        self.work.put_in_place(log)
    }

    /// No generation stands behind the working paths: each is set aside.
    pub fn set_aside(&self, log: &Log) -> Result<(), Failed> {
        self.work.set_aside(log)
    }
}

/// A copy whose expansion did not give the hashes the manifest lists.
pub fn copy_differs() -> Failed {
    at("restore (the copy does not match its checksums)")(Errno::IO)
}

/// Extracts the members of `archive` whose paths `takes` into `into`, at
/// their paths (a mode's `Extract`, and what it puts back after); the
/// hash of each compressed member, as expanded, goes into `expanded`.
///
/// In a child beside ckptrun (`Beside`): the walk over the archive and
/// the extraction's frames then touch the child's pages and the code only
/// children run, never the supervisor's (how-it-works.md, "Memory").
/// Here, as before, when no child gives an answer.
pub fn extract_where(
    archive: BorrowedFd,
    into: BorrowedFd,
    takes: fn(&[u8]) -> bool,
    expanded: &mut Fold,
) -> Result<(), Failed> {
    const STEPS: [&str; 1] = ["restore (extract)"];
    let (done, sum) = Beside::or_here(
        || {
            let mut sum = Fold::default();
            (extract_here(archive, into, takes, &mut sum), sum)
        },
        |(done, sum)| {
            let [step, errno] = Failed::sent(&done, &STEPS);
            [step, errno, sum.0]
        },
        |[step, errno, sum]| (Failed::received([step, errno], &STEPS), Fold(sum)),
    );
    expanded.join(sum);
    done
}

/// `extract_where`'s work.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn extract_here(
    file: BorrowedFd,
    into: BorrowedFd,
    takes: fn(&[u8]) -> bool,
    expanded: &mut Fold,
) -> Result<(), Failed> {
    // Anything a child that died left there goes first (each member is
    // created anew: O_EXCL).
    tree::empty(into).map_err(at("restore (extract)"))?;
    let done = archive::each_member(file, |m| {
        if takes(m.path.as_bytes())
            && let Some(hash) = archive::extract(file, m, into, m.path.c())?
        {
            expanded.add(m.offset, hash);
        }
        Ok(true)
    });
    match done {
        Ok(()) => Ok(()),
        Err(Bad::Io(e)) => Err(at("restore (extract)")(e)),
        Err(_) => Err(at("restore (extract)")(Errno::IO)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp_dir::TempDir;
    use crate::store::writer::Writer;
    use std::os::fd::AsFd;

    #[test]
    fn an_extraction_made_again_over_one_a_dead_child_left_succeeds() {
        let dir = TempDir::new("extract-again");
        let archive = dir.join("archive");
        let out = std::fs::File::create(&archive).unwrap();
        let sums = std::fs::File::create_new(dir.join("sums")).unwrap();
        let mut w = Writer::new(
            out.as_fd(),
            sums.as_fd(),
            crate::store::pack::Packing::WherePays,
        );
        w.bytes(b"ckpt_a.dmtcp", 0o644, b"image a").unwrap();
        w.bytes(b"other", 0o644, b"not taken").unwrap();
        w.finish().unwrap();
        let into = dir.join("into");
        std::fs::create_dir(&into).unwrap();
        let into_fd = std::fs::File::open(&into).unwrap();
        let file = std::fs::File::open(&archive).unwrap();
        let takes = |p: &[u8]| p.starts_with(b"ckpt_");
        // What a child killed half-way leaves: a member, and another file.
        std::fs::write(into.join("ckpt_a.dmtcp"), b"ima").unwrap();
        std::fs::write(into.join("left"), b"x").unwrap();
        let mut sum = Fold::default();
        extract_here(file.as_fd(), into_fd.as_fd(), takes, &mut sum).unwrap();
        assert_eq!(
            std::fs::read(into.join("ckpt_a.dmtcp")).unwrap(),
            b"image a"
        );
        assert!(!into.join("left").exists() && !into.join("other").exists());
    }
}
