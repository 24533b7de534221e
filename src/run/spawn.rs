//! Starting the job: everything is prepared before fork; the child only
//! makes async-signal-safe calls and reports an exec failure to the
//! parent through a close-on-exec pipe, so the parent knows, not guesses,
//! why the job did not start.

use core::fmt;
use std::ffi::{CString, OsStr, OsString, c_char};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::io::Errno;
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::Pid as RPid;

use rustix::fs::{Mode, OFlags};

use crate::os::error::{self, Error};
use crate::os::sys::{self, Forked, Pid};
use crate::run::signals::Inherited;

/// The job's executable and argv, as C strings, built before fork.
pub struct Command {
    path: CString,
    /// Owns the strings `argv` points into.
    _args: Vec<CString>,
    argv: Vec<*const c_char>,
    stdio: Stdio,
    /// SIGKILL the child when ckptrun dies (PR_SET_PDEATHSIG).
    dies_with_ckptrun: bool,
    /// The child's working directory, if not ckptrun's.
    cwd: Option<OwnedFd>,
}

/// What the child gets as its standard input, output and error: each
/// `Some` is a descriptor (3 or above, close-on-exec, opened before fork)
/// that the child dup2s onto 0, 1 or 2; `None` leaves ckptrun's own.
#[derive(Default)]
pub struct Stdio([Option<OwnedFd>; 3]);

impl Stdio {
    /// `--stdin FILE` (read), `--stdout FILE` and `--stderr FILE`
    /// (created if need be, and appended to, as the DMTCP shim did).
    pub fn files(
        stdin: Option<&OsStr>,
        stdout: Option<&OsStr>,
        stderr: Option<&OsStr>,
    ) -> Result<Self, Error> {
        let append = OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND;
        let open = |option: &str, path: Option<&OsStr>, flags: OFlags| {
            path.map(|path| {
                let fd =
                    rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::from_raw_mode(0o666))
                        .and_then(above_stdio)
                        .map_err(|e| Error::os(format_args!("{option} {}", path.display()), e))?;
                Ok::<_, Error>(fd)
            })
            .transpose()
        };
        Ok(Self([
            open("--stdin", stdin, OFlags::RDONLY)?,
            open("--stdout", stdout, append)?,
            open("--stderr", stderr, append)?,
        ]))
    }

    /// Copies of the `--stdout` and `--stderr` descriptors (for ckptrun's
    /// own use: their size, cutting them back); `None` where there is none.
    pub fn outputs(&self) -> [Option<OwnedFd>; 2] {
        [&self.0[1], &self.0[2]].map(|fd| fd.as_ref()?.try_clone().ok())
    }

    /// For a helper ckptrun runs (a DMTCP tool): standard input and
    /// output on /dev/null, so that nothing it prints lands in the job's
    /// output (or in HTCondor's), standard error onto ckptrun's, for its
    /// error messages.
    pub fn helper() -> Result<Self, Error> {
        let null = || {
            rustix::fs::open(c"/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
                .and_then(above_stdio)
                .map_err(|e| Error::os("/dev/null", e))
        };
        // (A standard error ckptrun was started without is /dev/null by
        // now: see sys::hold_standard_fds.)
        let err = above_stdio_dup(rustix::stdio::stderr()).ok();
        Ok(Self([Some(null()?), Some(null()?), err]))
    }

    /// As `helper`, but standard output and error into `out` (a pipe
    /// ckptrun reads): for a question asked again and again (`--status`),
    /// which fails, saying so on standard error, when the computation ends
    /// meanwhile and its coordinator with it. ckptrun expects that, and
    /// HTCondor's error file is no place for it.
    pub fn capture(out: OwnedFd) -> Result<Self, Error> {
        let mut stdio = Self::helper()?;
        let out = above_stdio(out).map_err(|e| Error::os("a pipe", e))?;
        stdio.0[2] = Some(above_stdio_dup(out.as_fd()).map_err(|e| Error::os("a pipe", e))?);
        stdio.0[1] = Some(out);
        Ok(stdio)
    }
}

/// `fd` moved to a number of 3 or above, close-on-exec, so that the
/// child's dup2 onto 0-2 never overwrites one still to be copied.
/// (Opened close-on-exec: a low number is one ckptrun was started
/// without, and is closed again when `fd` is dropped.)
fn above_stdio(fd: OwnedFd) -> rustix::io::Result<OwnedFd> {
    if std::os::fd::AsRawFd::as_raw_fd(&fd) > 2 {
        return Ok(fd);
    }
    above_stdio_dup(fd.as_fd())
}

fn above_stdio_dup(fd: std::os::fd::BorrowedFd) -> rustix::io::Result<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(fd, 3)
}

