//! The supervision loop: wait for one signal (or a deadline), act on it,
//! reap every child that ended, and return when the job itself has ended.
//! Runs after the job started, so nothing here allocates.

use core::fmt;
use std::time::{Duration, Instant};

use rustix::process::WaitOptions;

use crate::log::Log;
use crate::protocol::{Action, Ended, Protocol};
use crate::signals::Name;
use crate::sys::{self, Pid, SigSet};

/// How long a job ended with SIGTERM may take before SIGKILL.
pub const END_GRACE: Duration = Duration::from_secs(10);

/// The `--interval` timer.
#[derive(Clone, Copy)]
pub struct Periodic {
    pub every: Duration,
    /// Fire again after each tick (checkpoint and continue), or once.
    pub repeat: bool,
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
            sys::strerror(e.raw_os_error())
        ));
    }
}

/// Supervises `job` until it ends; returns how it ended.
pub fn supervise(
    job: Pid,
    protocol: &mut impl Protocol,
    periodic: Option<Periodic>,
    log: &Log,
) -> Ended {
    let mut sup = Supervisor {
        job,
        protocol,
        log,
        periodic,
        tick_at: periodic.map(|p| Instant::now() + p.every),
        kill_at: None,
    };
    let waiting_for = SigSet::full();
    loop {
        if let Some(ended) = sup.reap() {
            return ended;
        }
        match sys::wait_signal(&waiting_for, sup.time_left()) {
            // The next pass of the loop reaps.
            Some(libc::SIGCHLD) => {}
            Some(sig) => {
                let action = sup.protocol.on_signal(sig);
                sup.act(format_args!("received {}", Name(sig)), action);
            }
            None => sup.deadlines(),
        }
    }
}

struct Supervisor<'a, P> {
    job: Pid,
    protocol: &'a mut P,
    log: &'a Log,
    periodic: Option<Periodic>,
    tick_at: Option<Instant>,
    kill_at: Option<Instant>,
}

impl<P: Protocol> Supervisor<'_, P> {
    /// Reaps every child that has ended and returns the job's status if it
    /// was among them. SIGCHLDs coalesce, so one may stand for many
    /// children: drain until none is left, and look for the job inside.
    fn reap(&mut self) -> Option<Ended> {
        let mut ended = None;
        loop {
            let Ok(Some((pid, status))) =
                rustix::process::wait(WaitOptions::NOHANG | WaitOptions::UNTRACED)
            else {
                return ended;
            };
            if pid.as_raw_nonzero().get() != self.job {
                continue;
            }
            if let Some(sig) = status.stopping_signal() {
                let action = self.protocol.on_stop(sig, self.log);
                self.act(format_args!("job stopped by {}", Name(sig)), action);
                continue;
            }
            let job_ended = Ended {
                raw: status.as_raw(),
            };
            self.log.info(format_args!("job {job_ended}"));
            ended = Some(job_ended);
        }
    }

    /// Carries out `action`, logging it after `why` on one line.
    fn act(&mut self, why: fmt::Arguments<'_>, action: Action) {
        match action {
            Action::Forward(sig) => {
                self.log
                    .info(format_args!("{why}: sent {} to the job", Name(sig)));
                let _ = sys::kill(self.job, sig);
            }
            Action::Drop => self.log.info(format_args!("{why}: nothing sent")),
            Action::End => {
                self.log
                    .info(format_args!("{why}: ending the job (SIGTERM, SIGCONT)"));
                let _ = sys::kill(self.job, libc::SIGTERM);
                let _ = sys::kill(self.job, libc::SIGCONT);
                self.kill_at = Some(Instant::now() + END_GRACE);
            }
        }
    }

    /// Time until the nearest deadline, if any.
    fn time_left(&self) -> Option<Duration> {
        let next = match (self.tick_at, self.kill_at) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(next.saturating_duration_since(Instant::now()))
    }

    fn deadlines(&mut self) {
        let now = Instant::now();
        if self.kill_at.is_some_and(|t| t <= now) {
            self.log.warn(format_args!(
                "job still running {}s after SIGTERM: sending SIGKILL",
                END_GRACE.as_secs()
            ));
            let _ = sys::kill(self.job, libc::SIGKILL);
            self.kill_at = None;
        }
        if let (Some(t), Some(p)) = (self.tick_at, self.periodic)
            && t <= now
        {
            let action = self.protocol.on_tick();
            self.act(
                format_args!("periodic checkpoint (every {} ms)", p.every.as_millis()),
                action,
            );
            self.tick_at = p.repeat.then(|| now + p.every);
        }
    }
}
