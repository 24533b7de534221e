//! File trees named relative to a directory descriptor: copy, make
//! durable, remove, and fingerprint a file or a directory with all it
//! holds. Used to commit and restore checkpoints while and after the job
//! runs, so nothing here allocates: names come from the kernel's own
//! directory entries, buffers are on the stack, and recursion is bounded.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, SeekFrom, Stat};
use rustix::io::{Errno, Result};

/// How deep a checkpoint directory may nest; deeper is refused (ELOOP)
/// rather than risk the stack.
const MAX_DEPTH: u32 = 32;

/// Room for a batch of directory entries.
const DIRENT_BUF: usize = 4096;

/// Copies `name` in `src` (a file, a symlink or a directory tree) to the
/// new name `to` in `dst`, and makes the copy durable: each file and
/// directory is fsync'd. Files are cloned (FICLONE) where the filesystem
/// shares blocks, else copied in the kernel (copy_file_range), else read
/// and written.
pub fn copy(src: BorrowedFd, name: &CStr, dst: BorrowedFd, to: &CStr) -> Result<()> {
    copy_at(src, name, dst, to, 0)
}

fn copy_at(src: BorrowedFd, name: &CStr, dst: BorrowedFd, to: &CStr, depth: u32) -> Result<()> {
    let st = stat(src, name)?;
    let mode = Mode::from_raw_mode(st.st_mode & 0o7777);
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => copy_file(src, name, dst, to, mode),
        FileType::Symlink => copy_symlink(src, name, dst, to),
        FileType::Directory => {
            if depth >= MAX_DEPTH {
                return Err(Errno::LOOP);
            }
            // Owner write and search, to fill it; the rest as it was.
            rustix::fs::mkdirat(dst, to, mode | Mode::RWXU)?;
            let into = open_dir(dst, to)?;
            each_entry(src, name, depth, |from, child| {
                copy_at(from, child, into.as_fd(), child, depth + 1)
            })?;
            rustix::fs::fsync(&into)
        }
        // FIFOs, sockets, devices: not checkpoint data.
        _ => Err(Errno::OPNOTSUPP),
    }
}

fn copy_file(src: BorrowedFd, name: &CStr, dst: BorrowedFd, to: &CStr, mode: Mode) -> Result<()> {
    let from = rustix::fs::openat(src, name, read_flags(), Mode::empty())?;
    let into = rustix::fs::openat(
        dst,
        to,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        mode,
    )?;
    if rustix::fs::ioctl_ficlone(&into, &from).is_err() {
        let len = rustix::fs::fstat(&from)?.st_size as u64;
        copy_range(&from, &into, len)?;
    }
    rustix::fs::fsync(&into)
}

