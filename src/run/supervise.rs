//! The supervision loop: wait for one signal (or a deadline), act on it,
//! reap every child that ended, and return when the job itself has ended.
//! Runs after the job started, so nothing here allocates.

use core::fmt;
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::WaitOptions;

use crate::os::log::Log;
use crate::os::procfs;
use crate::os::sys::{self, Pid, Sig, SigSet};
use crate::run::protocol::{self, Action, Ended, HOLD_RETRY, Job, Protocol};
use crate::run::signals::{self, Name};

/// How long a job ended with SIGTERM may take before SIGKILL.
pub const END_GRACE: Duration = Duration::from_secs(10);

/// How to supervise, from the command line.
#[derive(Clone, Copy)]
pub struct Supervision {
    /// Signal the job's whole process group, not only the job.
    pub pgroup: bool,
}

/// Outside a PID namespace, become the subreaper for our descendants so
/// that orphans are reparented to us and reaped, not left to init. As
/// PID 1 we already are.
pub fn adopt_orphans(log: &Log) {
    let me = rustix::process::getpid();
    if me.is_init() {
        return;
    }
    if let Err(e) = rustix::process::set_child_subreaper(Some(me)) {
        log.warn(format_args!(
            "cannot become a subreaper, orphans will go to init: {}",
            sys::strerror(e)
        ));
    }
}

/// `--kill-after SECS`: the job has ended; end what it left behind. Its
/// orphans are our children now (we are their subreaper), and so become
/// the orphans of those we end: SIGTERM them all, each once, and the
/// job's process group, rescanning as new ones are reparented to us;
/// SIGKILL what is left after `grace`. Every child counts, those ckptrun
/// was exec'd with too (they are its children as much). Returns when no child is left,
/// each reaped and `protocol` told (dmtcp mode's coordinator and helpers
/// among them: it must not signal their pids again). Does not allocate.
/// `proc_is_ours` says whether /proc shows our PID namespace (see
/// `procfs::is_ours`); if not, only the job's process group is signalled.
/// Not inlined: its 4 KiB buffer is then on the stack only with
/// --kill-after, not in every run.
#[inline(never)]
pub fn end_leftovers(
    job: Pid,
    grace: Duration,
    proc_is_ours: bool,
    protocol: &mut dyn Protocol,
    log: &Log,
) {
    let mut buf = [0u8; 4096];
    // Each gets one SIGTERM: a second may cut short the cleanup the first
    // began. Those in the job's group now get the group's; the others, and
    // any that join it later, one each. Remembered while they live, 64 at
    // a time (past that, one not remembered gets one a pass).
    let mut termed = Termed::new();
    if proc_is_ours {
        in_group(&mut buf, job, &mut termed);
    }
    let _ = sys::kill(-job, libc::SIGTERM);
    if !proc_is_ours {
        log.warn(format_args!(
            "--kill-after: /proc shows another PID namespace (mount a new one); only the job's process group got SIGTERM"
        ));
        return;
    }
    let kill_at = Instant::now() + grace;
    // A process in uninterruptible sleep survives even SIGKILL for a
    // while: do not wait on it forever.
    let give_up = kill_at + END_GRACE;
    let mut said = false;
    loop {
        let term = Instant::now() < kill_at;
        if !signal_children(&mut buf, term.then_some(&mut termed)) {
            return;
        }
        if Instant::now() > give_up {
            log.warn(format_args!(
                "processes the job left are still there {}s after SIGKILL; leaving them",
                END_GRACE.as_secs()
            ));
            return;
        }
        if !said {
            log.info(format_args!(
                "job ended; ending the processes it left (SIGKILL after {} ms)",
                grace.as_millis() as u64
            ));
            said = true;
        }
        // Reap what has ended, then look again shortly (a SIGCHLD wakes us
        // sooner). Other signals are not forwarded now: the job is gone.
        reap_all(protocol, log);
        let _ = sys::wait_signal(&SigSet::full(), Some(Duration::from_millis(20)));
        reap_all(protocol, log);
        // Reaped: gone, and their pids free for others.
        termed.retain(|&pid| sys::kill(pid, 0).is_ok());
    }
}

/// The children that have had their SIGTERM, from `end_leftovers` or
/// from the job's group's (64 at a time).
type Termed = heapless::Vec<Pid, 64>;

/// Adds to `termed` our children in the process group `pgid`.
fn in_group(buf: &mut [u8], pgid: Pid, termed: &mut Termed) {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    for child in procfs::children(me, buf) {
        if sys::process_group(child) == pgid {
            let _ = termed.push(child);
        }
    }
}

/// SIGTERM to each of our children not in `termed`, then remembered; with
/// no `termed`, SIGKILL to every one. Whether there was any child.
fn signal_children(buf: &mut [u8], mut termed: Option<&mut Termed>) -> bool {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut any = false;
    for child in procfs::children(me, buf) {
        any = true;
        let sig = match termed.as_mut() {
            None => libc::SIGKILL,
            Some(termed) if !termed.contains(&child) => {
                let _ = termed.push(child);
                libc::SIGTERM
            }
            Some(_) => continue,
        };
        let _ = sys::kill(child, sig);
    }
    any
}

