//! The LZ77 parse of a block: greedy, a hash of 6 bytes with one probe,
//! the last offset tried first; each match extended backward over the
//! literals before it. It fills the block's literals and its sequences
//! (literal length, match length, offset code), which the literals and
//! sequences sections then code. The encoder's hot loop.

use crate::copy::wild;

/// The hash table's size, as a power of two.
pub(super) const HASH_LOG: u32 = 14;

#[inline(always)]
fn rd64(s: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(s[i..i + 8].try_into().unwrap())
}
#[inline(always)]
fn hash6(v: u64) -> usize {
    ((v << 16).wrapping_mul(0xCF1BBCDCB7A56463) >> (64 - HASH_LOG)) as usize
}

/// The sequences of the block src[b0..b1] (matches may point back to
/// src[..b0]) into `seqs`, three u32 each (literal length, match length,
/// offset code), and its literals into `lits`, with the repeat offsets
/// `r` at its start: the literals' count, the sequences' count and the
/// repeat offsets at its end; None if the literals do not fit. Inlined
/// into its one caller: it was that caller's body (encode.rs, `block`).
#[inline(always)]
pub(super) fn parse(
    table: &mut [u32],
    lits: &mut [u8],
    seqs: &mut [u32],
    src: &[u8],
    b0: usize,
    b1: usize,
    mut r: [u32; 3],
) -> Option<(usize, usize, [u32; 3])> {
    let mut nl = 0;
    let mut ns = 0;
    let mut ip = b0;
    let mut anchor = b0;
    if b1 - b0 > 16 {
        let limit = b1 - 16;
        let mut step = 1usize << 6;
        while ip < limit {
            let v = rd64(src, ip);
            let h = hash6(v);
            let cand = table[h] as usize;
            table[h] = ip as u32;
            let Some((m, is_rep)) = candidate(src, ip, v, anchor, r[0], cand) else {
                ip += step >> 6;
                step += 1;
                continue;
            };
            step = 1 << 6;
            let (s, m, len) = match is_rep {
                true => (ip, m, match_len(src, ip, m, b1)),
                false => {
                    let (s, m) = extend_back(src, ip, m, anchor);
                    rather_repeat(src, (s, m, match_len(src, s, m, b1)), ip, r[0], b1)
                }
            };
            let off = (s - m) as u32;
            let ll = s - anchor;
            wild(lits, nl, src, anchor, ll)?;
            nl += ll;
            let ofb = if ll > 0 && off == r[0] {
                1
            } else {
                r = [off, r[0], r[1]];
                off + 3
            };
            seqs[3 * ns..3 * ns + 3].copy_from_slice(&[ll as u32, len as u32, ofb]);
            ns += 1;
            ip = s + len;
            anchor = ip;
            if ip < limit {
                table[hash6(rd64(src, ip - 2))] = (ip - 2) as u32;
            }
        }
    }
    lits[nl..nl + (b1 - anchor)].copy_from_slice(&src[anchor..b1]);
    nl += b1 - anchor;
    Some((nl, ns, r))
}

/// Where an earlier copy of the bytes at `ip` (the 8 from there, `v`)
/// starts, and whether it is at the last offset `r0`: there if their 4
/// first bytes match (not right after a match: no literals, the offset
/// code would mean another), else at the hash table's candidate `cand`
/// if their 6 first bytes match; None if neither.
#[inline(always)]
fn candidate(
    src: &[u8],
    ip: usize,
    v: u64,
    anchor: usize,
    r0: u32,
    cand: usize,
) -> Option<(usize, bool)> {
    if ip > anchor && ip >= r0 as usize && (v as u32) == (rd64(src, ip - r0 as usize) as u32) {
        Some((ip - r0 as usize, true))
    } else if cand < ip && (rd64(src, cand) ^ v) << 16 == 0 {
        Some((cand, false))
    } else {
        None
    }
}

/// The match (s, m, len) found at `ip` by the hash, or one at the last
/// offset `r0` a few bytes on, whichever looks cheaper: in a log, the
/// hash often finds the same digits far back where the line before
/// matches right after them, and a far offset costs more bits than a
/// few literals and a repeat (estimates in bits: a sequence 6 plus its
/// offset's, a literal or a byte left uncovered 4).
#[inline(always)]
fn rather_repeat(
    src: &[u8],
    (s, m, len): (usize, usize, usize),
    ip: usize,
    r0: u32,
    b1: usize,
) -> (usize, usize, usize) {
    let r0 = r0 as usize;
    if s - m == r0 {
        return (s, m, len);
    }
    let end = s + len;
    for p in ip + 1..(ip + 4).min(b1 - 16) {
        if p < r0 || rd64(src, p) as u32 != rd64(src, p - r0) as u32 {
            continue;
        }
        let rl = match_len(src, p, p - r0, b1);
        let far =
            6 + crate::highbit((s - m) as u32 + 3) as usize + 4 * (p + rl).saturating_sub(end);
        let near = 6 + 4 * (p - s) + 4 * end.saturating_sub(p + rl);
        if near < far {
            return (p, p - r0, rl);
        }
    }
    (s, m, len)
}

/// A match at `s` of the bytes at `m`, extended backward over the
/// literals since `anchor` while they match: where it now starts, (s, m).
#[inline(always)]
fn extend_back(src: &[u8], mut s: usize, mut m: usize, anchor: usize) -> (usize, usize) {
    while s > anchor && m > 0 && src[s - 1] == src[m - 1] {
        s -= 1;
        m -= 1;
    }
    (s, m)
}

/// How far src[s..] matches src[m..] (m < s), not past b1: 8 bytes at a
/// time, then byte by byte near b1.
#[inline(always)]
fn match_len(src: &[u8], s: usize, m: usize, b1: usize) -> usize {
    let mut len = 0;
    loop {
        if s + len + 8 > b1 {
            while s + len < b1 && src[s + len] == src[m + len] {
                len += 1;
            }
            return len;
        }
        let x = rd64(src, s + len) ^ rd64(src, m + len);
        if x != 0 {
            return len + (x.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
}
