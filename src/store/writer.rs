//! Writes a generation's archive (see `archive` for the format), front
//! to back, with its manifest (see `manifest`) as the last member: the
//! one room that needs both. Each file's data is compressed where it
//! pays (see `pack`), or else copied in the kernel and checksummed by a
//! child process beside the copy.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{FileType, Mode, SeekFrom};
use rustix::io::{Errno, Result};

use crate::os::beside::Beside;
use crate::os::copy::{STRETCH, copy};
use crate::os::decimal;
use crate::os::tree;
use crate::store::archive::{
    ALIGN, BLOCK, CODEC, CODEC_ZSTD, Kind, PATH_MAX, PAX_MAX, PathBuf, RAW_SIZE,
};
use crate::store::{manifest, pack};

/// Writes an archive, front to back, into a file opened for reading and
/// writing (`pack` moves frames within it), and its manifest (see
/// `manifest`) into `sums`, an empty file opened for reading and writing,
/// which `finish` adds as the last member.
pub struct Writer<'a> {
    out: BorrowedFd<'a>,
    sums: BorrowedFd<'a>,
    /// Bytes written so far: where `out`'s file position is.
    offset: u64,
    packing: pack::Packing,
}

impl<'a> Writer<'a> {
    /// `sums`: an empty file opened for reading and writing.
    pub fn new(out: BorrowedFd<'a>, sums: BorrowedFd<'a>, packing: pack::Packing) -> Self {
        Self {
            out,
            sums,
            offset: 0,
            packing,
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
        let size = data.len() as u64;
        self.header(&Entry {
            size,
            ..Entry::new(path, Kind::File, mode, now)
        })?;
        self.write(data)?;
        let mut hash = crate::store::hash::Hash::new();
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
                self.file(
                    file.as_fd(),
                    &Entry::new(at.as_bytes(), Kind::File, mode, mtime),
                )
            }
            FileType::Symlink => {
                let mut buf = [MaybeUninit::uninit(); PATH_MAX + 1];
                let (target, _) = rustix::fs::readlinkat_raw(dir, name, &mut buf)?;
                self.header(&Entry {
                    link: target,
                    ..Entry::new(at.as_bytes(), Kind::Symlink, mode, mtime)
                })?;
                self.sum(Kind::Symlink, at.as_bytes(), target, 0)
            }
            FileType::Directory => {
                if depth >= tree::MAX_DEPTH {
                    return Err(Errno::LOOP);
                }
                self.header(&Entry::new(at.as_bytes(), Kind::Dir, mode, mtime))?;
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

    /// A regular file `file` as the member `entry` says: compressed where
    /// it pays (see `pack`), else as it is.
    fn file(&mut self, file: BorrowedFd, entry: &Entry) -> Result<()> {
        let len = rustix::fs::fstat(file)?.st_size as u64;
        let (stored, hash) = match self.compressed(file, entry, len)? {
            Some(done) => done,
            None => {
                self.header(&Entry {
                    size: len,
                    ..*entry
                })?;
                (len, store_hashed(file, self.out, self.offset, len)?)
            }
        };
        self.offset += stored;
        self.sum(Kind::File, entry.path, b"", hash)?;
        self.pad(stored)
    }

    /// `file` compressed straight into the archive, behind its header,
    /// where it pays: the compressed size and the raw bytes' hash, the
    /// position at the data's end. None (and the archive as it was) where
    /// it does not. The header is written first with the raw size, then
    /// again with the compressed one: both the same length, since only a
    /// size of 8 GiB or more changes a header's length (a `size` record),
    /// and such a file is stored as it is.
    fn compressed(
        &mut self,
        file: BorrowedFd,
        entry: &Entry,
        len: u64,
    ) -> Result<Option<(u64, u64)>> {
        if !pack::worth_trying(self.packing, len) {
            return Ok(None);
        }
        let start = self.offset;
        let mut entry = Entry {
            size: len,
            compressed: Some(len),
            ..*entry
        };
        self.header(&entry)?;
        let data = self.offset;
        let packed = pack::compress(file, len, self.out, data);
        self.seek(start)?;
        let pack::Packed::Compressed { len: stored, hash } = packed else {
            // What a child wrote there goes.
            rustix::fs::ftruncate(self.out, start)?;
            return Ok(None);
        };
        entry.size = stored;
        self.header(&entry)?;
        if self.offset != data {
            return Err(Errno::IO);
        }
        rustix::fs::seek(self.out, SeekFrom::Start(data + stored))?;
        Ok(Some((stored, hash)))
    }

    /// Moves the archive's end back to `to`, where the next write goes.
    fn seek(&mut self, to: u64) -> Result<()> {
        rustix::fs::seek(self.out, SeekFrom::Start(to))?;
        self.offset = to;
        Ok(())
    }

    /// The manifest, as the last member, then the end-of-archive
    /// marker: two zero blocks.
    pub fn finish(mut self) -> Result<()> {
        let len = rustix::fs::fstat(self.sums)?.st_size as u64;
        let now = crate::os::sys::realtime().0;
        self.header(&Entry {
            size: len,
            ..Entry::new(manifest::NAME, Kind::File, 0o644, now)
        })?;
        copy(self.sums, Some(0), self.out, len)?;
        self.offset += len;
        self.pad(len)?;
        self.write(&[0; 2 * BLOCK])
    }

    fn header(&mut self, entry: &Entry) -> Result<()> {
        let Entry {
            path,
            kind,
            mode,
            mtime,
            size,
            link,
            compressed,
        } = *entry;
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
        let needs_pax = short.is_none() || link.len() > 100 || big || compressed.is_some();
        if needs_pax || align.is_some_and(|n| n != 0) {
            self.pax(
                &Entry {
                    path: name,
                    ..*entry
                },
                align,
            )?;
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

    /// A pax extended header giving the entry's path and, where needed,
    /// the link target, the size and what a compressed file expands to;
    /// with `blocks`, that many blocks long in all (mod 8), padded with a
    /// `comment` record.
    fn pax(&mut self, entry: &Entry, blocks: Option<usize>) -> Result<()> {
        let mut records = [0u8; PAX_MAX];
        let mut len = record(&mut records, 0, b"path", entry.path)?;
        if entry.link.len() > 100 {
            len = record(&mut records, len, b"linkpath", entry.link)?;
        }
        let mut digits = [0u8; 20];
        if entry.size >= 0o777_7777_7777 {
            let size = decimal::write(&mut digits, entry.size);
            len = record(&mut records, len, b"size", size)?;
        }
        if let Some(raw) = entry.compressed {
            len = record(&mut records, len, CODEC, CODEC_ZSTD)?;
            let raw = decimal::write(&mut digits, raw);
            len = record(&mut records, len, RAW_SIZE, raw)?;
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

/// What a member's header says.
#[derive(Clone, Copy)]
struct Entry<'a> {
    path: &'a [u8],
    kind: Kind,
    mode: u32,
    mtime: i64,
    /// Its data's bytes in the archive.
    size: u64,
    link: &'a [u8],
    /// A compressed file's raw size.
    compressed: Option<u64>,
}

impl<'a> Entry<'a> {
    fn new(path: &'a [u8], kind: Kind, mode: u32, mtime: i64) -> Self {
        Self {
            path,
            kind,
            mode,
            mtime,
            size: 0,
            link: b"",
            compressed: None,
        }
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
    let len = decimal::write(&mut n, total as u64);
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
    let len = decimal::write(&mut n, total as u64);
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
        Beside::start(|| crate::store::hash::hash_at(from, 0, len).ok().map(|h| [h]))
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
        Some([hash]) => Ok(hash),
        None => crate::store::hash::hash_at(from, 0, len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp_dir::TempDir;
    use crate::store::archive::{Bad, each_member, extract};
    use rustix::fs::CWD;
    use std::ffi::CString;
    use std::path::Path;

    fn c(p: &Path) -> CString {
        CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
    }

    fn write(archive: &Path, f: impl FnOnce(&mut Writer) -> Result<()>) {
        // Read and write, as a commit opens it (`pack` reads it too).
        let open = |path: &Path| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .unwrap()
        };
        let out = open(archive);
        let sums = open(&archive.with_extension("sums"));
        let mut w = Writer::new(out.as_fd(), sums.as_fd(), pack::Packing::WherePays);
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

    /// Bytes no codec shrinks.
    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn a_tree_round_trips_and_gnu_tar_reads_it() {
        let dir = TempDir::new("archive-tree");
        let src = dir.join("src");
        let long = "d".repeat(120);
        std::fs::create_dir_all(src.join("sub").join(&long)).unwrap();
        let a = noise(200_001);
        std::fs::write(src.join("a"), &a).unwrap();
        let text = "step,alpha,0.125\n".repeat(20_000);
        std::fs::write(src.join("text"), &text).unwrap();
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
            crate::store::manifest::verify(file.as_fd(), None, &mut Default::default()),
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
        let (_, _, stored) = found.iter().find(|m| m.0 == "state/text").unwrap();
        assert!(*stored < text.len() as u64 / 10, "compressed: {stored}");
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
        assert_eq!(std::fs::read(out.join("state/a")).unwrap(), a);
        // A compressed member is a zstd stream, as `zstd -d` reads it.
        let zstd = std::process::Command::new("zstd")
            .arg("-dc")
            .arg(out.join("state/text"))
            .output();
        match zstd {
            Ok(z) => assert!(z.status.success() && z.stdout == text.as_bytes()),
            Err(_) => assert!(std::env::var_os("CI").is_none(), "no zstd, and CI is set"),
        }
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
        assert_eq!(std::fs::read(into.join("state/a")).unwrap(), a);
        assert_eq!(
            std::fs::read(into.join("state/text")).unwrap(),
            text.as_bytes()
        );
        assert_eq!(std::fs::read(into.join(&deep)).unwrap(), b"bee");
    }

    #[test]
    fn a_cut_off_archive_is_torn_and_a_foreign_file_malformed() {
        let dir = TempDir::new("archive-torn");
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
    }
}