impl Command {
    /// `argv0 ARG... EXTRA...`, executing `path` (PROGRAM as found in PATH).
    pub fn new(
        path: &Path,
        argv0: &OsStr,
        args: &[OsString],
        extra: &[OsString],
    ) -> Result<Self, Error> {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| Error::usage(s.display(), "contains a NUL byte"))
        };
        let path = c(path.as_os_str())?;
        let all = std::iter::once(argv0)
            .chain(args.iter().map(|a| a.as_os_str()))
            .chain(extra.iter().map(|a| a.as_os_str()));
        let args = all.map(c).collect::<Result<Vec<_>, _>>()?;
        let argv = args
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(core::ptr::null()))
            .collect();
        Ok(Self {
            path,
            _args: args,
            argv,
            stdio: Stdio::default(),
            dies_with_ckptrun: false,
            cwd: None,
        })
    }

    /// The same, killed (SIGKILL) if ckptrun dies first: a computation
    /// ckptrun can no longer checkpoint or commit must not run on.
    pub fn dies_with_ckptrun(self) -> Self {
        Self {
            dies_with_ckptrun: true,
            ..self
        }
    }

    /// The same, run in the directory `dir`.
    pub fn in_dir(self, dir: OwnedFd) -> Self {
        Self {
            cwd: Some(dir),
            ..self
        }
    }

    /// The same, with these standard streams.
    pub fn with_stdio(self, stdio: Stdio) -> Self {
        Self { stdio, ..self }
    }
}

/// Why the job did not start.
#[derive(Clone, Copy, Debug)]
pub enum SpawnError {
    /// pipe(2) or fork(2) failed, or the child could not prepare itself
    /// (setpgid, prctl, sigaction, sigprocmask): ckptrun could not try.
    Launcher(i32),
    /// The child failed before exec and could not say why: its report
    /// was lost or cut short.
    Unreported,
    /// execve(2) failed with this errno, or the redirection before it.
    Exec(i32),
}

impl SpawnError {
    /// As env(1): 127 not found, 126 found but not executable, 125 when
    /// ckptrun could not even try.
    pub fn exit_code(self) -> u8 {
        match self {
            SpawnError::Launcher(_) | SpawnError::Unreported => error::LAUNCHER_FAILED,
            SpawnError::Exec(libc::ENOENT | libc::ENOTDIR) => error::NOT_FOUND,
            SpawnError::Exec(_) => error::CANNOT_EXECUTE,
        }
    }
}

/// Shows why, without allocating.
impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SpawnError::Launcher(errno) => write!(
                f,
                "cannot start it: {}",
                sys::strerror(Errno::from_raw_os_error(errno))
            ),
            SpawnError::Unreported => f.write_str(
                "cannot start it: the child failed before exec and could not report why",
            ),
            SpawnError::Exec(errno) => f.write_str(sys::strerror(Errno::from_raw_os_error(errno))),
        }
    }
}

/// Whether ckptrun's stdin is a terminal whose foreground is ckptrun's
/// own process group: then the job, in a group of its own, must become
/// the foreground or it would be stopped by SIGTTIN when it reads.
pub fn owns_terminal() -> bool {
    rustix::termios::tcgetpgrp(rustix::stdio::stdin())
        .is_ok_and(|fg| fg == rustix::process::getpgrp())
}

/// Forks and execs the job in its own process group; returns its pid
/// once exec has succeeded. Signals stay blocked in ckptrun throughout,
/// so one that arrives now waits for the supervisor.
pub fn spawn(
    command: &Command,
    inherited: &Inherited,
    foreground: bool,
) -> Result<Pid, SpawnError> {
    let (read_end, write_end) =
        pipe_with(PipeFlags::CLOEXEC).map_err(|e| SpawnError::Launcher(e.raw_os_error()))?;
    let ckptrun = rustix::process::getpid();
    match sys::fork().map_err(SpawnError::Launcher)? {
        Forked::Child => {
            drop(read_end);
            exec_child(command, inherited, foreground, ckptrun, write_end)
        }
        Forked::Parent(pid) => {
            drop(write_end);
            // Also done by the child; doing it here too means the group
            // exists before the parent signals it, whichever runs first.
            // EACCES once the child has exec'd is expected.
            let _ = rustix::process::setpgid(RPid::from_raw(pid), RPid::from_raw(pid));
            let failed = match read_report(read_end) {
                Ok(None) => return Ok(pid),
                Ok(Some(e)) => e,
                Err(errno) => {
                    // Whether it exec'd cannot be told: it must not run
                    // on unsupervised.
                    let _ = sys::kill(pid, libc::SIGKILL);
                    SpawnError::Launcher(errno)
                }
            };
            // The child _exit()ed after reporting (or is killed): reap it.
            let _ = rustix::process::waitpid(
                RPid::from_raw(pid),
                rustix::process::WaitOptions::empty(),
            );
            Err(failed)
        }
    }
}

/// What the child reports before it `_exit`s: the step that failed
/// (`SETUP` or `EXEC`) and the errno, each a native-endian i32.
const REPORT_LEN: usize = 8;
/// setpgid, prctl, sigaction or sigprocmask failed.
const SETUP: i32 = 1;
/// The redirections (fchdir, dup2) or execve failed.
const EXEC: i32 = 2;
/// The child's exit status when it could not write its report (8 bytes
/// into an empty pipe whose reader is waiting: only if ckptrun died). The
/// parent then reads no byte, as after a successful exec, and supervises
/// the child as the job, which "exited 125": LAUNCHER_FAILED, ckptrun's
/// own failure. Not told apart from a job that exits 125 by itself.
const REPORT_LOST: i32 = crate::os::error::LAUNCHER_FAILED as i32;

