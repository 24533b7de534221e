//! File trees named relative to a directory descriptor: remove, and
//! fingerprint a file or a directory with all it holds. Used while and
//! after the job runs, so nothing here allocates: names come from the
//! kernel's own directory entries, buffers are on the stack, and
//! recursion is bounded.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, SeekFrom, Stat};
use rustix::io::{Errno, Result};

/// How deep a checkpoint directory may nest; deeper is refused (ELOOP)
/// rather than risk the stack.
pub const MAX_DEPTH: u32 = 32;

/// Room for a batch of directory entries.
const DIRENT_BUF: usize = 4096;

/// Calls `f` with each name in the open directory `dir` but `.` and
/// `..`, read from its start; stops at the first error, `f`'s or the
/// read's. The one directory loop: the entries are read in batches into a
/// buffer on the stack, so it does not allocate.
pub fn each_name(dir: BorrowedFd, mut f: impl FnMut(&CStr) -> Result<()>) -> Result<()> {
    rustix::fs::seek(dir, SeekFrom::Start(0))?;
    let mut buf = [MaybeUninit::uninit(); DIRENT_BUF];
    let mut entries = RawDir::new(dir, &mut buf);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        if !is_dot(entry.file_name()) {
            f(entry.file_name())?;
        }
    }
    Ok(())
}

/// Removes everything in the open directory `dir`.
pub fn empty(dir: BorrowedFd) -> Result<()> {
    empty_at(dir, 0)
}

/// Removes what `dir` holds, `depth` below the top.
fn empty_at(dir: BorrowedFd, depth: u32) -> Result<()> {
    // Entries removed while a directory is read may hide others from that
    // read: read it again until a pass finds nothing.
    loop {
        let mut removed = false;
        each_name(dir, |name| {
            removed = true;
            remove_at(dir, name, depth)
        })?;
        if !removed {
            return Ok(());
        }
    }
}

/// Removes `name` (a file, a symlink, or a directory and all it holds).
/// Nothing there is not an error.
pub fn remove(dir: BorrowedFd, name: &CStr) -> Result<()> {
    remove_at(dir, name, 0)
}

fn remove_at(dir: BorrowedFd, name: &CStr, depth: u32) -> Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => return Ok(()),
        Err(Errno::ISDIR) => {}
        Err(e) => return Err(e),
    }
    if depth >= MAX_DEPTH {
        return Err(Errno::LOOP);
    }
    let d = open_dir(dir, name)?;
    empty_at(d.as_fd(), depth + 1)?;
    match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// What a file or tree looks like now: it changes when anything in it is
/// written, replaced, added or removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// The top-level inode: a new one means `name` was replaced (renamed
    /// over), not written in place.
    pub dev: u64,
    pub ino: u64,
    /// Bytes in all regular files.
    pub bytes: u64,
    /// Entries below a directory (0 for a file).
    pub entries: u64,
    /// An order-independent sum over every inode's identity, size and
    /// times.
    sum: u64,
}

impl Fingerprint {
    /// Holds data: a non-empty file, or a directory with a non-empty file.
    pub fn has_data(&self) -> bool {
        self.bytes > 0
    }
}

/// The fingerprint of `name`, or `None` if nothing is there.
pub fn fingerprint(dir: BorrowedFd, name: &CStr) -> Result<Option<Fingerprint>> {
    let st = match stat(dir, name) {
        Err(Errno::NOENT) => return Ok(None),
        other => other?,
    };
    let mut fp = Fingerprint {
        dev: st.st_dev,
        ino: st.st_ino,
        bytes: 0,
        entries: 0,
        sum: 0,
    };
    each_inode(dir, name, &st, 0, &mut |inode| {
        if let Inode::Found(_, st) = inode {
            fp.sum = fp.sum.wrapping_add(mix(st));
            if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                fp.bytes += st.st_size as u64;
            }
            fp.entries += 1;
        }
        Ok(())
    })?;
    // The top itself is not an entry below it.
    fp.entries -= 1;
    Ok(Some(fp))
}

/// What `each_inode` meets: an inode (its name and what stat says), or
/// the end of a directory's entries.
pub enum Inode<'a> {
    Found(&'a CStr, &'a Stat),
    DirEnd,
}

