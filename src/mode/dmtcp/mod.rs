//! `--mode dmtcp`: an unmodified program, checkpointed by DMTCP, under
//! HTCondor (PROTOCOLS.md §3 and §5). ckptrun replaces the `shim_dmtcp`
//! script. This file is the protocol: what each signal, timer and end
//! means for the computation, as one `Phase`. Its rooms:
//!
//! - `plan`: before the job runs: the tools (`tools`), the store, the
//!   images directory (`images`), a private coordinator (`coordinator`),
//!   and the job as `dmtcp_launch ... PROGRAM ARG...` or, when the store
//!   holds a committed checkpoint, `dmtcp_restart ... IMAGE...` (`restart`:
//!   how a restart gets its images);
//! - `join`: the job is not protected until the coordinator has seen it
//!   through its launch or restart, within a time limit;
//! - `checkpoint`: the requests, and the commit of their images;
//! - `processes`: the coordinator's life, the helpers, and their end.
//!
//! Eviction (SIGTERM, SIGINT as in the shim's submit files, the job ad's
//! KillSig and CheckpointSig) and `--interval`: `--kcheckpoint`, wait
//! until it is complete (within the eviction budget, if there is one),
//! commit the images as the next generation, exit 85.
//! `--interval-continue`: `--bcheckpoint` every SECS, committed while the
//! job runs on. The job's own end is passed on as condor mode does.
//! Whatever is left of its process group, the coordinator and the helpers
//! are ended before ckptrun exits.

mod checkpoint;
mod coordinator;
mod images;
mod join;
mod plan;
mod processes;
mod restart;
mod tools;

use std::path::Path;
use std::time::{Duration, Instant};

use self::checkpoint::{Asks, POLL, Pending, Place, Poll, Requests};
use self::images::Look;
use self::join::{Check, Status};
use self::processes::{Processes, Stop, Which};
use crate::config::Config;
use crate::mode::request::{PeriodicCommits, Policy};
use crate::os::error::{COMMIT_FAILED, Error, NO_ANSWER};
use crate::os::log::Log;
use crate::os::sys::{self, Pid, Sig};
use crate::run::protocol::{self, Action, Ended, Ending, Job, Protocol, Routes, Verdict};
use crate::run::signals::{Inherited, Name};
use crate::run::spawn;
use crate::run::supervise;

/// How long a computation DMTCP was told to kill after its checkpoint
/// may take to go before ckptrun SIGKILLs it.
const QUIT_GRACE: Duration = Duration::from_secs(2);
/// How long after the coordinator's exit 0 the job may take to end too
/// before that is reported. A computation's last process closes its
/// connection before it becomes a zombie, and `--exit-on-last` may end
/// the coordinator first: ckptrun can reap the coordinator of a job
/// that is ending of its own accord.
const LOST_GRACE: Duration = Duration::from_secs(1);

pub struct Dmtcp<'a> {
    inherited: &'a Inherited,
    log: &'a Log,
    place: Place,
    procs: Processes,
    requests: Requests,
    status: Status,
    routes: Routes,
    /// Evictions ("checkpoint, then exit"), time limits, `--interval`.
    policy: Policy,
    code: u8,
    by_signal: Option<Sig>,
    /// `--interval-continue`: periodic checkpoints keep the job running.
    keep_running: bool,
    phase: Phase,
    /// Periodic commits that failed (`--interval-continue`).
    periodic: PeriodicCommits,
    /// The job has ended: the coordinator is expected to go.
    job_ended: bool,
    /// The coordinator ended while the job ran, and when to say so if
    /// the job has not ended by then (LOST_GRACE).
    lost: Option<(Ended, Instant)>,
    /// The images directory holds a checkpoint that could not be
    /// committed: it is left for the user.
    keep_images: bool,
}

