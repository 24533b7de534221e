//! Reads the frames `encode` writes (see the crate's notes): single
//! segment, no dictionary, no checksum; raw, RLE and compressed blocks;
//! raw, RLE and Huffman literals (the tree's weights direct or
//! FSE-compressed, 1 or 4 streams); sequences with the predefined FSE
//! tables. Anything else, or anything inconsistent, is `None`.

use crate::codes::{LL_BASE, LL_BITS, LL_NORM, ML_BASE, ML_BITS, ML_NORM, OF_NORM};
use crate::copy::{copy_match, wild};
use crate::{BLOCK, MAGIC, highbit};

#[derive(Clone, Copy, Default)]
struct FseD {
    sym: u8,
    nb: u8,
    base: u16,
}

fn fse_table(norm: &[i16], log: u32, t: &mut [FseD; 64]) {
    let size = 1usize << log;
    let mask = size - 1;
    let step = (size >> 1) + (size >> 3) + 3;
    let mut next = [0u32; 53];
    let mut high = size - 1;
    for (s, &n) in norm.iter().enumerate() {
        if n == -1 {
            t[high].sym = s as u8;
            high = high.wrapping_sub(1);
            next[s] = 1;
        } else {
            next[s] = n as u32;
        }
    }
    let mut pos = 0;
    for (s, &n) in norm.iter().enumerate() {
        for _ in 0..n.max(0) {
            t[pos].sym = s as u8;
            pos = (pos + step) & mask;
            while pos > high {
                pos = (pos + step) & mask;
            }
        }
    }
    for e in t.iter_mut().take(size) {
        let s = e.sym as usize;
        let x = next[s];
        next[s] += 1;
        let nb = log - highbit(x);
        e.nb = nb as u8;
        e.base = ((x << nb) - size as u32) as u16;
    }
}

/// backward bit reader
struct BitR<'a> {
    s: &'a [u8],
    idx: usize, // bytes not yet loaded: s[..idx]
    cont: u64,  // the next `cb` bits of the stream, at the low end
    cb: u32,
}
impl<'a> BitR<'a> {
    fn new(s: &'a [u8]) -> Option<Self> {
        let last = *s.last()?;
        if last == 0 {
            return None;
        }
        let hb = highbit(last as u32);
        let mut r = BitR {
            s,
            idx: s.len() - 1,
            cont: (last as u64) & ((1 << hb) - 1),
            cb: hb,
        };
        r.refill();
        Some(r)
    }
    #[inline(always)]
    fn refill(&mut self) {
        if self.cb > 56 {
            return;
        }
        let k = ((64 - self.cb) / 8) as usize;
        if self.idx >= 8 {
            let v = u64::from_le_bytes(self.s[self.idx - 8..self.idx].try_into().unwrap());
            self.cont = if k == 8 {
                v
            } else {
                (self.cont << (8 * k)) | (v >> (64 - 8 * k))
            };
            self.idx -= k;
            self.cb += 8 * k as u32;
        } else {
            while self.cb <= 56 && self.idx > 0 {
                self.idx -= 1;
                self.cont = (self.cont << 8) | self.s[self.idx] as u64;
                self.cb += 8;
            }
        }
    }
    /// next nb bits (nb <= 25 after a refill), zero-padded past the start
    #[inline(always)]
    fn peek(&self, nb: u32) -> u64 {
        if nb == 0 {
            0
        } else if nb <= self.cb {
            (self.cont >> (self.cb - nb)) & ((1u64 << nb) - 1)
        } else {
            (self.cont << (nb - self.cb)) & ((1u64 << nb) - 1)
        }
    }
    #[inline(always)]
    fn skip(&mut self, nb: u32) -> Option<()> {
        if nb > self.cb {
            return None;
        }
        self.cb -= nb;
        Some(())
    }
    #[inline(always)]
    fn read(&mut self, nb: u32) -> Option<u64> {
        let v = self.peek(nb);
        self.skip(nb)?;
        Some(v)
    }
    /// the bits not yet read
    fn left(&self) -> u32 {
        self.cb + 8 * self.idx as u32
    }
    fn done(&self) -> bool {
        self.cb == 0 && self.idx == 0
    }
}

/// The working memory `Decoder::new` needs: a block's literals,
/// `crate::BLOCK` bytes.
pub struct Work<'a> {
    pub lits: &'a mut [u8],
}

