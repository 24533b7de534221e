//! Writes frames (see the crate's notes): each block parsed greedily
//! (a hash of 6 bytes, one probe, the last offset tried first, and
//! tried again a few bytes on before a far match is taken), its literals
//! Huffman-coded where that pays, each of its sequences' codes with the
//! predefined FSE table, RLE, or a table fitted to the block, whichever
//! is cheapest; a block that does not shrink is stored raw.
//! Blocks may refer back into the earlier blocks of their frame.
//!
//! This file: the encoder, its working memory, the frame and the block
//! (what goes raw); the block's parts are in `encode/` (see the crate's
//! notes).

mod bits;
mod fse;
mod huffman;
mod literals;
mod ncount;
mod parse;
mod sequences;
mod weights;

use crate::{BLOCK, MAGIC};
use literals::literals;
use parse::{HASH_LOG, parse};
use sequences::{Codes, sequences};

const MAX_SEQ: usize = BLOCK / 3 + 1;

/// The working memory `Encoder` needs, in elements: a hash table of
/// TABLE u32s, a block's literals (`crate::BLOCK` bytes), and SEQS u32s
/// for a block's sequences (three each).
pub const TABLE: usize = 1 << HASH_LOG;
pub const SEQS: usize = 3 * MAX_SEQ;

/// What the caller hands `Encoder::new`.
pub struct Work<'a> {
    pub table: &'a mut [u32],
    pub lits: &'a mut [u8],
    pub seqs: &'a mut [u32],
}

/// Writes frames, with the working memory it was given.
pub struct Encoder<'a> {
    table: &'a mut [u32],
    lits: &'a mut [u8],
    seqs: &'a mut [u32],
    codes: Codes,
}

impl<'a> Encoder<'a> {
    /// Panics if `work`'s slices are shorter than TABLE, `crate::BLOCK`
    /// and SEQS.
    pub fn new(work: Work<'a>) -> Self {
        assert!(work.table.len() >= TABLE && work.lits.len() >= BLOCK && work.seqs.len() >= SEQS);
        Self {
            table: work.table,
            lits: work.lits,
            seqs: work.seqs,
            codes: Codes::new(),
        }
    }

    /// `src` as one frame into `dst`: its length; `None` if it does not
    /// fit (`crate::bound(src.len())` bytes always do). `src` is at most
    /// 4 GiB. Never inlined: the one symbol the codec's encoding is
    /// reached by, so that all of it, under this crate's name, goes in
    /// the codec's own load segment (ckptrun's build.rs).
    #[inline(never)]
    pub fn frame(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        frame(self, src, dst)
    }
}

/// compress one block src[b0..b1] (matches may point back to src[0..b0]);
/// returns the compressed block body size or None
fn block(
    st: &mut Encoder,
    src: &[u8],
    b0: usize,
    b1: usize,
    rep: &mut [u32; 3],
    out: &mut [u8],
) -> Option<usize> {
    let (nl, ns, r) = parse(st.table, st.lits, st.seqs, src, b0, b1, *rep)?;
    let p = literals(&st.lits[..nl], out)?;
    let sz = sequences(st.seqs, ns, &mut st.codes, out.get_mut(p..)?)?;
    *rep = r;
    Some(p + sz)
}

/// One frame of `src` into `dst`.
fn frame(st: &mut Encoder, src: &[u8], dst: &mut [u8]) -> Option<usize> {
    let n = src.len();
    st.table.fill(0);
    let h = dst.get_mut(..9)?;
    h[..4].copy_from_slice(&MAGIC.to_le_bytes());
    let (fhd, fcs) = if n < 256 {
        (0x20u8, 1)
    } else if n < 65536 + 256 {
        (0x60, 2)
    } else {
        (0xA0, 4)
    };
    h[4] = fhd;
    match fcs {
        1 => h[5] = n as u8,
        2 => h[5..7].copy_from_slice(&((n - 256) as u16).to_le_bytes()),
        _ => h[5..9].copy_from_slice(&(n as u32).to_le_bytes()),
    }
    let mut p = 5 + fcs;
    let mut rep = [1u32, 4, 8];
    let mut b0 = 0;
    loop {
        let b1 = (b0 + BLOCK).min(n);
        let last = (b1 == n) as u32;
        let body = dst.get_mut(p + 3..)?;
        let saved = rep;
        let r = block(st, src, b0, b1, &mut rep, body);
        let (typ, sz) = match r {
            Some(sz) if sz < b1 - b0 => (2u32, sz),
            _ => {
                rep = saved;
                body.get_mut(..b1 - b0)?.copy_from_slice(&src[b0..b1]);
                (0, b1 - b0)
            }
        };
        let bh = last | (typ << 1) | ((sz as u32) << 3);
        dst[p..p + 3].copy_from_slice(&bh.to_le_bytes()[..3]);
        p += 3 + sz;
        if last == 1 {
            return Some(p);
        }
        b0 = b1;
    }
}
