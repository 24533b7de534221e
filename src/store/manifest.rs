//! A generation's manifest: the last member of every archive ckptrun
//! writes, `.ckptrun.xxh3`, one line for each member before it, in order:
//!
//! ```text
//! XXH3 (.ckptrun) = 5e2c11b3a1f0d7c4
//! # dir state
//! XXH3 (state/a) = 0d9b2a6e57c1f3a8
//! # symlink state/link -> ../a
//! ```
//!
//! A regular file's line is `xxhsum -H3`'s (xxHash's XXH3, 64 bits), so
//! that a user can check a generation by hand: `tar -xf NAME.1 -C DIR`,
//! then `xxhsum -c .ckptrun.xxh3` in DIR (it calls the `#` lines, which
//! record the directories and symlinks, improperly formatted, and checks
//! every file). XXH3 because every commit and every restore hashes every
//! byte: it runs at memory speed, in a child process beside the copy
//! (BENCHMARKS.md); and it is the checksum of a standard tool (`xxhsum`,
//! Debian's xxhash).
//!
//! Verifying rebuilds each line from the member read and compares it with
//! the manifest's, byte for byte: a changed byte in a file, a member
//! missing, added, renamed or of another kind, or a cut-off manifest all
//! differ. A restore, which expands the compressed files it copies,
//! checks their hashes from that expansion (`verify`'s `elsewhere`). Nothing here
//! allocates: lines are built in a fixed buffer, and data is hashed
//! through one on the stack.

use std::os::fd::BorrowedFd;

use rustix::io::{Errno, Result};

use crate::store::archive::{Bad, Kind, Member, PATH_MAX, each_member};
use crate::store::hash::hash_at;

/// The manifest's member name.
pub const NAME: &[u8] = b".ckptrun.xxh3";

/// One manifest line, on the stack.
pub struct Line(heapless::Vec<u8, { 2 * PATH_MAX + 64 }>);

impl Line {
    /// The line for a member: `hash` is its data's, for a regular file.
    pub fn new(kind: Kind, path: &[u8], link: &[u8], hash: u64) -> Result<Self> {
        let mut line = Self(heapless::Vec::new());
        match kind {
            Kind::File => {
                let mut hex = [0u8; 16];
                for (i, byte) in hash.to_be_bytes().iter().enumerate() {
                    hex[2 * i] = b"0123456789abcdef"[usize::from(byte >> 4)];
                    hex[2 * i + 1] = b"0123456789abcdef"[usize::from(byte & 15)];
                }
                line.push(&[b"XXH3 (", path, b") = ", &hex])?;
            }
            Kind::Dir => line.push(&[b"# dir ", path])?,
            Kind::Symlink => line.push(&[b"# symlink ", path, b" -> ", link])?,
        }
        line.push(&[b"\n"])?;
        Ok(line)
    }

