//! A generation's description: the `.ckptrun` member that opens every
//! archive, `key value` lines saying what it is:
//!
//! ```text
//! ckptrun store 3
//! generation 7
//! mode self
//! ```
//!
//! then whatever the mode adds (dmtcp mode: where its images were, its
//! working directory, the sizes of its outputs). `store 1` (an older
//! ckptrun's) has no `mode` line and no manifest. The mode that wrote a
//! generation is its `Tag`: a store holds one mode's generations.

use core::fmt;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::io::Errno;

use crate::os::beside::Beside;
use crate::os::decimal;
use crate::store::archive::{self, Bad};

/// The first member of every generation: what it is.
pub const META: &[u8] = b".ckptrun";
/// The most a generation's description may hold.
pub const META_MAX: usize = 8192;

/// A failed step of a commit or restore, for one line in the log.
#[derive(Clone, Copy, Debug)]
pub struct Failed {
    pub step: &'static str,
    pub errno: Errno,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = crate::os::sys::strerror(self.errno);
        write!(f, "{}: {why}", self.step)
    }
}

impl Failed {
    /// A step's outcome as two numbers, for a child beside ckptrun to
    /// send (`Failed::received` reads them back): `[0, 0]` for success,
    /// else the failed step's place in `steps`, from 1 (the last step if
    /// it is not there), and its errno.
    pub fn sent(done: &Result<(), Failed>, steps: &[&'static str]) -> [u64; 2] {
        match done {
            Ok(()) => [0, 0],
            Err(f) => {
                let place = steps.iter().position(|&s| s == f.step);
                let place = place.unwrap_or(steps.len() - 1);
                [place as u64 + 1, f.errno.raw_os_error() as u64]
            }
        }
    }

    /// What `sent` sent.
    pub fn received([place, errno]: [u64; 2], steps: &[&'static str]) -> Result<(), Failed> {
        if place == 0 {
            return Ok(());
        }
        let step = steps.get(place as usize - 1).or(steps.last());
        Err(Failed {
            step: step.copied().unwrap_or("restore"),
            errno: Errno::from_raw_os_error(errno as i32),
        })
    }
}

/// `step` failed with the errno given: for `map_err`.
pub fn at(step: &'static str) -> impl Fn(Errno) -> Failed {
    move |errno| Failed { step, errno }
}

/// The mode whose generations a store holds, as the mode hands it: the
/// name each description gives (`mode NAME`), and how to tell which mode
/// wrote any generation (store 1 names none: the mode layer knows their
/// signs).
#[derive(Clone, Copy)]
pub struct Tag {
    pub name: &'static str,
    pub owner: fn(&Meta) -> Option<&'static str>,
}

/// A generation's description being written, at most META_MAX bytes, on
/// the stack.
pub struct Description(heapless::Vec<u8, META_MAX>);

impl Description {
    /// The lines every generation opens with: the store's version, the
    /// generation's number and the mode that wrote it.
    pub fn new(g: u64, tag: &Tag) -> Result<Self, Failed> {
        let mut d = Self(heapless::Vec::new());
        let mut digits = [0u8; 20];
        for part in head(g, tag, &mut digits) {
            d.push(part)?;
        }
        Ok(d)
    }

    /// Whether generation `g`'s description fits, with `extra` after its
    /// head (else the error `push` would give): checked before a commit
    /// removes anything, without the description's 8 KiB on the stack.
    pub fn fits(g: u64, tag: &Tag, extra: &[&[u8]]) -> Result<(), Failed> {
        let mut digits = [0u8; 20];
        let head = head(g, tag, &mut digits);
        let len: usize = head.iter().chain(extra).map(|part| part.len()).sum();
        match len <= META_MAX {
            true => Ok(()),
            false => Err(too_long()),
        }
    }

    pub fn push(&mut self, part: &[u8]) -> Result<(), Failed> {
        self.0.extend_from_slice(part).map_err(|_| too_long())
    }
}

/// The lines every description opens with, as parts (`digits` holds the
/// number's).
fn head<'a>(g: u64, tag: &'a Tag, digits: &'a mut [u8; 20]) -> [&'a [u8]; 5] {
    [
        b"ckptrun store 3\ngeneration ",
        decimal::write(digits, g),
        b"\nmode ",
        tag.name.as_bytes(),
        b"\n",
    ]
}

fn too_long() -> Failed {
    at("describe the generation")(Errno::NAMETOOLONG)
}

impl std::ops::Deref for Description {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A generation's description as read, into a fixed buffer.
pub struct Meta {
    buf: [u8; META_MAX],
    len: usize,
}

impl Meta {
    /// An empty one, for `read_meta` to fill.
    pub fn new() -> Self {
        Self {
            buf: [0; META_MAX],
            len: 0,
        }
    }

