//! `--mode self`: the job checkpoints itself, and ckptrun is the wrapper
//! HTCondor's self-checkpointing contract asks for (PROTOCOLS.md §2): it
//! gives the job a private working copy of its last committed checkpoint,
//! asks it for checkpoints (on eviction and every `--interval`), checks
//! what it reports, commits it atomically and durably (see `store`), and
//! turns it into HTCondor's checkpoint exit code.
//!
//! A request is "checkpoint and exit" unless `--ckpt-continue`: then the
//! job checkpoints and runs on, and ckptrun commits once every path has
//! been replaced (renamed over) since the request, the only sign a running
//! job can give that a write is complete. An eviction is always "and
//! exit": with `--ckpt-continue` ckptrun kills the job once the checkpoint
//! is committed.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::mode::request::{self, PeriodicCommits, Policy};
use crate::mode::stores;
use crate::os::error::{COMMIT_FAILED, Error, NO_ANSWER, NO_CHECKPOINT};
use crate::os::log::Log;
use crate::os::sys::Sig;
use crate::os::tree::Fingerprint;
use crate::run::protocol::{self, Action, Ended, Ending, Job, Protocol, Routes, Verdict};
use crate::run::signals::Name;
use crate::store::{Store, Take};

/// How often a running job's checkpoint is looked at after a
/// `--ckpt-continue` request, and a request retried while the job has no
/// handler yet.
const POLL: Duration = Duration::from_millis(100);

pub struct SelfCkpt {
    store: Store,
    routes: Routes,
    request: Option<Sig>,
    /// Evictions, time limits and `--interval` ticks.
    policy: Policy,
    keep_running: bool,
    job_exit: Option<u8>,
    job_signal: Option<Sig>,
    code: u8,
    by_signal: Option<Sig>,
    restart_grace: Option<Duration>,
    /// The generation the working copy came from, if a checkpoint.
    restored: Option<u64>,
    /// The working paths when the job started, or at the last commit:
    /// a report is good if they changed since. (Not since the request: a
    /// job may finish a checkpoint of its own as the request arrives.)
    committed: Vec<Option<Fingerprint>>,
    /// The working paths when a `--ckpt-continue` request was sent.
    at_request: Vec<Option<Fingerprint>>,
    /// A commit happened during this run (`--ckpt-continue`).
    committed_in_run: bool,
    /// Scratch for the paths now (allocated here, reused).
    now: Vec<Option<Fingerprint>>,
    phase: Phase,
    /// A request went to the job during this run.
    asked: bool,
    /// ckptrun received a signal during this run (an eviction, say).
    signalled: bool,
    fell_back: bool,
    /// Periodic commits that failed (`--ckpt-continue`).
    periodic: PeriodicCommits,
}

/// Where the run is with its requests.
#[derive(Clone, Copy)]
enum Phase {
    /// None under way.
    Idle,
    /// One sent and not yet answered.
    Asked(Pending),
    /// Asked to exit, the job did not in time: it is being killed
    /// (exit NO_ANSWER).
    TimedOut,
    /// A `--ckpt-continue` request to exit was committed, or a second
    /// periodic commit failed: the job is being killed. The generation
    /// committed, or none if the commit failed.
    Killed { committed: Option<u64> },
}

/// A request sent and not yet answered.
#[derive(Clone, Copy)]
struct Pending {
    /// The job must exit (or, if it keeps running, be killed) after it.
    exit: bool,
    deadline: Option<Instant>,
    next_poll: Option<Instant>,
}

impl SelfCkpt {
    /// Opens the store and restores the working copy; returns the
    /// protocol and the arguments to append to the job's own (the
    /// `--restart-arg`s, when it restarts from a checkpoint).
    pub fn plan(config: &Config, log: &Log) -> Result<(Self, Vec<OsString>), Error> {
        let (store, opened) = Store::open(
            (&config.store, &config.ckpt),
            config.store_options(),
            (stores::SELF, &[]),
            None,
            log,
        )?;
        let restored = opened.checkpoint();
        let extra = match restored {
            Some(g) => {
                log.info(format_args!(
                    "restart from generation {g} of {}",
                    config.store.display()
                ));
                expand(&config.restart_args, &config.ckpt[0])
            }
            None => {
                log.info(format_args!("fresh start"));
                Vec::new()
            }
        };
        let mut evictions = vec![libc::SIGTERM];
        evictions.extend(&config.evict_signals);
        let mut defaults = Vec::new();
        if let Some(request) = config.ckpt_signal {
            for &sig in evictions.iter().chain(&config.periodic_signals) {
                defaults.push((sig, request));
            }
        }
        let n = store.work().paths().len();
        let mut protocol = Self {
            routes: Routes::new(&defaults, &config.maps),
            request: config.ckpt_signal,
            policy: Policy::new(config, evictions),
            keep_running: config.ckpt_continue,
            job_exit: config.job_ckpt_exit,
            job_signal: config.job_ckpt_signal,
            code: config.ckpt_exit_code,
            by_signal: config.exit_by_signal,
            restart_grace: config.restart_grace,
            restored,
            committed: vec![None; n],
            at_request: vec![None; n],
            committed_in_run: false,
            now: vec![None; n],
            phase: Phase::Idle,
            asked: false,
            signalled: false,
            fell_back: false,
            periodic: PeriodicCommits::default(),
            store,
        };
        protocol.started();
        Ok((protocol, extra))
    }

