//! What varies between checkpoint protocols (condor, self, init, dmtcp):
//! how a signal ckptrun receives reaches the job, what a timer
//! asks of it, what a stopped job means, whether it starts again, and how
//! its end is judged. Spawning, supervising, reaping and exiting are
//! shared; they carry out the protocol's actions and know nothing of
//! checkpoints.

use core::fmt;
use std::time::{Duration, Instant};

use crate::os::error::CODE_COLLISION;
use crate::os::log::Log;
use crate::os::procfs;
use crate::os::sys::{Pid, Sig};
use crate::run::signals::{self, Name};

/// What the supervisor does to the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send the job this signal.
    Forward(Sig),
    /// Nothing.
    Drop,
    /// End the job: SIGTERM and SIGCONT now, SIGKILL if it lingers.
    End,
    /// SIGKILL the job now.
    Kill,
    /// Not yet: ask again shortly (the job is not ready for it).
    Hold,
    /// The job stopped by this terminal stop signal (Ctrl-Z's SIGTSTP;
    /// SIGTTIN, SIGTTOU from the background): stop ckptrun by it too, so
    /// that a shell's job control sees it; once continued, continue the
    /// job (see `run::job_control::job_stopped`).
    Suspend(Sig),
}

/// The running job, as a protocol sees it.
pub struct Job {
    pub pid: Pid,
    pub started: Instant,
}

impl Job {
    /// Whether the job has a handler for `sig` (1-31) now; `false` if
    /// unknown. Does not allocate.
    pub fn catches(&self, sig: Sig) -> bool {
        procfs::catches(self.pid, sig)
    }
}

/// How ckptrun ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Exit(u8),
    /// Die by this signal (exit 128+N when that is impossible, as PID 1).
    Signal(Sig),
}

/// How the job ended, as waitpid(2) reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    pub raw: i32,
    /// The job's pid, which is also its process group's id.
    pub pid: Pid,
}

impl Ended {
    pub fn exit_code(self) -> Option<u8> {
        libc::WIFEXITED(self.raw).then(|| libc::WEXITSTATUS(self.raw) as u8)
    }

    pub fn signal(self) -> Option<Sig> {
        libc::WIFSIGNALED(self.raw).then(|| libc::WTERMSIG(self.raw))
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.exit_code(), self.signal()) {
            (Some(code), _) => write!(f, "exited {code}"),
            (_, Some(sig)) if libc::WCOREDUMP(self.raw) => {
                write!(f, "killed by {} (core dumped)", Name(sig))
            }
            (_, Some(sig)) => write!(f, "killed by {}", Name(sig)),
            _ => write!(f, "wait status 0x{:x}", self.raw),
        }
    }
}

/// The job checkpointed (to `what`): exit with HTCondor's checkpoint
/// code, or die by the signal the job ad or --exit-by-signal names.
pub fn checkpointed(
    code: u8,
    by_signal: Option<Sig>,
    what: impl fmt::Display,
    log: &Log,
) -> Verdict {
    if let Some(sig) = by_signal
        && as_pid_1()
    {
        // PID 1 cannot die by a signal it raises; 128+N would read as an
        // ordinary exit. The code is the checkpoint's other spelling.
        log.warn(format_args!(
            "job checkpointed to {what}; as PID 1 ckptrun cannot die by {}: exit {code}",
            Name(sig)
        ));
        return Verdict::Exit(code);
    }
    match by_signal {
        Some(sig) => {
            log.info(format_args!(
                "job checkpointed to {what}; dying by {}",
                Name(sig)
            ));
            Verdict::Signal(sig)
        }
        None => {
            log.info(format_args!("job checkpointed to {what}; exit {code}"));
            Verdict::Exit(code)
        }
    }
}

/// Whether ckptrun's end is PID 1's: it is PID 1, or the child a ckptrun
/// that is PID 1 runs (see main.rs, dmtcp mode), whose end PID 1 passes
/// on. Does not allocate.
pub fn as_pid_1() -> bool {
    if rustix::process::getpid().is_init() {
        return true;
    }
    if rustix::process::getppid().is_none_or(|p| !p.is_init()) {
        return false;
    }
    let mut init = [core::mem::MaybeUninit::uninit(); 4096];
    let mut me = [core::mem::MaybeUninit::uninit(); 4096];
    let cwd = rustix::fs::CWD;
    match (
        rustix::fs::readlinkat_raw(cwd, c"/proc/1/exe", &mut init),
        rustix::fs::readlinkat_raw(cwd, c"/proc/self/exe", &mut me),
    ) {
        (Ok((init, _)), Ok((me, _))) => init == me,
        _ => false,
    }
}

/// The job's end, not a checkpoint, as ckptrun's own: passed on, unless
/// HTCondor would take it for a checkpoint (the checkpoint code, or death
/// by the checkpoint signal) and restart the job forever: then 122.
pub fn guard_collision(ended: Ended, code: u8, by_signal: Option<Sig>, log: &Log) -> Verdict {
    let collides = match by_signal {
        Some(sig) => ended.signal() == Some(sig),
        None => ended.exit_code() == Some(code),
    };
    if !collides {
        return pass_on(ended);
    }
    log.warn(format_args!(
        "job {ended} by itself, which HTCondor reads as a checkpoint; reporting {CODE_COLLISION} so it does not restart the job forever"
    ));
    Verdict::Exit(CODE_COLLISION)
}

