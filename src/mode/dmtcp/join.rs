//! The join check: a job started under DMTCP is not protected until the
//! coordinator sees it (`dmtcp_command --status`: peers, running), and a
//! restart not until every image is restored and running. ckptrun asks
//! every PROBE until then, within a time limit; a job that never joins is
//! ended, not left to run unprotected. No checkpoint is requested before
//! (see `Phase::Joining`): the coordinator forgets a `--kcheckpoint`'s
//! "kill after" when the computation's first process joins.

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::mode::dmtcp::coordinator::Coordinator;
use crate::mode::dmtcp::processes::Processes;
use crate::mode::dmtcp::restart::RESTART_FAILED;
use crate::os::decimal;
use crate::os::error::{Error, LAUNCHER_FAILED};
use crate::os::log::Log;
use crate::os::sys::{self, Pid};
use crate::run::signals::Inherited;
use crate::run::spawn;

/// How long a job may take to join the coordinator after dmtcp_launch,
/// and a restart to complete (every image restored, the computation
/// running), before ckptrun gives up on it.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);
const RESTART_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the coordinator is asked about the job meanwhile.
const PROBE: Duration = Duration::from_millis(50);

/// `dmtcp_command --status`, built before the job starts, and the pipe
/// it prints into, read here.
pub struct Status {
    command: spawn::Command,
    out: OwnedFd,
}

impl Status {
    pub fn new(coordinator: &Coordinator, tool: &std::path::Path) -> Result<Self, Error> {
        let (out, into) = sys::answer_pipe().map_err(|e| Error::os("a pipe", e))?;
        let command = coordinator.command(tool, &["--status"], Some(into))?;
        Ok(Self { command, out })
    }
}

/// The job was started; the coordinator has not yet seen it through.
#[derive(Clone, Copy)]
pub struct Check {
    /// A restart of this many images (else a launch).
    restart: Option<usize>,
    limit: Duration,
    deadline: Instant,
    next_probe: Instant,
    /// The `--status` helper, while it runs.
    probe: Option<Pid>,
}

impl Check {
    pub fn new(restart: Option<usize>, now: Instant) -> Self {
        let limit = match restart {
            Some(_) => RESTART_TIMEOUT,
            None => JOIN_TIMEOUT,
        };
        Self {
            restart,
            limit,
            deadline: now + limit,
            next_probe: now + PROBE,
            probe: None,
        }
    }

    /// When it next wants `on_deadline`: while a probe runs, only at its
    /// time limit.
    pub fn deadline(&self) -> Instant {
        match self.probe {
            None => self.deadline.min(self.next_probe),
            Some(_) => self.deadline,
        }
    }

    /// Past the time limit: the code to end with (said on stderr).
    /// Otherwise a probe is started if one is due.
    pub fn on_deadline(
        &mut self,
        now: Instant,
        (status, procs, inherited): (&Status, &mut Processes, &Inherited),
        log: &Log,
    ) -> Result<(), u8> {
        if now >= self.deadline {
            let (code, what) = match self.restart {
                Some(_) => (RESTART_FAILED, "the restart did not complete"),
                None => (
                    LAUNCHER_FAILED,
                    "the job did not join the DMTCP coordinator: it would run unprotected",
                ),
            };
            log.warn(format_args!(
                "{what} within {} s; ending it (exit {code})",
                self.limit.as_secs()
            ));
            return Err(code);
        }
        if self.probe.is_none() && now >= self.next_probe {
            match procs.helper(&status.command, inherited) {
                Ok(pid) => self.probe = Some(pid),
                Err(e) => log.warn(format_args!("dmtcp_command --status: {e}")),
            }
            self.next_probe = now + PROBE;
        }
        Ok(())
    }

    /// Whether `pid` is the `--status` helper running.
    pub fn probes_with(&self, pid: Pid) -> bool {
        self.probe == Some(pid)
    }

    /// The `--status` helper exited (`ok`: with 0): whether the
    /// coordinator saw the job through (said in the log).
    pub fn probed(&mut self, status: &Status, ok: bool, log: &Log) -> bool {
        self.probe = None;
        let mut buf = [0u8; 2048];
        let len = sys::drain(status.out.as_fd(), &mut buf);
        if !ok {
            return false;
        }
        let (peers, running) = parse_status(&buf[..len]);
        if !running || peers == 0 {
            return false;
        }
        match self.restart {
            // A restored process may well end at once (a short sleep).
            Some(images) if peers < images => log.info(format_args!(
                "restart complete, but {peers} of {images} processes are running: the others ended during or right after it"
            )),
            Some(images) => log.info(format_args!(
                "restart complete: {images} process(es) running under DMTCP"
            )),
            None => log.info(format_args!("the job runs under DMTCP")),
        }
        true
    }
}

/// `NUM_PEERS=N` and `RUNNING=yes` from `dmtcp_command --status`.
fn parse_status(out: &[u8]) -> (usize, bool) {
    let mut peers = 0;
    let mut running = false;
    for line in out.split(|&b| b == b'\n') {
        let line = line.trim_ascii();
        if let Some(n) = line.strip_prefix(b"NUM_PEERS=") {
            peers = decimal::parse(n).unwrap_or(0) as usize;
        } else if line == b"RUNNING=yes" {
            running = true;
        }
    }
    (peers, running)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_as_dmtcp_command_prints_it() {
        let out = b"Coordinator:\n  Host: 127.0.0.1\n  Port: 4444\nStatus...\n  NUM_PEERS=2\n  RUNNING=yes\n  CKPT_INTERVAL=0 (checkpoint manually)\n";
        assert_eq!(parse_status(out), (2, true));
        assert_eq!(parse_status(b"  NUM_PEERS=0\n  RUNNING=no\n"), (0, false));
    }
}
