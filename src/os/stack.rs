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
/// How far below the margin pages are handed back. Deeper than any frame
/// ckptrun makes, and short of any other mapping: the kernel places
/// mappings at least 128 MiB below the stack's top (mmap_base), and
/// ckptrun calls this within a few hundred KiB of that top.
const SPAN: usize = 1 << 20;

/// Hands back the stack pages below the caller's frame (those of
/// functions that have returned). What of the range is not mapped is
/// skipped; an error only leaves the pages resident.
#[inline(never)]
pub fn release() {
    let mark = 0u8;
    let here = core::ptr::addr_of!(mark) as usize;
    let top = (here - MARGIN) & !(PAGE - 1);
    // SAFETY: [top - SPAN, top) is this thread's stack below the frame
    // of this function less MARGIN, or unmapped: on a stack that grows
    // down, that is memory of frames that have returned (ckptrun runs one
    // thread; a signal handler that ran there has returned too, and one
    // that runs after this call finds zeroed pages, as a fresh stack). No
    // other mapping lies within SPAN below it (see SPAN). MADV_DONTNEED
    // on private anonymous memory only drops the pages: the next touch
    // maps a zeroed one.
    let _ = unsafe {
        rustix::mm::madvise(
            (top - SPAN) as *mut core::ffi::c_void,
            SPAN,
            rustix::mm::Advice::LinuxDontNeed,
        )
    };
}
