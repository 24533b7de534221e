//! The short copies both sides make, literals into place and matches
//! from earlier output, in 8- or 16-byte steps inside the buffers' ends:
//! most are a few bytes long, too short for a call to memcpy to pay.
//! Both are `#[inline(always)]`: they are in the hot loops.

/// copy src[s..s + n] to dst[d..d + n] in 16-byte steps (may write up to 15
/// bytes past d + n, inside dst): no call to memcpy for short runs
#[inline(always)]
pub(crate) fn wild(dst: &mut [u8], d: usize, src: &[u8], s: usize, n: usize) -> Option<()> {
    if d + n + 16 <= dst.len() && s + n + 16 <= src.len() {
        let mut k = 0;
        while k < n {
            let v: [u8; 16] = src[s + k..s + k + 16].try_into().unwrap();
            dst[d + k..d + k + 16].copy_from_slice(&v);
            k += 16;
        }
        Some(())
    } else {
        dst.get_mut(d..d + n)?.copy_from_slice(src.get(s..s + n)?);
        Some(())
    }
}

/// copy `len` bytes from dst[p - off..] to dst[p..], overlapping allowed
#[inline(always)]
pub(crate) fn copy_match(dst: &mut [u8], p: usize, off: usize, len: usize) -> Option<()> {
    let end = p.checked_add(len)?;
    if off == 0 || off > p || end > dst.len() {
        return None;
    }
    let mut m = p - off;
    let mut d = p;
    if off >= 16 && end + 16 <= dst.len() {
        while d < end {
            let v: [u8; 16] = dst[m..m + 16].try_into().unwrap();
            dst[d..d + 16].copy_from_slice(&v);
            d += 16;
            m += 16;
        }
    } else if off >= 8 && end + 8 <= dst.len() {
        while d < end {
            let v: [u8; 8] = dst[m..m + 8].try_into().unwrap();
            dst[d..d + 8].copy_from_slice(&v);
            d += 8;
            m += 8;
        }
    } else {
        while d < end {
            dst[d] = dst[m];
            d += 1;
            m += 1;
        }
    }
    Some(())
}
