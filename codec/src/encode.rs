//! Writes frames (see the crate's notes): each block parsed greedily
//! (a hash of 6 bytes, one probe, the last offset tried first), its
//! literals Huffman-coded where that pays, its sequences with the
//! predefined FSE tables; a block that does not shrink is stored raw.
//! Blocks may refer back into the earlier blocks of their frame.

use crate::{BLOCK, LL_BITS, LL_NORM, MAGIC, ML_BITS, ML_NORM, OF_NORM, highbit};

const HASH_LOG: u32 = 14;
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

/// FSE compression table: one of the predefined distributions, or a
/// block's Huffman weights (at most 53 symbols, accuracy log at most 6).
struct FseC {
    log: u32,
    state: [u16; 64],
    delta_nb: [u32; 53],
    delta_find: [i32; 53],
}

impl FseC {
    fn new(norm: &[i16], log: u32) -> FseC {
        let size = 1usize << log;
        let mask = size - 1;
        let step = (size >> 1) + (size >> 3) + 3;
        let mut sym = [0u8; 64];
        let mut cumul = [0u32; 54];
        let mut high = size - 1;
        for u in 1..=norm.len() {
            if norm[u - 1] == -1 {
                cumul[u] = cumul[u - 1] + 1;
                sym[high] = (u - 1) as u8;
                high = high.wrapping_sub(1);
            } else {
                cumul[u] = cumul[u - 1] + norm[u - 1] as u32;
            }
        }
        let mut pos = 0;
        for (s, &n) in norm.iter().enumerate() {
            for _ in 0..n.max(0) {
                sym[pos] = s as u8;
                pos = (pos + step) & mask;
                while pos > high {
                    pos = (pos + step) & mask;
                }
            }
        }
        let mut t = FseC {
            log,
            state: [0; 64],
            delta_nb: [0; 53],
            delta_find: [0; 53],
        };
        for (u, &s) in sym[..size].iter().enumerate() {
            let s = s as usize;
            t.state[cumul[s] as usize] = (size + u) as u16;
            cumul[s] += 1;
        }
        let mut total: i32 = 0;
        for (s, &n) in norm.iter().enumerate() {
            match n {
                0 => {}
                -1 | 1 => {
                    t.delta_nb[s] = (log << 16).wrapping_sub(1 << log);
                    t.delta_find[s] = total - 1;
                    total += 1;
                }
                _ => {
                    let max_out = log - highbit(n as u32 - 1);
                    let min_plus = (n as u32) << max_out;
                    t.delta_nb[s] = (max_out << 16).wrapping_sub(min_plus);
                    t.delta_find[s] = total - n as i32;
                    total += n as i32;
                }
            }
        }
        t
    }
    fn init(&self, s: usize) -> u32 {
        let nb = (self.delta_nb[s].wrapping_add(1 << 15)) >> 16;
        let v = (nb << 16).wrapping_sub(self.delta_nb[s]);
        self.state[((v >> nb) as i32 + self.delta_find[s]) as usize] as u32
    }
    fn encode(&self, w: &mut BitW, st: &mut u32, s: usize) {
        let nb = (st.wrapping_add(self.delta_nb[s])) >> 16;
        w.add(*st as u64, nb);
        *st = self.state[((*st >> nb) as i32 + self.delta_find[s]) as usize] as u32;
    }
}

/// forward bit writer (LSB first), read backward by the decoder
struct BitW<'a> {
    out: &'a mut [u8],
    pos: usize,
    acc: u64,
    n: u32,
    ok: bool,
}
impl<'a> BitW<'a> {
    fn new(out: &'a mut [u8]) -> Self {
        BitW {
            out,
            pos: 0,
            acc: 0,
            n: 0,
            ok: true,
        }
    }
    #[inline(always)]
    fn add(&mut self, v: u64, nb: u32) {
        self.acc |= (v & ((1u64 << nb) - 1)) << self.n;
        self.n += nb;
    }
    #[inline(always)]
    fn flush(&mut self) {
        let nbytes = (self.n >> 3) as usize;
        if self.pos + 8 <= self.out.len() {
            self.out[self.pos..self.pos + 8].copy_from_slice(&self.acc.to_le_bytes());
        } else {
            self.ok = false;
            return;
        }
        self.pos += nbytes;
        self.acc = if nbytes == 8 {
            0
        } else {
            self.acc >> (nbytes * 8)
        };
        self.n &= 7;
    }
    /// end mark, returns the stream's size (None if it did not fit)
    fn close(mut self) -> Option<usize> {
        self.add(1, 1);
        self.flush();
        if !self.ok {
            return None;
        }
        Some(self.pos + (self.n > 0) as usize)
    }
}