/// Calls `f` with `name` (whose stat is `st`, `depth` below the top) and,
/// for a directory, with everything below it, depth first, each
/// directory's entries followed by its end. The one walk over a tree's
/// inodes: fingerprints, and the record of a kept working copy.
pub fn each_inode(
    dir: BorrowedFd,
    name: &CStr,
    st: &Stat,
    depth: u32,
    f: &mut dyn FnMut(Inode) -> Result<()>,
) -> Result<()> {
    f(Inode::Found(name, st))?;
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        each_entry(dir, name, depth, |d, child| {
            each_inode(d, child, &stat(d, child)?, depth + 1, f)
        })?;
        f(Inode::DirEnd)?;
    }
    Ok(())
}

/// One inode's identity, size and times, mixed (splitmix64 steps).
// The nanosecond fields are u64 on x86_64 but u32 on i686.
#[allow(clippy::unnecessary_cast)]
fn mix(st: &Stat) -> u64 {
    let fields = [
        st.st_ino,
        st.st_size as u64,
        st.st_mtime as u64,
        st.st_mtime_nsec as u64,
        st.st_ctime as u64,
        st.st_ctime_nsec as u64,
    ];
    fields.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &v| {
        let mut z = (h ^ v).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// Opens the directory `name` (at `depth` below the top, refused past
/// MAX_DEPTH) and calls `f` with it and each entry's name but `.` and
/// `..`. Returns the open directory.
pub fn each_entry(
    dir: BorrowedFd,
    name: &CStr,
    depth: u32,
    mut f: impl FnMut(BorrowedFd, &CStr) -> Result<()>,
) -> Result<OwnedFd> {
    if depth >= MAX_DEPTH {
        return Err(Errno::LOOP);
    }
    let d = open_dir(dir, name)?;
    each_name(d.as_fd(), |child| f(d.as_fd(), child))?;
    Ok(d)
}

/// `name` itself, not what a symlink points to.
pub fn stat(dir: BorrowedFd, name: &CStr) -> Result<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// A directory the user named: a symlink to one is followed.
pub fn open_named_dir(dir: BorrowedFd, name: &CStr) -> Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// How ckptrun opens a file it reads (a checkpoint's, an archive): not
/// through a symlink, never as a controlling terminal.
pub fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY
}

/// A directory ckptrun made or found inside one: a symlink is refused.
pub fn open_dir(dir: BorrowedFd, name: &CStr) -> Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
}

fn is_dot(name: &CStr) -> bool {
    matches!(name.to_bytes(), b"." | b"..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp_dir::TempDir;
    use rustix::fs::CWD;
    use std::ffi::CString;
    use std::path::Path;

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
    }

    #[test]
    fn removes_a_tree_with_a_symlink_but_not_its_target() {
        let dir = TempDir::new("tree-remove");
        let tree = dir.join("t");
        std::fs::create_dir_all(tree.join("sub/deeper")).unwrap();
        std::fs::write(tree.join("sub/deeper/b"), b"bee").unwrap();
        std::fs::write(dir.join("outside"), b"kept").unwrap();
        std::os::unix::fs::symlink("../../outside", tree.join("sub/link")).unwrap();
        remove(CWD, &c(&tree)).unwrap();
        assert!(!tree.exists());
        assert_eq!(std::fs::read(dir.join("outside")).unwrap(), b"kept");
        remove(CWD, &c(&tree)).unwrap();
    }

    #[test]
    fn a_fingerprint_changes_when_a_file_inside_is_rewritten_in_place() {
        let dir = TempDir::new("tree-fp");
        let tree = dir.join("t");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("x"), b"one").unwrap();
        let before = fingerprint(CWD, &c(&tree)).unwrap().unwrap();
        assert_eq!((before.entries, before.bytes), (1, 3));
        assert_eq!(fingerprint(CWD, &c(&tree)).unwrap(), Some(before));
        std::fs::write(tree.join("x"), b"two").unwrap();
        let after = fingerprint(CWD, &c(&tree)).unwrap().unwrap();
        assert_ne!(after, before);
        assert_eq!(after.ino, before.ino, "written in place, not replaced");
        assert_eq!(fingerprint(CWD, &c(&dir.join("none"))).unwrap(), None);
    }
}
