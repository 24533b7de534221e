//! The sequences section of a compressed block (RFC 8878, 3.1.1.3.2):
//! the sequences' count, then their codes and extra bits in one stream,
//! with the predefined FSE distributions for all three codes (the
//! section's "compression modes" byte 0).

use super::bits::BitW;
use super::fse::FseC;
use crate::codes::{LL_BITS, LL_NORM, ML_BITS, ML_NORM, OF_NORM};
use crate::highbit;

/// The FSE tables of the three predefined distributions, built once by
/// `Encoder::new`.
pub(super) struct Codes {
    ll: FseC,
    ml: FseC,
    of: FseC,
}

impl Codes {
    pub(super) fn new() -> Self {
        Codes {
            ll: FseC::new(&LL_NORM, 6),
            ml: FseC::new(&ML_NORM, 6),
            of: FseC::new(&OF_NORM, 5),
        }
    }
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

/// The sequences section of the `ns` sequences in `seqs` (see
/// `parse::parse`) into `out`: its size, or None if it does not fit.
/// Inlined into its one caller, whose body it was (encode.rs, `block`).
#[inline(always)]
pub(super) fn sequences(seqs: &[u32], ns: usize, codes: &Codes, out: &mut [u8]) -> Option<usize> {
    let mut p = 0;
    let o = out.get_mut(..4)?;
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
        return Some(p);
    }
    out[p] = 0; // all three predefined
    p += 1;
    Some(p + stream(seqs, ns, codes, out.get_mut(p..)?)?)
}

/// The sequences' stream, last sequence first (the decoder reads it
/// backward): its size, or None if it does not fit in `out`.
#[inline(always)]
fn stream(seqs: &[u32], ns: usize, codes: &Codes, out: &mut [u8]) -> Option<usize> {
    let (llt, mlt, oft) = (&codes.ll, &codes.ml, &codes.of);
    let mut w = BitW::new(out);
    let (l, m, o) = seq(seqs, ns - 1);
    let (lc, mc, oc) = (ll_code(l), ml_code(m - 3), highbit(o) as usize);
    let (mut sl, mut sm, mut so) = (llt.init(lc), mlt.init(mc), oft.init(oc));
    w.add(l as u64, LL_BITS[lc] as u32);
    w.add((m - 3) as u64, ML_BITS[mc] as u32);
    w.add(o as u64, oc as u32);
    w.flush();
    for n in (0..ns - 1).rev() {
        let (l, m, o) = seq(seqs, n);
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
    w.close()
}

/// Sequence `n` of a block: (literal length, match length, offset code).
fn seq(seqs: &[u32], n: usize) -> (u32, u32, u32) {
    (seqs[3 * n], seqs[3 * n + 1], seqs[3 * n + 2])
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
