//! Slurm, recognised from `SLURM_JOB_ID` (no option asks for it). When
//! Slurm preempts a job (PreemptMode=REQUEUE), requeues it (`scontrol
//! requeue`), ends it at its time limit or cancels it (`scancel`), it does
//! the same to every process of the job, ckptrun's and the job's alike:
//! SIGCONT and SIGTERM, then SIGKILL KillWait seconds later. Only the
//! job's state in slurmctld tells these apart (docs/slurm.md has what was
//! seen of Slurm 22.05). So, under Slurm:
//!
//! - In a mode that checkpoints (condor, self, dmtcp), every process
//!   ckptrun starts (the job, DMTCP's coordinator and tools) starts with
//!   SIGTERM ignored (`shield`): Slurm's own SIGTERM must not end the job
//!   before ckptrun has its checkpoint. A job that installs a SIGTERM
//!   handler of its own gets Slurm's signal as it would without ckptrun.
//! - Each SIGTERM ckptrun receives is looked up (`scontrol show job`,
//!   `Watch`): a requeue (the restart count grew), the time limit, or a
//!   signal while the job runs on (`--signal=B:TERM@SECS`, `scancel
//!   --batch --signal=TERM`) is an eviction, which the mode answers as
//!   ever (checkpoint, exit 85); a cancel ends the job at once. Slurm
//!   unreachable, or a state that is neither: an eviction, so that
//!   nothing is lost.
//! - In init mode, which checkpoints nothing, a SIGTERM Slurm sent to
//!   every process of the job is not sent to the job a second time.

use core::fmt;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::program;
use crate::os::sys::{self, Pid, Sig, SigSet};
use crate::run::protocol::{Action, Ended, Ending, Job, Protocol, Verdict};
use crate::run::signals::Inherited;
use crate::run::spawn::{self, Stdio};

/// The Slurm job ckptrun runs in, as its environment says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlurmJob {
    pub id: u64,
    /// How often Slurm requeued the job before this run
    /// (`SLURM_RESTART_COUNT`, unset before the first requeue).
    pub restarts: u32,
}

impl SlurmJob {
    /// From `SLURM_JOB_ID` and `SLURM_RESTART_COUNT`; none outside Slurm.
    pub fn from_env(env: impl Fn(&str) -> Option<OsString>) -> Option<Self> {
        let number = |name: &str| env(name)?.to_str()?.parse::<u64>().ok();
        Some(Self {
            id: number("SLURM_JOB_ID")?,
            restarts: number("SLURM_RESTART_COUNT").map_or(0, |n| n.min(u32::MAX.into()) as u32),
        })
    }
}

/// How ckptrun runs under Slurm.
#[derive(Clone, Copy, Debug)]
pub struct Slurm {
    pub job: SlurmJob,
    /// The mode checkpoints the job (condor, self, dmtcp); else (init)
    /// ckptrun only passes signals on.
    pub checkpoints: bool,
}

/// Before anything is started: in a mode that checkpoints, every process
/// ckptrun starts has SIGTERM ignored.
pub fn shield(slurm: &Slurm, inherited: &mut Inherited, log: &Log) {
    let ignored = match slurm.checkpoints {
        true => {
            inherited.ignore_sigterm();
            ", SIGTERM ignored"
        }
        false => "",
    };
    log.info(format_args!(
        "Slurm job {} (restart {}){ignored}",
        slurm.job.id, slurm.job.restarts
    ));
}

/// What Slurm means by a SIGTERM, from the job's state in slurmctld.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Meaning {
    /// The job goes back to the queue (preemption, `scontrol requeue`):
    /// its restart count grew.
    Requeue,
    /// The job has reached its time limit.
    TimeLimit,
    /// The job runs on, as Slurm sees it: a signal to its batch step.
    Signal,
    /// Slurm ends the job for good (`scancel`).
    Cancel,
    /// Slurm could not be asked, or did not say.
    Unknown,
}

impl fmt::Display for Meaning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Meaning::Requeue => "requeued",
            Meaning::TimeLimit => "timed out",
            Meaning::Signal => "running",
            Meaning::Cancel => "cancelled",
            Meaning::Unknown => "state unknown",
        })
    }
}

