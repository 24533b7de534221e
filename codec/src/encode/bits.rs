//! The bit writer of the Huffman streams, the sequences' stream and the
//! FSE-compressed weights: forward, least significant bit first, 64 bits
//! buffered and stored 8 bytes at a time; the decoder reads it backward
//! from the end mark `close` writes.

/// forward bit writer (LSB first), read backward by the decoder
pub(super) struct BitW<'a> {
    out: &'a mut [u8],
    pos: usize,
    acc: u64,
    n: u32,
    ok: bool,
}

impl<'a> BitW<'a> {
    pub(super) fn new(out: &'a mut [u8]) -> Self {
        BitW {
            out,
            pos: 0,
            acc: 0,
            n: 0,
            ok: true,
        }
    }
    /// `nb` bits of `v` (at most 56 since the last flush, in all)
    #[inline(always)]
    pub(super) fn add(&mut self, v: u64, nb: u32) {
        self.acc |= (v & ((1u64 << nb) - 1)) << self.n;
        self.n += nb;
    }
    /// the whole bytes added so far to `out`: 8 bytes stored whatever
    /// their number, so that it takes no loop; a stream too long for
    /// `out` turns `close` to None
    #[inline(always)]
    pub(super) fn flush(&mut self) {
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
    pub(super) fn close(mut self) -> Option<usize> {
        self.add(1, 1);
        self.flush();
        if !self.ok {
            return None;
        }
        Some(self.pos + (self.n > 0) as usize)
    }
}
