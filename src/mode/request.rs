//! The request policy every mode shares: which signals ckptrun receives
//! are evictions, how long the job may take to answer a request for a
//! checkpoint (`--ckpt-timeout`; for an eviction, else HTCondor's
//! JobMaxVacateTime less a tenth), when the next `--interval` tick is due,
//! how a job killed for not answering in time is judged, and what a failed
//! periodic commit means. How a request is made and answered is each
//! mode's own.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::os::error::{COMMIT_FAILED, NO_ANSWER};
use crate::os::log::Log;
use crate::os::sys::Sig;
use crate::run::protocol::{Ended, HOLD_RETRY, Verdict};

pub struct Policy {
    /// Signals that mean "checkpoint, then exit": their requests get the
    /// eviction's time limit.
    evictions: Vec<Sig>,
    timeout: Option<Duration>,
    evict_timeout: Option<Duration>,
    interval: Option<Duration>,
    next_tick: Option<Instant>,
}

impl Policy {
    /// `evictions`: the signals the mode takes for an eviction. No tick is
    /// due until `start_ticks`.
    pub fn new(config: &Config, evictions: Vec<Sig>) -> Self {
        Self {
            evictions,
            timeout: config.ckpt_timeout,
            // --ckpt-timeout (only ever explicit) wins over the job ad.
            evict_timeout: config.ckpt_timeout.or(config.vacate_time.map(budget)),
            interval: config.interval,
            next_tick: None,
        }
    }

    pub fn is_eviction(&self, sig: Sig) -> bool {
        self.evictions.contains(&sig)
    }

    /// When a request sent now must be answered (None: no limit); an
    /// eviction's, or `--interval`'s and the checkpoint signals'.
    pub fn answer_by(&self, evicted: bool) -> Option<Instant> {
        let limit = if evicted {
            self.evict_timeout
        } else {
            self.timeout
        };
        limit.map(|t| Instant::now() + t)
    }

    /// The next tick is one `--interval` after `now` (none without it).
    pub fn start_ticks(&mut self, now: Instant) {
        self.next_tick = self.interval.map(|every| now + every);
    }

    /// No tick until `start_ticks` (a request is under way, or the job
    /// is ending).
    pub fn stop_ticks(&mut self) {
        self.next_tick = None;
    }

    /// The tick came while the job cannot take the request yet: tried
    /// again in a moment.
    pub fn hold_tick(&mut self, now: Instant) {
        self.next_tick = Some(now + HOLD_RETRY);
    }

    pub fn tick_due(&self, now: Instant) -> bool {
        self.next_tick.is_some_and(|t| t <= now)
    }

    pub fn next_tick(&self) -> Option<Instant> {
        self.next_tick
    }
}

/// A job ckptrun killed because it did not answer in time, and that died
/// by that SIGKILL, ends ckptrun with NO_ANSWER (124), which HTCondor
/// takes for a failure, not for a checkpoint.
pub fn timed_out(killed_for_time: bool, ended: Ended) -> Option<Verdict> {
    (killed_for_time && ended.signal() == Some(libc::SIGKILL)).then_some(Verdict::Exit(NO_ANSWER))
}

/// The eviction budget HTCondor gives (JobMaxVacateTime), less a tenth
/// (at most 30 s) so that ckptrun ends the job itself, and says why,
/// before HTCondor's SIGKILL.
pub fn budget(vacate: Duration) -> Duration {
    vacate - (vacate / 10).min(Duration::from_secs(30))
}

/// The policy for commits made at an `--interval` tick while the job runs
/// on (self `--ckpt-continue`, dmtcp `--interval-continue`): a failed one
/// is said and the job runs on, the next tick committing again; a second
/// failure in a row ends the job (exit 123), which must not run on with
/// no checkpoint it can come back to.
#[derive(Default)]
pub struct PeriodicCommits {
    failed: bool,
}

impl PeriodicCommits {
    /// After a commit at a tick: whether the job may run on.
    pub fn run_on(&mut self, committed: bool, log: &Log) -> bool {
        let failed_before = core::mem::replace(&mut self.failed, !committed);
        match (committed, failed_before) {
            (true, _) => true,
            (false, false) => {
                log.warn(format_args!(
                    "the job runs on; the next --interval tick commits again, and ends it if that fails too"
                ));
                true
            }
            (false, true) => {
                log.warn(format_args!(
                    "a second periodic commit failed: ending the job rather than running it on with no checkpoint (exit {})",
                    COMMIT_FAILED
                ));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eviction_budget_leaves_a_margin() {
        assert_eq!(budget(Duration::from_secs(10)), Duration::from_secs(9));
        assert_eq!(budget(Duration::from_secs(600)), Duration::from_secs(570));
    }
}
