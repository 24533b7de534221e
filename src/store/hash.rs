//! XXH3 (64 bits), as `xxhsum -H3` computes it: every byte of every
//! generation goes through it, at memory speed. Without allocating: data
//! is hashed through a buffer on the stack.

use std::os::fd::BorrowedFd;

use rustix::io::Result;
use xxhash_rust::xxh3::Xxh3Default;

/// How much data is hashed at a time, through a buffer on the stack.
const CHUNK: usize = 128 * 1024;

/// A running XXH3 of a member's data.
pub struct Hash(Xxh3Default);

impl Hash {
    pub fn new() -> Self {
        Self(Xxh3Default::new())
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    pub fn digest(&self) -> u64 {
        self.0.digest()
    }
}

/// The XXH3 of `len` bytes of `file` at `offset`.
pub fn hash_at(file: BorrowedFd, offset: u64, len: u64) -> Result<u64> {
    let mut hash = Hash::new();
    hash_more(&mut hash, file, offset, len)?;
    Ok(hash.digest())
}

/// Adds `len` bytes of `file` at `offset` to `hash`.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
pub fn hash_more(hash: &mut Hash, file: BorrowedFd, offset: u64, len: u64) -> Result<()> {
    let mut buf = [0u8; CHUNK];
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(CHUNK as u64) as usize;
        crate::os::copy::read_at(file, &mut buf[..want], offset + done)?;
        hash.update(&buf[..want]);
        done += want as u64;
    }
    Ok(())
}