/// Where the computation is.
#[derive(Clone, Copy)]
enum Phase {
    /// Launched or restarted: the coordinator has not yet seen it through
    /// (`join`). A checkpoint asked for meanwhile is not sent before it
    /// has: the coordinator forgets a `--kcheckpoint`'s "kill after" when
    /// the computation's first process joins.
    Joining {
        check: Check,
        pending: Option<Pending>,
    },
    /// It runs under DMTCP; `pending`: a checkpoint requested and not yet
    /// complete.
    Running { pending: Option<Pending> },
    /// The eviction's checkpoint is complete; the computation is ending:
    /// DMTCP kills it (--kcheckpoint), else ckptrun does at `kill_at`.
    Checkpointed { kill_at: Option<Instant> },
    /// The eviction's checkpoint was not complete in time, or could not
    /// be requested; the computation is being ended.
    NotCheckpointed,
    /// The job never came under DMTCP, its restart did not complete, or
    /// a second periodic commit failed: ended, and ckptrun exits with
    /// this code.
    Failed(u8),
}

impl Phase {
    fn running(&self) -> bool {
        matches!(self, Phase::Joining { .. } | Phase::Running { .. })
    }

    /// The checkpoint requested, while the computation runs.
    fn pending(&self) -> Option<&Pending> {
        match self {
            Phase::Joining { pending, .. } | Phase::Running { pending } => pending.as_ref(),
            _ => None,
        }
    }

    /// Where a request is kept: none once the computation is ending.
    fn pending_slot(&mut self) -> Option<&mut Option<Pending>> {
        match self {
            Phase::Joining { pending, .. } | Phase::Running { pending } => Some(pending),
            _ => None,
        }
    }
}

/// The plan, and the checkpoints requested.
impl<'a> Dmtcp<'a> {
    /// Finds the tools, opens the store, prepares the images directory,
    /// starts the coordinator; returns the protocol and the command that
    /// starts the job (`path` is PROGRAM as found).
    pub fn plan(
        config: &Config,
        path: &Path,
        stdio: &spawn::Stdio,
        inherited: &'a Inherited,
        log: &'a Log,
    ) -> Result<(Self, spawn::Command), Error> {
        let (parts, job) = plan::make(config, path, stdio, inherited, log)?;
        let mut evictions = vec![libc::SIGTERM, libc::SIGINT];
        evictions.extend(&config.evict_signals);
        evictions.extend(&config.periodic_signals);
        let now = Instant::now();
        let mut policy = Policy::new(config, evictions);
        policy.start_ticks(now);
        let protocol = Self {
            inherited,
            log,
            place: parts.place,
            procs: parts.procs,
            requests: parts.requests,
            status: parts.status,
            routes: Routes::new(&[], &config.maps),
            policy,
            code: config.ckpt_exit_code,
            by_signal: config.exit_by_signal,
            keep_running: config.interval_continue,
            phase: Phase::Joining {
                check: Check::new(parts.restart, now),
                pending: None,
            },
            periodic: PeriodicCommits::default(),
            job_ended: false,
            lost: None,
            keep_images: false,
        };
        Ok((protocol, job))
    }

    /// Asks the coordinator for a checkpoint, or joins the one under way.
    /// `evicted`: an eviction asks (else `--interval`).
    fn ask(&mut self, exit: bool, evicted: bool) -> Action {
        self.ask_by(exit, evicted, self.policy.answer_by(evicted))
    }

    /// `ask`, with the time limit given.
    fn ask_by(&mut self, exit: bool, evicted: bool, deadline: Option<Instant>) -> Action {
        let now = Instant::now();
        let joined = matches!(self.phase, Phase::Running { .. });
        let Some(slot) = self.phase.pending_slot() else {
            return Action::Drop;
        };
        if let Some(p) = slot {
            if exit {
                p.then_exit(evicted, deadline, self.log);
            }
            return Action::Drop;
        }
        // After a checkpoint given up on, one that ends the computation
        // is taken only once that one is done with (see `given_up`); one
        // under way is waited for.
        let late = self.place.late(self.log);
        let asks = match (exit, late) {
            (false, _) => Asks::RunOn,
            (true, None) => Asks::Exit,
            (true, Some(_)) => Asks::RunOnThenExit { by: deadline },
        };
        let p = slot.insert(Pending::new(asks, evicted, deadline, now));
        self.place.frozen = None;
        self.policy.stop_ticks();
        if late.is_none_or(|look| look == Look::Nothing) {
            let rooms = (&self.requests, &mut self.procs, self.inherited);
            p.send(joined, rooms, self.log);
        }
        Action::Drop
    }

