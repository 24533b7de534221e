//! A benchmark and a byte-for-byte check, ignored by default: the file
//! named by CODEC_FILE compressed in 1 MiB frames, each frame expanded
//! again and compared; prints the ratio and the encode and decode speeds.
//! With CODEC_OUT set, the concatenated frames are written there too (a
//! `zstd -d` stream; `cmp` two of them to see that a change to the
//! encoder left its output alone: it is deterministic).
//!
//! CODEC_FILE=... cargo test --release -p ckptrun-codec --test ratio -- --ignored --nocapture
use ckptrun_codec::{BLOCK, bound, decode, encode};
use std::time::Instant;

#[test]
#[ignore]
fn ratio() {
    let path = std::env::var("CODEC_FILE").expect("CODEC_FILE");
    let data = std::fs::read(&path).unwrap();
    let mut table = vec![0u32; encode::TABLE];
    let mut lits = vec![0u8; BLOCK];
    let mut seqs = vec![0u32; encode::SEQS];
    let mut enc = encode::Encoder::new(encode::Work {
        table: &mut table,
        lits: &mut lits,
        seqs: &mut seqs,
    });
    let chunk = 1 << 20;
    let mut frames = Vec::new();
    let mut buf = vec![0u8; bound(chunk)];
    let t = Instant::now();
    let mut total = 0;
    for c in data.chunks(chunk) {
        let n = enc.frame(c, &mut buf).unwrap();
        total += n;
        frames.push(buf[..n].to_vec());
    }
    let te = t.elapsed().as_secs_f64();
    let mut dlits = vec![0u8; BLOCK];
    let mut dec = decode::Decoder::new(decode::Work { lits: &mut dlits });
    let mut out = vec![1u8; data.len()];
    let t = Instant::now();
    for (f, o) in frames.iter().zip(out.chunks_mut(chunk)) {
        assert_eq!(dec.frame(f, o), Some(f.len()));
    }
    let td = t.elapsed().as_secs_f64();
    assert!(out == data);
    if let Some(to) = std::env::var_os("CODEC_OUT") {
        std::fs::write(to, frames.concat()).unwrap();
    }
    let mb = data.len() as f64 / 1e6;
    println!(
        "{path}: {} -> {total} bytes, encode {:.0} MB/s, decode {:.0} MB/s",
        data.len(),
        mb / te,
        mb / td
    );
}
