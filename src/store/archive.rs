//! One committed generation as one file: a POSIX tar archive (ustar
//! headers, pax records for long paths and large sizes), so that
//! HTCondor, which moves only top-level files on eviction, carries the
//! whole generation, and so that `tar tvf` shows what it holds. This is
//! the format and its reader; `writer` writes it.
//!
//! ckptrun writes and reads only what it needs: regular files,
//! directories and symlinks, depth first, each directory before what it
//! holds. Each regular file's data starts on a 4 KiB boundary of the
//! archive (a pax header padded with a `comment` record where needed):
//! the kernel copies page-aligned data faster, and filesystems that share
//! blocks (XFS, btrfs) can share them instead of copying. Reading checks
//! every header and the end-of-archive marker, so a cut-off file is told
//! from a whole one. Nothing here allocates: headers and paths live in
//! fixed buffers, data moves in the kernel (copy_file_range) where it can.

use core::fmt;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{Mode, OFlags, Timestamps};
use rustix::io::{Errno, Result};

use crate::os::copy::{copy, read_at};
use crate::os::decimal;

pub const BLOCK: usize = 512;
/// The longest path a member may have (Linux's PATH_MAX, less its NUL).
pub const PATH_MAX: usize = 4095;
/// Where file data starts: a multiple of this in the archive.
pub const ALIGN: u64 = 4096;
/// The largest pax record block ckptrun reads: a path, a link target, a
/// size and padding to ALIGN.
pub const PAX_MAX: usize = 2 * (PATH_MAX + 32) + 64 + ALIGN as usize;

/// A path inside an archive, on the stack.
#[derive(Clone)]
pub struct PathBuf {
    bytes: [u8; PATH_MAX + 1],
    len: usize,
}

impl PathBuf {
    pub const fn new() -> Self {
        Self {
            bytes: [0; PATH_MAX + 1],
            len: 0,
        }
    }

    pub fn from(bytes: &[u8]) -> Result<Self> {
        let mut p = Self::new();
        p.push_raw(bytes)?;
        Ok(p)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The path, NUL-terminated, for a system call.
    pub fn c(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.bytes[..=self.len]).unwrap_or(c"")
    }

    pub fn push_raw(&mut self, bytes: &[u8]) -> Result<()> {
        if self.len + bytes.len() > PATH_MAX || bytes.contains(&0) {
            return Err(Errno::NAMETOOLONG);
        }
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        self.bytes[self.len] = 0;
        Ok(())
    }

    /// Appends `/name`; returns the length to `truncate` back to.
    pub fn join(&mut self, name: &[u8]) -> Result<usize> {
        let before = self.len;
        self.push_raw(b"/")?;
        self.push_raw(name).inspect_err(|_| self.truncate(before))?;
        Ok(before)
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = len;
        self.bytes[len] = 0;
    }

    /// `self/rest`.
    pub fn joined(&self, rest: &[u8]) -> Result<Self> {
        let mut p = self.clone();
        p.join(rest)?;
        Ok(p)
    }
}

impl fmt::Display for PathBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::os::log::Lossy(self.as_bytes()).fmt(f)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// One member, as read.
pub struct Member {
    pub path: PathBuf,
    pub kind: Kind,
    pub mode: u32,
    pub mtime: i64,
    /// The bytes of its data in the archive.
    pub size: u64,
    /// Where its data starts in the archive.
    pub offset: u64,
    pub link: PathBuf,
    /// A compressed file's size once expanded (see `pack`); none for a
    /// file stored as it is.
    pub compressed: Option<u64>,
}

/// The pax records of a compressed member: the codec, and the size once
/// expanded (vendor keywords: GNU tar says it ignores them, and extracts
/// the compressed bytes).
pub const CODEC: &[u8] = b"CKPTRUN.codec";
pub const CODEC_ZSTD: &[u8] = b"zstd";
pub const RAW_SIZE: &[u8] = b"CKPTRUN.size";

fn checksum_ok(h: &[u8; BLOCK]) -> bool {
    let stored = parse_octal(&h[148..156]);
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| u64::from(if (148..156).contains(&i) { b' ' } else { b }))
        .sum();
    stored == Some(sum)
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let field = field.trim_ascii_start();
    let end = field
        .iter()
        .position(|&b| b == 0 || b == b' ')
        .unwrap_or(field.len());
    let digits = &field[..end];
    if digits.is_empty() || !digits.iter().all(|b| (b'0'..=b'7').contains(b)) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(8)?.checked_add(u64::from(d - b'0'))
    })
}

/// What is wrong with an archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Cut off: it ends before its end-of-archive marker.
    Torn,
    /// Not an archive ckptrun wrote (a bad header, an unsafe path).
    Malformed,
    Io(Errno),
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::Torn => f.write_str("cut off (torn)"),
            Bad::Malformed => f.write_str("not an archive ckptrun wrote"),
            Bad::Io(e) => f.write_str(crate::os::sys::strerror(*e)),
        }
    }
}

impl From<Errno> for Bad {
    fn from(e: Errno) -> Self {
        Bad::Io(e)
    }
}