    /// The checkpoint to exit with is complete, or will not be: end the
    /// computation. A complete one DMTCP kills itself (--kcheckpoint),
    /// with SIGKILL as the fallback; one not complete is killed now.
    fn end_computation(&mut self, phase: Phase) -> Action {
        self.policy.stop_ticks();
        match phase {
            // Checkpointed only by a request that kills (on_pending).
            Phase::Checkpointed { .. } => {
                self.phase = Phase::Checkpointed {
                    kill_at: Some(Instant::now() + QUIT_GRACE),
                };
                Action::Drop
            }
            phase => {
                self.phase = phase;
                Action::Kill
            }
        }
    }

    /// No checkpoint is pending: is an `--interval` tick due?
    fn on_tick(&mut self, now: Instant, log: &Log) -> Action {
        if !self.policy.tick_due(now) || !self.phase.running() {
            return Action::Drop;
        }
        self.policy.stop_ticks();
        log.info(format_args!(
            "--interval: periodic checkpoint{}",
            if self.keep_running {
                ", the job running on"
            } else {
                " and exit"
            }
        ));
        self.ask(!self.keep_running, false)
    }

    /// A checkpoint is pending: is it complete, out of time, or to be
    /// asked for again?
    fn on_pending(&mut self, now: Instant, log: &Log) -> Action {
        let joined = matches!(self.phase, Phase::Running { .. });
        let Some(Some(p)) = self.phase.pending_slot() else {
            return Action::Drop;
        };
        let poll = p.poll(&self.place.images, &self.procs, now);
        let asked = *p;
        match poll {
            Poll::Wait => Action::Drop,
            Poll::Writing => {
                if !matches!(asked.asks, Asks::Exit) {
                    self.place.note_frozen();
                }
                Action::Drop
            }
            Poll::AskAgain => {
                p.send(
                    joined,
                    (&self.requests, &mut self.procs, self.inherited),
                    log,
                );
                Action::Drop
            }
            Poll::Complete if matches!(asked.asks, Asks::Exit) => {
                log.info(format_args!("checkpoint complete"));
                self.end_computation(Phase::Checkpointed { kill_at: None })
            }
            Poll::Complete => self.committed_on(asked),
            Poll::OutOfTime => {
                // DMTCP froze the computation for it: it cannot go on either.
                log.warn(format_args!(
                    "the {} checkpoint was not complete in time: ending the computation",
                    if asked.evicted {
                        "eviction's"
                    } else {
                        "periodic"
                    }
                ));
                self.end_computation(Phase::NotCheckpointed)
            }
            Poll::GivenUp => self.given_up(asked, now, log),
        }
    }

    /// A run-on checkpoint is complete: commit it while the job runs on;
    /// then, if an eviction came during it, the one that ends the
    /// computation, within what is left of the eviction's time.
    fn committed_on(&mut self, p: Pending) -> Action {
        if !self.commit_periodic() {
            return self.end_computation(Phase::Failed(COMMIT_FAILED));
        }
        if let Asks::RunOnThenExit { by } = p.asks {
            return self.ask_by(true, p.evicted, by);
        }
        Action::Drop
    }

    /// No checkpoint could be taken.
    fn given_up(&mut self, p: Pending, now: Instant, log: &Log) -> Action {
        log.warn(format_args!(
            "no checkpoint could be taken ({} requests{})",
            p.tries,
            if self.procs.coordinator_gone() {
                ", the coordinator is gone"
            } else {
                ""
            }
        ));
        if p.exit() {
            return self.end_computation(Phase::NotCheckpointed);
        }
        if let Some(slot) = self.phase.pending_slot() {
            *slot = None;
        }
        // Once asked for, DMTCP may still take it (a job stopped, then
        // continued), at a time ckptrun cannot tell (see `Place`).
        self.place.lapsed |= p.tries > 0;
        self.policy.start_ticks(now);
        Action::Drop
    }

