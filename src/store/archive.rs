//! One committed generation as one file: a POSIX tar archive (ustar
//! headers, pax records for long paths and large sizes), so that
//! HTCondor, which moves only top-level files on eviction, carries the
//! whole generation, and so that `tar tvf` shows what it holds.
//!
//! ckptrun writes and reads only what it needs: regular files,
//! directories and symlinks, depth first, each directory before what it
//! holds. Each regular file's data starts on a 4 KiB boundary of the
//! archive (a pax header padded with a `comment` record where needed):
//! the kernel copies page-aligned data faster, and filesystems that share
//! blocks (XFS, btrfs) can share them instead of copying. Reading checks every header and the end-of-archive marker, so
//! a cut-off file is told from a whole one. Nothing here allocates:
//! headers and paths live in fixed buffers, data moves in the kernel
//! (copy_file_range) where it can.

use core::fmt;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{FileType, Mode, OFlags, Timestamps};
use rustix::io::{Errno, Result};

use crate::os::beside::Beside;
use crate::store::manifest;
use crate::store::tree;

const BLOCK: usize = 512;
/// The longest path a member may have (Linux's PATH_MAX, less its NUL).
pub const PATH_MAX: usize = 4095;
/// Where file data starts: a multiple of this in the archive.
const ALIGN: u64 = 4096;
/// The largest pax record block ckptrun reads: a path, a link target, a
/// size and padding to ALIGN.
const PAX_MAX: usize = 2 * (PATH_MAX + 32) + 64 + ALIGN as usize;

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

    fn push_raw(&mut self, bytes: &[u8]) -> Result<()> {
        if self.len + bytes.len() > PATH_MAX || bytes.contains(&0) {
            return Err(Errno::NAMETOOLONG);
        }
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        self.bytes[self.len] = 0;
        Ok(())
    }

    /// Appends `/name`; returns the length to `truncate` back to.
    fn join(&mut self, name: &[u8]) -> Result<usize> {
        let before = self.len;
        self.push_raw(b"/")?;
        self.push_raw(name).inspect_err(|_| self.truncate(before))?;
        Ok(before)
    }

    fn truncate(&mut self, len: usize) {
        self.len = len;
        self.bytes[len] = 0;
    }

    /// `self/rest`.
    pub fn joined(&self, rest: &[u8]) -> Result<Self> {
        let mut p = self.clone();
        p.join(rest)?;
        Ok(p)
    }

    /// What follows `prefix/`, if this path is below `prefix`.
    pub fn below(&self, prefix: &[u8]) -> Option<&[u8]> {
        self.as_bytes()
            .strip_prefix(prefix)?
            .strip_prefix(b"/")
            .filter(|rest| !rest.is_empty())
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
    pub size: u64,
    /// Where its data starts in the archive.
    pub offset: u64,
    pub link: PathBuf,
}

/// Writes an archive, front to back, into a file opened for writing,
/// and its manifest (see `manifest`) into `sums`, an empty file opened
/// for reading and writing, which `finish` adds as the last member.
pub struct Writer<'a> {
    out: BorrowedFd<'a>,
    sums: BorrowedFd<'a>,
    /// Bytes written so far.
    offset: u64,
}

impl<'a> Writer<'a> {
    pub fn new(out: BorrowedFd<'a>, sums: BorrowedFd<'a>) -> Self {
        Self {
            out,
            sums,
            offset: 0,
        }
    }

