//! Working memory for a child beside ckptrun (see `beside`) that needs
//! more than a stack should hold: the codec's tables and a chunk of
//! data. An anonymous private mapping, made in the child and unmapped
//! with it, never the heap: ckptrun allocates nothing once the job runs,
//! its children included, and the supervising process's memory is not
//! touched.

use core::cell::Cell;
use core::ptr::NonNull;

use rustix::io::Result;
use rustix::mm::{MapFlags, ProtFlags};

/// Element types a region hands out: any bit pattern is a value, and the
/// region's alignment (a page) suits them.
pub trait Plain: Copy {}
impl Plain for u8 {}
impl Plain for u32 {}

pub struct Region {
    start: NonNull<u8>,
    len: usize,
    /// Bytes already handed out, from the start.
    used: Cell<usize>,
}

impl Region {
    /// A zeroed mapping of `len` bytes (at least one).
    pub fn map(len: usize) -> Result<Self> {
        let len = len.max(1);
        // SAFETY: a new anonymous private mapping: no file, no fixed
        // address, so no existing memory is affected.
        let start = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )?
        };
        let start = NonNull::new(start.cast::<u8>()).ok_or(rustix::io::Errno::NOMEM)?;
        Ok(Self {
            start,
            len,
            used: Cell::new(0),
        })
    }

    /// `n` elements of `T` (zeroed) carved from what is left, each slice
    /// apart from every other; None if they do not fit.
    #[allow(clippy::mut_from_ref)]
    pub fn carve<T: Plain>(&self, n: usize) -> Option<&mut [T]> {
        let align = core::mem::align_of::<T>();
        let at = self.used.get().next_multiple_of(align);
        let bytes = n.checked_mul(core::mem::size_of::<T>())?;
        let end = at.checked_add(bytes)?;
        if end > self.len {
            return None;
        }
        self.used.set(end);
        // SAFETY: [at, end) lies inside the mapping, which lives as long as
        // `self` (the slice borrows it); no other slice covers it, since
        // `used` only grows; `at` is aligned for T (the mapping starts on
        // a page); the bytes are zero, or what an earlier user of this
        // very range left, and any bit pattern is a T (`Plain`).
        Some(unsafe { core::slice::from_raw_parts_mut(self.start.as_ptr().add(at).cast::<T>(), n) })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping `map` made, unmapped once; no slice of it
        // outlives `self`.
        let _ = unsafe { rustix::mm::munmap(self.start.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carved_slices_are_zeroed_aligned_and_apart() {
        let region = Region::map(64 * 1024).unwrap();
        let bytes = region.carve::<u8>(3).unwrap();
        let words = region.carve::<u32>(100).unwrap();
        assert_eq!(words.as_ptr() as usize % 4, 0);
        assert!(bytes.iter().all(|&b| b == 0) && words.iter().all(|&w| w == 0));
        bytes.fill(7);
        words.fill(u32::MAX);
        assert_eq!(bytes, [7, 7, 7]);
        assert!(region.carve::<u8>(64 * 1024).is_none(), "beyond its end");
    }
}