    /// An empty one on the heap (before the job starts), made there, not
    /// on the stack and moved: its pages are fresh zeroes, and only the
    /// one or two a description fills are ever touched.
    pub fn boxed() -> Box<Self> {
        let layout = std::alloc::Layout::new::<Self>();
        // SAFETY: `layout` is Meta's, not zero-sized; a failed allocation
        // goes to handle_alloc_error, as Box::new's does. Every field of
        // a Meta is an integer (bytes and a length), for which all-zero
        // bytes are a valid value: the empty description `new` makes.
        // The box owns memory from the global allocator, with the layout
        // it frees it with.
        unsafe {
            let meta = std::alloc::alloc_zeroed(layout).cast::<Self>();
            if meta.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(meta)
        }
    }

    /// The value of `key`, if the description has it.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.buf[..self.len]
            .split(|&b| b == b'\n')
            .find_map(|line| {
                let rest = line.strip_prefix(key)?;
                rest.strip_prefix(b" ")
            })
    }

    /// Its number.
    pub fn generation(&self) -> Option<u64> {
        decimal::parse(self.get(b"generation")?)
    }

    /// Written by an older ckptrun (store 1), without checksums.
    pub fn is_store_1(&self) -> bool {
        self.get(b"ckptrun store") == Some(b"1")
    }
}

/// Reads the description of the archive `file` into `meta`, and checks
/// the archive is whole; false for an empty file (a slot holding no
/// generation). Into the caller's `meta`, not returned: moved by value
/// through a `Result`, its 8 KiB would be copied into frame after frame.
pub fn read_meta(file: BorrowedFd, meta: &mut Meta) -> Result<bool, Bad> {
    read_meta_by(file, meta, described_beside)
}

/// `read_meta`, with the description found by `find`.
fn read_meta_by(
    file: BorrowedFd,
    meta: &mut Meta,
    find: fn(BorrowedFd) -> Result<(u64, usize), Bad>,
) -> Result<bool, Bad> {
    meta.len = 0;
    if rustix::fs::fstat(file)?.st_size == 0 {
        return Ok(false);
    }
    let (offset, len) = find(file)?;
    crate::os::copy::read_at(file, &mut meta.buf[..len], offset)?;
    meta.len = len;
    if meta.generation().is_none() {
        return Err(Bad::Malformed);
    }
    Ok(true)
}

/// The number of the generation in the archive `file` (0 if its
/// description has none; none for an empty file), as `read_meta` reads
/// it; in a child beside ckptrun (`Beside`), so that neither the walk
/// nor the description touch the supervisor's pages (how-it-works.md,
/// "Memory"). Here, as before, when no child gives an answer (none can
/// be made, or it dies).
pub fn read_number(file: BorrowedFd) -> Result<Option<u64>, Bad> {
    // As numbers here too (`as_sent`).
    let sent = Beside::or_here(
        || match number_here(file) {
            Ok(None) => [0, 0],
            Ok(Some(g)) => [1, g],
            Err(bad) => [2, encode(bad)],
        },
        as_sent,
        as_sent,
    );
    match sent {
        [0, _] => Ok(None),
        [1, g] => Ok(Some(g)),
        [_, bad] => Err(decode(bad)),
    }
}

/// What a child sends, as it is. For `read_number` and
/// `described_beside`, whose work gives the numbers a child sends, in
/// the supervisor too: `Beside::or_here`'s copies are then not named by
/// the archive's types, which would put them in the segment only
/// children run (build.rs), where 200 bytes of room are left on i686.
fn as_sent<const N: usize>(sent: [u64; N]) -> [u64; N] {
    sent
}

/// `read_number`'s work.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn number_here(file: BorrowedFd) -> Result<Option<u64>, Bad> {
    let mut meta = Meta::new();
    let found = read_meta_by(file, &mut meta, described)?;
    Ok(found.then(|| meta.generation().unwrap_or(0)))
}