    /// The member's line in the manifest.
    fn sum(&self, kind: Kind, path: &[u8], link: &[u8], hash: u64) -> Result<()> {
        let line = manifest::Line::new(kind, path, link, hash)?;
        crate::os::sys::write_all(self.sums, line.bytes())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        crate::os::sys::write_all(self.out, bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// A regular file holding `data`, dated now.
    pub fn bytes(&mut self, path: &[u8], mode: u32, data: &[u8]) -> Result<()> {
        let now = crate::os::sys::realtime().0;
        self.header(path, Kind::File, mode, now, data.len() as u64, b"")?;
        self.write(data)?;
        let mut hash = manifest::Hash::new();
        hash.update(data);
        self.sum(Kind::File, path, b"", hash.digest())?;
        self.pad(data.len() as u64)
    }

    /// `name` in `dir` (a file, a symlink or a whole tree) as the member
    /// `path` and, for a tree, the members below it.
    pub fn tree(&mut self, dir: BorrowedFd, name: &CStr, path: &[u8]) -> Result<()> {
        let mut at = PathBuf::from(path)?;
        self.tree_at(dir, name, &mut at, 0)
    }

    fn tree_at(
        &mut self,
        dir: BorrowedFd,
        name: &CStr,
        at: &mut PathBuf,
        depth: u32,
    ) -> Result<()> {
        let st = tree::stat(dir, name)?;
        let mode = st.st_mode & 0o7777;
        let mtime = st.st_mtime as i64;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {
                let file = rustix::fs::openat(dir, name, tree::read_flags(), Mode::empty())?;
                let len = rustix::fs::fstat(&file)?.st_size as u64;
                self.header(at.as_bytes(), Kind::File, mode, mtime, len, b"")?;
                let hash = store_hashed(file.as_fd(), self.out, self.offset, len)?;
                self.offset += len;
                self.sum(Kind::File, at.as_bytes(), b"", hash)?;
                self.pad(len)
            }
            FileType::Symlink => {
                let mut buf = [MaybeUninit::uninit(); PATH_MAX + 1];
                let (target, _) = rustix::fs::readlinkat_raw(dir, name, &mut buf)?;
                self.header(at.as_bytes(), Kind::Symlink, mode, mtime, 0, target)?;
                self.sum(Kind::Symlink, at.as_bytes(), target, 0)
            }
            FileType::Directory => {
                if depth >= tree::MAX_DEPTH {
                    return Err(Errno::LOOP);
                }
                self.header(at.as_bytes(), Kind::Dir, mode, mtime, 0, b"")?;
                self.sum(Kind::Dir, at.as_bytes(), b"", 0)?;
                tree::each_entry(dir, name, depth, |d, child| {
                    let back = at.join(child.to_bytes())?;
                    let done = self.tree_at(d, child, at, depth + 1);
                    at.truncate(back);
                    done
                })?;
                Ok(())
            }
            // FIFOs, sockets, devices: not checkpoint data.
            _ => Err(Errno::OPNOTSUPP),
        }
    }

    /// The manifest, as the last member, then the end-of-archive
    /// marker: two zero blocks.
    pub fn finish(mut self) -> Result<()> {
        let len = rustix::fs::fstat(self.sums)?.st_size as u64;
        let now = crate::os::sys::realtime().0;
        self.header(manifest::NAME, Kind::File, 0o644, now, len, b"")?;
        copy(self.sums, Some(0), self.out, len)?;
        self.offset += len;
        self.pad(len)?;
        self.write(&[0; 2 * BLOCK])
    }

    fn header(
        &mut self,
        path: &[u8],
        kind: Kind,
        mode: u32,
        mtime: i64,
        size: u64,
        link: &[u8],
    ) -> Result<()> {
        // A directory's name ends in `/`, as tar writes it.
        let mut name = PathBuf::from(path)?;
        if kind == Kind::Dir {
            name.push_raw(b"/")?;
        }
        let name = name.as_bytes();
        let (prefix, short) = split_name(name);
        let big = size >= 0o777_7777_7777;
        // For file data: how many blocks (mod 8) to put before this
        // header so that the data after it starts on an ALIGN boundary.
        let align = (kind == Kind::File && size > 0).then(|| {
            let misaligned = (self.offset + BLOCK as u64) % ALIGN;
            (((ALIGN - misaligned) % ALIGN) / BLOCK as u64) as usize
        });
        if short.is_none() || link.len() > 100 || big || align.is_some_and(|n| n != 0) {
            self.pax(name, link, size, align)?;
        }
        let (prefix, short) = match short {
            Some(short) => (prefix, short),
            // The pax record holds the path; the header a stand-in.
            None => (&b""[..], &name[name.len().saturating_sub(99)..]),
        };
        let flag = match kind {
            Kind::File => b'0',
            Kind::Symlink => b'2',
            Kind::Dir => b'5',
        };
        let h = Ustar {
            name: short,
            prefix,
            mode: mode & 0o7777,
            size: if big { 0 } else { size },
            mtime: mtime.max(0) as u64,
            flag,
            link: &link[..link.len().min(100)],
        };
        self.write(&h.block())
    }

    /// A pax extended header giving `path` and, where needed, the link
    /// target and the size; with `blocks`, that many blocks long in all
    /// (mod 8), padded with a `comment` record.
    fn pax(&mut self, path: &[u8], link: &[u8], size: u64, blocks: Option<usize>) -> Result<()> {
        let mut records = [0u8; PAX_MAX];
        let mut len = record(&mut records, 0, b"path", path)?;
        if link.len() > 100 {
            len = record(&mut records, len, b"linkpath", link)?;
        }
        if size >= 0o777_7777_7777 {
            let mut digits = [0u8; 20];
            len = record(&mut records, len, b"size", decimal(&mut digits, size))?;
        }
        if let Some(blocks) = blocks {
            // The records must take blocks - 1 blocks, modulo 8: fill
            // them up with a comment (at least 16 bytes long).
            let want = (blocks + 7) % 8;
            let mut target = len.div_ceil(BLOCK).max(1);
            while target % 8 != want || target * BLOCK - len < 16 {
                target += 1;
            }
            len = padding(&mut records, len, target * BLOCK - len)?;
        }
        let h = Ustar {
            name: b"././@PaxHeader",
            prefix: b"",
            mode: 0o644,
            size: len as u64,
            mtime: 0,
            flag: b'x',
            link: b"",
        };
        self.write(&h.block())?;
        self.write(&records[..len])?;
        self.pad(len as u64)
    }

    fn pad(&mut self, len: u64) -> Result<()> {
        let rest = (BLOCK - (len % BLOCK as u64) as usize) % BLOCK;
        self.write(&[0; BLOCK][..rest])
    }
}

/// A ustar header's fields (owner 0:0), each short enough for its place.
struct Ustar<'a> {
    name: &'a [u8],
    prefix: &'a [u8],
    mode: u32,
    size: u64,
    mtime: u64,
    flag: u8,
    link: &'a [u8],
}

