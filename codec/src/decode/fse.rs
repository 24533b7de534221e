//! FSE decoding tables (RFC 8878, 4.1): built from normalized counts,
//! those of the predefined distributions or those an FSE table
//! description gives (a block's sequence codes or Huffman weights), and
//! the reading of such a description.

use crate::highbit;

/// One state of an FSE decoding table: its symbol, and the bits to read
/// and the base they are added to for the next state.
#[derive(Clone, Copy, Default)]
pub(super) struct FseD {
    pub(super) sym: u8,
    pub(super) nb: u8,
    pub(super) base: u16,
}

/// The most states a table has: accuracy log 9, the sequences' largest.
pub(super) const STATES: usize = 1 << 9;

/// The decoding table of the normalized counts `norm` (at most 53, summing
/// to 1 << log) at accuracy log `log` (0 to 9) into `t`.
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn fse_table(norm: &[i16], log: u32, t: &mut [FseD; STATES]) {
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

/// An FSE table description (RFC 8878, 4.1.1) of at most `max_log` and
/// `norm.len()` symbols into `norm`: (the accuracy log, the number of
/// symbols, the description's size in bytes).
#[cfg_attr(ckptrun_cold_size, optimize(size))]
pub(super) fn read_ncount(
    src: &[u8],
    max_log: u32,
    norm: &mut [i16],
) -> Option<(u32, usize, usize)> {
    let mut pos = 0;
    let get = |nb: u32, pos: &mut usize, keep: bool| -> Option<u32> {
        let v = bits_at(src, *pos, nb)?;
        if keep {
            *pos += nb as usize;
        }
        Some(v)
    };
    let log = get(4, &mut pos, true)? + 5;
    if log > max_log {
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
                if z < 3 || s >= norm.len() {
                    break;
                }
            }
        }
        if s >= norm.len() {
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
