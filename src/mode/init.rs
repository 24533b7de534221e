//! `--mode init`: no checkpoint protocol. ckptrun is only a minimal
//! init, as tini is: no personality change and no arguments added;
//! signals reach the job unchanged (`--map` still applies); the job's
//! exit status becomes ckptrun's as it is, 0 to 255.

use crate::config::Config;
use crate::os::log::Log;
use crate::os::sys::Sig;
use crate::run::protocol::{self, Action, Ended, Job, Protocol, Routes, Verdict};

pub struct Init {
    routes: Routes,
}

impl Init {
    pub fn new(config: &Config) -> Self {
        Self {
            routes: Routes::new(&[], &config.maps),
        }
    }

    /// Every signal passed on as it is (`--map` is for the job, not for a
    /// ckptrun supervised by ckptrun).
    pub fn plain() -> Self {
        Self {
            routes: Routes::new(&[], &[]),
        }
    }
}

impl Protocol for Init {
    fn on_signal(&mut self, sig: Sig, _job: &Job) -> Action {
        self.routes.route(sig)
    }

    /// A job stopped by a terminal stop signal stops ckptrun too, for a
    /// shell's job control; any other stop (SIGSTOP, a debugger) is its
    /// own business.
    fn on_stop(&mut self, sig: Sig, _log: &Log) -> Action {
        match sig {
            libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => Action::Suspend(sig),
            _ => Action::Drop,
        }
    }

    /// Signals pass as they are: a SIGCONT discards a pending SIGTSTP
    /// here as it would without ckptrun.
    fn stops_are_requests(&self) -> bool {
        false
    }

    fn judge(&mut self, ended: Ended, _log: &Log) -> Verdict {
        protocol::pass_on(ended)
    }
}
