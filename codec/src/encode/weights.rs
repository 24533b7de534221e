//! The Huffman tree description's weights FSE-compressed (RFC 8878,
//! 4.2.1.2): their counts normalized at accuracy log 5 or 6, the FSE
//! table description, and the weights coded with two interleaved states.
//! Worth it where the direct 4-bit form is larger, and the only way to
//! describe a tree whose symbols go past 128.

use super::bits::BitW;
use super::fse::FseC;
use super::ncount::{NCOUNT_MAX, normalize, write_ncount};

/// The weights `w` FSE-compressed (RFC 8878, 4.2.1.2), header byte
/// included, at whichever accuracy log (5 or 6) is smaller: the size, or
/// None if it is 128 bytes or more or the weights cannot be FSE-coded
/// (fewer than two of them, or all the same: the decoder would not know
/// where they end).
#[inline(never)] // once a block: one copy, out of the hot loop (size)
#[cfg_attr(ckptrun_cold_size, optimize(size))]
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
    let mut desc = [0u8; NCOUNT_MAX];
    let h = 1 + write_ncount(&norm[..=top], log, &mut desc);
    out[1..h].copy_from_slice(&desc[..h - 1]);
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
