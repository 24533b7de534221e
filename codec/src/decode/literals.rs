//! The literals section of a compressed block (RFC 8878, 3.1.1.3.1):
//! raw, one repeated byte, or Huffman-coded in one or four streams with
//! a tree description of their own (a treeless section, reusing the
//! previous block's tree, is refused: the encoder never writes one).

use super::huffman::{HufTable, huf_four, huf_one, tree};
use crate::BLOCK;

/// Where a block's literals are read to: `buf` (`crate::BLOCK` bytes),
/// and the Huffman decoding table. One struct, passed by one reference
/// (not its fields one by one, with which the compiler makes the
/// decoder 1.5 KB larger).
pub(super) struct Literals<'a> {
    pub(super) buf: &'a mut [u8],
    huf: HufTable,
}

impl<'a> Literals<'a> {
    pub(super) fn new(buf: &'a mut [u8]) -> Self {
        Literals {
            buf,
            huf: [(0, 0); 1 << 11],
        }
    }
}

/// The literals section at the start of `src` into `st.buf`: (literal
/// count, section size).
pub(super) fn literals(st: &mut Literals, src: &[u8]) -> Option<(usize, usize)> {
    let b0 = *src.first()? as usize;
    let (typ, sf) = (b0 & 3, (b0 >> 2) & 3);
    if typ < 2 {
        let (hl, n) = match sf {
            0 | 2 => (1, b0 >> 3),
            1 => (2, (b0 >> 4) + ((*src.get(1)? as usize) << 4)),
            _ => (
                3,
                (b0 >> 4) + ((*src.get(1)? as usize) << 4) + ((*src.get(2)? as usize) << 12),
            ),
        };
        if n > BLOCK {
            return None;
        }
        if typ == 0 {
            st.buf[..n].copy_from_slice(src.get(hl..hl + n)?);
            return Some((n, hl + n));
        }
        let b = *src.get(hl)?;
        st.buf[..n].fill(b);
        return Some((n, hl + 1));
    }
    if typ == 3 {
        return None; // treeless: zenc never writes it
    }
    let h = u64::from_le_bytes({
        let mut b = [0u8; 8];
        let k = src.len().min(5);
        b[..k].copy_from_slice(&src[..k]);
        b
    });
    let (hl, n, cs, streams) = match sf {
        0 => (3, (h >> 4) & 0x3ff, (h >> 14) & 0x3ff, 1),
        1 => (3, (h >> 4) & 0x3ff, (h >> 14) & 0x3ff, 4),
        2 => (4, (h >> 4) & 0x3fff, (h >> 18) & 0x3fff, 4),
        _ => (5, (h >> 4) & 0x3ffff, (h >> 22) & 0x3ffff, 4),
    };
    let (n, cs) = (n as usize, cs as usize);
    if n > BLOCK {
        return None;
    }
    let body = src.get(hl..hl + cs)?;
    let (maxb, used) = tree(body, &mut st.huf)?;
    let data = &body[used..];
    let lits = &mut st.buf[..n];
    if streams == 1 {
        huf_one(data, &st.huf, maxb, lits)?;
    } else {
        huf_four(data, &st.huf, maxb, lits)?;
    }
    Some((n, hl + cs))
}
