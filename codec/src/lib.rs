//! The part of the zstd format (RFC 8878) that ckptrun writes and reads:
//! single-segment frames with their content size and no checksum (ckptrun
//! keeps its own, over the bytes the job wrote), blocks of at most 128 KiB
//! stored raw, as one repeated byte, or compressed: a greedy LZ77 parse,
//! literals Huffman-coded (the tree's weights in the direct 4-bit form or
//! FSE-compressed, whichever is smaller), sequences coded with the
//! predefined FSE distributions or with tables fitted to each block
//! (described in it; RFC 8878's FSE and RLE modes, not its repeat mode).
//! Any zstd decoder (`zstd -d`) reads what
//! `encode` writes; `decode` reads only this subset, and refuses anything
//! else or anything inconsistent (`None`), never panicking and never
//! writing outside its output.
//!
//! Nothing here allocates: the caller hands over the working memory
//! (`encode::Work`, `decode::Work`). No `unsafe` either.
//!
//! The files, each side's in its own folder:
//! - `encode.rs`: the encoder and its frames (header, blocks, the
//!   fallback to raw blocks); in `encode/`: `parse.rs` the LZ77 parse,
//!   `literals.rs` the literals section, `huffman.rs` the Huffman code
//!   and its tree description, `weights.rs` that description's weights
//!   FSE-compressed, `sequences.rs` the sequences section and its
//!   tables, `ncount.rs` normalized counts and their description (both
//!   use them), `fse.rs` the FSE encoding tables, `bits.rs` the bit
//!   writer.
//! - `decode.rs`: the decoder and its frames; in `decode/`:
//!   `literals.rs`, `huffman.rs` (tree description, weights and
//!   streams), `sequences.rs` (decoded and executed), `fse.rs` the FSE
//!   decoding tables and table descriptions, `bits.rs` the bit reader.
//! - `codes.rs`: the sequence codes' tables both sides share;
//!   `copy.rs`: the short copies both sides make.

#![no_std]
// The shipped build (scripts/build-release.sh) compiles the cold parts
// (tables built once a block: `#[cfg_attr(ckptrun_cold_size,
// optimize(size))]`) for size, the rest for speed.
#![cfg_attr(ckptrun_cold_size, feature(optimize_attribute))]
#![forbid(unsafe_code)]

mod codes;
mod copy;
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

/// The index of the highest set bit of `x` (not 0).
fn highbit(x: u32) -> u32 {
    31 - x.leading_zeros()
}