/// Reaps every child that has ended, and tells `protocol` of each; true
/// when no child is left at all (ECHILD). Does not allocate.
pub fn reap_all(protocol: &mut dyn Protocol, log: &Log) -> bool {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => {
                protocol.reaped(pid.as_raw_nonzero().get(), status.as_raw(), log)
            }
            Err(rustix::io::Errno::CHILD) => return true,
            _ => return false,
        }
    }
}

/// The job has ended and said it is done: SIGKILL what is left of its
/// process group and reap it, so that none of it still runs (or finishes
/// a write) afterwards. Bounded: a process stuck in the kernel is waited
/// for END_GRACE at most. Processes that left the group are not touched,
/// nor reaped: a child outside it (dmtcp mode's coordinator, a helper) is
/// the protocol's to reap, which must hear of its end. Does not allocate.
pub fn end_group(pgid: Pid, log: &Log) {
    let give_up = Instant::now() + END_GRACE;
    let Some(group) = rustix::process::Pid::from_raw(pgid) else {
        return;
    };
    while sys::kill(-pgid, libc::SIGKILL).is_ok() {
        // Members are gone only once reaped (they are our children now).
        while let Ok(Some(_)) = rustix::process::waitpgid(group, WaitOptions::NOHANG) {}
        if sys::kill(-pgid, 0).is_err() {
            return;
        }
        if Instant::now() > give_up {
            log.warn(format_args!(
                "processes the job left in its group survive SIGKILL after {}s; going on",
                END_GRACE.as_secs()
            ));
            return;
        }
        let _ = sys::wait_signal(&SigSet::full(), Some(Duration::from_millis(10)));
    }
}

/// `--pdeathsig`: when our parent dies, we receive `sig` (blocked, so the
/// loop handles it like any signal). If the parent `was` has already died,
/// the kernel will not send it: raise it now. The job does not inherit
/// it: fork clears it in the child.
pub fn signal_on_parent_death(sig: Sig, was: Pid, log: &Log) {
    if let Err(errno) = sys::set_parent_death_signal(sig) {
        log.warn(format_args!(
            "--pdeathsig {}: {}",
            Name(sig),
            sys::strerror(Errno::from_raw_os_error(errno))
        ));
        return;
    }
    let now = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if now != was {
        let _ = sys::kill(rustix::process::getpid().as_raw_nonzero().get(), sig);
    }
}

/// Supervises the job `pid` until it ends; returns how it ended.
pub fn supervise(pid: Pid, protocol: &mut dyn Protocol, how: Supervision, log: &Log) -> Ended {
    // What the start's restore used of the stack is not used again.
    crate::os::stack::release();
    let started = Instant::now();
    let mut sup = Supervisor {
        job: Job { pid, started },
        protocol,
        log,
        target: if how.pgroup { -pid } else { pid },
        kill_at: None,
        held: Held::default(),
    };
    let waiting_for = SigSet::full();
    loop {
        if let Some(ended) = sup.reap() {
            return ended;
        }
        match sys::wait_signal(&waiting_for, sup.time_left()) {
            // The next pass of the loop reaps.
            Some(got) if got.sig == libc::SIGCHLD => {}
            // Our own write hit a closed pipe or a file size limit; passing
            // that on would punish the job (and, logged, loop forever).
            Some(got) if got.from_self => {}
            Some(got) => sup.signal(got.sig, false),
            None => sup.deadlines(),
        }
    }
}

struct Supervisor<'a> {
    job: Job,
    /// Where signals for the job go: its pid, or its process group.
    target: Pid,
    protocol: &'a mut dyn Protocol,
    log: &'a Log,
    kill_at: Option<Instant>,
    held: Held,
}

/// Requests the protocol asked to hold, and when to offer them again.
#[derive(Default)]
struct Held {
    signals: u64,
    retry_at: Option<Instant>,
}