/// What ckptrun does with a SIGTERM from Slurm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// The mode checkpoints the job and exits (85).
    Evict,
    /// The job ends at once (see `Watch::cancel`).
    EndNow,
    /// Init mode: Slurm sent it to every process of the job, the job's
    /// too: not sent a second time (a signal `--map` makes of it is).
    NotAgain,
    /// Init mode: passed on as any signal.
    PassOn,
}

impl Answer {
    /// The policy: only a cancel ends a job that is checkpointed without
    /// a checkpoint; what Slurm could not say is taken for an eviction,
    /// so that nothing is lost.
    fn to(meaning: Meaning, checkpoints: bool) -> Self {
        match (meaning, checkpoints) {
            (Meaning::Cancel, true) => Answer::EndNow,
            (_, true) => Answer::Evict,
            (Meaning::Requeue | Meaning::TimeLimit | Meaning::Cancel, false) => Answer::NotAgain,
            (Meaning::Signal | Meaning::Unknown, false) => Answer::PassOn,
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Answer::Evict => "checkpoint and exit",
            Answer::EndNow => "ending the job",
            Answer::NotAgain => "not sent again",
            Answer::PassOn => "passed on",
        })
    }
}

/// How long `scontrol` may take to answer. Unanswered, a SIGTERM is an
/// eviction: KillWait (30 s by default) is the whole time there is.
const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// The question `scontrol -o show job ID` (one line), built before the
/// job starts, and the pipe it answers into (read here, non-blocking).
struct Query {
    scontrol: spawn::Command,
    answers: OwnedFd,
}

impl Query {
    fn prepare(job: SlurmJob) -> Result<Self, Error> {
        let path = program::locate("scontrol".as_ref(), crate::os::sys::var_os("PATH"))?;
        let (answers, into) = sys::answer_pipe().map_err(|e| Error::os("a pipe", e))?;
        let args = ["-o", "show", "job"]
            .into_iter()
            .map(OsString::from)
            .chain([job.id.to_string().into()])
            .collect::<Vec<_>>();
        let scontrol = spawn::Command::new(&path, "scontrol".as_ref(), &args, &[])?
            .with_stdio(Stdio::capture(into)?);
        Ok(Self { scontrol, answers })
    }

    /// Asks slurmctld about the job, waiting ANSWER_WITHIN at most. Does
    /// not allocate.
    #[inline(never)] // A large frame: see how-it-works.md, "Memory".
    fn ask(&self, job: SlurmJob, inherited: &Inherited, log: &Log) -> Meaning {
        let mut out = [0u8; 2048];
        let Some(answer) = self.answer(inherited, log, &mut out) else {
            return Meaning::Unknown;
        };
        let said = fields(answer).and_then(|f| core::str::from_utf8(f).ok());
        log.info(format_args!(
            "scontrol: job {}: {}",
            job.id,
            said.unwrap_or("no job state")
        ));
        meaning(answer, job.restarts)
    }

    /// How often Slurm has requeued the job before this run: its own
    /// count if lower than SLURM_RESTART_COUNT, which sbatch passes on
    /// from the submitter's environment (a job submitted by a requeued
    /// run's script starts with that run's count, and its first
    /// preemptions would be taken for cancels). Never higher. A job no
    /// longer running (`meaning` would read a signal to it) is being
    /// requeued or cancelled as ckptrun starts: that is taken for a
    /// requeue already counted (a wrong eviction costs a checkpoint, a
    /// wrong cancel the work). Asked before the job starts, and only when
    /// the count is not 0.
    #[inline(never)] // A large frame, as `ask`'s.
    fn baseline(&self, env: u32, inherited: &Inherited, log: &Log) -> u32 {
        let mut out = [0u8; 2048];
        let count = |answer: &[u8]| {
            let runs = meaning(answer, u32::MAX) == Meaning::Signal;
            Some(restarts(answer)?.saturating_sub(u32::from(!runs)))
        };
        match self.answer(inherited, log, &mut out).and_then(count) {
            Some(n) if n < env => {
                log.info(format_args!(
                    "SLURM_RESTART_COUNT={env} is inherited: requeues counted from {n}"
                ));
                n
            }
            _ => env,
        }
    }

