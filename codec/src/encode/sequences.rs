//! The sequences section of a compressed block (RFC 8878, 3.1.1.3.2):
//! the sequences' count, the three codes' tables, then their codes and
//! extra bits in one stream. Each code (literal length, offset, match
//! length) takes the cheapest of: the predefined distribution, one
//! symbol repeated (RLE), or a table fitted to the block's own counts,
//! described in the section (a few dozen bytes); this is where a block
//! of many short matches (log lines) saves most.

use super::bits::BitW;
use super::fse::FseC;
use super::ncount::{NCOUNT_MAX, cost, normalize, write_ncount};
use crate::codes::{LL_BITS, LL_NORM, ML_BITS, ML_NORM, OF_NORM};
use crate::highbit;

/// The tables of the three codes, built once by `Encoder::new`, and the
/// room for a block's own.
pub(super) struct Codes {
    ll: Code,
    ml: Code,
    of: Code,
}

impl Codes {
    pub(super) fn new() -> Self {
        Codes {
            ll: Code::new(&LL_NORM, 6, 9),
            ml: Code::new(&ML_NORM, 6, 9),
            of: Code::new(&OF_NORM, 5, 8),
        }
    }
}

/// One code's tables: the predefined distribution (`norm` at accuracy
/// log `log`), and a block's own, at most `max_log`.
struct Code {
    predefined: FseC,
    norm: &'static [i16],
    max_log: u32,
    own: FseC,
}

impl Code {
    fn new(norm: &'static [i16], log: u32, max_log: u32) -> Self {
        Code {
            predefined: FseC::new(norm, log),
            norm,
            max_log,
            own: FseC::new(norm, log),
        }
    }

    /// The table for a block whose `ns` codes are counted in `cnt`: its
    /// mode (0 predefined, 1 RLE, 2 its own), its description written
    /// at out[*p..] (p moved past it); None if out is too short. Once a
    /// block: compiled for size where the build says (lib.rs).
    #[cfg_attr(ckptrun_cold_size, optimize(size))]
    fn choose(
        &mut self,
        cnt: &[u32],
        ns: usize,
        out: &mut [u8],
        p: &mut usize,
    ) -> Option<(u8, &FseC)> {
        let top = cnt.iter().rposition(|&c| c > 0)?;
        let present = cnt.iter().filter(|&&c| c > 0).count();
        let mut norm = [0i16; 53];
        if present == 1 {
            *out.get_mut(*p)? = top as u8;
            *p += 1;
            norm[top] = 1;
            self.own = FseC::new(&norm[..=top], 0);
            return Some((1, &self.own));
        }
        let log = table_log(ns, top, present, self.max_log);
        normalize(&cnt[..=top], log, &mut norm[..=top]);
        let mut desc = [0u8; NCOUNT_MAX];
        let h = write_ncount(&norm[..=top], log, &mut desc);
        let own = cost(cnt, &norm[..=top], log)? + (h as u64) * 8 * 256;
        if cost(cnt, self.norm, self.predefined.log).is_some_and(|pre| pre <= own) {
            return Some((0, &self.predefined));
        }
        out.get_mut(*p..*p + h)?.copy_from_slice(&desc[..h]);
        *p += h;
        self.own = FseC::new(&norm[..=top], log);
        Some((2, &self.own))
    }
}

/// The accuracy log of a block's own table for `ns` codes, the largest
/// `top`, `present` distinct: about a quarter as many states as codes,
/// at least enough for the symbols, 5 to `max_log`.
fn table_log(ns: usize, top: usize, present: usize, max_log: u32) -> u32 {
    let ns = ns as u32;
    let fits = highbit(ns.max(2) - 1).saturating_sub(2);
    let least = (highbit(ns) + 1).min(highbit(top.max(1) as u32) + 2);
    let mut log = fits.min(max_log).max(least).clamp(5, max_log);
    while (1usize << log) < present {
        log += 1;
    }
    log
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
pub(super) fn sequences(
    seqs: &[u32],
    ns: usize,
    codes: &mut Codes,
    out: &mut [u8],
) -> Option<usize> {
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
    let (mut ll, mut ml, mut of) = ([0u32; 36], [0u32; 53], [0u32; 32]);
    for n in 0..ns {
        let (lc, mc, oc) = codes_of(seq(seqs, n));
        ll[lc] += 1;
        ml[mc] += 1;
        of[oc] += 1;
    }
    let modes = p;
    p += 1;
    // the tables' descriptions: literal lengths, offsets, match lengths
    let Codes {
        ll: lt,
        ml: mt,
        of: ot,
    } = codes;
    let (lm, lt) = lt.choose(&ll, ns, out, &mut p)?;
    let (om, ot) = ot.choose(&of, ns, out, &mut p)?;
    let (mm, mt) = mt.choose(&ml, ns, out, &mut p)?;
    out[modes] = (lm << 6) | (om << 4) | (mm << 2);
    Some(p + stream(seqs, ns, [lt, mt, ot], out.get_mut(p..)?)?)
}

/// A sequence's codes: literal length, match length, offset.
#[inline(always)]
fn codes_of((l, m, o): (u32, u32, u32)) -> (usize, usize, usize) {
    (ll_code(l), ml_code(m - 3), highbit(o) as usize)
}

/// The sequences' stream, last sequence first (the decoder reads it
/// backward), with the tables of the literal lengths, match lengths and
/// offsets: its size, or None if it does not fit in `out`.
#[inline(always)]
fn stream(seqs: &[u32], ns: usize, [llt, mlt, oft]: [&FseC; 3], out: &mut [u8]) -> Option<usize> {
    let mut w = BitW::new(out);
    let (l, m, o) = seq(seqs, ns - 1);
    let (lc, mc, oc) = codes_of((l, m, o));
    let (mut sl, mut sm, mut so) = (llt.init(lc), mlt.init(mc), oft.init(oc));
    w.add(l as u64, LL_BITS[lc] as u32);
    w.add((m - 3) as u64, ML_BITS[mc] as u32);
    w.add(o as u64, oc as u32);
    w.flush();
    for n in (0..ns - 1).rev() {
        let (l, m, o) = seq(seqs, n);
        let (lc, mc, oc) = codes_of((l, m, o));
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