impl Ustar<'_> {
    fn block(&self) -> [u8; BLOCK] {
        let mut h = [0u8; BLOCK];
        h[..self.name.len()].copy_from_slice(self.name);
        octal(&mut h[100..108], u64::from(self.mode));
        octal(&mut h[108..116], 0);
        octal(&mut h[116..124], 0);
        octal(&mut h[124..136], self.size);
        octal(&mut h[136..148], self.mtime);
        h[156] = self.flag;
        h[157..157 + self.link.len()].copy_from_slice(self.link);
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[345..345 + self.prefix.len()].copy_from_slice(self.prefix);
        seal(&mut h);
        h
    }
}

/// Splits a name into ustar's prefix (at most 155 bytes) and name (at
/// most 100), at a `/`; `None` when it cannot be split so.
fn split_name(name: &[u8]) -> (&[u8], Option<&[u8]>) {
    if name.len() <= 100 {
        return (b"", Some(name));
    }
    // The last `/` (not the final one of a directory) that leaves a short
    // enough name after it.
    let body = name.strip_suffix(b"/").unwrap_or(name);
    for (i, _) in body.iter().enumerate().rev().filter(|&(_, &b)| b == b'/') {
        let (prefix, rest) = (&name[..i], &name[i + 1..]);
        if rest.len() > 100 {
            break;
        }
        if prefix.len() <= 155 && !rest.is_empty() {
            return (prefix, Some(rest));
        }
    }
    (b"", None)
}

/// Appends the pax record `LEN key=value\n` to `buf` at `at`.
fn record(buf: &mut [u8], at: usize, key: &[u8], value: &[u8]) -> Result<usize> {
    let body = key.len() + value.len() + 3; // ' ', '=', '\n'
    // The length counts its own digits.
    let mut total = body + 1;
    while total != body + digits(total) {
        total = body + digits(total);
    }
    let out = buf.get_mut(at..at + total).ok_or(Errno::NAMETOOLONG)?;
    let mut n = [0u8; 20];
    let len = decimal(&mut n, total as u64);
    let parts: [&[u8]; 6] = [len, b" ", key, b"=", value, b"\n"];
    let mut i = 0;
    for part in parts {
        out[i..i + part.len()].copy_from_slice(part);
        i += part.len();
    }
    Ok(at + total)
}