    /// The job (re)starts now.
    fn started(&mut self) {
        self.signalled = false;
        self.committed_in_run = false;
        self.store.work().fingerprints(&mut self.committed);
        self.policy.start_ticks(Instant::now());
    }

    /// A request goes to the job now, for an eviction or not.
    fn asked(&mut self, exit: bool, evicted: bool) {
        let now = Instant::now();
        self.asked = true;
        self.policy.stop_ticks();
        let deadline = self.policy.answer_by(evicted);
        match &mut self.phase {
            Phase::Asked(p) if p.exit => {
                // Already asked to exit: the earlier deadline stands.
                p.deadline = protocol::earliest(&[p.deadline, deadline]);
                return;
            }
            // Being killed: nothing more to ask of it.
            Phase::TimedOut | Phase::Killed { .. } => return,
            Phase::Idle | Phase::Asked(_) => {}
        }
        if self.keep_running {
            self.store.work().fingerprints(&mut self.at_request);
        }
        self.phase = Phase::Asked(Pending {
            exit,
            deadline,
            next_poll: self.keep_running.then(|| now + POLL),
        });
    }

    /// With `--ckpt-continue`: has every path been replaced since the
    /// request, and does it hold data?
    fn answered(&mut self) -> bool {
        // Cheap first: has every path's top level been replaced?
        let replaced = self
            .store
            .work()
            .paths()
            .iter()
            .zip(&self.at_request)
            .all(|(c, before)| {
                c.identity()
                    .is_some_and(|id| before.is_none_or(|b| (b.dev, b.ino) != id))
            });
        if !replaced {
            return false;
        }
        self.store.work().fingerprints(&mut self.now);
        self.now.iter().zip(&self.at_request).all(|(now, before)| {
            now.is_some_and(|n| {
                n.has_data() && before.is_none_or(|b| (b.dev, b.ino) != (n.dev, n.ino))
            })
        })
    }

    /// The job said it checkpointed: is it there, with data, and new?
    fn check_report(&mut self, log: &Log) -> bool {
        self.store.work().fingerprints(&mut self.now);
        for (c, now) in self.store.work().paths().iter().zip(&self.now) {
            let why = match now {
                None => "is missing",
                Some(n) if !n.has_data() => "is empty",
                Some(_) => continue,
            };
            log.warn(format_args!(
                "job reported a checkpoint but {} {why}; nothing committed (exit {NO_CHECKPOINT})",
                c.path.display()
            ));
            return false;
        }
        if self.now == self.committed {
            let since = if self.committed_in_run {
                "the last commit"
            } else {
                "the job started"
            };
            log.warn(format_args!(
                "job reported a checkpoint but nothing in --ckpt was written since {since}; nothing committed (exit {NO_CHECKPOINT})"
            ));
            return false;
        }
        true
    }

    fn commit(&mut self, take: Take, log: &Log) -> Result<u64, ()> {
        self.store.commit(take, log).map_err(|f| {
            log.warn(format_args!(
                "cannot commit the checkpoint to {}: {f}; the last committed one is kept (exit {COMMIT_FAILED})",
                self.store.name()
            ));
        })
    }

    fn reported(&self, ended: Ended) -> bool {
        (self.job_exit.is_some() && ended.exit_code() == self.job_exit)
            || (self.job_signal.is_some() && ended.signal() == self.job_signal)
    }

    fn checkpointed(&self, g: u64, log: &Log) -> Verdict {
        protocol::checkpointed(
            self.code,
            self.by_signal,
            format_args!("generation {g} ({})", self.store.slot_of(g)),
            log,
        )
    }
}

/// The `--restart-arg`s with `{ckpt}` replaced by the first `--ckpt`.
fn expand(args: &[OsString], ckpt: &OsString) -> Vec<OsString> {
    args.iter()
        .map(|arg| {
            let mut out = Vec::new();
            let mut rest = arg.as_bytes();
            while let Some(at) = rest.windows(6).position(|w| w == b"{ckpt}") {
                out.extend_from_slice(&rest[..at]);
                out.extend_from_slice(ckpt.as_bytes());
                rest = &rest[at + 6..];
            }
            out.extend_from_slice(rest);
            OsString::from_vec(out)
        })
        .collect()
}