/// Copies `len` bytes in the kernel; falls back to read and write where
/// copy_file_range cannot (across filesystems on old kernels, some FUSE
/// and network filesystems).
fn copy_range(from: &OwnedFd, into: &OwnedFd, len: u64) -> Result<()> {
    let mut done = 0u64;
    while done < len {
        let chunk = (len - done).min(1 << 30) as usize;
        match rustix::fs::copy_file_range(from, None, into, None, chunk) {
            Ok(0) => return Ok(()), // it shrank; what is there is copied
            Ok(n) => done += n as u64,
            Err(Errno::INTR) => {}
            Err(Errno::XDEV | Errno::NOSYS | Errno::INVAL | Errno::OPNOTSUPP) if done == 0 => {
                return copy_by_reading(from, into);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn copy_by_reading(from: &OwnedFd, into: &OwnedFd) -> Result<()> {
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = crate::sys::read_fill(from, &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        crate::sys::write_all(into, &buf[..n])?;
    }
}

fn copy_symlink(src: BorrowedFd, name: &CStr, dst: BorrowedFd, to: &CStr) -> Result<()> {
    let mut buf = [MaybeUninit::uninit(); 4096];
    let (target, _) = rustix::fs::readlinkat_raw(src, name, &mut buf)?;
    // The target with a NUL after it, on the stack (a &[u8] path longer
    // than 255 bytes would be copied to the heap by rustix).
    let mut with_nul = [0u8; 4097];
    let len = target.len().min(4096);
    with_nul[..len].copy_from_slice(&target[..len]);
    let target = CStr::from_bytes_until_nul(&with_nul).map_err(|_| Errno::INVAL)?;
    rustix::fs::symlinkat(target, dst, to)
}

/// Makes `name` durable: fsyncs it and, for a directory, everything in
/// it. (The caller fsyncs the directory holding `name`.)
pub fn sync(dir: BorrowedFd, name: &CStr) -> Result<()> {
    sync_at(dir, name, 0)
}

fn sync_at(dir: BorrowedFd, name: &CStr, depth: u32) -> Result<()> {
    let st = stat(dir, name)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {
            let file = rustix::fs::openat(dir, name, read_flags(), Mode::empty())?;
            rustix::fs::fsync(&file)
        }
        FileType::Directory => {
            let d = each_entry(dir, name, depth, |d, child| sync_at(d, child, depth + 1))?;
            rustix::fs::fsync(&d)
        }
        _ => Ok(()),
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
    // Entries removed while a directory is read may hide others from that
    // read: read it again until a pass finds nothing.
    loop {
        rustix::fs::seek(&d, SeekFrom::Start(0))?;
        let mut removed = false;
        let mut buf = [MaybeUninit::uninit(); DIRENT_BUF];
        let mut entries = RawDir::new(&d, &mut buf);
        while let Some(entry) = entries.next() {
            let entry = entry?;
            if !is_dot(entry.file_name()) {
                remove_at(d.as_fd(), entry.file_name(), depth + 1)?;
                removed = true;
            }
        }
        if !removed {
            break;
        }
    }
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
    add(&mut fp, dir, name, &st, 0)?;
    Ok(Some(fp))
}

fn add(fp: &mut Fingerprint, dir: BorrowedFd, name: &CStr, st: &Stat, depth: u32) -> Result<()> {
    fp.sum = fp.sum.wrapping_add(mix(st));
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => fp.bytes += st.st_size as u64,
        FileType::Directory => {
            each_entry(dir, name, depth, |d, child| {
                fp.entries += 1;
                add(fp, d, child, &stat(d, child)?, depth + 1)
            })?;
        }
        _ => {}
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
fn each_entry(
    dir: BorrowedFd,
    name: &CStr,
    depth: u32,
    mut f: impl FnMut(BorrowedFd, &CStr) -> Result<()>,
) -> Result<OwnedFd> {
    if depth >= MAX_DEPTH {
        return Err(Errno::LOOP);
    }
    let d = open_dir(dir, name)?;
    let mut buf = [MaybeUninit::uninit(); DIRENT_BUF];
    let mut entries = RawDir::new(&d, &mut buf);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        if !is_dot(entry.file_name()) {
            f(d.as_fd(), entry.file_name())?;
        }
    }
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

/// A directory ckptrun made or found inside one: a symlink is refused.
pub fn open_dir(dir: BorrowedFd, name: &CStr) -> Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
}

fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY
}

fn is_dot(name: &CStr) -> bool {
    matches!(name.to_bytes(), b"." | b"..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::CWD;
    use std::ffi::CString;
    use std::path::{Path, PathBuf};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ckptrun-tree-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
    }

    #[test]
    fn copies_a_tree_with_a_symlink_and_removes_it() {
        let dir = scratch("copy");
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("sub/deeper")).unwrap();
        std::fs::write(src.join("a"), vec![7u8; 200_000]).unwrap();
        std::fs::write(src.join("sub/deeper/b"), b"bee").unwrap();
        std::os::unix::fs::symlink("../a", src.join("sub/link")).unwrap();
        copy(CWD, &c(&src), CWD, &c(&dir.join("dst"))).unwrap();
        let dst = dir.join("dst");
        assert_eq!(std::fs::read(dst.join("a")).unwrap(), vec![7u8; 200_000]);
        assert_eq!(std::fs::read(dst.join("sub/deeper/b")).unwrap(), b"bee");
        assert_eq!(
            std::fs::read_link(dst.join("sub/link")).unwrap(),
            Path::new("../a")
        );
        remove(CWD, &c(&dst)).unwrap();
        assert!(!dst.exists());
        assert!(src.join("sub/deeper/b").exists(), "the source is untouched");
        remove(CWD, &c(&dst)).unwrap();
    }

    #[test]
    fn a_fingerprint_changes_when_a_file_inside_is_rewritten_in_place() {
        let dir = scratch("fp");
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