/// The job's end as ckptrun's own: its exit code, or death by its signal.
pub fn pass_on(ended: Ended) -> Verdict {
    match (ended.exit_code(), ended.signal()) {
        (Some(code), _) => Verdict::Exit(code),
        (_, Some(sig)) => Verdict::Signal(sig),
        _ => Verdict::Exit(crate::os::error::LAUNCHER_FAILED),
    }
}

/// How ckptrun ends, for the protocol's `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// "Checkpointed: transfer and restart me" (HTCondor's checkpoint
    /// exit code, or death by its signal).
    Checkpoint,
    /// The job's end, with exit 0.
    Success,
    /// Any other end: the job's, or ckptrun's own failure.
    Failure,
}

pub trait Protocol {
    /// ckptrun received `sig` (never SIGCHLD).
    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action;
    /// The job stopped with `sig`.
    fn on_stop(&mut self, sig: Sig, log: &Log) -> Action;
    /// Whether a stop signal the job catches and has pending when ckptrun
    /// passes on a SIGCONT (which discards it) is a request, SIGTSTP for
    /// "checkpoint", to send again after it (see `Supervisor::resume`).
    fn stops_are_requests(&self) -> bool {
        true
    }
    /// The store in which this start found no generation (self and dmtcp
    /// modes): a run Slurm requeued should have found one.
    fn empty_store(&self) -> Option<&crate::store::Store> {
        None
    }
    /// When the protocol's own timer (`--interval`, a request's time
    /// limit) next wants `on_deadline`, if ever.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// The protocol's own timer is due.
    fn on_deadline(&mut self, _job: &Job, _log: &Log) -> Action {
        Action::Drop
    }
    /// The job ended: how should ckptrun end?
    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict;
    /// The job ended `ran` after it started: should it be started again
    /// (the protocol has prepared for it)? Asked before `judge`.
    fn again(&mut self, _ended: Ended, _ran: Duration, _log: &Log) -> bool {
        false
    }
    /// A child that is not the job ended (a helper the protocol started,
    /// or an orphan ckptrun adopted); `raw` is its wait status.
    fn reaped(&mut self, _pid: Pid, _raw: i32, _log: &Log) {}
    /// The job has ended for good (it is not started again): children
    /// reaped from now on (`--kill-after` ends them before `judge`) end
    /// with it, not while it runs.
    fn job_ended(&mut self, _log: &Log) {}
    /// ckptrun is about to exit (after `judge`, or when the job could not
    /// start), so: stop whatever the protocol started besides the job,
    /// and leave what the job's end asks for.
    fn end(&mut self, _ending: Ending, _log: &Log) {}
}

/// How often a request held because the job is not ready (see
/// `when_ready`) is tried again.
pub const HOLD_RETRY: Duration = Duration::from_millis(50);

/// How long after exec a job may take to install its checkpoint
/// handlers. A checkpoint request that arrives earlier is held until the
/// job catches it: sent before, the signal's default action would stop
/// or kill the job. After this, a job that does not catch it is taken at
/// its word.
pub const READY_GRACE: Duration = Duration::from_secs(2);

/// Holds `action` if it sends one of `requests` that the job, just
/// started, has no handler for yet (see READY_GRACE).
pub fn when_ready(action: Action, requests: &[Sig], job: &Job) -> Action {
    match action {
        Action::Forward(sig)
            if requests.contains(&sig)
                && job.started.elapsed() < READY_GRACE
                && !job.catches(sig) =>
        {
            Action::Hold
        }
        other => other,
    }
}

/// The earliest of `times`, if any: one loop for every deadline's
/// reckoning (each protocol's, and the supervisor's), kept out of line
/// so that each caller costs a call, not a copy of the loop.
#[inline(never)]
pub fn earliest(times: &[Option<Instant>]) -> Option<Instant> {
    times.iter().flatten().min().copied()
}

/// Which signal the job gets for each signal ckptrun receives: itself,
/// unless a protocol default or `--map` says otherwise. 0 drops it.
pub struct Routes([Sig; signals::MAX as usize + 1]);

impl Routes {
    pub fn new(defaults: &[(Sig, Sig)], user: &[(Sig, Sig)]) -> Self {
        let mut table = [0; signals::MAX as usize + 1];
        for (sig, to) in table.iter_mut().enumerate() {
            *to = sig as Sig;
        }
        for &(from, to) in defaults.iter().chain(user) {
            table[from as usize] = to;
        }
        Self(table)
    }

    pub fn route(&self, sig: Sig) -> Action {
        match self.0.get(sig as usize).copied().unwrap_or(sig) {
            0 => Action::Drop,
            to => Action::Forward(to),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_default_then_user() {
        let r = Routes::new(
            &[(libc::SIGTERM, libc::SIGTSTP)],
            &[(libc::SIGINT, 0), (libc::SIGTERM, libc::SIGTERM)],
        );
        assert_eq!(r.route(libc::SIGTERM), Action::Forward(libc::SIGTERM));
        assert_eq!(r.route(libc::SIGINT), Action::Drop);
        assert_eq!(r.route(libc::SIGHUP), Action::Forward(libc::SIGHUP));
    }

    #[test]
    fn shows_how_the_job_ended() {
        assert_eq!(
            Ended {
                raw: 3 << 8,
                pid: 2
            }
            .to_string(),
            "exited 3"
        );
        assert_eq!(
            Ended {
                raw: libc::SIGUSR2,
                pid: 2
            }
            .to_string(),
            "killed by SIGUSR2"
        );
        assert_eq!(
            Ended {
                raw: libc::SIGSEGV | 0x80,
                pid: 2
            }
            .to_string(),
            "killed by SIGSEGV (core dumped)"
        );
    }
}