/// Appends a pax `comment` record exactly `total` bytes long (at least
/// 16), which readers ignore.
fn padding(buf: &mut [u8], at: usize, total: usize) -> Result<usize> {
    let mut n = [0u8; 20];
    let len = decimal(&mut n, total as u64);
    let head = len.len() + b" comment=".len();
    let out = buf.get_mut(at..at + total).ok_or(Errno::NAMETOOLONG)?;
    out[..len.len()].copy_from_slice(len);
    out[len.len()..head].copy_from_slice(b" comment=");
    out[head..total - 1].fill(b'.');
    out[total - 1] = b'\n';
    Ok(at + total)
}

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// `n` in decimal, in `buf`, without allocating.
pub fn decimal(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// `n` in octal, zero-padded, NUL-terminated, filling `field`.
fn octal(field: &mut [u8], mut n: u64) {
    let last = field.len() - 1;
    field[last] = 0;
    for b in field[..last].iter_mut().rev() {
        *b = b'0' + (n & 7) as u8;
        n >>= 3;
    }
}

/// Fills in the checksum: the sum of the header's bytes, its own field
/// counted as spaces.
fn seal(h: &mut [u8; BLOCK]) {
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    octal(&mut h[148..155], sum);
    h[155] = b' ';
}

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

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
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
            Bad::Io(e) => f.write_str(crate::os::sys::strerror(e.raw_os_error())),
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
    };
    let mut pax = Pax {
        path: None,
        link: None,
        size: None,
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
        parse_pax(records, &mut self.path, &mut self.link, &mut self.size)
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

fn parse_pax(
    mut records: &[u8],
    path: &mut Option<PathBuf>,
    link: &mut Option<PathBuf>,
    size: &mut Option<u64>,
) -> core::result::Result<(), Bad> {
    while !records.is_empty() && records[0] != 0 {
        let space = records
            .iter()
            .position(|&b| b == b' ')
            .ok_or(Bad::Malformed)?;
        let len = parse_decimal(&records[..space]).ok_or(Bad::Malformed)? as usize;
        if len <= space + 1 || len > records.len() || records[len - 1] != b'\n' {
            return Err(Bad::Malformed);
        }
        let body = &records[space + 1..len - 1];
        let eq = body.iter().position(|&b| b == b'=').ok_or(Bad::Malformed)?;
        let (key, value) = (&body[..eq], &body[eq + 1..]);
        let as_path = || PathBuf::from(value).map_err(|_| Bad::Malformed);
        match key {
            b"path" => *path = Some(as_path()?),
            b"linkpath" => *link = Some(as_path()?),
            b"size" => *size = Some(parse_decimal(value).ok_or(Bad::Malformed)?),
            _ => {}
        }
        records = &records[len..];
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset`.
pub fn read_at(fd: BorrowedFd, buf: &mut [u8], offset: u64) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Creates `member` as `to` in `dir` (`to` may hold `/`s: its parents
/// must exist). A file's data is copied from `archive` in the kernel and
/// not fsync'd: working copies are rebuilt from the store before every
/// start, so a crash cannot leave one that is used. A directory is made
/// writable by its owner, so that what it holds can be created.
pub fn extract(archive: BorrowedFd, member: &Member, dir: BorrowedFd, to: &CStr) -> Result<()> {
    let mode = Mode::from_raw_mode(member.mode);
    match member.kind {
        Kind::Dir => rustix::fs::mkdirat(dir, to, mode | Mode::RWXU),
        Kind::Symlink => rustix::fs::symlinkat(member.link.c(), dir, to),
        Kind::File => {
            let out = rustix::fs::openat(
                dir,
                to,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                mode,
            )?;
            copy(archive, Some(member.offset), out.as_fd(), member.size)?;
            let when = rustix::fs::Timespec {
                tv_sec: member.mtime as _,
                tv_nsec: 0,
            };
            let times = Timestamps {
                last_access: when,
                last_modification: when,
            };
            rustix::fs::futimens(&out, &times)
        }
    }
}

/// How much of a file is copied before its writeback starts.
const STRETCH: u64 = 8 << 20;

/// Below this, a file is hashed here rather than beside the copy.
const BESIDE_MIN: u64 = 1 << 20;

/// Copies the first `len` bytes of `from` to `into` (at its position,
/// `at`) in the kernel, so that filesystems that can share blocks (XFS,
/// btrfs) share them instead; returns the XXH3 of `from`'s bytes, read
/// by a child process beside the copy (see `Beside`) from the page cache
/// the copy uses too (a shared block is not in `into`'s). A file that
/// changes while it is copied gives a generation that does not match its
/// manifest: found damaged, never restored. Each stretch's writeback
/// starts once it is copied, so the commit's fsync overlaps the copying.
fn store_hashed(from: BorrowedFd, into: BorrowedFd, at: u64, len: u64) -> Result<u64> {
    let beside = if len >= BESIDE_MIN {
        Beside::start(|| manifest::hash_at(from, 0, len).ok())
    } else {
        None
    };
    let mut done = 0u64;
    while done < len {
        let stretch = (len - done).min(STRETCH);
        copy(from, Some(done), into, stretch)?;
        crate::os::sys::start_writeback(into, at + done, stretch);
        done += stretch;
    }
    match beside.and_then(Beside::result) {
        Some(hash) => Ok(hash),
        None => manifest::hash_at(from, 0, len),
    }
}

/// Copies `len` bytes from `from` (at `offset`, else at its position) to
/// `into` (at its position), in the kernel where it can.
fn copy(from: BorrowedFd, mut offset: Option<u64>, into: BorrowedFd, len: u64) -> Result<()> {
    let mut done = 0u64;
    while done < len {
        // In stretches: one call for a whole large file is many times
        // slower (2.2 s against 0.26 s for 1 GiB on ext4, kernel 6.18).
        let chunk = (len - done).min(STRETCH) as usize;
        match rustix::fs::copy_file_range(from, offset.as_mut(), into, None, chunk) {
            // It shrank while copied: the archive would be wrong.
            Ok(0) => return Err(Errno::IO),
            Ok(n) => done += n as u64,
            Err(Errno::INTR) => {}
            Err(Errno::XDEV | Errno::NOSYS | Errno::INVAL | Errno::OPNOTSUPP) => {
                return copy_by_reading(from, offset, into, len - done);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The fallback where copy_file_range cannot (some FUSE and network
/// filesystems): `len` bytes read from `from` (at `offset`, else at its
/// position) and written to `into`.
// Out of line: its large buffers stay off the stack of every caller
// (a frame is touched whole at entry), so supervising costs no memory.
#[inline(never)]
fn copy_by_reading(
    from: BorrowedFd,
    offset: Option<u64>,
    into: BorrowedFd,
    len: u64,
) -> Result<()> {
    let mut buf = [0u8; 64 * 1024];
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(buf.len() as u64) as usize;
        let n = match offset {
            Some(at) => rustix::io::pread(from, &mut buf[..want], at + done),
            None => rustix::io::read(from, &mut buf[..want]),
        };
        match n {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => {
                crate::os::sys::write_all(into, &buf[..n])?;
                done += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::CWD;
    use std::ffi::CString;
    use std::path::Path;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ckptrun-archive-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
    }

    fn write(archive: &Path, f: impl FnOnce(&mut Writer) -> Result<()>) {
        let out = std::fs::File::create(archive).unwrap();
        let sums = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(archive.with_extension("sums"))
            .unwrap();
        let mut w = Writer::new(out.as_fd(), sums.as_fd());
        f(&mut w).unwrap();
        w.finish().unwrap();
    }

    fn members(archive: &Path) -> Vec<(String, Kind, u64)> {
        let file = std::fs::File::open(archive).unwrap();
        let mut found = Vec::new();
        each_member(file.as_fd(), |m| {
            found.push((m.path.to_string(), m.kind, m.size));
            Ok(true)
        })
        .unwrap();
        found
    }

    #[test]
    fn a_tree_round_trips_and_gnu_tar_reads_it() {
        let dir = scratch("tree");
        let src = dir.join("src");
        let long = "d".repeat(120);
        std::fs::create_dir_all(src.join("sub").join(&long)).unwrap();
        std::fs::write(src.join("a"), vec![7u8; 200_001]).unwrap();
        std::fs::write(src.join("sub").join(&long).join("b".repeat(150)), b"bee").unwrap();
        std::os::unix::fs::symlink("../a", src.join("sub/link")).unwrap();
        let archive = dir.join("gen.tar");
        write(&archive, |w| {
            w.bytes(b".ckptrun", 0o644, b"generation 1\n")?;
            w.tree(CWD, &c(&src), b"state")
        });
        let found = members(&archive);
        assert_eq!(found[0], (".ckptrun".into(), Kind::File, 13));
        let file = std::fs::File::open(&archive).unwrap();
        assert!(matches!(
            crate::store::manifest::verify(file.as_fd()),
            Ok(crate::store::manifest::Verdict::Intact)
        ));
        let file = std::fs::File::open(&archive).unwrap();
        each_member(file.as_fd(), |m| {
            assert!(
                m.kind != Kind::File || m.offset % ALIGN == 0,
                "{} at {}",
                m.path,
                m.offset
            );
            Ok(true)
        })
        .unwrap();
        assert_eq!(found[1], ("state".into(), Kind::Dir, 0));
        assert!(found.contains(&("state/a".into(), Kind::File, 200_001)));
        let deep = format!("state/sub/{long}/{}", "b".repeat(150));
        assert!(found.contains(&(deep.clone(), Kind::File, 3)), "{found:?}");

        // GNU tar agrees, and extracts the same bytes.
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let tar = std::process::Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&out)
            .status()
            .unwrap();
        assert!(tar.success());
        assert_eq!(
            std::fs::read(out.join("state/a")).unwrap(),
            vec![7u8; 200_001]
        );
        assert_eq!(std::fs::read(out.join(&deep)).unwrap(), b"bee");
        assert_eq!(
            std::fs::read_link(out.join("state/sub/link")).unwrap(),
            Path::new("../a")
        );

        // And ckptrun's own extraction.
        let file = std::fs::File::open(&archive).unwrap();
        let into = dir.join("mine");
        std::fs::create_dir_all(&into).unwrap();
        let into_fd = std::fs::File::open(&into).unwrap();
        each_member(file.as_fd(), |m| {
            extract(file.as_fd(), m, into_fd.as_fd(), m.path.c()).map_err(Bad::Io)?;
            Ok(true)
        })
        .unwrap();
        assert_eq!(
            std::fs::read(into.join("state/a")).unwrap(),
            vec![7u8; 200_001]
        );
        assert_eq!(std::fs::read(into.join(&deep)).unwrap(), b"bee");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cut_off_archive_is_torn_and_a_foreign_file_malformed() {
        let dir = scratch("torn");
        let archive = dir.join("gen.tar");
        write(&archive, |w| w.bytes(b"x", 0o644, &[1u8; 3000]));
        let whole = std::fs::read(&archive).unwrap();
        for cut in [whole.len() - 1, whole.len() - 512, 1000, 600, 511] {
            std::fs::write(&archive, &whole[..cut]).unwrap();
            let file = std::fs::File::open(&archive).unwrap();
            let got = each_member(file.as_fd(), |_| Ok(true));
            assert_eq!(got, Err(Bad::Torn), "cut at {cut}");
        }
        std::fs::write(&archive, vec![b'x'; 4096]).unwrap();
        let file = std::fs::File::open(&archive).unwrap();
        assert_eq!(each_member(file.as_fd(), |_| Ok(true)), Err(Bad::Malformed));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_split_or_go_to_pax() {
        assert_eq!(split_name(b"short"), (&b""[..], Some(&b"short"[..])));
        let long = [b'a'; 130];
        let mut with_dir = b"dir/".to_vec();
        with_dir.extend_from_slice(&[b'b'; 99]);
        assert_eq!(split_name(&with_dir), (&b"dir"[..], Some(&[b'b'; 99][..])));
        assert_eq!(split_name(&long).1, None);
        let mut buf = [0u8; 64];
        let end = record(&mut buf, 0, b"path", b"x").unwrap();
        assert_eq!(&buf[..end], b"9 path=x\n");
        let mut big = [0u8; 200];
        let end = record(&mut big, 0, b"path", &[b'y'; 92]).unwrap();
        assert_eq!(end, 102, "the length counts its own three digits");
        assert_eq!(&big[..4], b"102 ");
        assert!(!safe(b"../x") && !safe(b"/x") && !safe(b"a/./b") && safe(b"a/b"));
    }
}