    /// A "keep running" checkpoint is complete: commit it while the job
    /// runs on, with the outputs' sizes when it was taken if they were
    /// seen (see `Place::note_frozen`). Whether it may run on (see
    /// `PeriodicCommits`).
    fn commit_periodic(&mut self) -> bool {
        let log = self.log;
        // A request whose `dmtcp_command` still runs (this checkpoint was
        // a lapsed one, not its own) may yet start one once this is done,
        // which nothing would watch: that one is taken as lapsed too.
        let asking = self.phase.pending().is_some_and(Pending::asking);
        if let Some(slot) = self.phase.pending_slot() {
            *slot = None;
        }
        self.policy.start_ticks(Instant::now());
        if self.place.frozen.is_none() {
            if self.place.lapsed {
                self.place.discard(log);
                self.place.lapsed = asking;
                return true;
            }
            log.info(format_args!(
                "the images were not seen being written: the outputs' sizes are taken now"
            ));
        }
        self.place.lapsed = asking;
        let done = self.place.commit(log);
        if let Err(f) = done {
            log.warn(format_args!(
                "{}: commit failed: {f}; the last commit is kept",
                self.place.store.name()
            ));
            // The next checkpoint overwrites what this one left.
            let _ = self.place.images.empty();
        }
        self.periodic.run_on(done.is_ok(), log)
    }
}

/// The coordinator: the job's launch or restart seen through, and its end.
impl Dmtcp<'_> {
    /// The launch or restart check is due: ask the coordinator again, or
    /// give up on the job.
    fn on_join(&mut self, now: Instant, log: &Log) -> Action {
        let Phase::Joining { check, .. } = &mut self.phase else {
            return Action::Drop;
        };
        let rooms = (&self.status, &mut self.procs, self.inherited);
        match check.on_deadline(now, rooms, log) {
            Ok(()) => Action::Drop,
            Err(code) => self.end_computation(Phase::Failed(code)),
        }
    }

    /// The `--status` helper exited: once the coordinator has seen the
    /// job through, it runs, and a request may be sent.
    fn probed(&mut self, ok: bool, log: &Log) {
        let Phase::Joining { check, pending } = &mut self.phase else {
            return;
        };
        if check.probed(&self.status, ok, log) {
            let running = Phase::Running { pending: *pending };
            self.phase = running;
        }
    }

    /// Whether the coordinator's end now is part of the computation's:
    /// else it takes the job with it (DMTCP's 99), and the user is told.
    fn coordinator_may_end(&self) -> bool {
        self.job_ended
            || self.procs.quitting()
            || !self.phase.running()
            // DMTCP ends the computation, then the coordinator.
            || self.phase.pending().is_some_and(|p| matches!(p.asks, Asks::Exit))
    }

    /// A coordinator killed under the job, seen as the job ends. The job
    /// may be reaped before it: the job's socket closes as the coordinator
    /// exits, before it is a zombie. Looked at without reaping; `reaped`
    /// hears of it later, as an end then expected.
    fn coordinator_died_first(&self, log: &Log) {
        let Some(pid) = self.procs.coordinator() else {
            return;
        };
        let Some(raw) = crate::os::procfs::ended_unreaped(pid) else {
            return;
        };
        let ended = Ended { raw, pid };
        if !self.coordinator_may_end() && ended.exit_code() != Some(0) {
            coordinator_lost(ended, log);
        }
    }

    /// The coordinator was reaped.
    fn coordinator_ended(&mut self, ended: Ended, log: &Log) {
        if self.coordinator_may_end() {
            log.info(format_args!("the DMTCP coordinator {ended}"));
        } else if ended.exit_code() == Some(0) {
            // --exit-on-last: the computation may be ending.
            self.lost = Some((ended, Instant::now() + LOST_GRACE));
        } else {
            coordinator_lost(ended, log);
        }
    }
}