/// Calls `f` with each member of `archive`, in order, until `f` returns
/// `Ok(false)`; checks every header on the way and, when `f` never
/// stops early, that the archive ends whole. Reads only headers.
pub fn each_member(
    archive: BorrowedFd,
    mut f: impl FnMut(&Member) -> core::result::Result<bool, Bad>,
) -> core::result::Result<(), Bad> {
    walk(archive, &mut f)
}

/// `each_member`'s walk, one copy for every caller (a closure type each
/// would otherwise get a copy of its own, all resident).
#[inline(never)]
fn walk(
    archive: BorrowedFd,
    f: &mut dyn FnMut(&Member) -> core::result::Result<bool, Bad>,
) -> core::result::Result<(), Bad> {
    let len = rustix::fs::fstat(archive)?.st_size as u64;
    let mut at = 0u64;
    let mut member = Member {
        path: PathBuf::new(),
        kind: Kind::File,
        mode: 0,
        mtime: 0,
        size: 0,
        offset: 0,
        link: PathBuf::new(),
        compressed: None,
    };
    let mut pax = Pax {
        path: None,
        link: None,
        size: None,
        compressed: None,
    };
    loop {
        let mut h = [0u8; BLOCK];
        if at + BLOCK as u64 > len {
            return Err(Bad::Torn);
        }
        read_at(archive, &mut h, at)?;
        at += BLOCK as u64;
        if h.iter().all(|&b| b == 0) {
            return end(archive, &mut h, at, len);
        }
        if !checksum_ok(&h) || &h[257..262] != b"ustar" {
            return Err(Bad::Malformed);
        }
        let typeflag = h[156];
        let data = at;
        let mut size = parse_octal(&h[124..136]).ok_or(Bad::Malformed)?;
        if typeflag == b'0' || typeflag == 0 {
            // A pax size replaces the header's (0 when too big for it).
            size = pax.size.take().unwrap_or(size);
        }
        at = data
            .checked_add(size.div_ceil(BLOCK as u64) * BLOCK as u64)
            .ok_or(Bad::Malformed)?;
        if at > len {
            return Err(Bad::Torn);
        }
        match typeflag {
            b'x' => pax.read(archive, data, size)?,
            b'g' => {}
            _ => {
                fill(&mut member, &h, size, data, &mut pax)?;
                if !f(&member)? {
                    return Ok(());
                }
            }
        }
    }
}

/// After a zero block at `at - BLOCK`: the end, if a second zero block
/// follows. What follows it (tar pads to its record size) is not read,
/// as tar does not.
#[inline]
fn end(
    archive: BorrowedFd,
    h: &mut [u8; BLOCK],
    at: u64,
    len: u64,
) -> core::result::Result<(), Bad> {
    if at + BLOCK as u64 > len {
        return Err(Bad::Torn);
    }
    read_at(archive, h, at)?;
    match h.iter().all(|&b| b == 0) {
        true => Ok(()),
        false => Err(Bad::Malformed),
    }
}

/// Values a pax header gave for the member after it.
struct Pax {
    path: Option<PathBuf>,
    link: Option<PathBuf>,
    size: Option<u64>,
    /// CKPTRUN.size, with CKPTRUN.codec=zstd.
    compressed: Option<u64>,
}

impl Pax {
    /// Reads the pax header whose `size` bytes of records are at `data`.
    #[inline]
    fn read(&mut self, archive: BorrowedFd, data: u64, size: u64) -> core::result::Result<(), Bad> {
        if size as usize > PAX_MAX {
            return Err(Bad::Malformed);
        }
        let mut records = [0u8; PAX_MAX];
        let records = &mut records[..size as usize];
        read_at(archive, records, data)?;
        parse_pax(records, self)
    }
}

/// Sets `member` from its ustar header `h` and what a pax header before
/// it gave; its data, `size` bytes, is at `data`.
#[inline]
fn fill(
    member: &mut Member,
    h: &[u8; BLOCK],
    size: u64,
    data: u64,
    pax: &mut Pax,
) -> core::result::Result<(), Bad> {
    member.kind = match h[156] {
        b'0' | 0 => Kind::File,
        b'5' => Kind::Dir,
        b'2' => Kind::Symlink,
        _ => return Err(Bad::Malformed),
    };
    member.path = match pax.path.take() {
        Some(p) => p,
        None => ustar_name(h)?,
    };
    member.link = match pax.link.take() {
        Some(p) => p,
        None => PathBuf::from(field(&h[157..257])).map_err(|_| Bad::Malformed)?,
    };
    member.size = size;
    pax.size = None;
    member.compressed = pax.compressed.take();
    if member.compressed.is_some() && member.kind != Kind::File {
        return Err(Bad::Malformed);
    }
    member.mode = parse_octal(&h[100..108]).ok_or(Bad::Malformed)? as u32 & 0o7777;
    member.mtime = parse_octal(&h[136..148]).unwrap_or(0) as i64;
    member.offset = data;
    strip_slash(&mut member.path);
    if !safe(member.path.as_bytes()) {
        return Err(Bad::Malformed);
    }
    Ok(())
}

