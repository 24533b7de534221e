//! The part of the zstd format (RFC 8878) that ckptrun writes and reads:
//! single-segment frames with their content size and no checksum (ckptrun
//! keeps its own, over the bytes the job wrote), blocks of at most 128 KiB
//! stored raw, as one repeated byte, or compressed: a greedy LZ77 parse,
//! literals Huffman-coded (tree weights in the direct 4-bit form, so only
//! when every literal byte is below 128; raw otherwise), sequences coded
//! with the predefined FSE distributions. Any zstd decoder (`zstd -d`)
//! reads what `encode` writes; `decode` reads only this subset, and
//! refuses anything else or anything inconsistent (`None`), never
//! panicking and never writing outside its output.
//!
//! Nothing here allocates: the caller hands over the working memory
//! (`encode::Work`, `decode::Work`). No `unsafe` either.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod decode;
pub mod encode;

/// The largest block.
pub const BLOCK: usize = 128 << 10;

/// The most a frame of `n` bytes can take: every block stored raw, a
/// 3-byte header each, and the frame's header.
pub const fn bound(n: usize) -> usize {
    n + 3 * (n.div_ceil(BLOCK) + 1) + 16
}

const MAGIC: u32 = 0xFD2F_B528;

// The predefined distributions (RFC 8878, 3.1.1.3.2.2).
static LL_NORM: [i16; 36] = [
    4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1,
    -1, -1, -1, -1,
];
static ML_NORM: [i16; 53] = [
    1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1,
];
static OF_NORM: [i16; 29] = [
    1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1,
];
static LL_BITS: [u8; 36] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11,
    12, 13, 14, 15, 16,
];
static ML_BITS: [u8; 53] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
];

fn highbit(x: u32) -> u32 {
    31 - x.leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// Text-like state: CSV lines of floats and words.
    fn text(n: usize, seed: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 64);
        let mut x = seed;
        let words = [
            "alpha", "beta", "gamma", "delta", "pressure", "velocity", "step",
        ];
        while out.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let w = words[(x >> 60) as usize % words.len()];
            let line = std::format!("{w},{},{:.6}\n", (x >> 40) % 10000, (x >> 20) as f64 / 1e9);
            out.extend_from_slice(line.as_bytes());
        }
        out.truncate(n);
        out
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn round_trip(data: &[u8]) -> usize {
        let mut table = vec![0u32; encode::TABLE];
        let mut lits = vec![0u8; BLOCK];
        let mut seqs = vec![0u32; encode::SEQS];
        let mut enc = encode::Encoder::new(encode::Work {
            table: &mut table,
            lits: &mut lits,
            seqs: &mut seqs,
        });
        let mut frame = vec![0u8; bound(data.len())];
        let len = enc.frame(data, &mut frame).expect("bound() is enough");
        let mut dlits = vec![0u8; BLOCK];
        let mut dec = decode::Decoder::new(decode::Work { lits: &mut dlits });
        let mut out = vec![0u8; data.len()];
        assert_eq!(decode::content_size(&frame[..len]), Some(data.len()));
        assert_eq!(dec.frame(&frame[..len], &mut out), Some(len));
        assert!(out == data, "round trip of {} bytes", data.len());
        len
    }

    #[test]
    fn frames_round_trip_whatever_the_data() {
        for n in [0, 1, 7, 255, 256, 4096, 65791, 131072, 131073, 1 << 20] {
            round_trip(&text(n, 1));
            round_trip(&noise(n, 2));
            round_trip(&vec![b'x'; n]);
        }
        let mut mixed = text(600_000, 3);
        mixed.extend(noise(300_000, 4));
        mixed.extend(vec![0u8; 150_000]);
        round_trip(&mixed);
    }

    #[test]
    fn text_compresses_and_noise_does_not_grow() {
        let n = 1 << 20;
        assert!(round_trip(&text(n, 5)) < n / 2);
        assert!(round_trip(&noise(n, 6)) <= bound(n));
    }

    #[test]
    fn damaged_frames_are_refused_not_trusted() {
        let data = text(300_000, 7);
        let mut table = vec![0u32; encode::TABLE];
        let mut lits = vec![0u8; BLOCK];
        let mut seqs = vec![0u32; encode::SEQS];
        let mut enc = encode::Encoder::new(encode::Work {
            table: &mut table,
            lits: &mut lits,
            seqs: &mut seqs,
        });
        let mut frame = vec![0u8; bound(data.len())];
        let len = enc.frame(&data, &mut frame).unwrap();
        let frame = &frame[..len];
        let mut dlits = vec![0u8; BLOCK];
        let mut dec = decode::Decoder::new(decode::Work { lits: &mut dlits });
        let mut out = vec![0u8; data.len()];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut bad = frame.to_vec();
            let at = (x % len as u64) as usize;
            bad[at] ^= 1 << ((x >> 32) % 8);
            // Refused, or decoded into bytes the caller's checksum judges.
            let _ = dec.frame(&bad, &mut out);
            let cut = (x >> 20) as usize % len;
            assert_eq!(dec.frame(&frame[..cut], &mut out), None, "cut at {cut}");
        }
    }
}
