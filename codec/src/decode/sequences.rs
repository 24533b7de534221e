//! The sequences section of a compressed block (RFC 8878, 3.1.1.3.2),
//! with the predefined FSE distributions only: each sequence decoded
//! and executed at once, its literals and its match copied into the
//! output. The decoder's hot loop.

use super::bits::BitR;
use super::fse::{FseD, fse_table};
use crate::codes::{LL_BASE, LL_BITS, LL_NORM, ML_BASE, ML_BITS, ML_NORM, OF_NORM};
use crate::copy::{copy_match, wild};

/// The decoding tables of the three predefined distributions, built once
/// by `Decoder::new`.
pub(super) struct Codes {
    ll: [FseD; 64],
    ml: [FseD; 64],
    of: [FseD; 64],
}

impl Codes {
    pub(super) fn new() -> Self {
        let mut c = Codes {
            ll: [FseD::default(); 64],
            ml: [FseD::default(); 64],
            of: [FseD::default(); 64],
        };
        fse_table(&LL_NORM, 6, &mut c.ll);
        fse_table(&ML_NORM, 6, &mut c.ml);
        fse_table(&OF_NORM, 5, &mut c.of);
        c
    }
}

/// The sequences section `s` executed, with the block's literals
/// `lits[..nl]`, into `dst` from `p`: where the block's output ends.
/// `rep`, the repeat offsets, carries over from block to block. Inlined
/// into its one caller, whose body it was (decode.rs, `block`).
#[inline(always)]
pub(super) fn sequences(
    codes: &Codes,
    (lits, nl): (&[u8], usize),
    s: &[u8],
    dst: &mut [u8],
    mut p: usize,
    rep: &mut [u32; 3],
) -> Option<usize> {
    let (ns, mut q) = count(s)?;
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
            let (le, me, oe) = (codes.ll[sl], codes.ml[sm], codes.of[so]);
            let (ofb, ml, ll) = values(&mut r, le.sym, me.sym, oe.sym)?;
            let off = offset(ofb, ll, rep);
            // execute
            if lp + ll > nl {
                return None;
            }
            wild(dst, p, lits, lp, ll)?;
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
    dst.get_mut(p..p + rest)?.copy_from_slice(&lits[lp..nl]);
    Some(p + rest)
}

/// The sequences' count at the start of `s`: (the count, its size).
#[inline(always)]
fn count(s: &[u8]) -> Option<(usize, usize)> {
    let b0 = *s.first()? as usize;
    Some(if b0 < 128 {
        (b0, 1)
    } else if b0 < 255 {
        (((b0 - 128) << 8) + *s.get(1)? as usize, 2)
    } else {
        (
            *s.get(1)? as usize + ((*s.get(2)? as usize) << 8) + 0x7F00,
            3,
        )
    })
}

/// A sequence's values from its codes (literal length `lc`, match length
/// `mc`, offset `oc`) and their extra bits: (offset value, match length,
/// literal length).
#[inline(always)]
fn values(r: &mut BitR, lc: u8, mc: u8, oc: u8) -> Option<(u32, usize, usize)> {
    let oc = oc as u32;
    if oc > 28 {
        return None;
    }
    let ofb = ((1u64 << oc) + r.read(oc)?) as u32;
    r.refill();
    let ml = ML_BASE[mc as usize] as usize + r.read(ML_BITS[mc as usize] as u32)? as usize;
    let ll = LL_BASE[lc as usize] as usize + r.read(LL_BITS[lc as usize] as u32)? as usize;
    Some((ofb, ml, ll))
}

/// The offset an offset value `ofb` stands for, after a literal length
/// `ll`, with the repeat offsets `rep`, which it updates (RFC 8878,
/// 3.1.2.5).
#[inline(always)]
fn offset(ofb: u32, ll: usize, rep: &mut [u32; 3]) -> u32 {
    if ofb > 3 {
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
    }
}