#[cfg(test)]
extern crate std;

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

    /// One step of xorshift64: the tests' reproducible noise (the unit
    /// tests of the codec's modules too).
    pub(crate) fn xorshift(x: &mut u64) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                xorshift(&mut x);
                x as u8
            })
            .collect()
    }

    /// UTF-8 text: Greek, Cyrillic, CJK and ASCII words, so that the
    /// literals hold bytes >= 128 in every block.
    fn utf8_text(n: usize, seed: u64) -> Vec<u8> {
        let words = [
            "αλφα",
            "βήτα",
            "давление",
            "скорость",
            "步骤",
            "温度",
            "step",
            "→",
            "naïve",
            "±0.5",
        ];
        let mut out = Vec::with_capacity(n + 64);
        let mut x = seed;
        while out.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let w = words[(x >> 59) as usize % words.len()];
            let line = std::format!("{w} {} ", (x >> 30) % 1000);
            out.extend_from_slice(line.as_bytes());
        }
        out.truncate(n);
        out
    }

    /// Bytes of all 256 values, the high ones far more frequent: one in
    /// eight uniform, the others 255 minus a draw piled up near 0, so
    /// that Huffman codes pay and LZ finds little.
    fn skewed(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                xorshift(&mut x);
                let b = (x >> 8) as u8 as u64;
                match x & 7 {
                    0 => b as u8,
                    _ => 255 - ((b * b * b * b) >> 26) as u8,
                }
            })
            .collect()
    }

    /// `n` bytes over an alphabet that `seed` picks (every `step`th
    /// symbol down from `top`, 1 to 255) with a skew it picks too, so
    /// that the Huffman weights take many shapes: odd and even counts,
    /// runs of absent symbols, few or many distinct weights.
    fn shaped(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        let mut next = move || {
            xorshift(&mut x);
            x
        };
        let top = 1 + (next() % 255) as usize;
        let step = 1 + (next() % 8) as usize;
        let alphabet: Vec<u8> = (0..=top).rev().step_by(step).map(|s| s as u8).collect();
        let skew = 1 + (next() % 5) as usize;
        (0..n)
            .map(|_| {
                let v = next();
                // a quarter uniform, the rest geometric over groups of `skew`
                let i = match v & 3 {
                    0 => (v >> 8) as usize,
                    _ => (v >> 2).trailing_zeros() as usize * skew + (v >> 40) as usize % skew,
                };
                alphabet[i % alphabet.len()]
            })
            .collect()
    }

    fn encode(data: &[u8]) -> Vec<u8> {
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
        frame.truncate(len);
        frame
    }

    fn round_trip(data: &[u8]) -> usize {
        let frame = encode(data);
        let mut dlits = vec![0u8; BLOCK];
        let mut dec = decode::Decoder::new(decode::Work { lits: &mut dlits });
        let mut out = vec![0u8; data.len()];
        assert_eq!(decode::content_size(&frame), Some(data.len()));
        // Its extent from the headers alone, read from a longer stream.
        let mut stream = frame.clone();
        stream.extend_from_slice(&[0xff; 20]);
        let read = |at: usize, buf: &mut [u8]| {
            buf.copy_from_slice(stream.get(at..at + buf.len())?);
            Some(())
        };
        assert_eq!(decode::frame_extent(read), Some((frame.len(), data.len())));
        let cut = |at: usize, buf: &mut [u8]| {
            buf.copy_from_slice(frame[..frame.len() - 1].get(at..at + buf.len())?);
            Some(())
        };
        assert_eq!(decode::frame_extent(cut), None, "a frame cut short");
        assert_eq!(dec.frame(&frame, &mut out), Some(frame.len()));
        assert!(out == data, "round trip of {} bytes", data.len());
        frame.len()
    }

    /// The first block's literals: their type (2: Huffman-coded) and, if
    /// Huffman-coded, the tree description's header byte (< 128: weights
    /// FSE-compressed).
    fn first_literals(frame: &[u8]) -> (u8, Option<u8>) {
        let head = 5 + [1, 2, 4, 8][frame[4] as usize >> 6];
        assert_eq!((frame[head] >> 1) & 3, 2, "a compressed block");
        let lits = &frame[head + 3..];
        let (typ, sf) = (lits[0] & 3, (lits[0] >> 2) & 3);
        let hl = [3, 3, 4, 5][sf as usize];
        (typ, (typ == 2).then(|| lits[hl]))
    }

    /// Where the first block's sequences section starts: past the frame
    /// header, the block header and its literals section.
    fn first_sequences(frame: &[u8]) -> usize {
        let head = 5 + [1, 2, 4, 8][frame[4] as usize >> 6];
        assert_eq!((frame[head] >> 1) & 3, 2, "a compressed block");
        let b = &frame[head + 3..];
        let (typ, sf) = (b[0] & 3, (b[0] as usize >> 2) & 3);
        let v = u64::from_le_bytes(b[..8].try_into().unwrap());
        let len = match (typ, sf) {
            (0 | 1, 0 | 2) => {
                1 + if typ == 0 {
                    (v as usize >> 3) & 0x1f
                } else {
                    1
                }
            }
            (0 | 1, 1) => {
                2 + if typ == 0 {
                    (v as usize >> 4) & 0xfff
                } else {
                    1
                }
            }
            (0 | 1, _) => {
                3 + if typ == 0 {
                    (v as usize >> 4) & 0xfffff
                } else {
                    1
                }
            }
            (_, 0 | 1) => 3 + ((v >> 14) & 0x3ff) as usize,
            (_, 2) => 4 + ((v >> 18) & 0x3fff) as usize,
            _ => 5 + ((v >> 22) & 0x3ffff) as usize,
        };
        head + 3 + len
    }

    /// The first block's sequences' compression modes byte.
    fn first_modes(frame: &[u8]) -> u8 {
        let s = &frame[first_sequences(frame)..];
        s[[1, 1, 2, 3][(s[0] >= 128) as usize + (s[0] == 255) as usize]]
    }

    #[test]
    fn sequence_codes_get_tables_of_their_own() {
        // many short matches: every code fitted (mode 2) or predefined
        let modes = first_modes(&encode(&text(1 << 20, 22)));
        assert!(
            [modes >> 6, (modes >> 4) & 3, (modes >> 2) & 3].contains(&2),
            "{modes:#x}"
        );
        // one match a block: every code one symbol (RLE, mode 1)
        assert_eq!(first_modes(&encode(&vec![b'x'; 1 << 20])), 0b0101_0100);
    }

    #[test]
    fn frames_round_trip_whatever_the_data() {
        for n in [0, 1, 7, 255, 256, 4096, 65791, 131072, 131073, 1 << 20] {
            round_trip(&text(n, 1));
            round_trip(&noise(n, 2));
            round_trip(&vec![b'x'; n]);
            round_trip(&utf8_text(n, 8));
            round_trip(&skewed(n, 9));
        }
        let mut mixed = text(600_000, 3);
        mixed.extend(noise(300_000, 4));
        mixed.extend(vec![0u8; 150_000]);
        mixed.extend(utf8_text(200_000, 10));
        mixed.extend(skewed(200_000, 11));
        round_trip(&mixed);
    }

    #[test]
    fn a_frame_whose_blocks_are_zeros_has_no_extent() {
        // Zeros read as empty raw blocks that are not the last: refused
        // after as many blocks as the content needs, not walked 3 bytes
        // at a time to the stream's end.
        let frame = encode(&text(1 << 20, 7));
        let head = 5 + [1, 2, 4, 8][frame[4] as usize >> 6];
        let mut stream = frame[..head].to_vec();
        stream.resize(64 << 20, 0);
        let mut reads = 0;
        let read = |at: usize, buf: &mut [u8]| {
            reads += 1;
            buf.copy_from_slice(stream.get(at..at + buf.len())?);
            Some(())
        };
        assert_eq!(decode::frame_extent(read), None);
        assert!(reads <= 2 + (1 << 20) / BLOCK, "{reads} reads");
    }

    #[test]
    fn text_compresses_and_noise_does_not_grow() {
        let n = 1 << 20;
        assert!(round_trip(&text(n, 5)) < n / 2);
        assert!(round_trip(&noise(n, 6)) <= bound(n));
    }

    #[test]
    fn literals_with_bytes_over_127_are_huffman_coded() {
        let n = 1 << 20;
        for data in [utf8_text(n, 12), skewed(n, 13)] {
            let frame = encode(&data);
            assert_eq!(first_literals(&frame), (2, first_literals(&frame).1));
            assert!(
                first_literals(&frame).1 < Some(128),
                "FSE-compressed weights"
            );
        }
        // skewed: 5.29 bits a byte by their entropy (8 if stored raw)
        let len = round_trip(&skewed(n, 14));
        assert!(len < n * 68 / 100, "{len} bytes");
        assert!(round_trip(&utf8_text(n, 15)) < n / 3);
    }

    #[test]
    fn weights_of_every_shape_round_trip() {
        let mut fse = 0;
        for seed in 0..300u64 {
            let data = shaped(2000 + (seed as usize * 797) % 150_000, seed + 1);
            round_trip(&data);
            if let (2, Some(h)) = first_literals(&encode(&data)) {
                fse += (h < 128) as u32;
            }
        }
        assert!(fse > 150, "{fse} of 300 with FSE-compressed weights");
    }

    /// The independent oracle: the zstd CLI expands our frames (several,
    /// one after the other, in one file) to the same bytes. Skipped, and
    /// said so, without zstd, unless CI is set.
    #[test]
    fn zstd_reads_what_we_write() {
        let mut inputs = vec![
            utf8_text(1 << 20, 16),
            skewed(300_000, 17),
            text(200_000, 18),
            noise(70_000, 19),
            vec![b'x'; 300_000],
            text(700_000, 23),
        ];
        for seed in 0..60 {
            inputs.push(shaped(1500 + seed * 2500, seed as u64 + 500));
        }
        let (mut frames, mut want) = (Vec::new(), Vec::new());
        for d in &inputs {
            frames.extend(encode(d));
            want.extend_from_slice(d);
        }
        let path =
            std::env::temp_dir().join(std::format!("ckptrun-codec-{}.zst", std::process::id()));
        std::fs::write(&path, &frames).unwrap();
        let out = std::process::Command::new("zstd")
            .arg("-dc")
            .arg(&path)
            .output();
        std::fs::remove_file(&path).unwrap();
        let out = match out {
            Ok(out) => out,
            Err(e) if std::env::var_os("CI").is_none() => {
                std::eprintln!("zstd_reads_what_we_write skipped: no zstd ({e})");
                return;
            }
            Err(e) => panic!("zstd: {e}"),
        };
        assert!(
            out.status.success(),
            "zstd: {}",
            std::string::String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == want, "zstd expands our frames to other bytes");
    }

    #[test]
    fn damaged_frames_are_refused_not_trusted() {
        damaged(&text(300_000, 7));
        damaged(&utf8_text(300_000, 20));
        damaged(&skewed(300_000, 21));
    }

    /// `data`'s frame, with bits flipped at random, and every bit of the
    /// first block's literals header and tree description (where the
    /// weights' FSE header and stream are) flipped in turn: decoding
    /// ends, without panicking; and each cut short is refused.
    fn damaged(data: &[u8]) {
        let frame = encode(data);
        let len = frame.len();
        let mut dlits = vec![0u8; BLOCK];
        let mut dec = decode::Decoder::new(decode::Work { lits: &mut dlits });
        let mut out = vec![0u8; data.len()];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            xorshift(&mut x);
            let mut bad = frame.clone();
            let at = (x % len as u64) as usize;
            bad[at] ^= 1 << ((x >> 32) % 8);
            // Refused, or decoded into bytes the caller's checksum judges.
            let _ = dec.frame(&bad, &mut out);
            let cut = (x >> 20) as usize % len;
            assert_eq!(dec.frame(&frame[..cut], &mut out), None, "cut at {cut}");
        }
        // One block's frame: the flips are where the tree is, then where
        // the sequences' tables are.
        let frame = encode(&data[..20_000]);
        let mut out = vec![0u8; 20_000];
        let seqs = first_sequences(&frame);
        for at in (7..7 + 3 + 5 + 128).chain(seqs..(seqs + 200).min(frame.len())) {
            for bit in 0..8 {
                let mut bad = frame.clone();
                bad[at] ^= 1 << bit;
                let _ = dec.frame(&bad, &mut out);
            }
        }
    }
}