    /// Runs `scontrol` and reads its answer into `out`; none if it could
    /// not run or did not answer in time (said in the log).
    #[inline(never)] // One copy for both.
    fn answer<'o>(&self, inherited: &Inherited, log: &Log, out: &'o mut [u8]) -> Option<&'o [u8]> {
        // A late answer to an earlier question.
        sys::drain(self.answers.as_fd(), out);
        let pid = match spawn::spawn(&self.scontrol, inherited, false) {
            Ok(pid) => pid,
            Err(e) => {
                log.warn(format_args!("scontrol: {e}"));
                return None;
            }
        };
        if !answered(pid) {
            log.warn(format_args!("scontrol: no answer"));
            return None;
        }
        let len = sys::drain(self.answers.as_fd(), out);
        Some(&out[..len])
    }
}

/// Waits for the helper `pid` to end, ANSWER_WITHIN at most (then kills
/// it); whether it ended in time. Only `pid` is reaped: the job's end, if
/// it comes meanwhile, is the supervisor's to see. Does not allocate.
fn answered(pid: Pid) -> bool {
    let give_up = Instant::now() + ANSWER_WITHIN;
    loop {
        if sys::reap(pid).is_some() {
            return true;
        }
        let left = give_up.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::reap_waiting(pid);
            return false;
        }
        let _ = sys::wait_signal(
            &SigSet::only(libc::SIGCHLD),
            Some(left.min(Duration::from_millis(10))),
        );
    }
}

/// What `scontrol -o show job` says (`... JobState=COMPLETING
/// Reason=None ... Restarts=1 ...`) of a job that was requeued `before`
/// times before this run.
fn meaning(out: &[u8], before: u32) -> Meaning {
    let Some(fields) = fields(out) else {
        return Meaning::Unknown;
    };
    let state = value(fields, b"JobState=").unwrap_or_default();
    if restarts(out).is_some_and(|n| n > before) {
        Meaning::Requeue
    } else if value(fields, b"Reason=") == Some(b"TimeLimit") {
        Meaning::TimeLimit
    } else if RUNS_ON.contains(&state) {
        Meaning::Signal
    } else if ENDS.contains(&state) {
        Meaning::Cancel
    } else {
        Meaning::Unknown
    }
}

/// The job's `Restarts=` count in a `scontrol -o show job` answer.
fn restarts(out: &[u8]) -> Option<u32> {
    core::str::from_utf8(value(fields(out)?, b"Restarts=")?)
        .ok()?
        .parse()
        .ok()
}

/// The value of the word `KEY=...` among `fields`.
#[inline(never)] // One copy for all.
fn value<'f>(fields: &'f [u8], key: &[u8]) -> Option<&'f [u8]> {
    fields
        .split(|b| b.is_ascii_whitespace())
        .find_map(|word| word.strip_prefix(key))
}

/// The part of the answer `meaning` reads, for the log too: from
/// `JobState=` to the end of the `Restarts=` word, after `UserId=`, so
/// that a job name holding `JobState=` changes nothing.
fn fields(out: &[u8]) -> Option<&[u8]> {
    let find = |from: usize, what: &[u8]| {
        let at = out[from..].windows(what.len()).position(|w| w == what)?;
        Some(from + at)
    };
    let from = find(find(0, b" UserId=")?, b"JobState=")?;
    let restarts = find(from, b"Restarts=")?;
    let end = out[restarts..]
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .map_or(out.len(), |n| restarts + n);
    Some(&out[from..end])
}

/// States of a job that runs on: SIGNALING is Slurm's flag for a signal
/// on its way to it, which a query right after `--signal=B:TERM@SECS`
/// may see (seen with Slurm 22.05 under load).
const RUNS_ON: [&[u8]; 2] = [b"RUNNING", b"SIGNALING"];
/// States of a job that ends for good, neither requeued nor timed out:
/// `scancel` shows COMPLETING, then CANCELLED. Any other state is not
/// taken for a cancel: a wrong eviction costs a checkpoint, a wrong
/// cancel the work since the last one.
const ENDS: [&[u8]; 4] = [b"COMPLETING", b"CANCELLED", b"PREEMPTED", b"DEADLINE"];