/// A `Bad` as one number, for a child to send (`decode` reads it).
pub fn encode(bad: Bad) -> u64 {
    match bad {
        Bad::Torn => 1 << 32,
        Bad::Malformed => 2 << 32,
        Bad::Io(e) => e.raw_os_error() as u32 as u64,
    }
}

/// What `encode` made; 0 (no errno: a verdict sent without its detail,
/// as `verify::check_preparing` sends it) reads as an I/O error.
pub fn decode(n: u64) -> Bad {
    match (n >> 32, n as u32 as i32) {
        (1, _) => Bad::Torn,
        (2, _) => Bad::Malformed,
        (_, 0) => Bad::Io(Errno::IO),
        (_, e) => Bad::Io(Errno::from_raw_os_error(e)),
    }
}

/// `described`, in a child beside ckptrun (`Beside`): the walk over every
/// header (some 60 KiB of stack) then touches the child's pages, never
/// the supervisor's (how-it-works.md, "Memory"). Here, as before, when
/// no child gives an answer (none can be made, or it dies).
fn described_beside(file: BorrowedFd) -> Result<(u64, usize), Bad> {
    // As numbers here too (`as_sent`).
    let sent = Beside::or_here(
        || match described(file) {
            Ok((offset, len)) => [0, offset, len as u64],
            Err(bad) => [1, encode(bad), 0],
        },
        as_sent,
        as_sent,
    );
    match sent {
        [0, offset, len] if len as usize <= META_MAX => Ok((offset, len as usize)),
        [1, bad, _] => Err(decode(bad)),
        _ => Err(Bad::Malformed),
    }
}

/// Where the description of the archive `file` is (its offset and
/// length), once the walk over its headers found it whole.
fn described(file: BorrowedFd) -> Result<(u64, usize), Bad> {
    let mut found = None;
    archive::each_member(file, |m| {
        if found.is_none() {
            let fits = m.size as usize <= META_MAX;
            if m.path.as_bytes() != META || m.kind != archive::Kind::File || !fits {
                return Err(Bad::Malformed);
            }
            found = Some((m.offset, m.size as usize));
        }
        Ok(true)
    })?;
    found.ok_or(Bad::Malformed)
}

/// A committed generation, open for reading.
pub struct Generation {
    pub number: u64,
    pub file: OwnedFd,
    pub meta: Box<Meta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_fits_exactly_when_it_can_be_written() {
        let tag = Tag {
            name: "dmtcp",
            owner: |_| None,
        };
        let head = Description::new(1234, &tag).unwrap().len();
        let room = META_MAX - head;
        for extra in [room - 1, room, room + 1] {
            let (a, b) = (vec![b'a'; extra / 2], vec![b'b'; extra - extra / 2]);
            let parts: [&[u8]; 2] = [&a, &b];
            let mut d = Description::new(1234, &tag).unwrap();
            let written = parts.iter().try_for_each(|p| d.push(p));
            let fits = Description::fits(1234, &tag, &parts);
            assert_eq!(fits.is_ok(), written.is_ok(), "{extra} bytes more");
            assert_eq!(fits.is_ok(), extra <= room);
        }
    }

    #[test]
    fn a_description_gives_its_values() {
        let mut meta = Meta {
            buf: [0; META_MAX],
            len: 0,
        };
        let text = b"ckptrun store 1\ngeneration 42\ncwd /a b\n";
        meta.buf[..text.len()].copy_from_slice(text);
        meta.len = text.len();
        assert_eq!(meta.generation(), Some(42));
        assert!(meta.is_store_1());
        assert_eq!(meta.get(b"cwd"), Some(&b"/a b"[..]));
        assert_eq!(meta.get(b"images-dir"), None);
    }

    #[test]
    fn a_new_description_names_its_store_generation_and_mode() {
        let tag = Tag {
            name: "self",
            owner: |_| None,
        };
        let d = Description::new(12, &tag).unwrap();
        assert_eq!(&*d, b"ckptrun store 3\ngeneration 12\nmode self\n");
    }
}
