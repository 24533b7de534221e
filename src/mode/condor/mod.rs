//! The protocol of condor_compile'd jobs (PROTOCOLS.md §1): start with
//! `-_condor_ckpt FILE`, or `-_condor_restart FILE -_condor_relocatable`
//! when FILE holds a checkpoint; SIGTSTP asks for "checkpoint and exit",
//! SIGUSR2 for "checkpoint and continue"; a job that checkpointed and
//! exited dies by SIGUSR2, which becomes HTCondor's checkpoint exit code
//! (or death by the job ad's or --exit-by-signal's signal). The job ad's
//! KillSig and CheckpointSig also ask for "checkpoint and exit"; a request
//! not answered within --ckpt-timeout (for an eviction, the ad's
//! JobMaxVacateTime less 10%) kills the job: exit 124.

pub mod ckptfile;

use std::ffi::OsString;

use std::time::Instant;

use crate::config::Config;
use crate::mode::condor::ckptfile::{CkptFile, Found, Snapshot, Sum};
use crate::mode::request::{self, Policy};
use crate::os::error::{Error, NO_ANSWER, NO_CHECKPOINT, NOT_CHECKPOINTABLE};
use crate::os::log::Log;
use crate::os::sys::Sig;
use crate::run::protocol::{self, Action, Ended, Job, Protocol, Routes, Verdict};
use crate::run::signals::Name;
use crate::store::OnDamage;

/// The old checkpoint-wrapper's signal table: eviction (SIGTERM) and
/// SIGTSTP mean "checkpoint and exit", SIGUSR2 "checkpoint and continue".
const WRAPPER_ROUTES: [(Sig, Sig); 3] = [
    (libc::SIGTERM, libc::SIGTSTP),
    (libc::SIGTSTP, libc::SIGTSTP),
    (libc::SIGUSR2, libc::SIGUSR2),
];

pub struct Condor {
    ckpt: CkptFile,
    before: Snapshot,
    ckpt_exit_code: u8,
    exit_by_signal: Option<Sig>,
    routes: Routes,
    /// Evictions, time limits and `--interval` ticks.
    policy: Policy,
    /// The request an `--interval` tick sends, and whether ticks repeat.
    tick: Sig,
    repeat: bool,
    ended_by_us: bool,
    /// When the job must have answered "checkpoint and exit".
    answer_by: Option<Instant>,
    timed_out: bool,
}

/// The wrapper's table, plus the job ad's eviction and checkpoint
/// signals: both ask for "checkpoint and exit".
fn wrapper_routes(config: &Config) -> Vec<(Sig, Sig)> {
    let mut routes = WRAPPER_ROUTES.to_vec();
    for &sig in config.evict_signals.iter().chain(&config.periodic_signals) {
        routes.push((sig, libc::SIGTSTP));
    }
    routes
}

impl Condor {
    /// Looks at FILE and decides how the job starts; returns the protocol
    /// and the arguments to append to the job's own.
    pub fn plan(config: &Config, log: &Log) -> Result<(Self, Vec<OsString>), Error> {
        let ckpt = CkptFile::new(ckpt_path(config))?;
        let found = verified(&ckpt, ckpt.prepare(log)?, config.on_damage, log)?;
        let file = ckpt.path.clone();
        let extra: Vec<OsString> = match found {
            Found::Image => {
                log.info(format_args!("restart from {}", file.display()));
                vec![
                    "-_condor_restart".into(),
                    file,
                    "-_condor_relocatable".into(),
                ]
            }
            Found::Absent | Found::Empty => {
                if found == Found::Empty {
                    log.info(format_args!(
                        "{} is empty: treated as no checkpoint",
                        file.display()
                    ));
                }
                log.info(format_args!(
                    "fresh start, checkpoints to {}",
                    file.display()
                ));
                vec!["-_condor_ckpt".into(), file]
            }
        };
        let evictions = [libc::SIGTERM]
            .into_iter()
            .chain(config.evict_signals.iter().copied());
        let mut policy = Policy::new(config, evictions.collect());
        policy.start_ticks(Instant::now());
        let protocol = Self {
            before: ckpt.snapshot(),
            ckpt,
            ckpt_exit_code: config.ckpt_exit_code,
            exit_by_signal: config.exit_by_signal,
            routes: Routes::new(&wrapper_routes(config), &config.maps),
            tick: if config.interval_continue {
                libc::SIGUSR2
            } else {
                libc::SIGTSTP
            },
            repeat: config.interval_continue,
            policy,
            ended_by_us: false,
            answer_by: None,
            timed_out: false,
        };
        Ok((protocol, extra))
    }
}