/// The computation's end.
impl Dmtcp<'_> {
    /// The job's first process has ended with a "checkpoint and exit"
    /// request pending: waits until the checkpoint is complete, or will
    /// not be: no image begun, the coordinator gone (every process has
    /// reported its image by then), or the request's time limit (else
    /// GIVE_UP) reached. Reaps what ends meanwhile. Does not allocate.
    fn wait_complete(&mut self, log: &Log) -> bool {
        let limit = self
            .phase
            .pending()
            .and_then(|p| p.deadline)
            .unwrap_or_else(|| Instant::now() + checkpoint::GIVE_UP);
        loop {
            let look = self.place.images.look();
            if look == Look::Complete {
                return true;
            }
            if look == Look::Nothing || self.procs.coordinator_gone() || Instant::now() >= limit {
                return self.place.images.look() == Look::Complete;
            }
            let _ = sys::wait_signal(&sys::SigSet::only(libc::SIGCHLD), Some(POLL));
            supervise::reap_all(self, log);
        }
    }

    /// The end of the computation as a verdict, once its group is gone.
    fn verdict(&mut self, ended: Ended, log: &Log) -> Verdict {
        match self.phase {
            // The computation ended with the checkpoint: its outputs are
            // as they were then.
            Phase::Checkpointed { .. } => match self.place.commit(log) {
                Ok(g) => protocol::checkpointed(
                    self.code,
                    self.by_signal,
                    format_args!("generation {g} ({})", self.place.store.slot_of(g)),
                    log,
                ),
                Err(f) => {
                    self.keep_images = true;
                    log.warn(format_args!(
                        "{}: commit failed: {f}; the last commit is kept, the images are left in {}",
                        self.place.store.name(),
                        self.place.images.at().display()
                    ));
                    Verdict::Exit(COMMIT_FAILED)
                }
            },
            Phase::NotCheckpointed => Verdict::Exit(NO_ANSWER),
            Phase::Failed(code) => Verdict::Exit(code),
            Phase::Joining { pending, .. } | Phase::Running { pending } => {
                // An image begun means DMTCP had frozen the job for its
                // checkpoint: it did not end by itself. Otherwise it did
                // (as the eviction came), and its end is passed on.
                if pending.is_some_and(|p| p.exit()) && self.place.images.look() != Look::Nothing {
                    log.warn(format_args!(
                        "the computation ended before its checkpoint was complete; nothing committed"
                    ));
                    return Verdict::Exit(NO_ANSWER);
                }
                protocol::guard_collision(ended, self.code, self.by_signal, log)
            }
        }
    }

    /// Waits, at most STOP_GRACE, until nothing ckptrun started is left
    /// (see `processes`), reaping it. Does not allocate.
    fn stop_all(&mut self, log: &Log) {
        let mut stop = Processes::stopping(Instant::now());
        loop {
            let none_left = supervise::reap_all(self, log);
            match self
                .procs
                .stop_step(&mut stop, none_left, self.inherited, log)
            {
                Stop::Done => {
                    // The coordinator is gone: its port file says nothing
                    // any more.
                    let _ = rustix::fs::unlinkat(
                        self.place.store.scratch(),
                        coordinator::PORT_FILE,
                        rustix::fs::AtFlags::empty(),
                    );
                    return;
                }
                Stop::GaveUp => return,
                Stop::Wait => {}
            }
            let _ = sys::wait_signal(
                &sys::SigSet::only(libc::SIGCHLD),
                Some(Duration::from_millis(10)),
            );
        }
    }
}

/// The coordinator ended under the job, taking it with it: said on
/// stderr (HTCondor's error file), since the job's end follows from it.
#[inline(never)]
fn coordinator_lost(ended: Ended, log: &Log) {
    log.warn(format_args!(
        "the DMTCP coordinator {ended} while the job runs"
    ));
}

