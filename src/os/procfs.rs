//! Reading whether a child has installed a signal handler, from
//! /proc/PID/stat in a fixed buffer: it runs in the supervision loop,
//! where nothing may allocate.

use core::fmt::Write;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use crate::os::decimal;
use crate::os::sys::{self, Pid, Sig};

/// Whether our child `pid` has a handler installed for `sig` (1-31).
/// `false` when that cannot be known: /proc unreadable, or a /proc that
/// belongs to another PID namespace (its `pid` is not our child).
pub fn catches(pid: Pid, sig: Sig) -> bool {
    in_mask(pid, sig, |s| s.caught)
}

/// Whether `sig` (1-31) sent to our child `pid` is surely lost: it
/// ignores it (SIGTERM, say, under Slurm: `run::slurm::shield`) and does
/// not block it, for the kernel queues a blocked signal even when
/// ignored (a program may take it with sigwait or a signalfd). Only for
/// a single thread: /proc/PID/stat shows the first thread's mask, and
/// another may block it. `false` when that cannot be known.
pub fn deaf(pid: Pid, sig: Sig) -> bool {
    in_mask(pid, sig, |s| {
        if s.threads == 1 {
            s.ignored & !s.blocked
        } else {
            0
        }
    })
}

/// Whether `sig` is in the mask `pick` takes from our child's stat line.
fn in_mask(pid: Pid, sig: Sig, pick: fn(&Stat) -> u64) -> bool {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    stat(pid)
        .filter(|s| s.ppid == me)
        .is_some_and(|s| (1..=31).contains(&sig) && pick(&s) & (1u64 << (sig - 1)) != 0)
}

/// The signals our child `pid` catches and has pending, sent to it or
/// to its main thread (bit N-1 for signal N): requests it has not taken
/// yet, because it has not run since, is stopped, or blocks them. 0 when
/// /proc cannot say. Does not allocate.
pub fn caught_pending(pid: Pid) -> u64 {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    if stat(pid).is_none_or(|s| s.ppid != me) {
        return 0;
    }
    // The masks come some 650 bytes in; the rest (1.4 KiB in all) is not
    // needed.
    let mut buf = [0u8; 2048];
    read(pid, "status", &mut buf).map_or(0, caught_pending_in)
}

/// `caught_pending` from a status file.
fn caught_pending_in(status: &[u8]) -> u64 {
    let mask = |key: &[u8]| {
        let at = status.windows(key.len()).position(|w| w == key)? + key.len();
        hex(status.get(at..at + 17)?)
    };
    let pending = mask(b"\nSigPnd:").unwrap_or(0) | mask(b"\nShdPnd:").unwrap_or(0);
    pending & mask(b"\nSigCgt:").unwrap_or(0)
}

/// A mask of /proc/PID/status: up to 16 hex digits, blanks around.
fn hex(field: &[u8]) -> Option<u64> {
    let digits = field.trim_ascii();
    (1..=16).contains(&digits.len()).then_some(())?;
    digits.iter().try_fold(0u64, |v, &b| {
        Some(v << 4 | (b as char).to_digit(16)? as u64)
    })
}

/// Whether our child `pid` has left its program behind: it is exiting
/// or a zombie. /proc/PID/exe names the program of a process that has
/// one; `exit` drops it (exit_mm) before it closes the process's files,
/// while `execve` has the new one in place before it closes those marked
/// close-on-exec. So once a close-on-exec pipe's end has closed, this
/// tells an exit from an exec. `None` when /proc cannot say (not
/// mounted, or not our PID namespace's). Does not allocate.
pub fn has_exited(pid: Pid) -> Option<bool> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    stat(pid).filter(|s| s.ppid == me)?;
    let mut path: heapless::String<32> = heapless::String::new();
    write!(path, "/proc/{pid}/exe\0").ok()?;
    let path = core::ffi::CStr::from_bytes_with_nul(path.as_bytes()).ok()?;
    // Following the link: ENOENT once the program is gone. Anything else
    // (found; EACCES for a job that exec'd a set-uid program) means one
    // is there.
    Some(matches!(
        rustix::fs::stat(path),
        Err(rustix::io::Errno::NOENT)
    ))
}

/// How long `ended_unreaped` waits for a child it saw exiting to become
/// a zombie: it has only its last steps left, unless it is stuck in the
/// kernel (a hung file system), which must not stop ckptrun.
const EXITING_WITHIN: Duration = Duration::from_secs(1);