/// Writes frames, with the working memory it was given.
pub struct Encoder<'a> {
    table: &'a mut [u32],
    lits: &'a mut [u8],
    seqs: &'a mut [u32],
    ll: FseC,
    ml: FseC,
    of: FseC,
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
            ll: FseC::new(&LL_NORM, 6),
            ml: FseC::new(&ML_NORM, 6),
            of: FseC::new(&OF_NORM, 5),
        }
    }

    /// `src` as one frame into `dst`: its length; `None` if it does not
    /// fit (`crate::bound(src.len())` bytes always do). `src` is at most
    /// 4 GiB.
    #[inline(never)]
    pub fn frame(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        frame(self, src, dst)
    }
}

#[inline(always)]
fn rd64(s: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(s[i..i + 8].try_into().unwrap())
}
#[inline(always)]
fn hash6(v: u64) -> usize {
    ((v << 16).wrapping_mul(0xCF1BBCDCB7A56463) >> (64 - HASH_LOG)) as usize
}
fn ll_code(ll: u32) -> usize {
    static HI: [u8; 64] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 16, 17, 17, 18, 18, 19, 19, 20,
        20, 20, 20, 21, 21, 21, 21, 22, 22, 22, 22, 22, 22, 22, 22, 23, 23, 23, 23, 23, 23, 23, 23,
        24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24,
    ];
    if ll < 64 {
        HI[ll as usize] as usize
    } else {
        highbit(ll) as usize + 19
    }
}
fn ml_code(mlbase: u32) -> usize {
    static HI: [u8; 128] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        25, 26, 27, 28, 29, 30, 31, 32, 32, 33, 33, 34, 34, 35, 35, 36, 36, 36, 36, 37, 37, 37, 37,
        38, 38, 38, 38, 38, 38, 38, 38, 39, 39, 39, 39, 39, 39, 39, 39, 40, 40, 40, 40, 40, 40, 40,
        40, 40, 40, 40, 40, 40, 40, 40, 40, 41, 41, 41, 41, 41, 41, 41, 41, 41, 41, 41, 41, 41, 41,
        41, 41, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42,
        42, 42, 42, 42, 42, 42, 42, 42, 42, 42, 42,
    ];
    if mlbase < 128 {
        HI[mlbase as usize] as usize
    } else {
        highbit(mlbase) as usize + 36
    }
}

