//! The sequences section of a compressed block (RFC 8878, 3.1.1.3.2):
//! each code's table (predefined, RLE, or described in the section; the
//! repeat mode, which `encode` never writes, is refused), then each
//! sequence decoded and executed at once, its literals and its match
//! copied into the output. The decoder's hot loop.

use super::bits::BitR;
use super::fse::{FseD, STATES, fse_table, read_ncount};
use crate::codes::{LL_BASE, LL_BITS, LL_NORM, ML_BASE, ML_BITS, ML_NORM, OF_NORM};
use crate::copy::{copy_match, wild};

/// The tables of the three codes: the predefined ones, built once by
/// `Decoder::new`, and the room for a block's own.
pub(super) struct Codes {
    ll: Code,
    ml: Code,
    of: Code,
}

impl Codes {
    pub(super) fn new() -> Self {
        Codes {
            ll: Code::new(&LL_NORM, 6, 9, 36),
            ml: Code::new(&ML_NORM, 6, 9, 53),
            of: Code::new(&OF_NORM, 5, 8, 32),
        }
    }
}

/// One code's tables: the predefined distribution at accuracy log
/// `log`, and a block's own, of at most `max_log` and `symbols`.
struct Code {
    predefined: [FseD; STATES],
    log: u32,
    max_log: u32,
    symbols: usize,
    own: [FseD; STATES],
}

impl Code {
    #[inline(never)] // three calls: one copy, not three (size)
    fn new(norm: &[i16], log: u32, max_log: u32, symbols: usize) -> Self {
        let mut c = Code {
            predefined: [FseD::default(); STATES],
            log,
            max_log,
            symbols,
            own: [FseD::default(); STATES],
        };
        fse_table(norm, log, &mut c.predefined);
        c
    }

    /// The table a block's compression mode `mode` names, its description
    /// read from s[*q..] (q moved past it): (its states, its accuracy log).
    /// Whole: the hot loop looks a state up masked to the array, with no
    /// bound's check. A state never passes the table's `1 << log`, even
    /// from a damaged description: the first is `log` bits, and each next
    /// one is an entry's base plus its `nb` bits, which `fse_table` keeps
    /// under the table's size (`read_ncount` takes only counts summing to
    /// it); RLE's one state is 0.
    fn table(&mut self, mode: u8, s: &[u8], q: &mut usize) -> Option<(&[FseD; STATES], u32)> {
        match mode {
            0 => Some((&self.predefined, self.log)),
            1 => {
                let sym = *s.get(*q)?;
                *q += 1;
                if sym as usize >= self.symbols {
                    return None;
                }
                self.own[0] = FseD {
                    sym,
                    nb: 0,
                    base: 0,
                };
                Some((&self.own, 0))
            }
            2 => {
                let mut norm = [0i16; 53];
                let norm = &mut norm[..self.symbols];
                let (log, n, used) = read_ncount(s.get(*q..)?, self.max_log, norm)?;
                *q += used;
                fse_table(&norm[..n], log, &mut self.own);
                Some((&self.own, log))
            }
            _ => None,
        }
    }
}

/// The sequences section `s` executed, with the block's literals
/// `lits[..nl]`, into `dst` from `p`: where the block's output ends.
/// `rep`, the repeat offsets, carries over from block to block. Inlined
/// into its one caller, whose body it was (decode.rs, `block`).
#[inline(always)]
pub(super) fn sequences(
    codes: &mut Codes,
    (lits, nl): (&[u8], usize),
    s: &[u8],
    dst: &mut [u8],
    mut p: usize,
    rep: &mut [u32; 3],
) -> Option<usize> {
    let (ns, mut q) = count(s)?;
    let mut lp = 0; // next literal
    if ns > 0 {
        let modes = *s.get(q)?;
        q += 1;
        if modes & 3 != 0 {
            return None;
        }
        let Codes { ll, ml, of } = codes;
        let (lt, llog) = ll.table(modes >> 6, s, &mut q)?;
        let (ot, olog) = of.table((modes >> 4) & 3, s, &mut q)?;
        let (mt, mlog) = ml.table((modes >> 2) & 3, s, &mut q)?;
        let mut r = BitR::new(s.get(q..)?)?;
        let mut sl = r.read(llog)? as usize;
        let mut so = r.read(olog)? as usize;
        let mut sm = r.read(mlog)? as usize;
        let at = |t: &[FseD; STATES], state: usize| t[state & (STATES - 1)];
        for i in 0..ns {
            r.refill();
            debug_assert!(sl < 1 << llog && sm < 1 << mlog && so < 1 << olog);
            let (le, me, oe) = (at(lt, sl), at(mt, sm), at(ot, so));
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
                sl = le.base as usize + r.take(le.nb as u32) as usize;
                sm = me.base as usize + r.take(me.nb as u32) as usize;
                so = oe.base as usize + r.take(oe.nb as u32) as usize;
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
    let ofb = ((1u64 << oc) + r.take(oc)) as u32;
    r.refill();
    let ml = ML_BASE[mc as usize] as usize + r.take(ML_BITS[mc as usize] as u32) as usize;
    let ll = LL_BASE[lc as usize] as usize + r.take(LL_BITS[lc as usize] as u32) as usize;
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