    fn push(&mut self, parts: &[&[u8]]) -> Result<()> {
        for part in parts {
            self.0
                .extend_from_slice(part)
                .map_err(|_| Errno::NAMETOOLONG)?;
        }
        Ok(())
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The line `member` of `archive` should have in the manifest (a
/// compressed file's hash is its raw bytes', expanded by a child: see
/// `pack`); none when a compressed file does not expand.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
pub fn line_of(archive: BorrowedFd, member: &Member) -> Result<Option<Line>> {
    let hash = match (member.kind, member.compressed) {
        (Kind::File, None) => hash_at(archive, member.offset, member.size)?,
        (Kind::File, Some(raw)) => {
            match crate::store::pack::expand(archive, (member.offset, member.size, raw), None) {
                Some(hash) => hash,
                None => return Ok(None),
            }
        }
        _ => 0,
    };
    Line::new(
        member.kind,
        member.path.as_bytes(),
        member.link.as_bytes(),
        hash,
    )
    .map(Some)
}

/// What checking an archive against its manifest found.
pub enum Verdict {
    Intact,
    /// It has no manifest: an older ckptrun's (store 1), or damaged.
    NoManifest,
    /// The first member whose line differs, by the offset of its data
    /// (its path is 4 KiB wide: see `member_path`), or `None` when every
    /// member matched but the manifest lists more (members are missing).
    Damaged(Option<u64>),
}

/// The hashes of compressed members, each with its member's offset in
/// the archive, summed: one number for a set of (member, hash) pairs,
/// whatever order they were taken in, that two processes can compare.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fold(pub u64);

impl Fold {
    pub fn add(&mut self, offset: u64, hash: u64) {
        // splitmix64's finalizer: each pair to a number of its own.
        let mut z = hash ^ offset.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.0 = self.0.wrapping_add(z ^ (z >> 31));
    }

    /// Adds what `other` summed (the sum is the same in any order).
    pub fn join(&mut self, other: Fold) {
        self.0 = self.0.wrapping_add(other.0);
    }
}

/// Which compressed members a caller expands itself, by path.
pub trait Elsewhere {
    fn takes(&self, path: &[u8]) -> bool;
}

/// Checks every member of `archive`, and every byte of their data,
/// against its manifest; but the compressed members whose paths
/// `elsewhere` takes are not expanded here: their lines are checked but
/// for the hash, and the hash each lists goes into `listed`, for the
/// caller to match with what expanding them gave (a restore: see
/// `store::verify`).
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
pub fn verify(
    archive: BorrowedFd,
    elsewhere: Option<&dyn Elsewhere>,
    listed: &mut Fold,
) -> core::result::Result<Verdict, Bad> {
    let mut last = None;
    each_member(archive, |m| {
        last = Some((m.offset, m.size, m.path.as_bytes() == NAME));
        Ok(true)
    })?;
    let Some((sums, sums_len, true)) = last else {
        return Ok(Verdict::NoManifest);
    };
    let mut at = 0u64;
    let mut bad = None;
    let mut text = [0u8; 2 * PATH_MAX + 64];
    each_member(archive, |m| {
        if m.offset == sums && m.path.as_bytes() == NAME {
            return Ok(false);
        }
        let here = m.compressed.is_none() || !elsewhere.is_some_and(|e| e.takes(m.path.as_bytes()));
        let line = match here {
            true => line_of(archive, m)?,
            // Its hash is read from the manifest below.
            false => Line::new(m.kind, m.path.as_bytes(), m.link.as_bytes(), 0).map(Some)?,
        };
        let Some(line) = line else {
            bad = Some(m.offset);
            return Ok(false);
        };
        let line = line.bytes();
        let len = line.len() as u64;
        let fits = at + len <= sums_len;
        if fits {
            crate::os::copy::read_at(archive, &mut text[..line.len()], sums + at)?;
        }
        let text = &text[..line.len()];
        let same = fits
            && match here {
                true => text == line,
                false => listed_hash(text, line)
                    .map(|hash| listed.add(m.offset, hash))
                    .is_some(),
            };
        if !same {
            bad = Some(m.offset);
            return Ok(false);
        }
        at += len;
        Ok(true)
    })?;
    Ok(match bad {
        Some(offset) => Verdict::Damaged(Some(offset)),
        None if at != sums_len => Verdict::Damaged(None),
        None => Verdict::Intact,
    })
}

/// The hash a file's manifest line `listed` gives, if it is `line` but
/// for the hash (16 lowercase hex digits before the newline, as
/// `Line::new` writes them).
fn listed_hash(listed: &[u8], line: &[u8]) -> Option<u64> {
    let digits = line.len().checked_sub(17)?;
    if listed.len() != line.len()
        || listed[..digits] != line[..digits]
        || listed.last() != Some(&b'\n')
    {
        return None;
    }
    let mut hash = 0u64;
    for &d in &listed[digits..line.len() - 1] {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        hash = hash << 4 | u64::from(v);
    }
    Some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::hash::Hash;

    #[test]
    fn a_file_line_is_xxhsums() {
        // `printf hello | xxhsum -H3` says 9555e8555c62dcfd.
        let mut h = Hash::new();
        h.update(b"hel");
        h.update(b"lo");
        let line = Line::new(Kind::File, b"h.txt", b"", h.digest()).unwrap();
        assert_eq!(line.bytes(), b"XXH3 (h.txt) = 9555e8555c62dcfd\n");
        let line = Line::new(Kind::Symlink, b"d/l", b"../a", 0).unwrap();
        assert_eq!(line.bytes(), b"# symlink d/l -> ../a\n");
    }

    #[test]
    fn a_listed_hash_is_read_only_from_the_same_line() {
        let want = Line::new(Kind::File, b"h.txt", b"", 0).unwrap();
        let want = want.bytes();
        let hash = |listed: &[u8]| listed_hash(listed, want);
        assert_eq!(
            hash(b"XXH3 (h.txt) = 9555e8555c62dcfd\n"),
            Some(0x9555_e855_5c62_dcfd)
        );
        // Another path, a digit not as written, no newline: not its line.
        assert_eq!(hash(b"XXH3 (h.txy) = 9555e8555c62dcfd\n"), None);
        assert_eq!(hash(b"XXH3 (h.txt) = 9555E8555c62dcfd\n"), None);
        assert_eq!(hash(b"XXH3 (h.txt) = 9555e8555c62dcfdd"), None);
        assert_eq!(hash(b"# dir h.txt\n"), None);
    }

    #[test]
    fn a_fold_is_the_same_set_in_any_order_and_no_other() {
        let fold = |pairs: &[(u64, u64)]| {
            let mut f = Fold::default();
            pairs.iter().for_each(|&(o, h)| f.add(o, h));
            f
        };
        let (a, b) = ((4096, 7), (8192, 9));
        assert_eq!(fold(&[a, b]), fold(&[b, a]));
        assert_ne!(fold(&[a, b]), fold(&[a]));
        // The hashes swapped between the members.
        assert_ne!(fold(&[a, b]), fold(&[(4096, 9), (8192, 7)]));
        assert_ne!(fold(&[a, b]), fold(&[a, (8192, 8)]));
    }
}