/// The mode's protocol, with Slurm's SIGTERM looked up first.
pub struct Watch<'p> {
    inner: &'p mut dyn Protocol,
    slurm: Slurm,
    /// None: scontrol could not be found (every SIGTERM is an eviction).
    query: Option<Query>,
    /// What Slurm meant by the SIGTERM the mode holds until the job
    /// handles its request (`protocol::when_ready`): the supervisor tries
    /// it again every 50 ms, and Slurm is not asked again each time.
    held: Option<Meaning>,
    inherited: &'p Inherited,
    log: &'p Log,
}

impl<'p> Watch<'p> {
    /// Builds the question before the job starts (it allocates).
    pub fn new(
        mut slurm: Slurm,
        inner: &'p mut dyn Protocol,
        inherited: &'p Inherited,
        log: &'p Log,
    ) -> Self {
        let query = Query::prepare(slurm.job)
            .map_err(|e| log.warn(format_args!("{e}: every SIGTERM evicts")))
            .ok();
        if let Some(query) = query.as_ref().filter(|_| slurm.job.restarts > 0) {
            slurm.job.restarts = query.baseline(slurm.job.restarts, inherited, log);
        }
        if let Some(store) = inner.empty_store().filter(|_| slurm.job.restarts > 0) {
            log.warn(format_args!(
                "{}: Slurm requeued job {} (restart {}), yet this start found no checkpoint \
                 there: the job starts from the beginning",
                store.name(),
                slurm.job.id,
                slurm.job.restarts
            ));
        }
        Self {
            inner,
            slurm,
            query,
            held: None,
            inherited,
            log,
        }
    }

    /// What Slurm means by the SIGTERM ckptrun received (said in the log).
    fn meaning(&self) -> Meaning {
        let meaning = match &self.query {
            Some(query) => query.ask(self.slurm.job, self.inherited, self.log),
            None => Meaning::Unknown,
        };
        self.log.info(format_args!(
            "SIGTERM: Slurm job {} {meaning}: {}",
            self.slurm.job.id,
            Answer::to(meaning, self.slurm.checkpoints)
        ));
        meaning
    }

    /// What a SIGTERM Slurm sent with `answer` does.
    fn act(&mut self, answer: Answer, job: &Job) -> Action {
        let sig = libc::SIGTERM;
        match answer {
            Answer::Evict | Answer::PassOn => self.inner.on_signal(sig, job),
            Answer::EndNow => self.cancel(job),
            // What --map makes of it (SIGTERM as SIGINT, say) still goes.
            Answer::NotAgain => match self.inner.on_signal(sig, job) {
                Action::Forward(libc::SIGTERM) => Action::Drop,
                other => other,
            },
        }
    }

    /// Slurm cancels the job: it ends at once. A job that handles SIGTERM
    /// has Slurm's, and is left to it (the log says nothing is sent); one
    /// that ignores it is killed.
    fn cancel(&mut self, job: &Job) -> Action {
        match job.catches(libc::SIGTERM) {
            true => Action::Drop,
            false => Action::Kill,
        }
    }
}

