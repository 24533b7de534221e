//! Thin wrappers over the libc calls rustix does not offer safely: signal
//! masks and dispositions, `sigtimedwait`, `kill` with any signal number
//! (rustix wants a named `Signal`), `personality`, `fork`, `execve`,
//! `_exit` and `strerror`. Each wrapper is one `unsafe` call and says why it
//! is sound; the rest of ckptrun is safe Rust.
//!
//! Every function here that the child calls between `fork` and `exec` is
//! async-signal-safe (signal-safety(7)): prctl, sigaction, sigprocmask,
//! execve, write, _exit, and the errno read.

use core::ffi::{CStr, c_char, c_int, c_ulong};
use core::mem::MaybeUninit;
use core::time::Duration;
use std::os::fd::OwnedFd;

/// A signal number, as the kernel numbers them (1..=64).
pub type Sig = c_int;

/// A process id.
pub type Pid = libc::pid_t;

/// The errno of the last failed call on this thread.
pub fn errno() -> c_int {
    // SAFETY: __errno_location returns a valid pointer to this thread's
    // errno for the thread's whole life; reading it is async-signal-safe.
    unsafe { *libc::__errno_location() }
}

/// The C library's text for an errno, without allocating (musl keeps a
/// static table): the one way ckptrun words an errno, on paths where
/// formatting an `io::Error` would allocate. A raw errno (a call rustix
/// does not wrap, the spawned child's report) goes through
/// `Errno::from_raw_os_error` first.
pub fn strerror(e: rustix::io::Errno) -> &'static str {
    // SAFETY: musl's strerror returns a pointer into a static, immutable,
    // NUL-terminated table for any input; ckptrun has one thread.
    let text = unsafe { CStr::from_ptr(libc::strerror(e.raw_os_error())) };
    text.to_str().unwrap_or("unknown error")
}

/// Wall-clock time, seconds and nanoseconds since 1970 (0 before it).
/// Through the C library's clock_gettime, as std's clocks: rustix's own
/// vDSO lookup would add some 3 KB to the binary for the same call.
pub fn realtime() -> (i64, u32) {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_secs() as i64, t.subsec_nanos())
}

/// The coarse wall clock (seconds, nanoseconds): the one the kernel
/// dates inodes by, so a ctime can be compared with it.
pub fn coarse_realtime() -> Option<(i64, i64)> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut t) };
    #[allow(clippy::unnecessary_cast)] // i32 on i686
    (r == 0).then_some((t.tv_sec as i64, t.tv_nsec as i64))
}