impl Protocol for Dmtcp<'_> {
    fn empty_store(&self) -> Option<&crate::store::Store> {
        let store = &self.place.store;
        store.found_none().then_some(store)
    }

    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action {
        if !self.policy.is_eviction(sig) {
            return self.routes.route(sig);
        }
        // Once the computation is being ended, there is nothing to ask.
        if self.phase.running() {
            self.log
                .info(format_args!("{}: eviction, checkpoint and exit", Name(sig)));
            // A stopped computation cannot be checkpointed; it is being
            // evicted: let it run.
            let _ = sys::kill(-job.pid, libc::SIGCONT);
            return self.ask(true, true);
        }
        Action::Drop
    }

    /// A stopped job is its own business (job control, a debugger).
    fn on_stop(&mut self, _sig: Sig, _log: &Log) -> Action {
        Action::Drop
    }

    fn deadline(&self) -> Option<Instant> {
        let pending = self.phase.pending().and_then(Pending::wake_at);
        let check = match &self.phase {
            Phase::Joining { check, .. } => Some(check.deadline()),
            _ => None,
        };
        let lost = self.lost.map(|(_, at)| at);
        let tick = self.policy.next_tick();
        let kill_at = match self.phase {
            Phase::Checkpointed { kill_at } => kill_at,
            _ => None,
        };
        protocol::earliest(&[pending, check, tick, kill_at, lost])
    }

    fn on_deadline(&mut self, _job: &Job, log: &Log) -> Action {
        let now = Instant::now();
        if let Some((ended, at)) = self.lost
            && at <= now
        {
            self.lost = None;
            coordinator_lost(ended, log);
        }
        if let Phase::Checkpointed { kill_at: Some(t) } = self.phase
            && t <= now
        {
            self.phase = Phase::Checkpointed { kill_at: None };
            // Handled (SIGKILL): for the log, not HTCondor's error file.
            log.info(format_args!(
                "the computation is still there {} ms after its checkpoint",
                QUIT_GRACE.as_millis() as u64
            ));
            return Action::Kill;
        }
        let action = self.on_join(now, log);
        if action != Action::Drop {
            return action;
        }
        match self.phase.pending() {
            Some(_) => self.on_pending(now, log),
            None => self.on_tick(now, log),
        }
    }

    fn reaped(&mut self, pid: Pid, raw: i32, log: &Log) {
        if !(libc::WIFEXITED(raw) || libc::WIFSIGNALED(raw)) {
            return;
        }
        let ended = Ended { raw, pid };
        if let Which::Coordinator = self.procs.ended(pid) {
            return self.coordinator_ended(ended, log);
        }
        if matches!(&self.phase, Phase::Joining { check, .. } if check.probes_with(pid)) {
            return self.probed(ended.exit_code() == Some(0), log);
        }
        if let Some(Some(p)) = self.phase.pending_slot() {
            p.requester_ended(pid, ended.exit_code() == Some(0));
        }
    }

    fn job_ended(&mut self, log: &Log) {
        self.coordinator_died_first(log);
        self.job_ended = true;
    }

    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict {
        self.job_ended = true;
        if let Some((coordinator, _)) = self.lost.take() {
            log.info(format_args!(
                "the DMTCP coordinator {coordinator} as the job ended"
            ));
        }
        // With --kcheckpoint each process exits once its own image is
        // written: the job's first process may end while others still
        // write theirs.
        if self.phase.pending().is_some_and(Pending::exit) && self.wait_complete(log) {
            log.info(format_args!("checkpoint complete"));
            self.phase = Phase::Checkpointed { kill_at: None };
        }
        // Nothing of the computation may run on (or write) after this.
        supervise::end_group(ended.pid, log);
        self.verdict(ended, log)
    }

    /// Stops what ckptrun started (see `processes`), removes DMTCP's
    /// temporary files (see `plan::temporary`), and the images directory
    /// unless it holds a checkpoint that could not be committed. Does not
    /// allocate.
    fn end(&mut self, ending: Ending, log: &Log) {
        self.stop_all(log);
        let _ = crate::os::tree::remove(self.place.store.scratch(), coordinator::TMP);
        let _ = crate::os::tree::remove(self.place.store.scratch(), crate::store::scratch::RESTORE);
        crate::mode::stores::at_end(&mut self.place.store, ending, log);
        if !self.keep_images {
            self.place.images.remove();
        }
    }
}