/// A checkpoint found at FILE is checked against the checksum ckptrun
/// recorded when it was made (`FILE.xxh3`): a damaged one is never
/// restarted from. It is refused, or with `--fresh-if-damaged` set aside
/// as `FILE.damaged` for a fresh start.
fn verified(ckpt: &CkptFile, found: Found, on_damage: OnDamage, log: &Log) -> Result<Found, Error> {
    if found != Found::Image || ckpt.check_sum()? != Sum::Damaged {
        return Ok(found);
    }
    if on_damage == OnDamage::Refuse {
        return Err(Error::usage(
            ckpt.path.display(),
            "does not match the checksum recorded when it was made (.xxh3 beside it): the checkpoint \
             is damaged; to start the job afresh, run with --fresh-if-damaged (or remove it)",
        ));
    }
    let aside = ckpt.set_damaged_aside()?;
    log.warn(format_args!(
        "{} is damaged (it does not match its checksum); kept as {}, the job starts afresh (--fresh-if-damaged)",
        ckpt.path.display(),
        aside.display()
    ));
    Ok(Found::Absent)
}

/// The checkpoint file: the last --ckpt, else PROGRAM as given + `.ckpt`.
pub fn ckpt_path(config: &Config) -> OsString {
    config
        .ckpt
        .last()
        .cloned()
        .unwrap_or_else(|| CkptFile::default_for(&config.program))
}

/// Holds a checkpoint request while the job, just started, has no handler
/// for it yet: sent before, SIGTSTP would stop a condor_compile'd job and
/// SIGUSR2 kill it. After READY_GRACE, a job that does not catch them is
/// taken at its word (SIGTSTP stops it: not condor_compile'd).
fn when_ready(action: Action, job: &Job) -> Action {
    protocol::when_ready(action, &[libc::SIGTSTP, libc::SIGUSR2], job)
}

impl Condor {
    /// "Checkpoint and exit" went to the job, for an eviction or not: it
    /// has the policy's time to do so.
    fn asked(&mut self, evicted: bool) {
        if self.answer_by.is_none() {
            self.answer_by = self.policy.answer_by(evicted);
        }
    }
}

impl Protocol for Condor {
    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action {
        let action = when_ready(self.routes.route(sig), job);
        if action == Action::Forward(libc::SIGTSTP) {
            self.asked(self.policy.is_eviction(sig));
        }
        action
    }

    fn deadline(&self) -> Option<Instant> {
        protocol::earliest(&[self.answer_by, self.policy.next_tick()])
    }

    fn on_deadline(&mut self, job: &Job, log: &Log) -> Action {
        let now = Instant::now();
        if self.answer_by.is_some_and(|t| t <= now) {
            self.answer_by = None;
            self.timed_out = true;
            log.warn(format_args!(
                "job did not checkpoint and exit in time; killing it (exit {NO_ANSWER})"
            ));
            return Action::Kill;
        }
        if !self.policy.tick_due(now) {
            return Action::Drop;
        }
        let action = when_ready(Action::Forward(self.tick), job);
        if action == Action::Hold {
            self.policy.hold_tick(now);
            return Action::Drop;
        }
        match self.repeat {
            true => self.policy.start_ticks(now),
            false => self.policy.stop_ticks(),
        }
        log.info(format_args!(
            "--interval: asking the job for a checkpoint ({})",
            Name(self.tick)
        ));
        if self.tick == libc::SIGTSTP {
            self.asked(false);
        }
        action
    }

    fn on_stop(&mut self, sig: Sig, log: &Log) -> Action {
        if sig != libc::SIGTSTP {
            // SIGSTOP from HTCondor's suspend, say: it will send SIGCONT.
            return Action::Drop;
        }
        log.warn(format_args!(
            "job stopped on SIGTSTP instead of checkpointing: it is not condor_compile'd; ending it (exit {NOT_CHECKPOINTABLE})"
        ));
        self.ended_by_us = true;
        Action::End
    }

    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict {
        let file = self.ckpt.path.display();
        // A checkpoint renamed into FILE during this run is whole (the
        // library renames FILE.tmp once written), however the job ended
        // after it: killed in its pause before SIGUSR2 (exit 124), or
        // ended after an "checkpoint and continue". Its checksum is
        // recorded: the one before it would refuse it at the next start.
        let written = self.ckpt.written_since(self.before);
        if written && let Err(e) = self.ckpt.record_sum() {
            log.warn(format_args!(
                "{file}: cannot record its checksum ({}): the next restart goes unverified",
                crate::os::sys::strerror(e)
            ));
        }
        if self.ended_by_us {
            return Verdict::Exit(NOT_CHECKPOINTABLE);
        }
        if let Some(verdict) = request::timed_out(self.timed_out, ended) {
            return verdict;
        }
        match (ended.exit_code(), ended.signal()) {
            (_, Some(libc::SIGUSR2)) if written => {
                protocol::checkpointed(self.ckpt_exit_code, self.exit_by_signal, file, log)
            }
            (_, Some(libc::SIGUSR2)) => {
                log.warn(format_args!(
                    "job died by SIGUSR2 but {file} was not written during this run; exit {NO_CHECKPOINT}"
                ));
                Verdict::Exit(NO_CHECKPOINT)
            }
            _ => protocol::guard_collision(ended, self.ckpt_exit_code, self.exit_by_signal, log),
        }
    }
}