/// Starts writing `len` bytes of `fd` at `offset` back to the disk,
/// without waiting (sync_file_range(2), SYNC_FILE_RANGE_WRITE): a later
/// fsync then finds less to do. A hint: a failure is left to that fsync.
pub fn start_writeback(fd: impl std::os::fd::AsFd, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain integers; the descriptor is borrowed for the call.
    unsafe {
        libc::sync_file_range(
            fd.as_fd().as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// The process group of `pid` (getpgid(2)): 0 for a group outside our
/// PID namespace, -1 on error. Not rustix's, which asserts a positive one.
pub fn process_group(pid: Pid) -> Pid {
    // SAFETY: a plain integer argument.
    unsafe { libc::getpgid(pid) }
}

/// A set of signals (`sigset_t`), built bit by bit as the kernel reads
/// it. Not with sigfillset(3) and sigaddset(3): musl's leave out 32-34,
/// which it keeps for its own threads (ckptrun has one), and one of them
/// would then kill ckptrun (or, as PID 1, vanish) instead of reaching the
/// job.
#[derive(Clone, Copy)]
pub struct SigSet(libc::sigset_t);

/// The unsigned longs of the kernel's mask: signals 1 to 64.
const MASK_WORDS: usize = 64 / c_ulong::BITS as usize;

impl SigSet {
    pub fn empty() -> Self {
        // SAFETY: sigset_t is an array of integers; all zero is no signal.
        Self(unsafe { core::mem::zeroed() })
    }

    /// Every signal, 1 to 64.
    #[inline(never)] // One copy for every caller.
    pub fn full() -> Self {
        let mut set = Self::empty();
        *set.kernel_mask() = [c_ulong::MAX; MASK_WORDS];
        set
    }

    pub fn only(sig: Sig) -> Self {
        let mut set = Self::empty();
        set.add(sig);
        set
    }

    /// Adds `sig` (1 to 64; any other number is left out).
    #[inline(never)] // One copy for every caller.
    pub fn add(&mut self, sig: Sig) {
        let Some(bit) = (sig as u32).checked_sub(1).filter(|&b| b < 64) else {
            return;
        };
        let word = (bit / c_ulong::BITS) as usize;
        self.kernel_mask()[word] |= 1 << (bit % c_ulong::BITS);
    }

    fn kernel_mask(&mut self) -> &mut [c_ulong; MASK_WORDS] {
        // SAFETY: sigset_t is a C array of unsigned longs, 1024 bits in
        // musl, that begins with the kernel's 64-bit mask (signal N is bit
        // N-1). The cast stays within it and keeps its alignment.
        unsafe { &mut *(&raw mut self.0).cast::<[c_ulong; MASK_WORDS]>() }
    }
}

/// Replaces this thread's signal mask and returns the previous one
/// (pthread_sigmask(3); async-signal-safe). It cannot fail with valid
/// arguments.
pub fn set_mask(how: c_int, set: &SigSet) -> SigSet {
    let mut old = SigSet::empty();
    // SAFETY: both pointers are to initialised sigset_t values we own.
    unsafe { libc::pthread_sigmask(how, &set.0, &mut old.0) };
    old
}

/// Replaces this thread's signal mask (sigprocmask(2) through
/// pthread_sigmask(3); async-signal-safe), saying if it failed: for the
/// child between fork and exec, which reports any failure.
pub fn try_set_mask(how: c_int, set: &SigSet) -> Result<(), c_int> {
    // SAFETY: a valid sigset_t we own; a null old pointer is allowed.
    match unsafe { libc::pthread_sigmask(how, &set.0, core::ptr::null_mut()) } {
        0 => Ok(()),
        // pthread_sigmask returns the error number, not -1.
        errno => Err(errno),
    }
}

/// A signal disposition (`struct sigaction`), kept only to be restored.
#[derive(Clone, Copy)]
pub struct SigAction(libc::sigaction);

impl SigAction {
    /// `SIG_DFL` with no flags and an empty mask.
    pub fn default_action() -> Self {
        // SAFETY: an all-zero sigaction is SIG_DFL (0), no flags, and an
        // empty mask on Linux.
        Self(unsafe { core::mem::zeroed() })
    }

    /// `SIG_IGN` with no flags and an empty mask.
    pub fn ignore() -> Self {
        let mut action = Self::default_action();
        action.0.sa_sigaction = libc::SIG_IGN;
        action
    }

    pub fn is_ignored(&self) -> bool {
        self.0.sa_sigaction == libc::SIG_IGN
    }

    /// SA_NOCLDWAIT: the kernel reaps children itself, so `waitpid`
    /// would never report them.
    pub fn no_child_wait(&self) -> bool {
        self.0.sa_flags & libc::SA_NOCLDWAIT != 0
    }
}

/// The current disposition of `sig` (sigaction(2)).
pub fn get_action(sig: Sig) -> SigAction {
    let mut old = SigAction::default_action();
    // SAFETY: a null new action only reads; `old` is a valid sigaction.
    unsafe { libc::sigaction(sig, core::ptr::null(), &mut old.0) };
    old
}

/// Installs a disposition (sigaction(2); async-signal-safe); the errno
/// if it failed.
pub fn set_action(sig: Sig, action: &SigAction) -> Result<(), c_int> {
    // SAFETY: `action` is a valid sigaction holding SIG_DFL, SIG_IGN or a
    // value the kernel itself gave us; a null old pointer is allowed.
    match unsafe { libc::sigaction(sig, &action.0, core::ptr::null_mut()) } {
        0 => Ok(()),
        _ => Err(errno()),
    }
}

/// A signal taken from the queue.
#[derive(Clone, Copy)]
pub struct Received {
    pub sig: Sig,
    /// Raised by this very process: a write of ours to a closed pipe
    /// (SIGPIPE) or past RLIMIT_FSIZE (SIGXFSZ). Those are ckptrun's own
    /// business, never the job's.
    pub from_self: bool,
}

/// Waits for one of the (blocked) signals in `set`, at most `timeout`
/// (sigtimedwait(2)). `None` means the time ran out or a wake-up without
/// a signal; the caller loops.
pub fn wait_signal(set: &SigSet, timeout: Option<Duration>) -> Option<Received> {
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    let sig = match timeout {
        Some(t) => {
            let ts = libc::timespec {
                tv_sec: t.as_secs().min(i32::MAX as u64) as _,
                tv_nsec: t.subsec_nanos() as _,
            };
            // SAFETY: valid set, writable siginfo, valid timespec.
            unsafe { libc::sigtimedwait(&set.0, info.as_mut_ptr(), &ts) }
        }
        // SAFETY: valid set, writable siginfo.
        None => unsafe { libc::sigwaitinfo(&set.0, info.as_mut_ptr()) },
    };
    if sig <= 0 {
        return None;
    }
    if sig == libc::SIGILL {
        // Blocked by `on_sigill` to be taken here (see `internal_error::catch_traps`):
        // a trap must find it unblocked again.
        set_mask(libc::SIG_UNBLOCK, &SigSet::only(libc::SIGILL));
    }
    // SAFETY: zero-initialised and filled in by the kernel for `sig`.
    let info = unsafe { info.assume_init() };
    // The kernel raises these for a write of ours as if we had sent them
    // (SI_USER from our own pid). Only these two: any other signal with our
    // pid may have been raised before the exec that started ckptrun, and
    // is meant for the job. SAFETY: si_pid is valid for SI_USER.
    let from_self = matches!(sig, libc::SIGPIPE | libc::SIGXFSZ)
        && info.si_code == libc::SI_USER
        && unsafe { info.si_pid() } == rustix::process::getpid().as_raw_nonzero().get();
    Some(Received { sig, from_self })
}

/// Sleeps for `d`, taking no signal: sigtimedwait on an empty set (all
/// of ckptrun's signals are blocked and stay pending for the supervisor).
/// No new code beside `wait_signal`, which the binary has anyway.
pub fn pause_for(d: Duration) {
    let _ = wait_signal(&SigSet::empty(), Some(d));
}

/// Reads into `buf` until it is full or the end of the file, retrying
/// after EINTR; returns how many bytes it read. Async-signal-safe (read(2)).
pub fn read_fill(fd: impl std::os::fd::AsFd, buf: &mut [u8]) -> rustix::io::Result<usize> {
    let mut len = 0;
    while len < buf.len() {
        match rustix::io::read(&fd, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

/// Reads what is in the pipe now (non-blocking) into `buf`, keeping the
/// first `buf.len()` bytes; returns how many it kept.
pub fn drain(pipe: std::os::fd::BorrowedFd, buf: &mut [u8]) -> usize {
    let mut len = 0;
    let mut spill = [0u8; 512];
    loop {
        let into: &mut [u8] = if len < buf.len() {
            &mut buf[len..]
        } else {
            &mut spill
        };
        match rustix::io::read(pipe, into) {
            Ok(0) | Err(_) => return len,
            Ok(n) if len < buf.len() => len += n,
            Ok(_) => {}
        }
    }
}

/// Reaps our child `pid` if it has ended; its raw wait status.
pub fn reap(pid: Pid) -> Option<i32> {
    reap_with(pid, rustix::process::WaitOptions::NOHANG)
}

/// Waits for our child `pid` to end and reaps it; its raw wait status.
pub fn reap_waiting(pid: Pid) -> Option<i32> {
    reap_with(pid, rustix::process::WaitOptions::empty())
}

fn reap_with(pid: Pid, options: rustix::process::WaitOptions) -> Option<i32> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    match rustix::process::waitpid(Some(pid), options) {
        Ok(Some((_, status))) => Some(status.as_raw()),
        _ => None,
    }
}

/// A pipe a helper answers into: (the read end, non-blocking, to read
/// with `drain`; the write end, for its standard output). Both close on
/// exec.
pub fn answer_pipe() -> rustix::io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::NONBLOCK)?;
    Ok((read, write))
}

/// Writes all of `bytes`, retrying after EINTR and short writes.
pub fn write_all(fd: impl std::os::fd::AsFd, mut bytes: &[u8]) -> rustix::io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(&fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// abort(3): dies by SIGABRT, even with SIGABRT blocked (musl unblocks it).
/// Async-signal-safe.
pub fn abort() -> ! {
    // SAFETY: no arguments; never returns.
    unsafe { libc::abort() }
}

/// Sets the signal this process receives when its parent dies
/// (prctl(PR_SET_PDEATHSIG)).
pub fn set_parent_death_signal(sig: Sig) -> Result<(), c_int> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Sends `sig` to `pid` (kill(2); async-signal-safe). Negative `pid`
/// means a process group, as in kill(2).
pub fn kill(pid: Pid, sig: Sig) -> Result<(), c_int> {
    // SAFETY: kill has no memory arguments.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Sets this process's execution domain and returns the previous one;
/// 0xffffffff only reads it (personality(2)).
pub fn personality(persona: u32) -> Result<u32, c_int> {
    // SAFETY: personality has no memory arguments.
    let prev = unsafe { libc::personality(persona as libc::c_ulong) };
    if prev == -1 {
        Err(errno())
    } else {
        Ok(prev as u32)
    }
}

pub enum Forked {
    Child,
    Parent(Pid),
}

/// fork(2).
///
/// Sound because ckptrun never starts a thread: the child is a full copy
/// of a single-threaded process, so no lock can be held by a thread that
/// does not exist in the child. The child still keeps to
/// async-signal-safe calls (see `spawn::exec_child`).
pub fn fork() -> Result<Forked, c_int> {
    // SAFETY: see above.
    match unsafe { libc::fork() } {
        -1 => Err(errno()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// The environment variable `name`'s value, as `std::env::var_os` gives
/// it but without std's lock and C-string copy of the name (ckptrun
/// never starts a thread, and `add_env` is the only writer): 1.1 KB
/// less of the supervisor's code.
pub fn var_os(name: &str) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: environ is libc's NULL-terminated array of NUL-terminated
    // entries, or NULL; nothing changes it while this runs (one thread).
    let mut p = unsafe { environ };
    // SAFETY: as above.
    while let Some(entry) = unsafe { p.as_ref() }.filter(|e| !e.is_null()) {
        // SAFETY: as above: each entry is a NUL-terminated string.
        let entry = unsafe { CStr::from_ptr(*entry) }.to_bytes();
        let value = entry
            .strip_prefix(name.as_bytes())
            .and_then(|r| r.strip_prefix(b"="));
        if let Some(value) = value {
            return Some(std::ffi::OsStr::from_bytes(value).to_os_string());
        }
        // SAFETY: the entry was not the terminating NULL: one more follows.
        p = unsafe { p.add(1) };
    }
    None
}

/// Adds `entry` (`NAME=VALUE`, NAME not set yet) to ckptrun's
/// environment, which every program it starts from now on inherits
/// (`execve`): a new array, the old one's entries and `entry`, both kept
/// for the life of the process. Sound because ckptrun never starts a
/// thread: nothing reads `environ` while it changes, and the old array
/// stays valid. Allocates: only before the job starts. Inlined into its
/// one caller (dmtcp mode), whose load segment it is in (build.rs), not
/// the supervisor's; std's `set_var` would add 1.2 KB there.
#[inline(always)]
pub fn add_env(entry: std::ffi::CString) {
    let mut all = Vec::new();
    // SAFETY: environ is libc's NULL-terminated array of entries, or
    // NULL (none).
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            all.push(*p);
            p = p.add(1);
        }
    }
    all.push(entry.into_raw().cast_const());
    all.push(core::ptr::null());
    // SAFETY: see above; the array is leaked, so it outlives every use.
    unsafe { environ = all.leak().as_ptr() };
}

/// How many CPUs this process may run on (its affinity), 1 if that
/// cannot be told. Inlined into its one caller (`store::pack`, in the
/// segment only children run: build.rs).
#[inline(always)]
pub fn cpus() -> usize {
    // SAFETY: cpu_set_t is plain bits, valid all zero.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    let size = core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: the call fills `set`, whose size it is given; CPU_COUNT
    // reads it.
    match unsafe { libc::sched_getaffinity(0, size, &mut set) } {
        0 => unsafe { libc::CPU_COUNT(&set) }.max(1) as usize,
        _ => 1,
    }
}

unsafe extern "C" {
    /// The process environment, handed on to the job (dmtcp mode names
    /// DMTCP's temporary directory in it: `add_env`).
    static mut environ: *const *const c_char;
}

/// execve(2) with the current environment; returns only on failure, with
/// the errno. Async-signal-safe.
///
/// `argv` must be a NULL-terminated array of pointers to NUL-terminated
/// strings that outlive the call; `spawn::Command` builds it so.
pub fn execve(path: &CStr, argv: &[*const c_char]) -> c_int {
    debug_assert!(argv.last().is_some_and(|p| p.is_null()));
    // SAFETY: path is NUL-terminated; argv is NULL-terminated (checked by
    // the caller's construction); environ is libc's own array.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), environ) };
    errno()
}

/// Puts /dev/null (close-on-exec) on each of descriptors 0-2 that ckptrun
/// was started without, so that no file ckptrun opens later (its log, the
/// store) takes that number and receives what is written to stderr. The
/// job still gets them closed: close-on-exec.
pub fn hold_standard_fds() {
    for fd in 0..3 {
        // SAFETY: fcntl(F_GETFD) on a number only asks whether it is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        // open(2) returns the lowest free number: `fd`, as 0..fd are open.
        let Ok(null) = rustix::fs::open(
            c"/dev/null",
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            return;
        };
        if std::os::fd::AsRawFd::as_raw_fd(&null) == fd {
            // Kept open for the life of the process.
            std::mem::forget(null);
        }
    }
}

/// Waits for the child `pid` to end (waitpid(2), retried after EINTR):
/// its exit code, or none if it died by a signal or cannot be waited for.
pub fn wait_exit_code(pid: Pid) -> Option<c_int> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => return status.exit_status(),
            Err(rustix::io::Errno::INTR) => {}
            _ => return None,
        }
    }
}

/// Closes every descriptor of this process but `a` and `b`
/// (close_range(2), else one by one up to 4096 on a kernel before 5.9):
/// for a child that must hold nothing else of its parent's, such as a
/// lock or an output pipe. Async-signal-safe.
pub fn close_all_but(a: c_int, b: c_int) {
    let (lo, hi) = (a.min(b).max(0) as i64, a.max(b).max(0) as i64);
    let ranges = [(0, lo - 1), (lo + 1, hi - 1), (hi + 1, i64::from(u32::MAX))];
    for (first, last) in ranges.into_iter().filter(|(f, l)| f <= l) {
        // SAFETY: close_range takes integers only.
        let r = unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) };
        if r != 0 {
            for fd in first..=last.min(4095) {
                // SAFETY: close of a number this child no longer uses.
                unsafe { libc::close(fd as c_int) };
            }
        }
    }
}

/// _exit(2): ends the process at once, running no destructor or atexit
/// handler. Async-signal-safe.
pub fn exit_now(code: c_int) -> ! {
    // SAFETY: no arguments besides the code; never returns.
    unsafe { libc::_exit(code) }
}

/// dlsym(3) for the static 32-bit x86 build, in place of musl's.
///
/// rustix goes through libc on 32-bit x86 (Cargo.toml says why) and asks
/// `dlsym` whether libc has `statx` before falling back to the system
/// call. A static binary has no dynamic symbols: musl's stub answers null
/// too, but first formats a dlerror message with printf, which links
/// about 9 KB of printf and floating-point formatting into the binary
/// for nothing. The linker takes this definition and leaves musl's out.
/// Nothing in ckptrun reads dlerror.
#[cfg(all(
    target_arch = "x86",
    target_env = "musl",
    target_feature = "crt-static",
    not(test)
))]
#[unsafe(no_mangle)]
extern "C" fn dlsym(
    _handle: *mut core::ffi::c_void,
    _name: *const c_char,
) -> *mut core::ffi::c_void {
    core::ptr::null_mut()
}