/// Reads frames, with the working memory it was given.
pub struct Decoder<'a> {
    lits: &'a mut [u8],
    huf: [(u8, u8); 1 << 11], // (symbol, bits)
    ll: [FseD; 64],
    ml: [FseD; 64],
    of: [FseD; 64],
}

impl<'a> Decoder<'a> {
    /// Panics if `work.lits` is shorter than `crate::BLOCK`.
    pub fn new(work: Work<'a>) -> Self {
        assert!(work.lits.len() >= BLOCK);
        let mut d = Self {
            lits: work.lits,
            huf: [(0, 0); 1 << 11],
            ll: [FseD::default(); 64],
            ml: [FseD::default(); 64],
            of: [FseD::default(); 64],
        };
        fse_table(&LL_NORM, 6, &mut d.ll);
        fse_table(&ML_NORM, 6, &mut d.ml);
        fse_table(&OF_NORM, 5, &mut d.of);
        d
    }

    /// Decodes the frame at the start of `src` into `dst`, whose length
    /// must be the frame's content size (see `content_size`): the bytes
    /// of `src` the frame took; `None` if it is not a frame this crate
    /// writes, or is damaged in a way the format shows.
    #[inline(never)]
    pub fn frame(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        frame(self, src, dst)
    }
}

/// The content size a frame's header gives.
pub fn content_size(src: &[u8]) -> Option<usize> {
    header(src).map(|(_, n)| n)
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
    Some(match fhd >> 6 {
        0 => (6, *src.get(5)? as usize),
        1 => (
            7,
            u16::from_le_bytes(src.get(5..7)?.try_into().ok()?) as usize + 256,
        ),
        2 => (
            9,
            u32::from_le_bytes(src.get(5..9)?.try_into().ok()?) as usize,
        ),
        _ => (
            13,
            usize::try_from(u64::from_le_bytes(src.get(5..13)?.try_into().ok()?)).ok()?,
        ),
    })
}

/// literals section: fills st.lits, returns (literal count, section size)
fn literals(st: &mut Decoder, src: &[u8]) -> Option<(usize, usize)> {
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
            st.lits[..n].copy_from_slice(src.get(hl..hl + n)?);
            return Some((n, hl + n));
        }
        let b = *src.get(hl)?;
        st.lits[..n].fill(b);
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
    let lits = &mut st.lits[..n];
    if streams == 1 {
        huf_one(data, &st.huf, maxb, lits)?;
    } else {
        huf_four(data, &st.huf, maxb, lits)?;
    }
    Some((n, hl + cs))
}

/// One Huffman stream, `data`, into `lits`.
fn huf_one(data: &[u8], huf: &[(u8, u8); 1 << 11], maxb: u32, lits: &mut [u8]) -> Option<()> {
    let mut r = BitR::new(data)?;
    for o in lits.iter_mut() {
        r.refill();
        *o = huf_sym(&mut r, huf, maxb)?;
    }
    r.done().then_some(())
}

