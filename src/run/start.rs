//! One start of the job, whatever its mode, from the command its mode
//! planned to ckptrun's verdict: orphans adopted, Slurm's SIGTERM watched,
//! the allocation guard armed, the job spawned and supervised (once more
//! when the protocol falls back), then its status file, what it left
//! behind, the protocol's judgment and HTCondor's outputs.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use rustix::fd::OwnedFd;

use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::sys::{Pid, Sig};
use crate::os::{alloc_guard, procfs};
use crate::run::protocol::{Ended, Ending, Protocol, Verdict};
use crate::run::signals::Inherited;
use crate::run::slurm::{Slurm, Watch};
use crate::run::status_file::StatusFile;
use crate::run::supervise::{self, Supervision};
use crate::run::{exit, spawn};

/// What the options say of running the job, whatever its mode.
#[derive(Clone, Copy)]
pub struct Settings {
    pub supervision: Supervision,
    /// `--pdeathsig`.
    pub pdeathsig: Option<Sig>,
    /// `--kill-after`: how long what the job left may take to end.
    pub kill_after: Option<Duration>,
    /// How ckptrun ends after a checkpoint: this code, or death by this
    /// signal.
    pub ckpt_exit_code: u8,
    pub exit_by_signal: Option<Sig>,
    /// Under Slurm: its SIGTERM is looked up (see `run::slurm`).
    pub slurm: Option<Slurm>,
}

impl Settings {
    /// What ckptrun ending so tells HTCondor: "checkpointed: transfer and
    /// restart me", or the job's end, successful or not.
    pub fn ending(&self, verdict: Verdict) -> Ending {
        match verdict {
            Verdict::Exit(code) if code == self.ckpt_exit_code => Ending::Checkpoint,
            Verdict::Signal(sig) if Some(sig) == self.exit_by_signal => Ending::Checkpoint,
            Verdict::Exit(0) => Ending::Success,
            _ => Ending::Failure,
        }
    }
}

/// Under HTCondor: the sandbox, and the names in it that are not the
/// job's outputs (see exit::mark_outputs_changed).
pub struct Outputs {
    pub sandbox: Option<OwnedFd>,
    pub not_outputs: Vec<OsString>,
}

/// What starting and supervising the job needs, planned.
pub struct Start<'a> {
    /// PROGRAM as given, for messages.
    pub program: &'a OsStr,
    pub settings: Settings,
    pub inherited: &'a Inherited,
    pub log: &'a Log,
    pub status_file: Option<StatusFile>,
    /// Under HTCondor, what to mark changed at the job's end.
    pub outputs: Option<Outputs>,
}

impl Start<'_> {
    /// Starts `command` and supervises it to its end under `protocol`
    /// (`dyn`: one copy of this and of the supervisor, not one per mode).
    pub fn supervise(
        self,
        command: spawn::Command,
        protocol: &mut dyn Protocol,
    ) -> Result<Verdict, Error> {
        let (settings, log) = (self.settings, self.log);
        supervise::adopt_orphans(log);
        if let Some(sig) = settings.pdeathsig {
            supervise::signal_on_parent_death(sig, self.inherited.parent, log);
        }
        let proc_is_ours = settings.kill_after.is_some() && procfs::is_ours();
        let foreground = spawn::owns_terminal();
        let test_faults = TestFaults::requested();
        let mut watched;
        let protocol: &mut dyn Protocol = match settings.slurm {
            Some(slurm) => {
                watched = Watch::new(slurm, protocol, self.inherited, log);
                &mut watched
            }
            None => protocol,
        };

        // From here on nothing allocates (debug builds abort if anything does).
        alloc_guard::arm();
        let (job, ended) = match self.run_job(&command, protocol, foreground, &test_faults) {
            Ok(ran) => ran,
            Err(verdict) => return Ok(verdict),
        };
        Ok(self.conclude(job, ended, proc_is_ours, protocol))
    }

    /// Starts the job and supervises it to its end, once more whenever the
    /// protocol wants (self mode's fallback). Returns its pid and end, or
    /// (`Err`) the verdict when it could not be started.
    fn run_job(
        &self,
        command: &spawn::Command,
        protocol: &mut dyn Protocol,
        foreground: bool,
        test_faults: &TestFaults,
    ) -> Result<(Pid, Ended), Verdict> {
        let log = self.log;
        loop {
            let job = match spawn::spawn(command, self.inherited, foreground) {
                Ok(pid) => pid,
                Err(e) => {
                    log.warn(format_args!("{}: {e}", self.program.display()));
                    if let Some(file) = &self.status_file {
                        file.record_launch_failure(e.exit_code(), log);
                    }
                    protocol.end(Ending::Failure, log);
                    return Err(Verdict::Exit(e.exit_code()));
                }
            };
            log.info(format_args!(
                "started {} as pid {job}",
                self.program.display()
            ));
            test_faults.inject();
            let started = std::time::Instant::now();
            let ended = supervise::supervise(job, protocol, self.settings.supervision, log);
            // The protocol may want one more start (self mode's fallback).
            if !protocol.again(ended, started.elapsed(), log) {
                return Ok((job, ended));
            }
        }
    }

    /// After the job's end: its status file, what it left, the verdict,
    /// and HTCondor's outputs.
    fn conclude(
        &self,
        job: Pid,
        ended: Ended,
        proc_is_ours: bool,
        protocol: &mut dyn Protocol,
    ) -> Verdict {
        let log = self.log;
        protocol.job_ended(log);
        if let Some(file) = &self.status_file {
            file.record(ended, log);
        }
        // Before the end is judged: nothing the job left may still run
        // (or write) while its end is weighed and a checkpoint committed.
        if let Some(grace) = self.settings.kill_after {
            supervise::end_leftovers(job, grace, proc_is_ours, protocol, log);
        }
        let verdict = protocol.judge(ended, log);
        let ending = self.settings.ending(verdict);
        protocol.end(ending, log);
        if let Some(o) = &self.outputs
            && ending != Ending::Checkpoint
        {
            exit::mark_outputs_changed(o.sandbox.as_ref(), &o.not_outputs, log);
        }
        verdict
    }
}

/// Faults the tests ask for, read before the allocation guard is armed
/// (reading the environment allocates) and made once the job runs.
struct TestFaults {
    allocate: bool,
    #[cfg(debug_assertions)]
    panic: bool,
}

impl TestFaults {
    fn requested() -> Self {
        Self {
            allocate: alloc_guard::test_allocation_requested(),
            #[cfg(debug_assertions)]
            panic: crate::os::internal_error::test_panic_requested(),
        }
    }

    fn inject(&self) {
        if self.allocate {
            alloc_guard::allocate_for_test();
        }
        #[cfg(debug_assertions)]
        if self.panic {
            crate::os::internal_error::panic_for_test();
        }
    }
}
