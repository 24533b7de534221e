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
        let number = decimal::write(&mut digits, g);
        for part in [
            &b"ckptrun store 3\ngeneration "[..],
            number,
            b"\nmode ",
            tag.name.as_bytes(),
            b"\n",
        ] {
            d.push(part)?;
        }
        Ok(d)
    }

    /// Lines a mode adds, with nothing before them.
    pub fn extra() -> Self {
        Self(heapless::Vec::new())
    }

    pub fn push(&mut self, part: &[u8]) -> Result<(), Failed> {
        self.0
            .extend_from_slice(part)
            .map_err(|_| at("describe the generation")(Errno::NAMETOOLONG))
    }
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

/// Reads the description of the archive `file`, and checks the archive
/// is whole. `None` for an empty file (a slot holding no generation).
pub fn read_meta(file: BorrowedFd) -> Result<Option<Meta>, Bad> {
    if rustix::fs::fstat(file)?.st_size == 0 {
        return Ok(None);
    }
    let mut meta = Meta {
        buf: [0; META_MAX],
        len: 0,
    };
    let mut first = true;
    archive::each_member(file, |m| {
        if first {
            first = false;
            let fits = m.size as usize <= META_MAX;
            if m.path.as_bytes() != META || m.kind != archive::Kind::File || !fits {
                return Err(Bad::Malformed);
            }
            meta.len = m.size as usize;
            crate::os::copy::read_at(file, &mut meta.buf[..meta.len], m.offset)?;
        }
        Ok(true)
    })?;
    if first || meta.generation().is_none() {
        return Err(Bad::Malformed);
    }
    Ok(Some(meta))
}

/// A committed generation, open for reading.
pub struct Generation {
    pub number: u64,
    pub file: OwnedFd,
    pub meta: Meta,
}

#[cfg(test)]
mod tests {
    use super::*;

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
