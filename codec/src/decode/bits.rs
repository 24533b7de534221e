//! The bit reader of the Huffman streams, the sequences' stream and the
//! FSE-compressed weights: backward from the stream's end mark, 64 bits
//! buffered, refilled 8 bytes at a time while they last.

use crate::highbit;

/// backward bit reader
pub(super) struct BitR<'a> {
    s: &'a [u8],
    idx: usize,           // bytes not yet loaded: s[..idx]
    pub(super) cont: u64, // the next `cb` bits of the stream, at the low end
    pub(super) cb: u32,
}

impl<'a> BitR<'a> {
    pub(super) fn new(s: &'a [u8]) -> Option<Self> {
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
    pub(super) fn refill(&mut self) {
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
    pub(super) fn peek(&self, nb: u32) -> u64 {
        if nb == 0 {
            0
        } else if nb <= self.cb {
            (self.cont >> (self.cb - nb)) & ((1u64 << nb) - 1)
        } else {
            (self.cont << (nb - self.cb)) & ((1u64 << nb) - 1)
        }
    }
    #[inline(always)]
    pub(super) fn skip(&mut self, nb: u32) -> Option<()> {
        if nb > self.cb {
            return None;
        }
        self.cb -= nb;
        Some(())
    }
    #[inline(always)]
    pub(super) fn read(&mut self, nb: u32) -> Option<u64> {
        let v = self.peek(nb);
        self.skip(nb)?;
        Some(v)
    }
    /// next nb bits (nb <= 32, and no more than a refill left: the
    /// sequences' hot loop), without a branch. Past the stream's start
    /// (damage) the bits are garbage and `cb` wraps to some 2^32, which
    /// no section's reads (at most some 2^23 bits) can bring back to 0:
    /// `done` is false for good. Nothing may `peek` or `read` after
    /// that (a shift of 64 or more).
    #[inline(always)]
    pub(super) fn take(&mut self, nb: u32) -> u64 {
        self.cb = self.cb.wrapping_sub(nb);
        self.cont.wrapping_shr(self.cb) & ((1u64 << nb) - 1)
    }
    /// the bits not yet read
    pub(super) fn left(&self) -> u32 {
        self.cb + 8 * self.idx as u32
    }
    pub(super) fn done(&self) -> bool {
        self.cb == 0 && self.idx == 0
    }
}
