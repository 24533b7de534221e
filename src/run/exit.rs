//! Ending ckptrun the way the verdict says: an exit code, or death by a
//! signal (the job's, or the checkpoint's) so that HTCondor records
//! ExitBySignal and the signal.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, FileType, Timestamps, UTIME_OMIT};
use rustix::process::{Resource, Rlimit};
use rustix::time::Timespec;

use crate::os::log::Log;
use crate::os::sys::{self, SigAction, SigSet};
use crate::run::protocol::Verdict;
use crate::run::signals::Name;

pub fn finish(verdict: Verdict, log: &Log) -> ! {
    match verdict {
        Verdict::Exit(code) => {
            log.info(format_args!("exit {code}"));
            sys::exit_now(code.into())
        }
        Verdict::Signal(sig) if rustix::process::getpid().is_init() => {
            // PID 1 cannot die by a signal it raises at itself (the kernel
            // drops it), so say it the shell's way.
            log.info(format_args!(
                "job killed by {}; exit {} (PID 1)",
                Name(sig),
                128 + sig
            ));
            sys::exit_now(128 + sig)
        }
        Verdict::Signal(sig) => die_by(sig, log),
    }
}

/// Dies by `sig`: default disposition, no core file (the job dumped its
/// own if it was going to; HTCondor compares the raw wait status, core
/// flag included), raised while blocked, then unblocked.
fn die_by(sig: sys::Sig, log: &Log) -> ! {
    log.info(format_args!("dying by {}", Name(sig)));
    // Both limits to 0: lowering the hard limit is always allowed, while
    // asking for an unlimited one fails for an unprivileged user and would
    // leave the soft limit as it was.
    let no_core = Rlimit {
        current: Some(0),
        maximum: Some(0),
    };
    let _ = rustix::process::setrlimit(Resource::Core, no_core);
    // A core_pattern that pipes to a program (systemd-coredump, apport)
    // ignores RLIMIT_CORE 0; a process that is not dumpable dumps nothing.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    let _ = sys::set_action(sig, &SigAction::default_action());
    let _ = sys::kill(rustix::process::getpid().as_raw_nonzero().get(), sig);
    sys::set_mask(libc::SIG_UNBLOCK, &SigSet::only(sig));
    // Still here: a signal whose default action is not to terminate.
    sys::exit_now(128 + sig)
}

/// At the job's real end under HTCondor, marks as changed every file
/// the job (or ckptrun) left at the top of the sandbox: HTCondor 24.0's
/// final transfer brings back only the files changed during the last run
/// (seen in a pool), so after an eviction what the job wrote before it
/// (its own files, `--stdout` files, HTCondor's `output` and `error`,
/// brought into the new sandbox from the spool) would never reach the
/// submit directory if the last run left it as it was. Left alone: names
/// starting with `.` (HTCondor's own: .job.ad, .chirp.config, ckptrun's
/// scratch) and `not_outputs`: the job's inputs (transfer_input_files and
/// the executable), which an uninterrupted run would not bring back
/// either, and its checkpoint files, of no use once it has ended.
/// ckptrun's own stdout and stderr are marked too, wherever they are. The
/// new modification time is at least a second after the old one: HTCondor
/// compares whole seconds. Does not allocate.
pub fn mark_outputs_changed(sandbox: Option<&OwnedFd>, not_outputs: &[OsString], log: &Log) {
    if let Some(dir) = sandbox {
        mark_sandbox(dir, not_outputs, log);
    }
    let streams = [
        ("stdout", rustix::stdio::stdout()),
        ("stderr", rustix::stdio::stderr()),
    ];
    for (name, fd) in streams {
        let Ok(stat) = rustix::fs::fstat(fd) else {
            continue;
        };
        if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile {
            if let Err(e) = rustix::fs::futimens(fd, &later(stat.st_mtime)) {
                unmarked(name, e, log);
            }
        }
    }
}

/// The sandbox's part of `mark_outputs_changed`. Not inlined: its 4 KiB
/// buffer is then on the stack only under HTCondor, not in every run.
#[inline(never)]
fn mark_sandbox(dir: &OwnedFd, not_outputs: &[OsString], log: &Log) {
    let _ = crate::os::tree::each_name(dir.as_fd(), |name| {
        let bytes = name.to_bytes();
        if bytes.starts_with(b".") || not_outputs.iter().any(|i| i.as_bytes() == bytes) {
            return Ok(());
        }
        let Ok(stat) = crate::os::tree::stat(dir.as_fd(), name) else {
            return Ok(());
        };
        if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile {
            let times = later(stat.st_mtime);
            if let Err(e) = rustix::fs::utimensat(dir, name, &times, AtFlags::SYMLINK_NOFOLLOW) {
                // Displayed without allocating (to_string_lossy would,
                // for a name that is not UTF-8).
                unmarked(std::ffi::OsStr::from_bytes(bytes).display(), e, log);
            }
        }
        Ok(())
    });
}

/// Logs a file that could not be marked changed.
fn unmarked(name: impl std::fmt::Display, e: rustix::io::Errno, log: &Log) {
    log.info(format_args!(
        "cannot mark {name} changed for HTCondor's final transfer: {}",
        sys::strerror(e)
    ));
}

/// Now as the modification time, or a second after `mtime` if that is
/// not later; the access time left as it is.
fn later(mtime: i64) -> Timestamps {
    let (secs, nanos) = sys::realtime();
    let now = Timespec {
        tv_sec: secs,
        tv_nsec: nanos.into(),
    };
    Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: if now.tv_sec > mtime {
            now
        } else {
            Timespec {
                tv_sec: mtime + 1,
                tv_nsec: 0,
            }
        },
    }
}
