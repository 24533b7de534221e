//! The short copies both sides make, literals into place and matches
//! from earlier output, in 8- or 16-byte steps inside the buffers' ends:
//! most are a few bytes long, too short for a call to memcpy to pay.
//! Both are `#[inline(always)]`: they are in the hot loops.

/// copy src[s..s + n] to dst[d..d + n] in 16-byte steps (may write up to 16
/// bytes past d + n, inside dst): no call to memcpy for short runs
#[inline(always)]
pub(crate) fn wild(dst: &mut [u8], d: usize, src: &[u8], s: usize, n: usize) -> Option<()> {
    if d + n + 16 <= dst.len() && s + n + 16 <= src.len() {
        // The first 16 whatever n is (most runs are shorter): no branch.
        let v: [u8; 16] = src[s..s + 16].try_into().unwrap();
        dst[d..d + 16].copy_from_slice(&v);
        let mut k = 16;
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
/// (may write up to 16 bytes past p + len, inside dst, even for len 0)
#[inline(always)]
pub(crate) fn copy_match(dst: &mut [u8], p: usize, off: usize, len: usize) -> Option<()> {
    let end = p.checked_add(len)?;
    if off == 0 || off > p || end > dst.len() {
        return None;
    }
    let mut m = p - off;
    let mut d = p;
    if off >= 16 && end + 16 <= dst.len() {
        loop {
            let v: [u8; 16] = dst[m..m + 16].try_into().unwrap();
            dst[d..d + 16].copy_from_slice(&v);
            d += 16;
            m += 16;
            if d >= end {
                break;
            }
        }
    } else if off >= 8 && end + 8 <= dst.len() {
        while d < end {
            let v: [u8; 8] = dst[m..m + 8].try_into().unwrap();
            dst[d..d + 8].copy_from_slice(&v);
            d += 8;
            m += 8;
        }
    } else if end + 8 <= dst.len() {
        // A pattern shorter than 8 bytes: its first 8 bytes one by one,
        // then 8 at a time from as many whole patterns back as make 8 or
        // more (the same bytes).
        for k in 0..8 {
            dst[d + k] = dst[m + k];
        }
        let back = [8, 8, 8, 9, 8, 10, 12, 14][off & 7];
        d += 8;
        while d < end {
            let v: [u8; 8] = dst[d - back..d - back + 8].try_into().unwrap();
            dst[d..d + 8].copy_from_slice(&v);
            d += 8;
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

#[cfg(test)]
mod tests {
    use std::vec;
    use std::vec::Vec;

    /// Every offset up to 40 and length up to 70, from the buffer's start
    /// or further on, ending anywhere up to the buffer's end (where the
    /// steps can no longer run past it): what one byte at a time makes,
    /// and nothing changed before the match.
    #[test]
    fn matches_copy_as_one_byte_at_a_time_would() {
        let start: Vec<u8> = (0..64u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
        for off in 1..=40 {
            // From the buffer's first byte, and from further on.
            for p in [off, 64] {
                for len in 0..=70 {
                    for slack in 0..=20 {
                        let mut got = vec![0u8; p + len + slack];
                        got[..p].copy_from_slice(&start[..p]);
                        let mut want = got.clone();
                        for i in p..p + len {
                            want[i] = want[i - off];
                        }
                        super::copy_match(&mut got, p, off, len).unwrap();
                        assert_eq!(got[..p + len], want[..p + len], "{off} {p} {len} {slack}");
                    }
                }
            }
        }
    }
}