fn strip_slash(path: &mut PathBuf) {
    while path.len > 1 && path.bytes[path.len - 1] == b'/' {
        path.truncate(path.len - 1);
    }
}

/// A relative path with no `.` or `..` component: it stays inside
/// whatever it is extracted into.
fn safe(path: &[u8]) -> bool {
    !path.is_empty()
        && !path.starts_with(b"/")
        && path
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

fn field(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

fn ustar_name(h: &[u8; BLOCK]) -> core::result::Result<PathBuf, Bad> {
    let prefix = field(&h[345..500]);
    let name = field(&h[..100]);
    let mut p = PathBuf::from(prefix).map_err(|_| Bad::Malformed)?;
    if !prefix.is_empty() {
        p.push_raw(b"/").map_err(|_| Bad::Malformed)?;
    }
    p.push_raw(name).map_err(|_| Bad::Malformed)?;
    Ok(p)
}

fn parse_pax(mut records: &[u8], pax: &mut Pax) -> core::result::Result<(), Bad> {
    let mut codec = None;
    let mut raw = None;
    while !records.is_empty() && records[0] != 0 {
        let space = records
            .iter()
            .position(|&b| b == b' ')
            .ok_or(Bad::Malformed)?;
        let len = decimal::parse(&records[..space]).ok_or(Bad::Malformed)? as usize;
        if len <= space + 1 || len > records.len() || records[len - 1] != b'\n' {
            return Err(Bad::Malformed);
        }
        let body = &records[space + 1..len - 1];
        let eq = body.iter().position(|&b| b == b'=').ok_or(Bad::Malformed)?;
        let (key, value) = (&body[..eq], &body[eq + 1..]);
        let as_path = || PathBuf::from(value).map_err(|_| Bad::Malformed);
        let number = || decimal::parse(value).ok_or(Bad::Malformed);
        match key {
            b"path" => pax.path = Some(as_path()?),
            b"linkpath" => pax.link = Some(as_path()?),
            b"size" => pax.size = Some(number()?),
            CODEC => codec = Some(value),
            RAW_SIZE => raw = Some(number()?),
            _ => {}
        }
        records = &records[len..];
    }
    pax.compressed = match (codec, raw) {
        (None, None) => None,
        (Some(CODEC_ZSTD), Some(raw)) => Some(raw),
        // A codec this ckptrun does not know, or half a description.
        _ => return Err(Bad::Malformed),
    };
    Ok(())
}

/// The path of the member whose data is at `offset` in `archive`,
/// copied into `into`: its length; none if no member's data is there.
pub fn path_at(archive: BorrowedFd, offset: u64, into: &mut [u8]) -> Option<usize> {
    let mut len = None;
    let _ = each_member(archive, |m| {
        let path = m.path.as_bytes();
        if m.offset == offset {
            let n = path.len().min(into.len());
            into[..n].copy_from_slice(&path[..n]);
            len = Some(n);
        }
        Ok(len.is_none())
    });
    len
}

/// Creates `member` as `to` in `dir` (`to` may hold `/`s: its parents
/// must exist). A file's data is copied from `archive` in the kernel, or
/// expanded by a child (see `pack`), and not fsync'd: working copies are
/// rebuilt from the store before every start, so a crash cannot leave one
/// that is used. A directory is made writable by its owner, so that what
/// it holds can be created. For a compressed file, the hash of the bytes
/// it expanded to, as written.
pub fn extract(
    archive: BorrowedFd,
    member: &Member,
    dir: BorrowedFd,
    to: &CStr,
) -> Result<Option<u64>> {
    let mode = Mode::from_raw_mode(member.mode);
    match member.kind {
        Kind::Dir => rustix::fs::mkdirat(dir, to, mode | Mode::RWXU).map(|()| None),
        Kind::Symlink => rustix::fs::symlinkat(member.link.c(), dir, to).map(|()| None),
        Kind::File => {
            let out = rustix::fs::openat(
                dir,
                to,
                // Read too: a member expanded in two halves has the
                // second hashed as written (`pack::expand`).
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                mode,
            )?;
            let hash = match member.compressed {
                None => {
                    copy(archive, Some(member.offset), out.as_fd(), member.size)?;
                    None
                }
                Some(raw) => {
                    let data = (member.offset, member.size, raw);
                    let hash = crate::store::pack::expand(archive, data, Some(out.as_fd()));
                    Some(hash.ok_or(Errno::IO)?)
                }
            };
            let when = rustix::fs::Timespec {
                tv_sec: member.mtime as _,
                tv_nsec: 0,
            };
            let times = Timestamps {
                last_access: when,
                last_modification: when,
            };
            rustix::fs::futimens(&out, &times).map(|()| hash)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_that_stay_inside_are_safe() {
        assert!(!safe(b"../x") && !safe(b"/x") && !safe(b"a/./b") && safe(b"a/b"));
        assert!(!safe(b"") && !safe(b"a//b"));
    }
}
