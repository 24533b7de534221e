//! The stack pages a restore or a commit used, handed back to the kernel
//! before ckptrun goes on supervising. Their functions keep large buffers
//! on the stack (see how-it-works.md, "Memory"): a restore reaches some
//! 160 KiB below `main`. Pages a process once touched stay resident, so
//! without this the supervisor of a self or dmtcp job would keep them
//! all the weeks its job runs, though it never uses them again.

/// The page size of every x86 Linux.
const PAGE: usize = 4096;
/// Left alone below this function's own frame: its callee (the system
/// call's wrapper, a frame of some bytes) and the red zone (128 bytes).
const MARGIN: usize = PAGE;
/// How far below the margin pages are handed back: more than a restore
/// uses below the supervision loop (some 150 KiB), and less than the
/// gap the kernel keeps free below a stack (see `release`).
const SPAN: usize = 256 << 10;

/// Hands back the stack pages below the caller's frame (those of
/// functions that have returned). An error (ENOMEM: part of the range
/// is not mapped, the rest is still dropped) only leaves pages resident.
#[inline(never)]
pub fn release() {
    let mark = 0u8;
    let here = core::hint::black_box(&mark) as *const u8 as usize;
    let top = here.saturating_sub(MARGIN) & !(PAGE - 1);
    let bottom = top.saturating_sub(SPAN);
    // SAFETY: [bottom, top) is the main stack below this frame (less
    // MARGIN), or the unmapped gap below the stack's mapping: the kernel
    // places no other mapping within stack_guard_gap (1 MiB by default,
    // since Linux 4.12) below it, and with the usual layout none within
    // 128 MiB of the stack's top (mmap_base), which this is within 1 MiB
    // of. On a stack that grows down, what lies below this frame belongs
    // to frames that have returned: ckptrun runs one thread (its
    // children are processes), has no alternate signal stack, and a
    // handler that ran there has returned; one that runs later finds
    // zeroed pages, as on a fresh stack. MADV_DONTNEED on private
    // anonymous memory only drops the pages: the next touch maps a
    // zeroed one.
    let _ = unsafe {
        rustix::mm::madvise(
            bottom as *mut core::ffi::c_void,
            top - bottom,
            rustix::mm::Advice::LinuxDontNeed,
        )
    };
}
