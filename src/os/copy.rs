//! A file's bytes read at an offset, and copied in the kernel
//! (copy_file_range), in stretches, or by reading and writing where the
//! kernel cannot. Without allocating.

use std::os::fd::BorrowedFd;

use rustix::io::{Errno, Result};

/// How much is copied in one call, and how much of a file is copied
/// before its writeback starts (see `store::writer`).
pub const STRETCH: u64 = 8 << 20;

/// Copies `len` bytes from `from` (at `offset`, else at its position) to
/// `into` (at its position), in the kernel where it can.
pub fn copy(from: BorrowedFd, mut offset: Option<u64>, into: BorrowedFd, len: u64) -> Result<()> {
    let mut done = 0u64;
    while done < len {
        // In stretches: one call for a whole large file is many times
        // slower (2.2 s against 0.26 s for 1 GiB on ext4, kernel 6.18).
        let chunk = (len - done).min(STRETCH) as usize;
        match rustix::fs::copy_file_range(from, offset.as_mut(), into, None, chunk) {
            // It shrank while copied: the archive would be wrong.
            Ok(0) => return Err(Errno::IO),
            Ok(n) => done += n as u64,
            Err(Errno::INTR) => {}
            Err(Errno::XDEV | Errno::NOSYS | Errno::INVAL | Errno::OPNOTSUPP) => {
                return copy_by_reading(from, offset, into, len - done);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The fallback where copy_file_range cannot (some FUSE and network
/// filesystems): `len` bytes read from `from` (at `offset`, else at its
/// position) and written to `into`.
#[inline(never)] // A large frame: see how-it-works.md, "Memory".
fn copy_by_reading(
    from: BorrowedFd,
    offset: Option<u64>,
    into: BorrowedFd,
    len: u64,
) -> Result<()> {
    let mut buf = [0u8; 64 * 1024];
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(buf.len() as u64) as usize;
        let n = match offset {
            Some(at) => rustix::io::pread(from, &mut buf[..want], at + done),
            None => rustix::io::read(from, &mut buf[..want]),
        };
        match n {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => {
                crate::os::sys::write_all(into, &buf[..n])?;
                done += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset`.
pub fn read_at(fd: BorrowedFd, buf: &mut [u8], offset: u64) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `bytes` at `offset`.
pub fn write_at(fd: BorrowedFd, mut bytes: &[u8], mut offset: u64) -> Result<()> {
    while !bytes.is_empty() {
        match rustix::io::pwrite(fd, bytes, offset) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
