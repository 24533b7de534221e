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
//! `catch_traps`).

use crate::os::log::Log;
use crate::os::sys;

/// Installs the SIGILL handler (and, where panics are not traps, a panic
/// hook). Called right after `Inherited::take`, which keeps SIGILL's
/// inherited disposition for the job.
pub fn report_panics() {
    catch_traps();
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
    match crate::os::alloc_guard::failed_allocation() {
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
    crate::os::sys::var_os("CKPTRUN_TEST_PANIC_AFTER_SPAWN").is_some()
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
unsafe extern "C" {
    /// The binary's ELF header, which the linker places at its start.
    static __ehdr_start: u8;
}

/// Installs the SIGILL handler and unblocks SIGILL (the caller has
/// blocked every signal). A trap, which is what a panic compiles to in
/// the shipped build (`ud2`, raised by the kernel: si_code > 0), is
/// reported by `trapped` with its offset in the binary; a
/// trap while SIGILL is blocked would kill ckptrun without a word. A
/// SIGILL sent by a process (si_code <= 0) is the job's: sent while
/// ckptrun waits in `wait_signal`, that call takes it; sent while ckptrun
/// is busy, `on_sigill` leaves it pending and blocked for the next one,
/// which unblocks it again.
pub fn catch_traps() {
    // SAFETY: an all-zero sigaction is valid (SIG_DFL, no flags); the
    // handler, flags and mask are set below.
    let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
    action.sa_sigaction = on_sigill as *const () as libc::sighandler_t;
    action.sa_flags = libc::SA_SIGINFO;
    // SAFETY: sigfillset initialises the mask it is given. Every signal
    // is blocked while the handler runs.
    unsafe { libc::sigfillset(&mut action.sa_mask) };
    // SAFETY: `action` is a valid sigaction whose handler has the
    // SA_SIGINFO signature; a null old pointer is allowed.
    unsafe { libc::sigaction(libc::SIGILL, &action, core::ptr::null_mut()) };
    // musl's sigaction unblocks 33 and 34 (its threads' own) with the
    // first handler installed: blocked again, to reach the job.
    sys::set_mask(libc::SIG_BLOCK, &sys::SigSet::full());
    sys::set_mask(libc::SIG_UNBLOCK, &sys::SigSet::only(libc::SIGILL));
}

extern "C" fn on_sigill(
    _: core::ffi::c_int,
    info: *mut libc::siginfo_t,
    context: *mut core::ffi::c_void,
) {
    // SAFETY: the kernel passes an SA_SIGINFO handler a valid siginfo_t.
    let info = unsafe { &*info };
    if info.si_code > 0 {
        // SAFETY: for a SIGILL the kernel raised, si_addr is the address
        // of the faulting instruction.
        let at = unsafe { info.si_addr() } as usize;
        let start = &raw const __ehdr_start as usize;
        trapped(at.wrapping_sub(start));
    }
    // SAFETY: the kernel passes an SA_SIGINFO handler a valid ucontext_t,
    // whose signal mask it restores when the handler returns: SIGILL
    // stays blocked after it.
    let context = unsafe { &mut *context.cast::<libc::ucontext_t>() };
    // SAFETY: uc_sigmask is an initialised sigset_t.
    unsafe { libc::sigaddset(&mut context.uc_sigmask, libc::SIGILL) };
    // Pending again (blocked here and after), for `wait_signal`.
    let _ = sys::kill(
        rustix::process::getpid().as_raw_nonzero().get(),
        libc::SIGILL,
    );
}
