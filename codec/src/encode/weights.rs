//! The Huffman tree description's weights FSE-compressed (RFC 8878,
//! 4.2.1.2): their counts normalized at accuracy log 5 or 6, the FSE
//! table description, and the weights coded with two interleaved states.
//! Worth it where the direct 4-bit form is larger, and the only way to
//! describe a tree whose symbols go past 128.

use super::bits::BitW;
use super::fse::FseC;

/// The weights `w` FSE-compressed (RFC 8878, 4.2.1.2), header byte
/// included, at whichever accuracy log (5 or 6) is smaller: the size, or
/// None if it is 128 bytes or more or the weights cannot be FSE-coded
/// (fewer than two of them, or all the same: the decoder would not know
/// where they end).
pub(super) fn fse_weights(w: &[u8], out: &mut [u8; 160]) -> Option<usize> {
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
