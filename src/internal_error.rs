//! A panic in ckptrun is a bug, or memory ran out; either way the user
//! gets one line on stderr saying so, then ckptrun aborts (SIGABRT), as
//! a panic did before.
//!
//! The shipped build (scripts/build-release.sh) compiles every panic to a
//! trap instruction at its site (`-Cpanic=immediate-abort`): no panic hook
//! runs, and std's message formatting and unwinder are left out of the
//! binary. The trap raises SIGILL; the handler installed here writes the
//! line, with where the trap was (an offset in the binary: `addr2line -e`
//! on an unstripped build of the same commit names the source line).
//! Other builds keep std's panics, and a panic hook makes them one line.
//!
//! SIGILL stays unblocked for this, as tini and catatonit leave the fault
//! signals. One sent by another process is still the job's: the
//! supervisor's `sigtimedwait` takes it as any other signal, and the
//! handler hands one that arrives while ckptrun is busy back to it (see
//! `sys::catch_traps`).

use crate::log::Log;
use crate::sys;

/// Installs the SIGILL handler (and, where panics are not traps, a panic
/// hook). Called right after `Inherited::take`, which keeps SIGILL's
/// inherited disposition for the job.
pub fn report_panics() {
    sys::catch_traps();
    #[cfg(not(panic = "immediate-abort"))]
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map_or(("?", 0), |l| (l.file(), l.line()));
        let payload = info.payload();
        let what = (payload.downcast_ref::<&str>().copied())
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        Log::stderr_only().warn(format_args!(
            "internal error: {what} at {}:{} ({}); please report it",
            at.0,
            at.1,
            identity()
        ));
    }));
}

/// The SIGILL handler's report, for a trap at `offset` in the binary.
/// Runs in a signal handler: it only formats on the stack and writes.
pub fn trapped(offset: usize) -> ! {
    let log = Log::stderr_only();
    match crate::alloc_guard::failed_allocation() {
        Some(size) => log.warn(format_args!(
            "out of memory: an allocation of {size} bytes failed"
        )),
        None => log.warn(format_args!(
            "internal error: a bug, trapped at {offset:#x} ({}); please report it",
            identity()
        )),
    }
    sys::abort()
}

/// Which build this is: enough to find the source line of an offset.
fn identity() -> &'static str {
    concat!(
        "ckptrun ",
        env!("CARGO_PKG_VERSION"),
        ", ",
        env!("CKPTRUN_TARGET"),
        ", commit ",
        env!("CKPTRUN_COMMIT")
    )
}

/// `CKPTRUN_TEST_PANIC_AFTER_SPAWN`, for the tests only: panic once the job
/// has started, to show a panic is one line. Read before the job starts
/// (reading the environment allocates). Debug builds only: the shipped
/// build has no such hook (nothing in a job's environment can make it
/// abort).
#[cfg(debug_assertions)]
pub fn test_panic_requested() -> bool {
    std::env::var_os("CKPTRUN_TEST_PANIC_AFTER_SPAWN").is_some()
}

/// Panics as a bug would (with a fixed message: a formatted one would
/// allocate in std's panic path, which the debug build's guard refuses
/// once the job runs).
#[cfg(debug_assertions)]
pub fn panic_for_test() {
    if std::hint::black_box(true) {
        panic!("the test panic CKPTRUN_TEST_PANIC_AFTER_SPAWN asked for");
    }
}
