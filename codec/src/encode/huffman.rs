//! The Huffman code of a block's literals: code lengths from the byte
//! counts (at most 11 bits), the tree description that carries them
//! (weights direct or FSE-compressed), and the four streams coded with
//! the canonical codes.

use super::bits::BitW;
use super::weights::fse_weights;

/// Huffman code lengths for counts (max 11 bits); returns max symbol + 1.
/// Counts are halved until the longest code fits: not optimal, but rare
/// (it takes a count 2^11 times another's) and cheap.
#[inline(never)] // once a block: one copy, out of the hot loop (size)
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn huff_lengths(cnt: &[u32; 256], len: &mut [u8; 256]) -> usize {
    let mut c = *cnt;
    while tree_depths(&c, len) > 11 {
        for count in c.iter_mut().filter(|c| **c > 0) {
            *count = (*count >> 1).max(1);
        }
    }
    cnt.iter().rposition(|&c| c > 0).unwrap() + 1
}

/// Huffman code lengths for the counts `c` (two present at least) into
/// `len`: the longest. The two-queue method: the symbols sorted by
/// count, the merged nodes made in order of weight, so each merge takes
/// the two lightest heads, in time linear past the sort.
fn tree_depths(c: &[u32; 256], len: &mut [u8; 256]) -> u8 {
    let mut leaf = [(0u32, 0u8); 256];
    let mut n = 0;
    for (s, &x) in c.iter().enumerate().filter(|&(_, &x)| x > 0) {
        leaf[n] = (x, s as u8);
        n += 1;
    }
    leaf[..n].sort_unstable();
    // nodes 0..n the leaves, n.. the merged ones; parents come later
    let mut w = [0u64; 511];
    let mut parent = [0usize; 511];
    for (w, l) in w.iter_mut().zip(&leaf[..n]) {
        *w = l.0 as u64;
    }
    let (mut li, mut ni) = (0, n);
    for next in n..2 * n - 1 {
        let mut lightest = || {
            let q = if li < n && (ni == next || w[li] <= w[ni]) {
                &mut li
            } else {
                &mut ni
            };
            *q += 1;
            *q - 1
        };
        let (a, b) = (lightest(), lightest());
        w[next] = w[a] + w[b];
        parent[a] = next;
        parent[b] = next;
    }
    let mut depth = [0u8; 511];
    for i in (0..2 * n - 2).rev() {
        depth[i] = depth[parent[i]] + 1;
    }
    len.fill(0);
    for (l, d) in leaf[..n].iter().zip(&depth[..n]) {
        len[l.1 as usize] = *d;
    }
    *depth[..n].iter().max().unwrap()
}

/// The four Huffman streams of `lits` and their jump table, coded with
/// the lengths `len`: their size, or None if they do not fit in `out`.
pub(super) fn huff_streams(lits: &[u8], len: &[u8; 256], out: &mut [u8]) -> Option<usize> {
    let maxb = *len.iter().max().unwrap() as u32;
    // canonical codes: longest first, ascending symbols
    let mut code = [0u16; 256];
    let mut next: u32 = 0;
    for l in (1..=maxb).rev() {
        for s in 0..256 {
            if len[s] as u32 == l {
                code[s] = next as u16;
                next += 1;
            }
        }
        next >>= 1;
    }
    let n = lits.len();
    let seg = n.div_ceil(4);
    let mut p = 6;
    for k in 0..4 {
        let part = &lits[(k * seg).min(n)..((k + 1) * seg).min(n)];
        let mut w = BitW::new(out.get_mut(p..)?);
        let mut i = part.len();
        while i >= 4 {
            for j in 1..=4 {
                let b = part[i - j] as usize;
                w.add(code[b] as u64, len[b] as u32);
            }
            w.flush();
            i -= 4;
        }
        while i > 0 {
            let b = part[i - 1] as usize;
            w.add(code[b] as u64, len[b] as u32);
            i -= 1;
        }
        let sz = w.close()?;
        if k < 3 {
            let sz = u16::try_from(sz).ok()?;
            out[2 * k..2 * k + 2].copy_from_slice(&sz.to_le_bytes());
        }
        p += sz;
    }
    Some(p)
}

/// The Huffman tree description for the code lengths `len` of symbols
/// `..nsym`: the weights of all but the last symbol, in the direct 4-bit
/// form or FSE-compressed, whichever is smaller (the direct form holds
/// 128 weights at most, so it cannot describe a byte >= 129). Its size,
/// or None if neither form fits.
#[inline(never)] // once a block: one copy, out of the hot loop (size)
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn tree_description(len: &[u8; 256], nsym: usize, out: &mut [u8]) -> Option<usize> {
    let maxb = *len.iter().max().unwrap();
    let mut w = [0u8; 255];
    let nw = nsym - 1;
    for (w, &l) in w.iter_mut().zip(&len[..nw]) {
        *w = if l > 0 { maxb + 1 - l } else { 0 };
    }
    let w = &w[..nw];
    let mut fse = [0u8; 160];
    let f = fse_weights(w, &mut fse);
    let direct = 1 + nw.div_ceil(2);
    match f {
        Some(f) if nw > 128 || f < direct => {
            out.get_mut(..f)?.copy_from_slice(&fse[..f]);
            Some(f)
        }
        _ if nw <= 128 => {
            let out = out.get_mut(..direct)?;
            out[0] = (127 + nw) as u8;
            for (o, pair) in out[1..].iter_mut().zip(w.chunks(2)) {
                *o = (pair[0] << 4) | pair.get(1).unwrap_or(&0);
            }
            Some(direct)
        }
        _ => None,
    }
}
