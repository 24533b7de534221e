//! The processes dmtcp mode starts besides the job, while it runs and at
//! its end: the private coordinator (whose life is one `Life`), the
//! `dmtcp_command` helpers, and the one `--quit` (`Quit`). At the end
//! they are given STOP_GRACE to go: the coordinator exits by itself when
//! its last client has gone (`--exit-on-last`), else it is told to
//! `--quit` after EXIT_ON_LAST; then whatever is left is SIGKILLed: the
//! coordinator, the helpers, and, where /proc shows our namespace, every
//! child ckptrun did not start with (the job's orphans too, ckptrun being
//! their subreaper). Nothing here allocates.

use std::time::{Duration, Instant};

use crate::mode::dmtcp::coordinator::Children;
use crate::os::log::Log;
use crate::os::sys::{self, Pid};
use crate::run::signals::Inherited;
use crate::run::spawn::{self, SpawnError};

/// How long the coordinator and the helpers have to exit at the end
/// before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a coordinator has to exit by itself once the job has ended
/// (`--exit-on-last`) before it is told to `--quit`.
const EXIT_ON_LAST: Duration = Duration::from_millis(200);

/// The coordinator's life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Life {
    Running(Pid),
    /// It detached and its pid could not be told: only `--quit` ends it.
    PidUnknown,
    /// Reaped.
    Exited,
}

/// `dmtcp_command --quit`, sent once.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quit {
    NotSent,
    Sent(Pid),
    CouldNotStart,
}

/// Which of ckptrun's processes ended.
pub enum Which {
    Coordinator,
    /// A helper, or a child ckptrun knows nothing of.
    Other,
}

pub struct Processes {
    /// ckptrun's children, told apart from those it was started with.
    children: Children,
    coordinator: Life,
    /// The `dmtcp_command`s running.
    helpers: heapless::Vec<Pid, 8>,
    quit: Quit,
    /// `dmtcp_command --quit`, built before the job starts.
    quit_command: spawn::Command,
}

/// Where the end is in its STOP_GRACE.
pub struct Stopping {
    quit_at: Instant,
    kill_at: Instant,
    give_up: Instant,
    said: bool,
}

/// What the end does next.
pub enum Stop {
    /// Nothing ckptrun started is left.
    Done,
    /// Some is left after SIGKILL: it is left.
    GaveUp,
    Wait,
}

impl Processes {
    pub fn new(children: Children, coordinator: Option<Pid>, quit_command: spawn::Command) -> Self {
        Self {
            children,
            coordinator: coordinator.map_or(Life::PidUnknown, Life::Running),
            helpers: heapless::Vec::new(),
            quit: Quit::NotSent,
            quit_command,
        }
    }

    /// Starts the helper `command`.
    pub fn helper(
        &mut self,
        command: &spawn::Command,
        inherited: &Inherited,
    ) -> Result<Pid, SpawnError> {
        let pid = spawn::spawn(command, inherited, false)?;
        let _ = self.helpers.push(pid);
        Ok(pid)
    }

    /// Child `pid` has ended: which it was.
    pub fn ended(&mut self, pid: Pid) -> Which {
        self.helpers.retain(|&h| h != pid);
        if self.coordinator == Life::Running(pid) {
            self.coordinator = Life::Exited;
            return Which::Coordinator;
        }
        Which::Other
    }

    /// The coordinator's pid, while it runs and it is known.
    pub fn coordinator(&self) -> Option<Pid> {
        match self.coordinator {
            Life::Running(pid) => Some(pid),
            _ => None,
        }
    }

    /// The coordinator has exited (its pid known, and reaped).
    pub fn coordinator_gone(&self) -> bool {
        self.coordinator == Life::Exited
    }

    /// `--quit` was sent: the coordinator is expected to go.
    pub fn quitting(&self) -> bool {
        matches!(self.quit, Quit::Sent(_))
    }

    fn send_quit(&mut self, inherited: &Inherited, log: &Log) {
        if self.quit != Quit::NotSent || self.coordinator_gone() {
            return;
        }
        self.quit = Quit::CouldNotStart;
        match spawn::spawn(&self.quit_command, inherited, false) {
            Ok(pid) => {
                self.quit = Quit::Sent(pid);
                let _ = self.helpers.push(pid);
            }
            Err(e) => log.warn(format_args!("dmtcp_command --quit: {e}")),
        }
    }

    /// The end begins now.
    pub fn stopping(now: Instant) -> Stopping {
        Stopping {
            quit_at: now + EXIT_ON_LAST,
            kill_at: now + STOP_GRACE,
            give_up: now + 2 * STOP_GRACE,
            said: false,
        }
    }

    /// One step of the end, once what had ended is reaped (`none_left`:
    /// no child at all is left).
    pub fn stop_step(
        &mut self,
        stop: &mut Stopping,
        none_left: bool,
        inherited: &Inherited,
        log: &Log,
    ) -> Stop {
        if none_left || self.all_gone() {
            return Stop::Done;
        }
        let now = Instant::now();
        if now >= stop.quit_at {
            self.send_quit(inherited, log);
        }
        if now >= stop.give_up {
            log.warn(format_args!(
                "processes DMTCP or the job started are still there after SIGKILL; leaving them"
            ));
            return Stop::GaveUp;
        }
        if now >= stop.kill_at {
            if !stop.said {
                log.info(format_args!(
                    "ending what is left of the computation (SIGKILL): the coordinator, helpers, processes the job left"
                ));
                stop.said = true;
            }
            self.kill_all();
        }
        Stop::Wait
    }

    /// Whether nothing ckptrun started (and can tell) is left.
    fn all_gone(&self) -> bool {
        let mut left = 0;
        self.children.each_new(|_| left += 1);
        let known_left = self.coordinator().is_some() || !self.helpers.is_empty();
        !known_left
            && match self.children.listable() {
                true => left == 0,
                // Only what ckptrun knows of can be waited for.
                false => self.coordinator != Life::PidUnknown || self.quit != Quit::NotSent,
            }
    }

    fn kill_all(&self) {
        for pid in self.coordinator().iter().chain(&self.helpers) {
            let _ = sys::kill(*pid, libc::SIGKILL);
        }
        self.children.each_new(|pid| {
            let _ = sys::kill(pid, libc::SIGKILL);
        });
    }
}