/// The wait status (as wait(2) gives it) of our child `pid` if it has
/// ended, without reaping it (WNOWAIT): whoever reaps it still hears of
/// it. One that `has_exited` shows exiting but not yet a zombie is looked
/// at again every 2 ms, for EXITING_WITHIN at most. Does not allocate.
/// dmtcp mode's alone, and inlined into its segment (build.rs), but on
/// i686, where that segment and the children's have no room left for it.
#[cfg_attr(target_arch = "x86", inline(never))]
pub fn ended_unreaped(pid: Pid) -> Option<i32> {
    use rustix::process::{WaitId, WaitIdOptions};
    let rpid = rustix::process::Pid::from_raw(pid)?;
    let peek = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
    let exiting = has_exited(pid) == Some(true);
    let give_up = Instant::now() + EXITING_WITHIN;
    let status = loop {
        match rustix::process::waitid(WaitId::Pid(rpid), peek) {
            Ok(Some(status)) => break status,
            Ok(None) if exiting && Instant::now() < give_up => {
                sys::pause_for(Duration::from_millis(2));
            }
            _ => return None,
        }
    };
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => Some((code & 0xff) << 8),
        (None, Some(sig)) => Some(sig | if status.dumped() { 0x80 } else { 0 }),
        _ => None,
    }
}

/// What ckptrun reads of a process's /proc/PID/stat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    ppid: Pid,
    threads: u64,
    /// Signals 1-31 its first thread blocks, those it ignores, and those
    /// it has a handler for.
    blocked: u64,
    ignored: u64,
    caught: u64,
}

/// Parent and signal masks of `pid`, from /proc/PID/stat.
fn stat(pid: Pid) -> Option<Stat> {
    // One line of about 300 bytes (the command name is at most 16);
    // a full buffer means something unexpected: unknown.
    let mut buf = [0u8; 1024];
    let line = read(pid, "stat", &mut buf)?;
    (line.len() < 1024).then_some(())?;
    parse_stat(line)
}

/// /proc/PID/FILE, as much of it as `buf` holds.
fn read<'b>(pid: Pid, file: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut path: heapless::String<32> = heapless::String::new();
    write!(path, "/proc/{pid}/{file}\0").ok()?;
    let path = core::ffi::CStr::from_bytes_with_nul(path.as_bytes()).ok()?;
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let len = sys::read_fill(&fd, buf).ok()?;
    Some(&buf[..len])
}

/// The parent (field 4), the threads (field 20), `blocked`, `sigignore`
/// and `sigcatch` (fields 32 to 34 of proc(5), decimal, signals 1-31)
/// from a stat line.
fn parse_stat(stat: &[u8]) -> Option<Stat> {
    // The command name (field 2) may hold spaces and parentheses: the
    // fields that follow start after the last ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = core::str::from_utf8(stat.get(close + 2..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let mut next = |skip| decimal::parse(fields.nth(skip)?.as_bytes());
    let ppid = Pid::try_from(next(1)?).ok()?; // field 4
    let threads = next(15)?; // field 20
    let blocked = next(11)?; // field 32
    let ignored = next(0)?; // field 33
    let caught = next(0)?; // field 34
    Some(Stat {
        ppid,
        threads,
        blocked,
        ignored,
        caught,
    })
}

/// Whether the /proc mounted here shows our own PID namespace: its
/// `self` names our pid. Inside a PID namespace whose /proc was not
/// remounted, it shows the outer one, where pids mean other processes.
/// Allocates: call it before the job starts.
pub fn is_ours() -> bool {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    std::fs::read_link("/proc/self")
        .is_ok_and(|target| target.as_os_str() == me.to_string().as_str())
}

/// Whether /proc gives the children of `pid` at all (the file needs
/// CONFIG_PROC_CHILDREN, and a sandbox may hide it).
pub fn lists_children(pid: Pid) -> bool {
    let mut path: heapless::String<48> = heapless::String::new();
    if write!(path, "/proc/{pid}/task/{pid}/children\0").is_err() {
        return false;
    }
    core::ffi::CStr::from_bytes_with_nul(path.as_bytes())
        .is_ok_and(|p| rustix::fs::open(p, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).is_ok())
}

