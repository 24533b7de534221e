//! Decimal numbers in bytes, written and read without allocating: slot
//! names, a generation's description, pax records, what DMTCP's tools
//! print. The one decimal parser.

/// `n` in decimal, in `buf`.
pub fn write(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// The number `digits` spell: ASCII digits only, at least one, and no
/// more than a u64 holds.
pub fn parse(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_junk_is_refused() {
        let mut buf = [0u8; 20];
        assert_eq!(write(&mut buf, 0), b"0");
        assert_eq!(write(&mut buf, u64::MAX), b"18446744073709551615");
        assert_eq!(parse(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse(b"18446744073709551616"), None, "past u64");
        assert_eq!(parse(b"042"), Some(42));
        for junk in [&b""[..], b"-1", b"1 ", b"0x1", b"+3"] {
            assert_eq!(parse(junk), None, "{junk:?}");
        }
    }
}
