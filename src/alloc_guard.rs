//! The proof that ckptrun does not allocate once the job is running: in
//! debug builds (the ones `cargo test` drives the integration tests
//! against), a global allocator that aborts the process on any allocation
//! after `arm()`. Release builds use the system allocator untouched.

/// From now on, any allocation aborts (debug builds).
pub fn arm() {
    #[cfg(debug_assertions)]
    imp::ARMED.store(true, core::sync::atomic::Ordering::SeqCst);
}

/// Debug builds only: when `CKPTRUN_TEST_ALLOCATE_AFTER_SPAWN` is set,
/// allocate once after the job started, so a test can see that the guard
/// is live. Read before arming (reading the environment allocates).
pub fn test_allocation_requested() -> bool {
    cfg!(debug_assertions) && std::env::var_os("CKPTRUN_TEST_ALLOCATE_AFTER_SPAWN").is_some()
}

/// Allocates (see `test_allocation_requested`).
pub fn allocate_for_test() {
    std::hint::black_box(Box::new(0u64));
}

#[cfg(debug_assertions)]
mod imp {
    use core::sync::atomic::{AtomicBool, Ordering};
    use std::alloc::{GlobalAlloc, Layout, System};

    pub static ARMED: AtomicBool = AtomicBool::new(false);

    struct Guard;

    #[global_allocator]
    static GUARD: Guard = Guard;

    fn check() {
        if ARMED.load(Ordering::SeqCst) {
            let msg = b"ckptrun: allocation after the job started (debug-build guard)\n";
            let _ = rustix::io::write(rustix::stdio::stderr(), msg);
            std::process::abort();
        }
    }

    // SAFETY: every call is passed to the system allocator unchanged; the
    // guard only aborts before it, never hands out memory of its own.
    unsafe impl GlobalAlloc for Guard {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            check();
            // SAFETY: same contract as ours.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            check();
            // SAFETY: same contract as ours.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            check();
            // SAFETY: same contract as ours.
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: same contract as ours.
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}
