//! Signal names and ckptrun's own signal state: what it inherited (to hand
//! back to the job) and the blocking that lets it receive every signal
//! synchronously, even as PID 1.

use core::fmt;

use crate::os::sys::{self, Sig, SigAction, SigSet};

/// The standard signals by name, without the `SIG` prefix.
const NAMES: [(&str, Sig); 31] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// A signal ckptrun can receive and pass on.
pub fn catchable(sig: Sig) -> Result<(), &'static str> {
    match sig {
        libc::SIGKILL | libc::SIGSTOP => Err("cannot be caught"),
        _ => Ok(()),
    }
}

/// A signal ckptrun may die by to say "checkpointed": not SIGKILL, which
/// every hard kill (OOM, HTCondor's own) would then look like.
pub fn not_kill(sig: Sig) -> Result<(), &'static str> {
    match sig {
        libc::SIGKILL => Err("every hard kill would look like a checkpoint; pick another"),
        _ => kills(sig),
    }
}

/// A signal whose default action ends a process, so a death by it can be
/// seen.
pub fn kills(sig: Sig) -> Result<(), &'static str> {
    match sig {
        libc::SIGCHLD | libc::SIGCONT | libc::SIGURG | libc::SIGWINCH => {
            Err("is ignored by default: nothing dies by it")
        }
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => {
            Err("stops a process, it does not end it")
        }
        _ => Ok(()),
    }
}

/// The highest signal number Linux delivers.
pub const MAX: Sig = 64;

/// The first real-time signal as the job's tools number them: glibc's
/// SIGRTMIN, which kill(1), bash and Python use (glibc keeps 32 and 33).
/// musl's (`libc::SIGRTMIN()`) is 35.
pub const RTMIN: Sig = 34;

/// Parses `TERM`, `SIGTERM`, `sigterm`, `15`, `RTMIN+2`. `0` is accepted
/// only where the caller allows it (it means "none").
pub fn parse(text: &str) -> Option<Sig> {
    if let Ok(n) = text.parse::<Sig>() {
        return (0..=MAX).contains(&n).then_some(n);
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(&(_, sig)) = NAMES.iter().find(|(n, _)| *n == name) {
        return Some(sig);
    }
    let rt = |offset: &str, base: Sig, sign: Sig| {
        let k: Sig = if offset.is_empty() {
            0
        } else {
            offset.parse().ok()?
        };
        let sig = base + sign * k;
        (RTMIN..=MAX).contains(&sig).then_some(sig)
    };
    if let Some(rest) = name.strip_prefix("RTMIN") {
        return rt(rest.strip_prefix('+').unwrap_or(rest), RTMIN, 1);
    }
    if let Some(rest) = name.strip_prefix("RTMAX") {
        return rt(rest.strip_prefix('-').unwrap_or(rest), MAX, -1);
    }
    None
}

/// Displays a signal as `SIGTERM`, `SIGRTMIN`, `SIGRTMIN+2` or `signal 33`
/// (as kill -l names them on a glibc system).
pub struct Name(pub Sig);

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((name, _)) = NAMES.iter().find(|(_, s)| *s == self.0) {
            return write!(f, "SIG{name}");
        }
        match self.0 - RTMIN {
            0 => return f.write_str("SIGRTMIN"),
            k @ 1..=30 => return write!(f, "SIGRTMIN+{k}"),
            _ => {}
        }
        write!(f, "signal {}", self.0)
    }
}

/// What ckptrun inherited and changed, so the job gets it back exactly.
pub struct Inherited {
    /// The signal mask ckptrun started with.
    pub mask: SigSet,
    /// The SIGCHLD disposition ckptrun started with. If its parent left
    /// SIGCHLD ignored, the kernel would reap our children behind our back,
    /// so ckptrun resets it for itself and restores it for the job.
    pub sigchld: SigAction,
    /// The SIGILL disposition ckptrun started with; ckptrun catches
    /// SIGILL for itself (`internal_error`) and restores it for the job.
    pub sigill: SigAction,
    /// ckptrun's parent when it started, to tell whether it has died
    /// before --pdeathsig could be armed.
    pub parent: sys::Pid,
    /// Every process ckptrun starts has SIGTERM ignored (under Slurm:
    /// see `run::slurm`), not ckptrun's own disposition.
    pub sigterm_ignored: bool,
}

impl Inherited {
    /// Blocks every signal and makes SIGCHLD reportable; returns what was
    /// there before. The first thing ckptrun does: a signal that arrives
    /// while the job is being started waits, pending, until the supervisor
    /// forwards it. Blocked signals are queued even when their disposition
    /// is SIG_DFL or SIG_IGN, which is what lets PID 1 receive them.
    pub fn take() -> Self {
        let mask = sys::set_mask(libc::SIG_SETMASK, &SigSet::full());
        let sigchld = sys::get_action(libc::SIGCHLD);
        let sigill = sys::get_action(libc::SIGILL);
        if sigchld.is_ignored() || sigchld.no_child_wait() {
            let _ = sys::set_action(libc::SIGCHLD, &SigAction::default_action());
        }
        let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
        Self {
            mask,
            sigchld,
            sigill,
            parent,
            sigterm_ignored: false,
        }
    }

    /// Every process ckptrun starts from now on (the job, and helpers)
    /// starts with SIGTERM ignored, unless it installs a handler of its
    /// own.
    pub fn ignore_sigterm(&mut self) {
        self.sigterm_ignored = true;
    }

    /// Gives the calling process back what ckptrun inherited (dispositions
    /// first: the mask may unblock a pending signal), with SIGTERM
    /// ignored if `ignore_sigterm` said so; the errno of the first call
    /// that failed. Called by the child between fork and exec:
    /// async-signal-safe (sigaction, sigprocmask).
    pub fn restore(&self) -> Result<(), core::ffi::c_int> {
        sys::set_action(libc::SIGCHLD, &self.sigchld)?;
        sys::set_action(libc::SIGILL, &self.sigill)?;
        if self.sigterm_ignored {
            sys::set_action(libc::SIGTERM, &SigAction::ignore())?;
        }
        sys::try_set_mask(libc::SIG_SETMASK, &self.mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_numbers_and_realtime() {
        assert_eq!(parse("TERM"), Some(libc::SIGTERM));
        assert_eq!(parse("SIGTERM"), Some(libc::SIGTERM));
        assert_eq!(parse("sigusr2"), Some(libc::SIGUSR2));
        assert_eq!(parse("20"), Some(libc::SIGTSTP));
        assert_eq!(parse("0"), Some(0));
        assert_eq!(parse("65"), None);
        assert_eq!(parse("-1"), None);
        assert_eq!(parse("BOGUS"), None);
        // As kill -l numbers them on a glibc system.
        assert_eq!(parse("RTMIN"), Some(34));
        assert_eq!(parse("RTMIN+2"), Some(36));
        assert_eq!(parse("RTMAX-1"), Some(63));
        assert_eq!(parse("RTMAX"), Some(64));
        assert_eq!(parse("RTMIN+99"), None);
    }

    #[test]
    fn names_round_trip() {
        for sig in 1..=MAX {
            let shown = Name(sig).to_string();
            if let Some(name) = shown.strip_prefix("SIG") {
                assert_eq!(parse(name), Some(sig), "{shown}");
            }
        }
        assert_eq!(Name(libc::SIGTSTP).to_string(), "SIGTSTP");
    }
}
