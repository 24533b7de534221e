//! Reads the frames `encode` writes (see the crate's notes): single
//! segment, no dictionary, no checksum; raw, RLE and compressed blocks;
//! raw, RLE and Huffman literals (the tree's weights direct or
//! FSE-compressed, 1 or 4 streams); sequences with the predefined FSE
//! tables, RLE, or tables of their own (not the repeat mode). Anything
//! else, or anything inconsistent, is `None`.
//!
//! This file: the decoder, its working memory, the frame's header and
//! blocks; a compressed block's sections are read in `decode/` (see the
//! crate's notes).

mod bits;
mod fse;
mod huffman;
mod literals;
mod sequences;

use crate::{BLOCK, MAGIC};
use literals::{Literals, literals};
use sequences::{Codes, sequences};

/// The working memory `Decoder::new` needs: a block's literals,
/// `crate::BLOCK` bytes.
pub struct Work<'a> {
    pub lits: &'a mut [u8],
}

/// Reads frames, with the working memory it was given.
pub struct Decoder<'a> {
    lits: Literals<'a>,
    codes: Codes,
}

impl<'a> Decoder<'a> {
    /// Panics if `work.lits` is shorter than `crate::BLOCK`.
    pub fn new(work: Work<'a>) -> Self {
        assert!(work.lits.len() >= BLOCK);
        Self {
            lits: Literals::new(work.lits),
            codes: Codes::new(),
        }
    }

    /// Decodes the frame at the start of `src` into `dst`, whose length
    /// must be the frame's content size (see `content_size`): the bytes
    /// of `src` the frame took; `None` if it is not a frame this crate
    /// writes, or is damaged in a way the format shows. Never inlined:
    /// the one symbol the codec's decoding is reached by, so that all of
    /// it, under this crate's name, goes in the codec's own load segment
    /// (ckptrun's build.rs).
    #[inline(never)]
    pub fn frame(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        frame(self, src, dst)
    }
}

/// The content size a frame's header gives.
pub fn content_size(src: &[u8]) -> Option<usize> {
    header(src).map(|(_, n)| n)
}

/// The frame at the start of what `read` gives (`read(at, buf)` fills
/// `buf` from `at`; `None` past the end): (the bytes it takes, its
/// content size), from its header and its blocks' headers alone, not
/// decoded; `None` if they are not those of a frame this crate writes
/// (which has one block for each BLOCK bytes of content, or one if
/// none: damaged bytes, zeros say, are refused after that many). For
/// sharing a stream of frames between decoders.
pub fn frame_extent(
    mut read: impl FnMut(usize, &mut [u8]) -> Option<()>,
) -> Option<(usize, usize)> {
    let mut head = [0u8; 13];
    read(0, &mut head[..5])?;
    let len = header_len(head[4]);
    read(0, &mut head[..len])?;
    let (mut at, size) = header(&head[..len])?;
    for _ in 0..size.div_ceil(BLOCK).max(1) {
        let mut h = [0u8; 3];
        read(at, &mut h)?;
        let bh = h[0] as u32 | (h[1] as u32) << 8 | (h[2] as u32) << 16;
        let (last, typ, sz) = (bh & 1, (bh >> 1) & 3, (bh >> 3) as usize);
        at += 3 + match typ {
            1 => 1,
            3 => return None,
            _ => sz,
        };
        if last == 1 {
            // Its last byte is there too.
            read(at - 1, &mut [0u8])?;
            return Some((at, size));
        }
    }
    None
}

/// A frame header this crate reads: its length and the content size.
fn header(src: &[u8]) -> Option<(usize, usize)> {
    if src.get(..4)? != MAGIC.to_le_bytes() {
        return None;
    }
    let fhd = *src.get(4)?;
    if fhd & 0x20 == 0 || fhd & 0x1f != 0 {
        return None; // single segment, no checksum, no dictionary
    }
    let len = header_len(fhd);
    let n = match len {
        6 => *src.get(5)? as usize,
        7 => u16::from_le_bytes(src.get(5..7)?.try_into().ok()?) as usize + 256,
        9 => u32::from_le_bytes(src.get(5..9)?.try_into().ok()?) as usize,
        _ => usize::try_from(u64::from_le_bytes(src.get(5..13)?.try_into().ok()?)).ok()?,
    };
    Some((len, n))
}

/// A frame header's length, from its descriptor (the fifth byte).
fn header_len(fhd: u8) -> usize {
    [6, 7, 9, 13][(fhd >> 6) as usize]
}

/// One compressed block, `src`, into `dst` from `p`: where its output
/// ends. `rep`, the repeat offsets, carries over from block to block.
fn block(
    st: &mut Decoder,
    src: &[u8],
    dst: &mut [u8],
    p: usize,
    rep: &mut [u32; 3],
) -> Option<usize> {
    let (nl, used) = literals(&mut st.lits, src)?;
    let s = src.get(used..)?;
    sequences(&mut st.codes, (st.lits.buf, nl), s, dst, p, rep)
}

/// One frame of `src` into `dst`.
fn frame(st: &mut Decoder, src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let (head, n) = header(src)?;
    if n != dst.len() {
        return None;
    }
    let mut i = head;
    let mut p = 0;
    let mut rep = [1u32, 4, 8];
    loop {
        let h = src.get(i..i + 3)?;
        let bh = h[0] as u32 | (h[1] as u32) << 8 | (h[2] as u32) << 16;
        let (last, typ, sz) = (bh & 1, (bh >> 1) & 3, (bh >> 3) as usize);
        i += 3;
        match typ {
            0 => {
                dst.get_mut(p..p + sz)?.copy_from_slice(src.get(i..i + sz)?);
                p += sz;
                i += sz;
            }
            1 => {
                let b = *src.get(i)?;
                dst.get_mut(p..p + sz)?.fill(b);
                p += sz;
                i += 1;
            }
            2 => {
                let q = block(st, src.get(i..i + sz)?, dst, p, &mut rep)?;
                if q - p > BLOCK {
                    return None;
                }
                p = q;
                i += sz;
            }
            _ => return None,
        }
        if last == 1 {
            break;
        }
    }
    if p != n {
        return None;
    }
    Some(i)
}
