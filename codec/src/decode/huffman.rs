//! The Huffman-coded literals: the tree description (weights direct or
//! FSE-compressed) into a decoding table, and the one or four streams
//! decoded with it, four in lockstep for speed.

use super::bits::BitR;
use super::fse::{FseD, STATES, fse_table, read_ncount};
use crate::highbit;

/// The decoding table: (symbol, bits) for each value of the next 11 bits
/// (the longest code), of which a code of length l fills 2^(11 - l).
pub(super) type HufTable = [(u8, u8); 1 << 11];

/// One Huffman stream, `data`, into `lits`.
pub(super) fn huf_one(data: &[u8], huf: &HufTable, maxb: u32, lits: &mut [u8]) -> Option<()> {
    let mut r = BitR::new(data)?;
    for o in lits.iter_mut() {
        r.refill();
        *o = huf_sym(&mut r, huf, maxb)?;
    }
    r.done().then_some(())
}

/// The jump table and four Huffman streams, `data`, into `lits`.
#[inline(always)]
pub(super) fn huf_four(data: &[u8], huf: &HufTable, maxb: u32, lits: &mut [u8]) -> Option<()> {
    let n = lits.len();
    let jt = data.get(..6)?;
    let s1 = u16::from_le_bytes([jt[0], jt[1]]) as usize;
    let s2 = u16::from_le_bytes([jt[2], jt[3]]) as usize;
    let s3 = u16::from_le_bytes([jt[4], jt[5]]) as usize;
    let d = &data[6..];
    let seg = n.div_ceil(4);
    if 3 * seg > n {
        return None;
    }
    let (a, b, c) = (s1, s1 + s2, s1 + s2 + s3);
    let mut r0 = BitR::new(d.get(..a)?)?;
    let mut r1 = BitR::new(d.get(a..b)?)?;
    let mut r2 = BitR::new(d.get(b..c)?)?;
    let mut r3 = BitR::new(d.get(c..)?)?;
    let (o0, rest) = lits.split_at_mut(seg);
    let (o1, rest) = rest.split_at_mut(seg);
    let (o2, o3) = rest.split_at_mut(seg);
    // the 4 streams in lockstep: 4 independent dependency chains
    let n3 = o3.len();
    let mut j = 0;
    while j + 4 <= n3 {
        r0.refill();
        r1.refill();
        r2.refill();
        r3.refill();
        for k in 0..4 {
            o0[j + k] = huf_sym(&mut r0, huf, maxb)?;
            o1[j + k] = huf_sym(&mut r1, huf, maxb)?;
            o2[j + k] = huf_sym(&mut r2, huf, maxb)?;
            o3[j + k] = huf_sym(&mut r3, huf, maxb)?;
        }
        j += 4;
    }
    let r = [&mut r0, &mut r1, &mut r2, &mut r3];
    let mut ok = true;
    for (x, o) in r.into_iter().zip([o0, o1, o2, o3]) {
        let from = j.min(o.len());
        for y in o[from..].iter_mut() {
            x.refill();
            *y = huf_sym(x, huf, maxb)?;
        }
        ok &= x.done();
    }
    ok.then_some(())
}

/// The Huffman tree description at the start of `body`, direct or
/// FSE-compressed, into the decoding table `huf`: (the longest code's
/// length, the description's size).
#[inline(never)] // once a block: one copy, out of the hot loop (size)
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn tree(body: &[u8], huf: &mut HufTable) -> Option<(u32, usize)> {
    let hb = *body.first()? as usize;
    let mut w = [0u8; 256];
    let (nw, used) = if hb < 128 {
        (fse_weights(body.get(1..1 + hb)?, &mut w)?, 1 + hb)
    } else {
        let nw = hb - 127;
        let wbytes = body.get(1..1 + nw.div_ceil(2))?;
        for i in 0..nw {
            w[i] = (wbytes[i / 2] >> if i % 2 == 0 { 4 } else { 0 }) & 15;
        }
        (nw, 1 + nw.div_ceil(2))
    };
    Some((huf_table(&mut w, nw, huf)?, used))
}