/// The jump table and four Huffman streams, `data`, into `lits`.
#[inline(always)]
fn huf_four(data: &[u8], huf: &[(u8, u8); 1 << 11], maxb: u32, lits: &mut [u8]) -> Option<()> {
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
fn tree(body: &[u8], huf: &mut [(u8, u8); 1 << 11]) -> Option<(u32, usize)> {
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
fn huf_table(w: &mut [u8; 256], nw: usize, huf: &mut [(u8, u8); 1 << 11]) -> Option<u32> {
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
    let (log, nsym, used) = read_ncount(src, &mut norm)?;
    let mut t = [FseD::default(); 64];
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

/// An FSE table description (RFC 8878, 4.1.1) for Huffman weights
/// (accuracy log 5 or 6, symbols up to 12) into `norm`: (the accuracy
/// log, the number of symbols, the description's size in bytes).
fn read_ncount(src: &[u8], norm: &mut [i16; 13]) -> Option<(u32, usize, usize)> {
    let mut pos = 0;
    let get = |nb: u32, pos: &mut usize, keep: bool| -> Option<u32> {
        let v = bits_at(src, *pos, nb)?;
        if keep {
            *pos += nb as usize;
        }
        Some(v)
    };
    let log = get(4, &mut pos, true)? + 5;
    if log > 6 {
        return None;
    }
    let mut remaining = (1i32 << log) + 1;
    let mut threshold = 1i32 << log;
    let mut nb = log + 1;
    let mut s = 0;
    while remaining > 1 {
        if s > 0 && norm[s - 1] == 0 {
            loop {
                let z = get(2, &mut pos, true)?;
                s += z as usize;
                if z < 3 || s > 12 {
                    break;
                }
            }
        }
        if s > 12 {
            return None;
        }
        // values below `max` take nb - 1 bits, the others nb
        let max = 2 * threshold - 1 - remaining;
        let mut v = get(nb - 1, &mut pos, false)? as i32;
        if v < max {
            pos += nb as usize - 1;
        } else {
            v = get(nb, &mut pos, true)? as i32;
            if v >= threshold {
                v -= max;
            }
        }
        let c = v - 1;
        remaining -= c.abs();
        norm[s] = c as i16;
        s += 1;
        if remaining < threshold {
            nb = highbit(remaining.max(1) as u32) + 1;
            threshold = 1 << (nb - 1);
        }
    }
    if remaining != 1 {
        return None;
    }
    Some((log, s, pos.div_ceil(8)))
}

/// `nb` bits (at most 25) of `src` from bit `pos`, least significant first;
/// None past its end.
fn bits_at(src: &[u8], pos: usize, nb: u32) -> Option<u32> {
    let end = pos + nb as usize;
    if end > 8 * src.len() {
        return None;
    }
    let mut b = [0u8; 4];
    let from = pos / 8;
    let k = (src.len() - from).min(4);
    b[..k].copy_from_slice(&src[from..from + k]);
    Some((u32::from_le_bytes(b) >> (pos % 8)) & ((1u32 << nb) - 1))
}

#[inline(always)]
fn huf_sym(r: &mut BitR, huf: &[(u8, u8); 1 << 11], maxb: u32) -> Option<u8> {
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

fn block(
    st: &mut Decoder,
    src: &[u8],
    dst: &mut [u8],
    mut p: usize,
    rep: &mut [u32; 3],
) -> Option<usize> {
    let (nl, used) = literals(st, src)?;
    let s = src.get(used..)?;
    let b0 = *s.first()? as usize;
    let (ns, mut q) = if b0 < 128 {
        (b0, 1)
    } else if b0 < 255 {
        (((b0 - 128) << 8) + *s.get(1)? as usize, 2)
    } else {
        (
            *s.get(1)? as usize + ((*s.get(2)? as usize) << 8) + 0x7F00,
            3,
        )
    };
    let mut lp = 0; // next literal
    if ns > 0 {
        if *s.get(q)? != 0 {
            return None; // not all predefined
        }
        q += 1;
        let mut r = BitR::new(s.get(q..)?)?;
        let mut sl = r.read(6)? as usize;
        let mut so = r.read(5)? as usize;
        let mut sm = r.read(6)? as usize;
        for i in 0..ns {
            r.refill();
            let (le, me, oe) = (st.ll[sl], st.ml[sm], st.of[so]);
            let oc = oe.sym as u32;
            if oc > 28 {
                return None;
            }
            let ofb = ((1u64 << oc) + r.read(oc)?) as u32;
            r.refill();
            let ml = ML_BASE[me.sym as usize] as usize
                + r.read(ML_BITS[me.sym as usize] as u32)? as usize;
            let ll = LL_BASE[le.sym as usize] as usize
                + r.read(LL_BITS[le.sym as usize] as u32)? as usize;
            let off = if ofb > 3 {
                let o = ofb - 3;
                *rep = [o, rep[0], rep[1]];
                o
            } else {
                let idx = (ofb - 1) as usize + (ll == 0) as usize;
                if idx == 0 {
                    rep[0]
                } else {
                    let o = if idx == 3 {
                        rep[0].wrapping_sub(1)
                    } else {
                        rep[idx]
                    };
                    if idx > 1 {
                        rep[2] = rep[1];
                    }
                    rep[1] = rep[0];
                    rep[0] = o;
                    o
                }
            };
            // execute
            if lp + ll > nl {
                return None;
            }
            wild(dst, p, st.lits, lp, ll)?;
            lp += ll;
            p += ll;
            copy_match(dst, p, off as usize, ml)?;
            p += ml;
            if i + 1 < ns {
                r.refill();
                sl = le.base as usize + r.read(le.nb as u32)? as usize;
                sm = me.base as usize + r.read(me.nb as u32)? as usize;
                so = oe.base as usize + r.read(oe.nb as u32)? as usize;
                if sl >= 64 || sm >= 64 || so >= 32 {
                    return None;
                }
            }
        }
        if !r.done() {
            return None;
        }
    }
    let rest = nl - lp;
    dst.get_mut(p..p + rest)?.copy_from_slice(&st.lits[lp..nl]);
    Some(p + rest)
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
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
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