impl Protocol for Watch<'_> {
    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action {
        if sig != libc::SIGTERM {
            return self.inner.on_signal(sig, job);
        }
        let meaning = match self.held.take() {
            Some(meaning) => meaning,
            None => self.meaning(),
        };
        let action = self.act(Answer::to(meaning, self.slurm.checkpoints), job);
        if action == Action::Hold {
            self.held = Some(meaning);
        }
        action
    }

    fn on_stop(&mut self, sig: Sig, log: &Log) -> Action {
        self.inner.on_stop(sig, log)
    }

    fn stops_are_requests(&self) -> bool {
        self.inner.stops_are_requests()
    }

    fn deadline(&self) -> Option<Instant> {
        self.inner.deadline()
    }

    fn on_deadline(&mut self, job: &Job, log: &Log) -> Action {
        self.inner.on_deadline(job, log)
    }

    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict {
        self.inner.judge(ended, log)
    }

    fn again(&mut self, ended: Ended, ran: Duration, log: &Log) -> bool {
        self.inner.again(ended, ran, log)
    }

    fn reaped(&mut self, pid: Pid, raw: i32, log: &Log) {
        self.inner.reaped(pid, raw, log)
    }

    fn job_ended(&mut self, log: &Log) {
        self.inner.job_ended(log)
    }

    fn end(&mut self, ending: Ending, log: &Log) {
        self.inner.end(ending, log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Slurm 22.05's `scontrol -o show job` prints it (cut).
    fn shown(name: &str, state: &str, reason: &str, restarts: u32) -> Vec<u8> {
        format!(
            "JobId=7 JobName={name} UserId=root(0) GroupId=root(0) MCS_label=N/A \
             Priority=1 Nice=0 Account=(null) QOS=(null) JobState={state} Reason={reason} \
             Dependency=(null) Requeue=1 Restarts={restarts} BatchFlag=1 Reboot=0 ExitCode=0:0\n"
        )
        .into_bytes()
    }

    #[test]
    fn slurms_sigterm_is_told_apart_by_the_jobs_state() {
        let cases = [
            ("COMPLETING", "None", 2, Meaning::Requeue),
            ("PENDING", "BeginTime", 2, Meaning::Requeue),
            ("COMPLETING", "TimeLimit", 1, Meaning::TimeLimit),
            ("RUNNING", "None", 1, Meaning::Signal),
            ("SIGNALING", "None", 1, Meaning::Signal),
            ("COMPLETING", "None", 1, Meaning::Cancel),
            ("CANCELLED", "None", 1, Meaning::Cancel),
            ("CONFIGURING", "None", 1, Meaning::Unknown),
        ];
        for (state, reason, restarts, want) in cases {
            let out = shown("job.sh", state, reason, restarts);
            assert_eq!(meaning(&out, 1), want, "{state} {reason} {restarts}");
            let logged = format!(
                "JobState={state} Reason={reason} Dependency=(null) Requeue=1 Restarts={restarts}"
            );
            assert_eq!(fields(&out), Some(logged.as_bytes()));
        }
    }

    #[test]
    fn only_a_cancel_ends_a_checkpointed_job_without_a_checkpoint() {
        use Meaning::*;
        for meaning in [Requeue, TimeLimit, Signal, Unknown] {
            assert_eq!(Answer::to(meaning, true), Answer::Evict, "{meaning}");
        }
        assert_eq!(Answer::to(Cancel, true), Answer::EndNow);
        for meaning in [Requeue, TimeLimit, Cancel] {
            assert_eq!(Answer::to(meaning, false), Answer::NotAgain, "{meaning}");
        }
        for meaning in [Signal, Unknown] {
            assert_eq!(Answer::to(meaning, false), Answer::PassOn, "{meaning}");
        }
    }

    #[test]
    fn the_restart_count_is_read_from_the_jobs_fields() {
        assert_eq!(restarts(&shown("job.sh", "RUNNING", "None", 0)), Some(0));
        assert_eq!(
            restarts(&shown("Restarts=9", "RUNNING", "None", 3)),
            Some(3)
        );
        assert_eq!(
            restarts(b"slurm_load_jobs error: Invalid job id specified\n"),
            None
        );
    }

    #[test]
    fn an_answer_without_the_jobs_state_is_unknown() {
        let error = b"slurm_load_jobs error: Invalid job id specified\n";
        assert_eq!(meaning(error, 0), Meaning::Unknown);
        assert_eq!(meaning(b"", 0), Meaning::Unknown);
        let named = shown("x JobState=RUNNING", "COMPLETING", "None", 0);
        assert_eq!(meaning(&named, 0), Meaning::Cancel);
    }

    #[test]
    fn the_environment_names_the_job() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(SlurmJob::from_env(env(&[])), None);
        assert_eq!(
            SlurmJob::from_env(env(&[("SLURM_JOB_ID", "42")])),
            Some(SlurmJob {
                id: 42,
                restarts: 0
            })
        );
        assert_eq!(
            SlurmJob::from_env(env(&[("SLURM_JOB_ID", "42"), ("SLURM_RESTART_COUNT", "3")])),
            Some(SlurmJob {
                id: 42,
                restarts: 3
            })
        );
        assert_eq!(SlurmJob::from_env(env(&[("SLURM_JOB_ID", "x")])), None);
    }
}
