//! `ckptrun --help`: the text of `help.txt`, kept in the binary as one
//! frame of ckptrun's own codec, which build.rs writes. Read-only data
//! counts towards the shipped binaries' 256 KiB as code does, and the
//! 8.9 KB of text takes 3.5 KB so. Only `--help` expands it (in the
//! codec's segment, see build.rs), into the heap: nothing is supervised
//! then.

use ckptrun_codec::{BLOCK, decode};

/// help.txt, compressed by build.rs, and its length.
const FRAME: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/help.zst"));
const SIZE: usize = include!(concat!(env!("OUT_DIR"), "/help.len"));

/// What `--help` prints. Never inlined: the decoder's tables (some
/// 10 KB) would widen `main`'s frame, the stack every supervisor holds.
#[inline(never)]
pub fn text() -> Vec<u8> {
    let mut text = vec![0; SIZE];
    let mut lits = vec![0; BLOCK];
    let mut decoder = decode::Decoder::new(decode::Work { lits: &mut lits });
    decoder
        .frame(FRAME, &mut text)
        .expect("build.rs writes one frame");
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_help_expands_to_help_txt() {
        assert_eq!(super::text(), include_bytes!("help.txt"));
    }
}
