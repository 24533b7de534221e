//! A shell's job control, for a job the terminal stops (init mode): the
//! job runs in a process group of its own, so a shell that started
//! ckptrun does not see the job stop. ckptrun passes the stop up to its
//! own group, and passes the shell's continuation down. Only with a
//! controlling terminal: a batch job has none, and ckptrun must not stop
//! there (Slurm's batch script and ckptrun share a group that is not
//! orphaned: a stop would hold ckptrun until Slurm's next SIGCONT).
//! Nothing here allocates.

use core::fmt;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::fs::{Mode, OFlags};

use crate::os::log::Log;
use crate::os::sys::{self, Pid, Sig, SigSet};

/// ckptrun's controlling terminal, opened for a moment.
struct Terminal(OwnedFd);

impl Terminal {
    /// None without one (a batch job, a daemon).
    fn open() -> Option<Self> {
        let flags = OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NONBLOCK;
        rustix::fs::open(c"/dev/tty", flags, Mode::empty())
            .ok()
            .map(Self)
    }

    /// The process group in its foreground, if it says.
    fn foreground(&self) -> Option<Pid> {
        let group = rustix::termios::tcgetpgrp(&self.0).ok()?;
        Some(group.as_raw_nonzero().get())
    }

    /// If ckptrun's group holds the foreground (a shell's `fg` gave it),
    /// gives it to the job's group `job`; whether it did.
    fn hand_to(&self, job: Pid) -> bool {
        let ours = rustix::process::getpgrp().as_raw_nonzero().get();
        self.foreground() == Some(ours)
            && rustix::process::Pid::from_raw(job)
                .is_some_and(|group| rustix::termios::tcsetpgrp(&self.0, group).is_ok())
    }
}

/// ckptrun received SIGCONT: if a shell's `fg` gave ckptrun's group the
/// terminal (dash's `fg` sends SIGCONT with it), the job's group takes it.
pub fn continued(job: Pid) {
    if let Some(terminal) = Terminal::open() {
        terminal.hand_to(job);
    }
}

/// The job `job` (its group) stopped by `sig`, a terminal stop signal.
/// - Stopped for want of the terminal (SIGTTIN, SIGTTOU) while ckptrun's
///   group has it (bash's `fg` of a job started with `&` sends no
///   SIGCONT): the job's group is given it and continued.
/// - Else ckptrun raises `sig` on its own group (a script or pipeline
///   that runs ckptrun is in it), unblocked for a moment. The kernel
///   stops them, unless the group is orphaned (no shell's job control
///   above it: ckptrun leads the session, or is PID 1), when it discards
///   the signal (signal(7)). Stopped, the shell sees the job stopped as
///   it would without ckptrun; once it continues ckptrun (`fg`, `bg`),
///   the job's group is continued, with the terminal if `fg` gave it.
///   Not stopped, a job that holds the terminal was stopped by it
///   (Ctrl-Z): continued at once, as the kernel discards the stop of an
///   orphaned group. Else it stays stopped.
pub fn job_stopped(job: Pid, sig: Sig, why: fmt::Arguments<'_>, log: &Log) {
    let Some(terminal) = Terminal::open() else {
        log.info(format_args!("{why}: nothing sent (no terminal)"));
        return;
    };
    if sig != libc::SIGTSTP && terminal.hand_to(job) {
        log.info(format_args!(
            "{why}: ckptrun's group had the terminal: gave it to the job's group, and sent it SIGCONT"
        ));
        let _ = sys::kill(-job, libc::SIGCONT);
        return;
    }
    if raise_on_own_group(sig) {
        let given = terminal.hand_to(job);
        log.info(format_args!(
            "{why}: ckptrun's group stopped too, until continued; sent SIGCONT to the job's group{}",
            if given { ", and gave it the terminal" } else { "" }
        ));
    } else if sig == libc::SIGTSTP && terminal.foreground() == Some(job) {
        log.info(format_args!(
            "{why}: no job control above ckptrun: sent SIGCONT to the job's group, \
             as the terminal's stop of an orphaned group is discarded"
        ));
    } else {
        log.info(format_args!("{why}: nothing sent"));
        return;
    }
    let _ = sys::kill(-job, libc::SIGCONT);
}

/// Raises the stop signal `sig` on ckptrun's process group; whether
/// ckptrun stopped by it (and has been continued since).
fn raise_on_own_group(sig: Sig) -> bool {
    // Raising it discards any SIGCONT pending here; unblocked, it is
    // delivered before set_mask returns: ckptrun stops there, or not.
    let _ = sys::kill(0, sig);
    sys::set_mask(libc::SIG_UNBLOCK, &SigSet::only(sig));
    sys::set_mask(libc::SIG_BLOCK, &SigSet::only(sig));
    // Only SIGCONT continues a stopped process: pending now, it is this
    // continuation, not a signal to pass on.
    sys::wait_signal(&SigSet::only(libc::SIGCONT), Some(Duration::ZERO)).is_some()
}
