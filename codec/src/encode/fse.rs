//! FSE encoding tables (RFC 8878, 4.1): built from normalized counts,
//! those of the predefined distributions, of a block's sequence codes, or
//! of its Huffman weights; and the coding of a symbol with one.

use super::bits::BitW;
use crate::highbit;

/// The most states a table has: accuracy log 9, the sequences' largest.
const STATES: usize = 1 << 9;

/// FSE compression table: one of the predefined distributions, a block's
/// own for the sequences' codes, or its Huffman weights' (at most 53
/// symbols, accuracy log 0 to 9; log 0 is one symbol that takes no bits,
/// RFC 8878's RLE mode).
pub(super) struct FseC {
    pub(super) log: u32,
    state: [u16; STATES],
    delta_nb: [u32; 53],
    delta_find: [i32; 53],
}

impl FseC {
    #[cfg_attr(ckptrun_cold_size, optimize(size))]
    pub(super) fn new(norm: &[i16], log: u32) -> FseC {
        let size = 1usize << log;
        let mut sym = [0u8; STATES];
        let mut cumul = [0u32; 54];
        spread(norm, log, &mut sym, &mut cumul);
        let mut t = FseC {
            log,
            state: [0; STATES],
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
    /// the first state, for the symbol `s` coded last
    pub(super) fn init(&self, s: usize) -> u32 {
        let nb = (self.delta_nb[s].wrapping_add(1 << 15)) >> 16;
        let v = (nb << 16).wrapping_sub(self.delta_nb[s]);
        self.state[((v >> nb) as i32 + self.delta_find[s]) as usize] as u32
    }
    /// the bits of state `st` that the symbol `s` pushes out, to `w`,
    /// and its next state
    pub(super) fn encode(&self, w: &mut BitW, st: &mut u32, s: usize) {
        let nb = (st.wrapping_add(self.delta_nb[s])) >> 16;
        w.add(*st as u64, nb);
        *st = self.state[((*st >> nb) as i32 + self.delta_find[s]) as usize] as u32;
    }
}

/// The symbols of `norm` spread over the table's states `sym` (RFC 8878,
/// 4.1.1), the ones of count -1 at the top, and `cumul`, each symbol's
/// first index among the states sorted by symbol.
fn spread(norm: &[i16], log: u32, sym: &mut [u8; STATES], cumul: &mut [u32; 54]) {
    let size = 1usize << log;
    let mask = size - 1;
    let step = (size >> 1) + (size >> 3) + 3;
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
}
