//! The proof that ckptrun does not allocate once the job is running: in
//! debug builds (the ones `cargo test` drives the integration tests
//! against), a global allocator that aborts the process on any allocation
//! after `arm()`. In every build it notes an allocation the system
//! allocator refused, so that the abort that follows says "out of memory"
//! (`internal_error`); otherwise it passes each call on unchanged.

use core::sync::atomic::{AtomicUsize, Ordering};
use std::alloc::{GlobalAlloc, Layout, System};

/// From now on, any allocation aborts (debug builds).
pub fn arm() {
    #[cfg(debug_assertions)]
    ARMED.store(true, Ordering::SeqCst);
}

/// Debug builds only: when `CKPTRUN_TEST_ALLOCATE_AFTER_SPAWN` is set,
/// allocate once after the job started, so a test can see that the guard
/// is live. Read before arming (reading the environment allocates).
pub fn test_allocation_requested() -> bool {
    cfg!(debug_assertions) && crate::os::sys::var_os("CKPTRUN_TEST_ALLOCATE_AFTER_SPAWN").is_some()
}

/// Allocates (see `test_allocation_requested`).
pub fn allocate_for_test() {
    std::hint::black_box(Box::new(0u64));
}

/// The size of the last allocation the system allocator refused, if any.
pub fn failed_allocation() -> Option<usize> {
    match FAILED.load(Ordering::Relaxed) {
        0 => None,
        size => Some(size),
    }
}

#[cfg(debug_assertions)]
static ARMED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

static FAILED: AtomicUsize = AtomicUsize::new(0);

struct Guard;

#[global_allocator]
static GUARD: Guard = Guard;

fn check() {
    #[cfg(debug_assertions)]
    if ARMED.load(Ordering::SeqCst) {
        let msg = b"ckptrun: allocation after the job started (debug-build guard)\n";
        let _ = rustix::io::write(rustix::stdio::stderr(), msg);
        std::process::abort();
    }
}

/// Notes a refused allocation of `size` bytes (std aborts next).
fn noted(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        FAILED.store(size.max(1), Ordering::Relaxed);
    }
    ptr
}

// SAFETY: every call is passed to the system allocator unchanged; the
// guard only aborts before it or notes a null result, never hands out
// memory of its own.
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check();
        // SAFETY: same contract as ours.
        noted(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check();
        // SAFETY: same contract as ours.
        noted(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check();
        // SAFETY: same contract as ours.
        noted(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}