impl Supervisor<'_> {
    /// Reaps every child that has ended and returns the job's status if it
    /// was among them. SIGCHLDs coalesce, so one may stand for many
    /// children: drain until none is left, and look for the job inside.
    fn reap(&mut self) -> Option<Ended> {
        let mut ended = None;
        loop {
            // wait(2) is any child (pid -1); waitpid(None) would be only
            // our own process group, which the job is not in.
            let Ok(Some((pid, status))) =
                rustix::process::wait(WaitOptions::NOHANG | WaitOptions::UNTRACED)
            else {
                return ended;
            };
            if pid.as_raw_nonzero().get() != self.job.pid {
                self.protocol
                    .reaped(pid.as_raw_nonzero().get(), status.as_raw(), self.log);
                continue;
            }
            if let Some(sig) = status.stopping_signal() {
                let action = self.protocol.on_stop(sig, self.log);
                self.act(format_args!("job stopped by {}", Name(sig)), action);
                continue;
            }
            let job_ended = Ended {
                raw: status.as_raw(),
                pid: self.job.pid,
            };
            self.log.info(format_args!("job {job_ended}"));
            ended = Some(job_ended);
        }
    }

    /// ckptrun received `sig` (again, if it was held).
    fn signal(&mut self, sig: Sig, was_held: bool) {
        if sig == libc::SIGCONT {
            crate::run::job_control::continued(self.job.pid);
        }
        let action = self.protocol.on_signal(sig, &self.job);
        if action == Action::Hold {
            if !was_held {
                self.log.info(format_args!(
                    "received {}: held until the job handles it",
                    Name(sig)
                ));
            }
            self.held.signals |= 1 << (sig - 1);
            self.held
                .retry_at
                .get_or_insert(Instant::now() + HOLD_RETRY);
            return;
        }
        self.act(format_args!("received {}", Name(sig)), action);
    }

    /// Carries out `action`, logging it after `why` on one line.
    fn act(&mut self, why: fmt::Arguments<'_>, action: Action) {
        match action {
            Action::Forward(libc::SIGCONT) if self.protocol.stops_are_requests() => {
                self.resume(why)
            }
            Action::Forward(sig) => {
                self.log
                    .info(format_args!("{why}: sent {} to the job", Name(sig)));
                let _ = sys::kill(self.target, sig);
            }
            Action::Drop | Action::Hold => self.log.info(format_args!("{why}: nothing sent")),
            // A job that ignores SIGTERM (under Slurm it starts so) would
            // wait out END_GRACE for nothing: SIGKILL, to it alone (the
            // processes it leaves get their SIGTERM as ever, --kill-after).
            // Not so a group (--pgroup): a shell leading it cannot but
            // ignore SIGTERM there, while what it runs may handle it.
            Action::End
                if self.target == self.job.pid && procfs::deaf(self.job.pid, libc::SIGTERM) =>
            {
                self.log.info(format_args!(
                    "{why}: ending the job (SIGKILL: it ignores SIGTERM)"
                ));
                let _ = sys::kill(self.target, libc::SIGKILL);
            }
            Action::End => {
                self.log
                    .info(format_args!("{why}: ending the job (SIGTERM, SIGCONT)"));
                let _ = sys::kill(self.target, libc::SIGTERM);
                let _ = sys::kill(self.target, libc::SIGCONT);
                self.kill_at = Some(Instant::now() + END_GRACE);
            }
            Action::Kill => {
                self.log.info(format_args!(
                    "{why}: killing the job and its process group (SIGKILL)"
                ));
                let _ = sys::kill(-self.job.pid, libc::SIGKILL);
                let _ = sys::kill(self.job.pid, libc::SIGKILL);
            }
            Action::Suspend(sig) => {
                crate::run::job_control::job_stopped(self.job.pid, sig, why, self.log)
            }
        }
    }

    /// Sends the job SIGCONT, which discards the stop signals it has
    /// pending (signal(7)): a checkpoint request sent as SIGTSTP that the
    /// job has not taken yet (stopped, or not run since; Slurm sends
    /// SIGCONT right behind its SIGTERM) would be lost. Such a signal,
    /// pending and caught (a request, not a stop), is sent again after it.
    fn resume(&mut self, why: fmt::Arguments<'_>) {
        let waiting = procfs::caught_pending(self.job.pid);
        let lost = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU]
            .into_iter()
            .find(|&s| waiting & (1 << (s - 1)) != 0);
        self.log
            .info(format_args!("{why}: sent SIGCONT to the job"));
        let _ = sys::kill(self.target, libc::SIGCONT);
        if let Some(sig) = lost {
            self.log.info(format_args!(
                "SIGCONT discarded the job's pending {}: sent it again",
                Name(sig)
            ));
            let _ = sys::kill(self.target, sig);
        }
    }

    /// Time until the nearest deadline, if any.
    fn time_left(&self) -> Option<Duration> {
        let next =
            protocol::earliest(&[self.kill_at, self.held.retry_at, self.protocol.deadline()])?;
        Some(next.saturating_duration_since(Instant::now()))
    }

    fn deadlines(&mut self) {
        let now = Instant::now();
        if self.kill_at.is_some_and(|t| t <= now) {
            self.log.warn(format_args!(
                "job still running {}s after SIGTERM: sending SIGKILL",
                END_GRACE.as_secs()
            ));
            let _ = sys::kill(self.target, libc::SIGKILL);
            self.kill_at = None;
        }
        if self.held.retry_at.is_some_and(|t| t <= now) {
            let held = core::mem::take(&mut self.held);
            for sig in (1..=signals::MAX).filter(|s| held.signals & (1 << (s - 1)) != 0) {
                self.signal(sig, true);
            }
        }
        if self.protocol.deadline().is_some_and(|t| t <= now) {
            let action = self.protocol.on_deadline(&self.job, self.log);
            if action != Action::Drop {
                self.act(format_args!("checkpoint timer"), action);
            }
        }
    }
}