/// The decoding table for the weights `w[..nw]` (the last symbol's
/// weight, `w[nw]`, is the one that completes the sum to a power of two):
/// the longest code's length.
fn huf_table(w: &mut [u8; 256], nw: usize, huf: &mut HufTable) -> Option<u32> {
    let mut total: u32 = 0;
    for &x in &w[..nw] {
        if x > 11 {
            return None;
        }
        if x > 0 {
            total += 1 << (x - 1);
        }
    }
    if total == 0 {
        return None;
    }
    let maxb = highbit(total) + 1;
    if maxb > 11 {
        return None;
    }
    let rest = (1u32 << maxb) - total;
    if !rest.is_power_of_two() {
        return None;
    }
    *w.get_mut(nw)? = (highbit(rest) + 1) as u8;
    // table: weights ascending, then symbols ascending
    let mut pos = 0usize;
    for wt in 1..=maxb as u8 {
        for (s, _) in w[..=nw].iter().enumerate().filter(|&(_, &x)| x == wt) {
            let len = 1usize << (wt - 1);
            let bits = (maxb + 1 - wt as u32) as u8;
            huf.get_mut(pos..pos + len)?.fill((s as u8, bits));
            pos += len;
        }
    }
    if pos != 1 << maxb {
        return None;
    }
    Some(maxb)
}

/// The FSE-compressed Huffman weights in `src` (RFC 8878, 4.2.1.2) into
/// `w`: how many. Two states share one table and take turns, state 1
/// first; the stream ends when a state's update needs more bits than are
/// left, and the other state then gives the last weight. Every update of
/// a table of two symbols or more reads at least a bit, so this ends;
/// with one symbol, 255 weights are the limit.
fn fse_weights(src: &[u8], w: &mut [u8; 256]) -> Option<usize> {
    let mut norm = [0i16; 13];
    let (log, nsym, used) = read_ncount(src, 6, &mut norm)?;
    let mut t = [FseD::default(); STATES];
    fse_table(&norm[..nsym], log, &mut t);
    let mut r = BitR::new(src.get(used..)?)?;
    let mut st = [r.read(log)? as usize, r.read(log)? as usize];
    let mut n = 0;
    loop {
        for k in 0..2 {
            let e = *t.get(st[k])?;
            *w.get_mut(n)? = e.sym;
            n += 1;
            r.refill();
            if e.nb as u32 > r.left() {
                *w.get_mut(n)? = t.get(st[1 - k])?.sym;
                return if n < 255 { Some(n + 1) } else { None };
            }
            st[k] = e.base as usize + r.read(e.nb as u32)? as usize;
        }
    }
}

#[inline(always)]
fn huf_sym(r: &mut BitR, huf: &HufTable, maxb: u32) -> Option<u8> {
    let v = if maxb <= r.cb {
        r.cont >> (r.cb - maxb)
    } else {
        r.cont << (maxb - r.cb)
    };
    let (sym, nb) = huf[(v as usize) & ((1 << maxb) - 1) & 2047];
    if nb as u32 > r.cb {
        return None;
    }
    r.cb -= nb as u32;
    Some(sym)
}

#[cfg(test)]
mod tests {
    /// Tree descriptions of random bytes, FSE-compressed weights (header
    /// byte < 128) and direct ones: read or refused, never a panic, and
    /// never more than 255 weights.
    #[test]
    fn random_tree_descriptions_end() {
        let mut huf = [(0u8, 0u8); 1 << 11];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut body = [0u8; 160];
        let mut read = 0;
        for i in 0..200_000 {
            for b in body.iter_mut() {
                crate::tests::xorshift(&mut x);
                *b = x as u8;
            }
            // mostly small accuracy logs (5, 6), as the format allows
            body[0] = if i % 4 == 0 { body[0] } else { body[0] % 128 };
            body[1] &= if i % 2 == 0 { 0xf1 } else { 0xff };
            if let Some((maxb, used)) = super::tree(&body, &mut huf) {
                assert!(maxb <= 11 && used <= body.len());
                read += 1;
            }
            let mut w = [0u8; 256];
            let n = (body[0] % 128) as usize;
            if let Some(k) = super::fse_weights(&body[1..1 + n], &mut w) {
                assert!(k <= 255);
            }
        }
        assert!(read > 0);
    }
}