impl Protocol for SelfCkpt {
    fn empty_store(&self) -> Option<&Store> {
        self.store.found_none().then_some(&self.store)
    }

    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action {
        self.signalled = true;
        let action = self.routes.route(sig);
        let Some(request) = self.request else {
            return action;
        };
        if action != Action::Forward(request) {
            return action;
        }
        let action = protocol::when_ready(action, &[request], job);
        if action == Action::Forward(request) {
            self.asked(true, self.policy.is_eviction(sig));
        }
        action
    }

    fn on_stop(&mut self, _sig: Sig, _log: &Log) -> Action {
        Action::Drop
    }

    fn deadline(&self) -> Option<Instant> {
        let pending = match self.phase {
            Phase::Asked(p) => [p.deadline, p.next_poll],
            _ => [None, None],
        };
        protocol::earliest(&[self.policy.next_tick(), pending[0], pending[1]])
    }

    fn on_deadline(&mut self, job: &Job, log: &Log) -> Action {
        let now = Instant::now();
        if let Phase::Asked(p) = self.phase {
            if p.next_poll.is_some_and(|t| t <= now) {
                if self.answered() {
                    self.phase = Phase::Idle;
                    let committed = self.commit(Take::Copy, log);
                    if p.exit || !self.periodic.run_on(committed.is_ok(), log) {
                        self.phase = Phase::Killed {
                            committed: committed.ok(),
                        };
                        return Action::Kill;
                    }
                    self.policy.start_ticks(Instant::now());
                    self.store.work().fingerprints(&mut self.committed);
                    self.committed_in_run = true;
                    return Action::Drop;
                }
                self.phase = Phase::Asked(Pending {
                    next_poll: Some(now + POLL),
                    ..p
                });
            }
            if p.deadline.is_some_and(|t| t <= now) {
                self.phase = Phase::Idle;
                if p.exit {
                    log.warn(format_args!(
                        "job did not checkpoint and exit in time; killing it (exit {NO_ANSWER}); the last committed checkpoint is kept"
                    ));
                    self.phase = Phase::TimedOut;
                    return Action::Kill;
                }
                log.warn(format_args!(
                    "job did not answer the checkpoint request in time; asking again in --interval"
                ));
                self.policy.start_ticks(now);
            }
            return Action::Drop;
        }
        if self.policy.tick_due(now) {
            let Some(request) = self.request else {
                self.policy.stop_ticks();
                return Action::Drop;
            };
            if protocol::when_ready(Action::Forward(request), &[request], job) == Action::Hold {
                self.policy.hold_tick(now);
                return Action::Drop;
            }
            log.info(format_args!(
                "--interval: asking the job for a checkpoint ({})",
                Name(request)
            ));
            self.asked(!self.keep_running, false);
            return Action::Forward(request);
        }
        Action::Drop
    }

    fn again(&mut self, ended: Ended, ran: Duration, log: &Log) -> bool {
        let (Some(grace), Some(g)) = (self.restart_grace, self.restored) else {
            return false;
        };
        let failed = ended.exit_code() != Some(0) && !self.reported(ended);
        // A run that got a signal may have been evicted: its failure says
        // nothing about the checkpoint.
        if self.fell_back || self.asked || self.signalled || !failed || ran >= grace {
            return false;
        }
        self.fell_back = true;
        log.warn(format_args!(
            "restart from generation {g} failed within --restart-grace ({ended}); falling back once"
        ));
        match self.store.fall_back(g, log) {
            Ok(Some(previous)) => {
                self.restored = Some(previous);
                self.started();
                true
            }
            Ok(None) => {
                log.warn(format_args!("no older intact checkpoint to fall back to"));
                false
            }
            Err(f) => {
                log.warn(format_args!("cannot fall back: {f}"));
                false
            }
        }
    }

    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict {
        match self.phase {
            Phase::Killed { committed: Some(g) } => return self.checkpointed(g, log),
            Phase::Killed { committed: None } => return Verdict::Exit(COMMIT_FAILED),
            _ => {}
        }
        if self.reported(ended) {
            if !self.check_report(log) {
                return Verdict::Exit(NO_CHECKPOINT);
            }
            // The job said it is done: nothing it left in its process
            // group may write into the generation about to be committed.
            crate::run::supervise::end_group(ended.pid, log);
            return match self.commit(Take::Move, log) {
                Ok(g) => self.checkpointed(g, log),
                Err(()) => Verdict::Exit(COMMIT_FAILED),
            };
        }
        if let Some(verdict) = request::timed_out(matches!(self.phase, Phase::TimedOut), ended) {
            return verdict;
        }
        protocol::guard_collision(ended, self.code, self.by_signal, log)
    }

    fn end(&mut self, ending: Ending, log: &Log) {
        stores::at_end(&mut self.store, ending, log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_args_expand_ckpt() {
        let args = ["--resume".into(), "{ckpt}".into(), "x={ckpt}.{ckpt}".into()];
        assert_eq!(
            expand(&args, &"st".into()),
            ["--resume", "st", "x=st.st"].map(OsString::from)
        );
    }
}