/// Huffman code lengths for counts (max 11 bits); returns max symbol + 1.
/// Counts are halved until the longest code fits: not optimal, but rare
/// (it takes a count 2^11 times another's) and cheap.
fn huff_lengths(cnt: &[u32; 256], len: &mut [u8; 256]) -> usize {
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
fn literals(lits: &[u8], out: &mut [u8]) -> Option<usize> {
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

/// The four Huffman streams of `lits` and their jump table, coded with
/// the lengths `len`: their size, or None if they do not fit in `out`.
fn huff_streams(lits: &[u8], len: &[u8; 256], out: &mut [u8]) -> Option<usize> {
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
fn tree_description(len: &[u8; 256], nsym: usize, out: &mut [u8]) -> Option<usize> {
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

/// The weights `w` FSE-compressed (RFC 8878, 4.2.1.2), header byte
/// included, at whichever accuracy log (5 or 6) is smaller: the size, or
/// None if it is 128 bytes or more or the weights cannot be FSE-coded
/// (fewer than two of them, or all the same: the decoder would not know
/// where they end).
fn fse_weights(w: &[u8], out: &mut [u8; 160]) -> Option<usize> {
    let mut cnt = [0u32; 12];
    for &x in w {
        cnt[x as usize] += 1;
    }
    if w.len() < 2 || cnt.iter().filter(|&&c| c > 0).count() < 2 {
        return None;
    }
    let mut best = None;
    let mut tmp = [0u8; 160];
    for log in [6, 5] {
        let mut norm = [0i16; 12];
        normalize(&cnt, log, &mut norm);
        let Some(sz) = fse_weights_with(w, &norm, log, &mut tmp) else {
            continue;
        };
        if best.is_none_or(|b| sz < b) {
            out[..sz].copy_from_slice(&tmp[..sz]);
            best = Some(sz);
        }
    }
    best
}

/// `fse_weights` at one accuracy log, with the normalized counts `norm`.
fn fse_weights_with(w: &[u8], norm: &[i16; 12], log: u32, out: &mut [u8; 160]) -> Option<usize> {
    let top = norm.iter().rposition(|&c| c > 0)?;
    let h = 1 + write_ncount(&norm[..=top], log, &mut out[1..]);
    let t = FseC::new(&norm[..=top], log);
    let mut bw = BitW::new(&mut out[h..]);
    // Two states over one table: state 1 codes the even-indexed weights,
    // state 2 the odd ones; coded last to first, so that the decoder,
    // reading the stream backward, meets them first to last. Each state
    // starts at its last weight.
    let n = w.len();
    let (mut s1, mut s2, mut i);
    if n % 2 == 1 {
        s1 = t.init(w[n - 1] as usize);
        s2 = t.init(w[n - 2] as usize);
        t.encode(&mut bw, &mut s1, w[n - 3] as usize);
        i = n - 3;
    } else {
        s2 = t.init(w[n - 1] as usize);
        s1 = t.init(w[n - 2] as usize);
        i = n - 2;
    }
    while i > 0 {
        t.encode(&mut bw, &mut s2, w[i - 1] as usize);
        t.encode(&mut bw, &mut s1, w[i - 2] as usize);
        bw.flush();
        i -= 2;
    }
    bw.add(s2 as u64, log);
    bw.add(s1 as u64, log);
    let size = h + bw.close()?;
    out[0] = u8::try_from(size - 1).ok().filter(|&b| b < 128)?;
    Some(size)
}

/// `cnt` scaled to normalized counts summing to exactly 1 << log, every
/// symbol present at least 1. Rounding leaves the sum a few off (at most
/// 12 symbols); each step then moves one count where it costs the fewest
/// bits (about c / (n - 1/2) to take one from a count n of c symbols, and
/// c / (n + 1/2) gained by adding one).
fn normalize(cnt: &[u32; 12], log: u32, norm: &mut [i16; 12]) {
    let size = 1u64 << log;
    let total: u64 = cnt.iter().map(|&c| c as u64).sum();
    let mut sum = 0;
    for (n, &c) in norm.iter_mut().zip(cnt) {
        *n = match c {
            0 => 0,
            c => ((c as u64 * size + total / 2) / total).max(1) as i16,
        };
        sum += *n as u64;
    }
    while sum != size {
        let d = if sum > size { -1 } else { 1 };
        let s = cheapest_step(cnt, norm, d);
        norm[s] += d as i16;
        sum = (sum as i64 + d) as u64;
    }
}

/// The count to take one from (`d` = -1) or add one to (`d` = 1) for the
/// fewest bits lost or the most gained: the smallest or largest
/// c / (2 n + d), among the counts that stay at least 1.
fn cheapest_step(cnt: &[u32; 12], norm: &[i16; 12], d: i64) -> usize {
    let key = |s: usize| (cnt[s] as i64, 2 * norm[s] as i64 + d);
    let mut pick = usize::MAX;
    for s in (0..12).filter(|&s| norm[s] > (d < 0) as i16) {
        if pick == usize::MAX {
            pick = s;
            continue;
        }
        let ((ca, na), (cb, nb)) = (key(s), key(pick));
        // ca / na against cb / nb, all positive
        if (ca * nb < cb * na) == (d < 0) && ca * nb != cb * na {
            pick = s;
        }
    }
    pick
}

/// The FSE table description (RFC 8878, 4.1.1) of `norm` (no count of -1)
/// at accuracy log `log` (5 or 6): its size. `out` holds 159 bytes, far
/// more than the 12 symbols ever take.
fn write_ncount(norm: &[i16], log: u32, out: &mut [u8]) -> usize {
    let mut acc = (log - 5) as u64;
    let mut nbits = 4;
    let mut p = 0;
    let mut put = |v: u64, nb: u32, acc: &mut u64, nbits: &mut u32| {
        *acc |= v << *nbits;
        *nbits += nb;
        while *nbits >= 8 {
            out[p] = *acc as u8;
            p += 1;
            *acc >>= 8;
            *nbits -= 8;
        }
    };
    let mut remaining = (1i32 << log) + 1;
    let mut threshold = 1i32 << log;
    let mut nb = log + 1;
    let mut s = 0;
    while remaining > 1 {
        if s > 0 && norm[s - 1] == 0 {
            // a run of zeros: its length in 2-bit steps of at most 3
            let start = s;
            while norm[s] == 0 {
                s += 1;
            }
            let mut z = s - start;
            while z >= 3 {
                put(3, 2, &mut acc, &mut nbits);
                z -= 3;
            }
            put(z as u64, 2, &mut acc, &mut nbits);
        }
        let c = norm[s] as i32;
        s += 1;
        // values below `max` take nb - 1 bits, the others nb
        let max = 2 * threshold - 1 - remaining;
        remaining -= c;
        let mut v = c + 1;
        if v >= threshold {
            v += max;
        }
        put(v as u64, nb - (v < max) as u32, &mut acc, &mut nbits);
        while remaining < threshold {
            nb -= 1;
            threshold >>= 1;
        }
    }
    put(0, 7, &mut acc, &mut nbits);
    p
}

/// copy src[s..s + n] to dst[d..d + n] in 16-byte steps (may write up to 15
/// bytes past d + n, inside dst): no call to memcpy for short runs
#[inline(always)]
fn wild(dst: &mut [u8], d: usize, src: &[u8], s: usize, n: usize) -> Option<()> {
    if d + n + 16 <= dst.len() && s + n + 16 <= src.len() {
        let mut k = 0;
        while k < n {
            let v: [u8; 16] = src[s + k..s + k + 16].try_into().unwrap();
            dst[d + k..d + k + 16].copy_from_slice(&v);
            k += 16;
        }
        Some(())
    } else {
        dst.get_mut(d..d + n)?.copy_from_slice(src.get(s..s + n)?);
        Some(())
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
    let mut nl = 0;
    let mut ns = 0;
    let mut ip = b0;
    let mut anchor = b0;
    let mut r = *rep;
    if b1 - b0 > 16 {
        let limit = b1 - 16;
        let mut step = 1usize << 6;
        while ip < limit {
            let v = rd64(src, ip);
            let h = hash6(v);
            let cand = st.table[h] as usize;
            st.table[h] = ip as u32;
            let (m, is_rep) = if ip > anchor
                && ip >= r[0] as usize
                && (v as u32) == (rd64(src, ip - r[0] as usize) as u32)
            {
                (ip - r[0] as usize, true)
            } else if cand < ip && (rd64(src, cand) ^ v) << 16 == 0 {
                (cand, false)
            } else {
                ip += step >> 6;
                step += 1;
                continue;
            };
            step = 1 << 6;
            let (mut s, mut m) = (ip, m);
            if !is_rep {
                while s > anchor && m > 0 && src[s - 1] == src[m - 1] {
                    s -= 1;
                    m -= 1;
                }
            }
            let mut len = 0;
            loop {
                if s + len + 8 > b1 {
                    while s + len < b1 && src[s + len] == src[m + len] {
                        len += 1;
                    }
                    break;
                }
                let x = rd64(src, s + len) ^ rd64(src, m + len);
                if x != 0 {
                    len += (x.trailing_zeros() / 8) as usize;
                    break;
                }
                len += 8;
            }
            let off = (s - m) as u32;
            let ll = s - anchor;
            wild(st.lits, nl, src, anchor, ll)?;
            nl += ll;
            let ofb = if ll > 0 && off == r[0] {
                1
            } else {
                r = [off, r[0], r[1]];
                off + 3
            };
            st.seqs[3 * ns..3 * ns + 3].copy_from_slice(&[ll as u32, len as u32, ofb]);
            ns += 1;
            ip = s + len;
            anchor = ip;
            if ip < limit {
                st.table[hash6(rd64(src, ip - 2))] = (ip - 2) as u32;
            }
        }
    }
    st.lits[nl..nl + (b1 - anchor)].copy_from_slice(&src[anchor..b1]);
    nl += b1 - anchor;
    let mut p = literals(&st.lits[..nl], out)?;
    // sequences section header
    let o = out.get_mut(p..p + 4)?;
    if ns < 128 {
        o[0] = ns as u8;
        p += 1;
    } else if ns < 0x7F00 {
        o[0] = ((ns >> 8) + 0x80) as u8;
        o[1] = ns as u8;
        p += 2;
    } else {
        o[0] = 0xFF;
        o[1..3].copy_from_slice(&((ns - 0x7F00) as u16).to_le_bytes());
        p += 3;
    }
    if ns == 0 {
        *rep = r;
        return Some(p);
    }
    out[p] = 0; // all three predefined
    p += 1;
    let (llt, mlt, oft) = (&st.ll, &st.ml, &st.of);
    let mut w = BitW::new(out.get_mut(p..)?);
    let (l, m, o) = seq(st.seqs, ns - 1);
    let (lc, mc, oc) = (ll_code(l), ml_code(m - 3), highbit(o) as usize);
    let (mut sl, mut sm, mut so) = (llt.init(lc), mlt.init(mc), oft.init(oc));
    w.add(l as u64, LL_BITS[lc] as u32);
    w.add((m - 3) as u64, ML_BITS[mc] as u32);
    w.add(o as u64, oc as u32);
    w.flush();
    for n in (0..ns - 1).rev() {
        let (l, m, o) = seq(st.seqs, n);
        let (lc, mc, oc) = (ll_code(l), ml_code(m - 3), highbit(o) as usize);
        oft.encode(&mut w, &mut so, oc);
        mlt.encode(&mut w, &mut sm, mc);
        llt.encode(&mut w, &mut sl, lc);
        w.flush();
        w.add(l as u64, LL_BITS[lc] as u32);
        w.add((m - 3) as u64, ML_BITS[mc] as u32);
        w.flush();
        w.add(o as u64, oc as u32);
        w.flush();
    }
    w.add(sm as u64, mlt.log);
    w.add(so as u64, oft.log);
    w.flush();
    w.add(sl as u64, llt.log);
    let sz = w.close()?;
    *rep = r;
    Some(p + sz)
}

/// Sequence `n` of a block: (literal length, match length, offset code).
fn seq(seqs: &[u32], n: usize) -> (u32, u32, u32) {
    (seqs[3 * n], seqs[3 * n + 1], seqs[3 * n + 2])
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

#[cfg(test)]
mod tests {
    #[test]
    fn code_tables() {
        const LLB: [u32; 36] = [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40,
            48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536,
        ];
        const MLB: [u32; 53] = [
            3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
            26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131,
            259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539,
        ];
        for v in 0..131072u32 {
            let c = super::ll_code(v);
            assert!(LLB[c] <= v && (c == 35 || LLB[c + 1] > v), "ll {v}");
            assert!(
                v - LLB[c] < (1 << super::LL_BITS[c]) || (c == 35),
                "llbits {v}"
            );
            let m = v + 3;
            let c = super::ml_code(v);
            assert!(MLB[c] <= m && (c == 52 || MLB[c + 1] > m), "ml {m}");
            assert!(
                m - MLB[c] < (1 << super::ML_BITS[c]) || c == 52,
                "mlbits {m}"
            );
        }
    }
}
