//! The literals section of a compressed block (RFC 8878, 3.1.1.3.1):
//! Huffman-coded in four streams where that saves enough, stored raw
//! otherwise.

use super::huffman::{huff_lengths, huff_streams, tree_description};

/// Literals stored as they are: the section's size, or None if `out` is
/// too short.
fn raw_literals(lits: &[u8], out: &mut [u8]) -> Option<usize> {
    let n = lits.len();
    let h = if n < 32 {
        *out.first_mut()? = (n << 3) as u8;
        1
    } else if n < 4096 {
        out.get_mut(..2)?
            .copy_from_slice(&[((n & 15) << 4) as u8 | 0b0100, (n >> 4) as u8]);
        2
    } else {
        out.get_mut(..3)?.copy_from_slice(&[
            ((n & 15) << 4) as u8 | 0b1100,
            (n >> 4) as u8,
            (n >> 12) as u8,
        ]);
        3
    };
    out.get_mut(h..h + n)?.copy_from_slice(lits);
    Some(h + n)
}

/// literals section; returns its size or None (then the caller stores the block raw)
pub(super) fn literals(lits: &[u8], out: &mut [u8]) -> Option<usize> {
    let n = lits.len();
    if n < 1024 {
        return raw_literals(lits, out);
    }
    let mut cnt = [0u32; 256];
    for &b in lits {
        cnt[b as usize] += 1;
    }
    if cnt.iter().filter(|&&c| c > 0).count() < 2 {
        return raw_literals(lits, out);
    }
    let mut len = [0u8; 256];
    let nsym = huff_lengths(&cnt, &mut len);
    // Not worth the time when the codes would not save 1/64th: (nearly)
    // uniform bytes, as in a block of noise.
    let bits: u64 = (0..256).map(|s| cnt[s] as u64 * len[s] as u64).sum();
    if bits / 8 + 64 >= (n - n / 64) as u64 {
        return raw_literals(lits, out);
    }
    let hl = if n < 16384 { 4 } else { 5 };
    // No tree description (weights all alike, too many for the direct
    // form) or streams past 64 KiB: the literals go raw, not the block.
    let Some(p) = huffman(lits, &len, nsym, hl, out) else {
        return raw_literals(lits, out);
    };
    let csize = p - hl;
    if csize + hl >= n + 3 {
        return raw_literals(lits, out);
    }
    if hl == 4 {
        let h: u32 = 2 | (2 << 2) | ((n as u32) << 4) | ((csize as u32) << 18);
        out[..4].copy_from_slice(&h.to_le_bytes());
    } else {
        let h: u64 = 2 | (3 << 2) | ((n as u64) << 4) | ((csize as u64) << 22);
        out[..5].copy_from_slice(&h.to_le_bytes()[..5]);
    }
    Some(p)
}

/// The tree description and the four streams, from `out[hl..]`: where
/// they end.
fn huffman(lits: &[u8], len: &[u8; 256], nsym: usize, hl: usize, out: &mut [u8]) -> Option<usize> {
    let p = hl + tree_description(len, nsym, out.get_mut(hl..)?)?;
    Some(p + huff_streams(lits, len, out.get_mut(p..)?)?)
}
