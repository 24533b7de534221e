//! Normalized counts (RFC 8878, 4.1.1): symbol counts scaled to a table
//! of 1 << log states, what an FSE table is built from, and their
//! description in a block (the "FSE table description"). Used for the
//! Huffman weights and for the sequences' codes.

/// `cnt` scaled to normalized counts `norm` (as long) summing to exactly
/// 1 << log, every symbol present at least 1; the caller makes sure the
/// table holds at least as many states as there are symbols present.
/// Rounding leaves the sum a few off; each step then moves one count
/// where it costs the fewest bits (about c / (n - 1/2) to take one from
/// a count n of c symbols, and c / (n + 1/2) gained by adding one).
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn normalize(cnt: &[u32], log: u32, norm: &mut [i16]) {
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
fn cheapest_step(cnt: &[u32], norm: &[i16], d: i64) -> usize {
    let key = |s: usize| (cnt[s] as i64, 2 * norm[s] as i64 + d);
    let mut pick = usize::MAX;
    for s in (0..norm.len()).filter(|&s| norm[s] > (d < 0) as i16) {
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

/// The most bytes a description takes: 53 symbols of at most 10 bits,
/// runs of zeros, the 4-bit log, the padding.
pub(super) const NCOUNT_MAX: usize = 80;

/// The FSE table description (RFC 8878, 4.1.1) of `norm` (no count of
/// -1, the last one not 0, at most 53) at accuracy log `log` (5 to 9):
/// its size.
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn write_ncount(norm: &[i16], log: u32, out: &mut [u8; NCOUNT_MAX]) -> usize {
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

/// log2(x) in 256ths of a bit (x >= 1), the fraction taken linearly
/// between powers of two: within 0.09 bits, enough to weigh one table
/// against another.
pub(super) fn log2_q8(x: u32) -> u32 {
    let h = crate::highbit(x);
    let frac = if h >= 8 { x >> (h - 8) } else { x << (8 - h) };
    (h << 8) + (frac & 255)
}

/// What coding `cnt` with the normalized counts `norm` (-1 for a count
/// of 1) at accuracy log `log` costs, in 256ths of a bit; None if a
/// symbol present has no state.
pub(super) fn cost(cnt: &[u32], norm: &[i16], log: u32) -> Option<u64> {
    let mut bits = 0u64;
    for (s, &c) in cnt.iter().enumerate().filter(|&(_, &c)| c > 0) {
        let n = match *norm.get(s)? {
            0 => return None,
            -1 => 1,
            n => n as u32,
        };
        bits += c as u64 * ((log << 8) - log2_q8(n)) as u64;
    }
    Some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_counts_sum_to_the_table_and_keep_every_symbol() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for log in 5..=9u32 {
            for _ in 0..200 {
                let mut cnt = [0u32; 53];
                for c in cnt.iter_mut() {
                    crate::tests::xorshift(&mut x);
                    *c = match x % 4 {
                        0 => 0,
                        1 => 1,
                        2 => (x >> 8) as u32 % 50,
                        _ => (x >> 8) as u32 % 40_000,
                    };
                }
                cnt[0] += 1;
                // no more symbols than states
                let n = 53.min(1 << log);
                let mut norm = [0i16; 53];
                normalize(&cnt[..n], log, &mut norm[..n]);
                let sum: i32 = norm.iter().map(|&n| n as i32).sum();
                assert_eq!(sum, 1 << log);
                for (c, n) in cnt[..n].iter().zip(norm) {
                    assert_eq!(*c > 0, n > 0);
                }
            }
        }
    }

    #[test]
    fn log2_is_close() {
        for x in 1..100_000u32 {
            let exact = (x as f64).log2() * 256.0;
            assert!((log2_q8(x) as f64 - exact).abs() < 0.09 * 256.0, "{x}");
        }
    }
}
