//! An "unmodified program" for the fake DMTCP tools (examples/fake_dmtcp),
//! for the tests of `ckptrun --mode dmtcp`.
//!
//! `dmtcp_job STEPS STEP_MS [ARG...]` runs steps `i = next..STEPS`: for
//! each, sleeps STEP_MS, then writes `step i\n` to stdout in one write(2)
//! (no buffering). At the end it prints `done args=ARG|ARG|...` (its own
//! argv, so a test sees that arguments survived a restart) and ends as
//! `DMTCP_JOB_END` says: unset or `0`: exit 0; `exit:N`: exit N;
//! `signal:NAME` (TERM, KILL, SEGV, USR1, INT, ... or a number): dies by
//! that signal, without a core dump.
//!
//! A fake cannot checkpoint an arbitrary process, so this one links the
//! fake's client side (`proto.rs`, the stand-in for the library DMTCP
//! preloads) and serves checkpoint requests itself: when started by the
//! fake dmtcp_launch or dmtcp_restart (`FAKE_DMTCP_COORD` set) it joins the
//! coordinator; otherwise it just runs, uncheckpointable. Its state is the
//! next step; a checkpoint freezes it between steps (the lock the main loop
//! holds around each step and the end). Restored by dmtcp_restart
//! (`FAKE_DMTCP_RESTORE`), it takes the step from the image and prints
//! nothing extra. As with DMTCP, its stdout is not cut back at a restart:
//! what it wrote after the checkpoint is written again, unless the
//! computation was killed with its checkpoint (`--kcheckpoint`) or
//! whoever restarts it cuts the file back (ckptrun does).
//!
//! - `DMTCP_JOB_PIDFILE=F`: writes its pid to F (tmp + rename) at every
//!   start, fresh or restored, once it has joined the coordinator.
//! - `DMTCP_JOB_CHILD=1`: at start forks a child that sleeps forever in
//!   the job's process group and never joins the coordinator (for "no
//!   process left behind" tests).
//! - `DMTCP_JOB_DATA=F`: also writes each `step i` line to F, which it
//!   holds open for writing on a descriptor above 2 (emptied at a fresh
//!   start, appended to when restored): DMTCP cuts such a file back to its
//!   size at the checkpoint.
//! - `DMTCP_JOB_LINGER_MS=N`: at the end, closes its connection to the
//!   coordinator, then lingers N ms before ending: the window in which
//!   a process being torn down has closed its files but is not yet a
//!   zombie, stretched (with `--exit-on-last`, DMTCP's coordinator may
//!   exit inside it).

#[path = "fake_dmtcp/proto.rs"]
mod proto;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::exit;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Held around each step: a checkpoint takes it to freeze the job.
static FREEZE: Mutex<()> = Mutex::new(());
/// The state: the next step to run.
static NEXT: AtomicU64 = AtomicU64::new(0);

fn state() -> String {
    NEXT.load(Ordering::SeqCst).to_string()
}