/// The child between fork and exec. Only async-signal-safe calls
/// (signal-safety(7)): prctl, getppid, setpgid, tcsetpgrp, getpid,
/// sigaction, sigprocmask, fchdir, dup2, execve, write, _exit. It touches
/// only data prepared before fork and never allocates. Every failure is
/// reported to the parent through `report` (see `read_report`).
fn exec_child(
    command: &Command,
    inherited: &Inherited,
    foreground: bool,
    ckptrun: RPid,
    report: OwnedFd,
) -> ! {
    if command.dies_with_ckptrun {
        // Async-signal-safe: prctl(2), getppid(2). If ckptrun died before
        // the prctl, the signal will never come: go now.
        if let Err(errno) = sys::set_parent_death_signal(libc::SIGKILL) {
            fail(&report, SETUP, errno);
        }
        if rustix::process::getppid() != Some(ckptrun) {
            sys::exit_now(crate::os::error::LAUNCHER_FAILED as i32);
        }
    }
    // Async-signal-safe: setpgid(2). Its own group, so that a terminal's
    // job control and --pgroup signals reach the job and not ckptrun, and
    // so that a stop signal is not discarded as it would be in an orphaned
    // group. A job left in ckptrun's group would get ckptrun's signals
    // (and --pgroup ones would reach ckptrun): refused.
    if let Err(e) = rustix::process::setpgid(None, None) {
        fail(&report, SETUP, e.raw_os_error());
    }
    if foreground {
        // Async-signal-safe: tcsetpgrp(3) (an ioctl), getpid(2). SIGTTOU
        // is still blocked here, so a background group may take the
        // terminal. Not checked: a job that cannot have the terminal
        // still runs, and is stopped (visibly) only if it reads it.
        let _ = rustix::termios::tcsetpgrp(rustix::stdio::stdin(), rustix::process::getpid());
    }
    // Async-signal-safe: sigaction(2), sigprocmask(2). The job gets the
    // signal mask and SIGCHLD disposition ckptrun inherited (and, under
    // Slurm, SIGTERM ignored: see run::slurm); every other disposition
    // ckptrun never changed, and exec keeps SIG_IGN.
    if let Err(errno) = inherited.restore() {
        fail(&report, SETUP, errno);
    }
    // Async-signal-safe: fchdir(2), on a descriptor opened before fork.
    // Async-signal-safe: dup2(2). The sources are 3 or above, so none is
    // overwritten before it is copied; dup2 clears close-on-exec on 0-2.
    // The first failure is reported.
    let [stdin, stdout, stderr] = &command.stdio.0;
    let redirected = [
        command.cwd.as_ref().map(rustix::process::fchdir),
        stdin.as_ref().map(rustix::stdio::dup2_stdin),
        stdout.as_ref().map(rustix::stdio::dup2_stdout),
        stderr.as_ref().map(rustix::stdio::dup2_stderr),
    ];
    let errno = match redirected.into_iter().flatten().find_map(Result::err) {
        Some(e) => e.raw_os_error(),
        // Async-signal-safe: execve(2); returns only on failure.
        None => sys::execve(&command.path, &command.argv),
    };
    fail(&report, EXEC, errno)
}

/// The child's end after a failure: reports `step` and `errno` to the
/// parent and `_exit`s; with status REPORT_LOST if the report could not
/// be written whole. Async-signal-safe: write(2), _exit(2).
fn fail(report: &OwnedFd, step: i32, errno: i32) -> ! {
    let mut bytes = [0u8; REPORT_LEN];
    bytes[..4].copy_from_slice(&step.to_ne_bytes());
    bytes[4..].copy_from_slice(&errno.to_ne_bytes());
    match sys::write_all(report, &bytes) {
        Ok(()) => sys::exit_now(crate::os::error::NOT_FOUND as i32),
        Err(_) => sys::exit_now(REPORT_LOST),
    }
}

/// Reads the child's report: `None` at end of file with no byte, which is
/// the pipe closed by a successful exec (or a child that could not write
/// its report: see REPORT_LOST); a report cut short is
/// `Unreported`. Err: the pipe could not be read.
fn read_report(pipe: OwnedFd) -> Result<Option<SpawnError>, i32> {
    let mut buf = [0u8; REPORT_LEN];
    let got = sys::read_fill(&pipe, &mut buf).map_err(|e| e.raw_os_error())?;
    let int = |at: usize| i32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
    Ok(match (got, int(0)) {
        (0, _) => None,
        (REPORT_LEN, SETUP) => Some(SpawnError::Launcher(int(4))),
        (REPORT_LEN, EXEC) => Some(SpawnError::Exec(int(4))),
        _ => Some(SpawnError::Unreported),
    })
}