/// The children of `pid` (a single-threaded process), as many as fit in
/// `buf`: /proc/PID/task/PID/children, read without allocating. Each is
/// checked to have `pid` as its parent, so a /proc that belongs to
/// another PID namespace yields nothing rather than strangers.
pub fn children(pid: Pid, buf: &mut [u8]) -> impl Iterator<Item = Pid> + '_ {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let len = (|| {
        let mut path: heapless::String<48> = heapless::String::new();
        write!(path, "/proc/{pid}/task/{pid}/children\0").ok()?;
        let path = core::ffi::CStr::from_bytes_with_nul(path.as_bytes()).ok()?;
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
        sys::read_fill(&fd, buf).ok()
    })()
    .unwrap_or(0);
    // A list cut off at the buffer's end may end in half a pid: drop it.
    let whole = if len == buf.len() {
        buf[..len].iter().rposition(|&b| b == b' ').unwrap_or(0)
    } else {
        len
    };
    buf[..whole]
        .split(|&b| b == b' ')
        .filter_map(|n| Pid::try_from(decimal::parse(n)?).ok())
        .filter(move |&child| stat(child).is_some_and(|s| s.ppid == me))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_pending_are_caught_and_pending_signals() {
        let status = b"Name:\tjob\nPPid:\t7\nSigPnd:\t0000000000004000\n\
            ShdPnd:\t0000000000080001\nSigBlk:\t0000000000080000\nSigCgt:\t0000000000084000\n";
        // SIGTSTP (shared) and SIGTERM (thread) caught and pending; SIGHUP
        // pending, not caught.
        assert_eq!(caught_pending_in(status), 0x84000);
        assert_eq!(caught_pending_in(b"SigPnd:\t00000000000000ff\n"), 0);
    }

    const STAT: &[u8] =
        b"4242 (a) b) c) S 77 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 555 \
        1000 50 18446744073709551615 1 1 0 0 0 0 16384 4096 526336 17 1 0 0 0 0 0\n";

    #[test]
    fn reads_the_signal_masks_after_the_command_name() {
        // Field 20: 3 threads. Fields 31-34: pending 0, blocked 16384
        // (SIGTERM), ignored 4096, caught 526336.
        let stat = Stat {
            ppid: 77,
            threads: 3,
            blocked: 1 << (libc::SIGTERM - 1),
            ignored: 4096,
            caught: 526_336,
        };
        assert_eq!(parse_stat(STAT), Some(stat));
        assert_eq!(
            526_336,
            (1 << (libc::SIGTSTP - 1)) | (1 << (libc::SIGUSR2 - 1))
        );
    }

    #[test]
    fn a_cut_line_means_unknown() {
        assert_eq!(parse_stat(b"4242 (cut"), None);
        assert_eq!(parse_stat(&STAT[..60]), None);
    }

    #[test]
    fn tells_a_running_child_from_an_exited_one() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as Pid;
        assert_eq!(has_exited(pid), Some(false));
        child.kill().unwrap();
        // A zombie now, not reaped: what spawn sees after an exit.
        let peek = rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT;
        let rpid = rustix::process::Pid::from_raw(pid).unwrap();
        rustix::process::waitid(rustix::process::WaitId::Pid(rpid), peek).unwrap();
        assert_eq!(has_exited(pid), Some(true));
        let raw = ended_unreaped(pid).unwrap();
        assert!(libc::WIFSIGNALED(raw) && libc::WTERMSIG(raw) == libc::SIGKILL);
        child.wait().unwrap();
        assert_eq!(has_exited(pid), None, "reaped: not our child any more");
    }

    #[test]
    fn this_proc_is_ours() {
        assert!(is_ours());
    }

    #[test]
    fn lists_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        // The test runs in a thread of the harness: its children are listed
        // under its own task id (ckptrun has one thread, so there pid == tid).
        // SAFETY: gettid has no arguments and cannot fail.
        let me = unsafe { libc::gettid() };
        let mut buf = [0u8; 4096];
        let found = children(me, &mut buf).any(|p| p == child.id() as Pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(found);
    }

    /// A child that ignores SIGTERM is deaf to it, unless it blocks it
    /// too (sigwait would take it).
    #[test]
    fn deaf_is_ignored_and_not_blocked() {
        use std::os::unix::process::CommandExt;
        let deaf_child = |block: bool| {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("5");
            // SAFETY: signal and sigprocmask are async-signal-safe; the
            // set is initialised by sigemptyset before use.
            unsafe {
                cmd.pre_exec(move || {
                    libc::signal(libc::SIGTERM, libc::SIG_IGN);
                    let mut set = core::mem::zeroed::<libc::sigset_t>();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGTERM);
                    let how = if block {
                        libc::SIG_BLOCK
                    } else {
                        libc::SIG_UNBLOCK
                    };
                    libc::sigprocmask(how, &set, core::ptr::null_mut());
                    Ok(())
                })
            };
            let mut child = cmd.spawn().unwrap();
            let pid = child.id() as Pid;
            // The child ignores SIGTERM once it has exec'd `sleep`.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !read_comm_is_sleep(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            let deaf = deaf(pid, libc::SIGTERM);
            let _ = child.kill();
            let _ = child.wait();
            deaf
        };
        assert!(deaf_child(false));
        assert!(!deaf_child(true));
    }

    fn read_comm_is_sleep(pid: Pid) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    }

    #[test]
    fn reads_a_real_child() {
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as Pid;
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let seen = stat(pid);
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        // What it ignores it inherits from this test, which may run with
        // SIGHUP ignored (nohup) or more.
        let seen = seen.map(|s| (s.ppid, s.caught));
        assert_eq!(seen, Some((me, 0)), "our child, catching nothing");
    }
}