/// How the job ends after its last step.
enum End {
    Exit(i32),
    Signal(i32),
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.to_str()?.parse().ok())
            .unwrap_or_else(|| fail(2, "usage: dmtcp_job STEPS STEP_MS [ARG...]"))
    };
    let (steps, step_ms) = (number(1), number(2));
    let end = match std::env::var("DMTCP_JOB_END") {
        Err(_) => End::Exit(0),
        Ok(spec) => {
            parse_end(&spec).unwrap_or_else(|| fail(2, &format!("bad DMTCP_JOB_END={spec:?}")))
        }
    };

    let restored = proto::restored().unwrap_or_else(|why| fail(99, &format!("restore: {why}")));
    if let Some(image) = &restored {
        let next = std::str::from_utf8(&image.state)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fail(99, "restore: bad state in the image"));
        NEXT.store(next, Ordering::SeqCst);
    }
    if std::env::var("DMTCP_JOB_CHILD").as_deref() == Ok("1") {
        // Before any thread exists; the child never joins.
        // SAFETY: fork in a single-threaded process; the child only closes
        // its standard streams (so that a test reading ckptrun's output is
        // not kept waiting by it) and pauses.
        if unsafe { libc::fork() } == 0 {
            for fd in 0..3 {
                // SAFETY: close has no memory arguments.
                unsafe { libc::close(fd) };
            }
            loop {
                // SAFETY: pause has no arguments.
                unsafe { libc::pause() };
            }
        }
    }
    // Opened before the job joins, as a program opens its files: it is
    // open at every checkpoint.
    let data = std::env::var_os("DMTCP_JOB_DATA").map(|path| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(restored.is_none())
            .open(&path)
            .unwrap_or_else(|e| fail(1, &format!("DMTCP_JOB_DATA: {e}")));
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
            .unwrap_or_else(|e| fail(1, &format!("DMTCP_JOB_DATA: {e}")));
        // Above 2 whatever the job inherited.
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) with a valid descriptor.
        let fd = unsafe {
            libc::fcntl(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::F_DUPFD_CLOEXEC,
                3,
            )
        };
        if fd < 0 {
            fail(1, "DMTCP_JOB_DATA: fcntl failed");
        }
        fd
    });
    proto::join(restored.as_ref(), &FREEZE, state)
        .unwrap_or_else(|why| fail(99, &format!("fake DMTCP: {why}")));
    if let Some(file) = std::env::var_os("DMTCP_JOB_PIDFILE") {
        let mut tmp = file.clone();
        tmp.push(".tmp");
        std::fs::write(&tmp, std::process::id().to_string())
            .and_then(|()| std::fs::rename(&tmp, &file))
            .unwrap_or_else(|e| fail(1, &format!("DMTCP_JOB_PIDFILE: {e}")));
    }

    while NEXT.load(Ordering::SeqCst) < steps {
        std::thread::sleep(Duration::from_millis(step_ms));
        let _step = FREEZE.lock().unwrap_or_else(|e| e.into_inner());
        let i = NEXT.load(Ordering::SeqCst);
        write_out(1, format!("step {i}\n").as_bytes());
        if let Some(fd) = data {
            write_out(fd, format!("step {i}\n").as_bytes());
        }
        NEXT.store(i + 1, Ordering::SeqCst);
    }
    // The end is a step too: not while a checkpoint is being written.
    let _end = FREEZE.lock().unwrap_or_else(|e| e.into_inner());
    let mut line = b"done args=".to_vec();
    for (n, arg) in args.iter().skip(3).enumerate() {
        if n > 0 {
            line.push(b'|');
        }
        line.extend(arg.as_bytes());
    }
    line.push(b'\n');
    write_out(1, &line);
    if let Some(ms) = std::env::var("DMTCP_JOB_LINGER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        proto::disconnect();
        std::thread::sleep(Duration::from_millis(ms));
    }
    match end {
        End::Exit(code) => exit(code),
        End::Signal(sig) => die_by(sig),
    }
}

fn parse_end(spec: &str) -> Option<End> {
    if spec.is_empty() || spec == "0" {
        return Some(End::Exit(0));
    }
    if let Some(code) = spec.strip_prefix("exit:") {
        return code.parse().ok().map(End::Exit);
    }
    let name = spec.strip_prefix("signal:")?;
    let name = name.strip_prefix("SIG").unwrap_or(name);
    let sig = match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "ILL" => libc::SIGILL,
        "ABRT" => libc::SIGABRT,
        "BUS" => libc::SIGBUS,
        "FPE" => libc::SIGFPE,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "SEGV" => libc::SIGSEGV,
        "USR2" => libc::SIGUSR2,
        "PIPE" => libc::SIGPIPE,
        "ALRM" => libc::SIGALRM,
        "TERM" => libc::SIGTERM,
        _ => name.parse().ok()?,
    };
    Some(End::Signal(sig))
}

/// All of `bytes` to `fd` with write(2), unbuffered; errors ignored (a
/// closed stdout does not stop the job).
fn write_out(fd: i32, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: bytes is a valid buffer of that length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Dies by `sig`: default disposition, unblocked, no core dump.
fn die_by(sig: i32) -> ! {
    // SAFETY: setrlimit, signal, sigprocmask and raise with valid arguments.
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    exit(128 + sig);
}

fn fail(code: i32, why: &str) -> ! {
    eprintln!("dmtcp_job: {why}");
    exit(code);
}
