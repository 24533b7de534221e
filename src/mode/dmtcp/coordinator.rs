//! The private coordinator (`--mode dmtcp`): started, its port learnt,
//! one an earlier run left ended, and the `dmtcp_command` calls ckptrun
//! makes to it built; ckptrun's children told apart from those it was
//! started with. The command lines are those of DMTCP 4 (PROTOCOLS.md §3
//! and issue 4 list what was observed of 4.2.0).

use std::ffi::{CStr, OsStr, OsString};
use std::fmt::Write as _;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use crate::os::decimal;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::sys::{self, Pid, SigSet};
use crate::run::signals::Inherited;
use crate::run::spawn::{self, Stdio};

/// Where clients reach the coordinator (it listens on every interface).
const HOST: &str = "127.0.0.1";

/// How long a coordinator may take to write its port file.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The port file, in the store's scratch directory.
pub const PORT_FILE: &CStr = c"coordinator-port";

/// DMTCP's temporary directory, in the store's scratch (see
/// `plan::temporary`).
pub const TMP: &CStr = c"dmtcp-tmp";

/// A running private coordinator.
pub struct Coordinator {
    pub port: u16,
    /// Its pid, once it has detached and become our child (ckptrun is its
    /// subreaper); `None` if it could not be told.
    pub pid: Option<Pid>,
}

impl Coordinator {
    /// Starts `dmtcp_coordinator --coord-port 0 --port-file F
    /// --exit-on-last --daemon --ckptdir IMAGES` and waits, at most
    /// START_TIMEOUT and without fixed sleeps, until it has written its
    /// port and the process started has detached. `scratch` is the
    /// store's open scratch directory, `scratch_at` its absolute path (the coordinator may change
    /// directory when it detaches). `children` lists ckptrun's children
    /// before it started anything (see `Children`).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        tool: &Path,
        scratch: BorrowedFd,
        scratch_at: &Path,
        images_at: &Path,
        children: &Children,
        inherited: &Inherited,
        log: &Log,
    ) -> Result<Self, Error> {
        let port_file = scratch_at.join(OsStr::from_bytes(PORT_FILE.to_bytes()));
        let store_id = identity(scratch);
        if children.listable() {
            end_stale(store_id, log);
        }
        let launcher = launch(tool, scratch, scratch_at, &port_file, images_at, inherited)?;
        let (port, launcher_running) =
            wait_for_port(tool, launcher, scratch, &port_file, children)?;
        // A launcher still running did not detach: it is the coordinator.
        // Otherwise the detached coordinator is our only child.
        let pid = if launcher_running {
            Some(launcher)
        } else {
            children.find_new(|pid| runs_with_our_port_file(pid, store_id))
        };
        log.info(format_args!(
            "coordinator on port {port}{}",
            match pid {
                Some(_) => "",
                None => " (its pid is unknown: --quit alone will end it)",
            }
        ));
        Ok(Self { port, pid })
    }

    /// The common arguments of every client and command.
    pub fn address(&self) -> [OsString; 4] {
        [
            "--coord-host".into(),
            HOST.into(),
            "--coord-port".into(),
            self.port.to_string().into(),
        ]
    }

    /// Ends a coordinator whose job will not start: SIGKILL where its pid
    /// is known, else `quit` (its `--quit` command) if there is one.
    pub fn abandon(&self, quit: Option<&spawn::Command>, inherited: &Inherited) {
        match (self.pid, quit) {
            (Some(pid), _) => {
                let _ = sys::kill(pid, libc::SIGKILL);
            }
            (None, Some(quit)) => {
                let _ = spawn::spawn(quit, inherited, false);
            }
            (None, None) => {}
        }
    }

    /// `dmtcp_command --coord-host H --coord-port P VERB...`, ready to
    /// spawn; its standard output and error into `capture` if given.
    pub fn command(
        &self,
        tool: &Path,
        verbs: &[&str],
        capture: Option<std::os::fd::OwnedFd>,
    ) -> Result<spawn::Command, Error> {
        let mut args = self.address().to_vec();
        args.extend(verbs.iter().map(OsString::from));
        let stdio = match capture {
            Some(out) => Stdio::capture(out)?,
            None => Stdio::helper()?,
        };
        Ok(spawn::Command::new(tool, OsStr::new("dmtcp_command"), &args, &[])?.with_stdio(stdio))
    }
}

/// Starts the coordinator in the store's scratch, a port file left from
/// before removed first; returns the pid of the process started (the
/// coordinator until it detaches).
fn launch(
    tool: &Path,
    scratch: BorrowedFd,
    scratch_at: &Path,
    port_file: &Path,
    images_at: &Path,
    inherited: &Inherited,
) -> Result<Pid, Error> {
    match rustix::fs::unlinkat(scratch, PORT_FILE, rustix::fs::AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(Error::os(port_file.display(), e)),
    }
    let args: Vec<OsString> = vec![
        // Its notes and warnings would land in HTCondor's error file.
        "--quiet".into(),
        "--quiet".into(),
        "--coord-port".into(),
        "0".into(),
        "--port-file".into(),
        port_file.into(),
        "--exit-on-last".into(),
        "--daemon".into(),
        "--ckptdir".into(),
        images_at.into(),
    ];
    // Run in the store's scratch: at every checkpoint DMTCP 4.2.0's
    // coordinator unlinks `dmtcp_restart_script.sh` in its working
    // directory, which would be the job's sandbox.
    let cwd = rustix::io::fcntl_dupfd_cloexec(scratch, 3)
        .map_err(|e| Error::os(scratch_at.display(), e))?;
    let command = spawn::Command::new(tool, OsStr::new("dmtcp_coordinator"), &args, &[])?
        .with_stdio(Stdio::helper()?)
        .in_dir(cwd);
    spawn::spawn(&command, inherited, false)
        .map_err(|e| Error::usage(tool.display(), format_args!("cannot start it: {e}")))
}

/// Waits, at most START_TIMEOUT and without fixed sleeps, until the
/// coordinator has written its port to `port_file` and `launcher` has
/// detached (exited 0). Returns the port, and whether `launcher` still
/// runs: then it did not detach and is the coordinator.
fn wait_for_port(
    tool: &Path,
    launcher: Pid,
    scratch: BorrowedFd,
    port_file: &Path,
    children: &Children,
) -> Result<(u16, bool), Error> {
    let fail = |why: &dyn std::fmt::Display| Error::usage(tool.display(), why);
    let give_up = Instant::now() + START_TIMEOUT;
    let mut port = None;
    let mut launcher_running = true;
    let mut pause = Duration::from_millis(1);
    loop {
        if launcher_running {
            match sys::reap(launcher) {
                None => {}
                Some(raw) if libc::WIFEXITED(raw) && libc::WEXITSTATUS(raw) == 0 => {
                    launcher_running = false;
                }
                Some(raw) => {
                    let ended = crate::run::protocol::Ended { raw, pid: launcher };
                    return Err(fail(&format_args!(
                        "{ended} before it was ready (see its messages above)"
                    )));
                }
            }
        }
        if port.is_none() {
            port = read_port(scratch);
        }
        let now = Instant::now();
        if let Some(port) = port
            && (!launcher_running || now >= give_up)
        {
            return Ok((port, launcher_running));
        }
        if now >= give_up {
            if launcher_running {
                let _ = sys::kill(launcher, libc::SIGKILL);
                let _ = sys::reap_waiting(launcher);
            } else {
                // It detached (so its pid is no longer ours to signal)
                // and never said where it listens: end it, our child.
                children.kill_new();
            }
            return Err(fail(&format_args!(
                "wrote no port to {} within {} s",
                port_file.display(),
                START_TIMEOUT.as_secs()
            )));
        }
        // Woken early by SIGCHLD when the launcher exits; other
        // signals stay pending for the supervisor.
        let _ = sys::wait_signal(&SigSet::only(libc::SIGCHLD), Some(pause.min(give_up - now)));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Kills a coordinator an earlier run in this sandbox left: ckptrun was
/// killed before the job joined it, so `--exit-on-last` never fires. It
/// is known by its `--port-file`, in this very store (the store is locked
/// by this run, so no live run's coordinator has it).
fn end_stale(store_id: Option<(u64, u64)>, log: &Log) {
    let Ok(procs) = crate::os::tree::open_named_dir(rustix::fs::CWD, c"/proc") else {
        return;
    };
    // Read without allocating: /proc may list thousands of processes.
    let _ = crate::os::tree::each_name(procs.as_fd(), |name| {
        let pid = decimal::parse(name.to_bytes()).and_then(|n| Pid::try_from(n).ok());
        if let Some(pid) = pid
            && runs_with_our_port_file(pid, store_id)
            && sys::kill(pid, libc::SIGKILL).is_ok()
        {
            log.warn(format_args!(
                "killed pid {pid}, a coordinator an earlier run left in this sandbox"
            ));
        }
        Ok(())
    });
}

/// (device, inode) of the open scratch directory.
fn identity(scratch: BorrowedFd) -> Option<(u64, u64)> {
    let st = rustix::fs::fstat(scratch).ok()?;
    Some((st.st_dev, st.st_ino))
}

/// Whether `pid` is a dmtcp_coordinator whose `--port-file` is in the
/// store `store_id`. DMTCP 4.2.0's coordinator overwrites its argv[0]
/// (` -p7779`) and its name (`dmtcp_coor:7779`), so it is known by the
/// program it runs; the arguments after argv[0] are left as they were.
/// Allocates: before the job starts only.
fn runs_with_our_port_file(pid: Pid, store_id: Option<(u64, u64)>) -> bool {
    let Some(store_id) = store_id else {
        return false;
    };
    // Only a coordinator's arguments are read: every process's would cost
    // as much memory as the longest command line on the machine.
    if !runs_coordinator(pid) {
        return false;
    }
    let Some(cmdline) = read_whole(&format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args = cmdline.split(|&b| b == 0);
    let Some(port_file) = args.skip_while(|&a| a != b"--port-file").nth(1) else {
        return false;
    };
    let port_file = Path::new(OsStr::from_bytes(port_file));
    port_file.file_name() == Some(OsStr::from_bytes(PORT_FILE.to_bytes()))
        && port_file
            .parent()
            .and_then(|dir| rustix::fs::stat(dir).ok())
            .is_some_and(|st| (st.st_dev, st.st_ino) == store_id)
}

/// Whether `pid` runs a program named dmtcp_coordinator. Its path is
/// read into a buffer on the stack (allocated only if it is longer).
fn runs_coordinator(pid: Pid) -> bool {
    let mut exe: heapless::String<32> = heapless::String::new();
    if write!(exe, "/proc/{pid}/exe").is_err() {
        return false;
    }
    let named = |path: &[u8]| {
        Path::new(OsStr::from_bytes(path)).file_name() == Some(OsStr::new("dmtcp_coordinator"))
    };
    let mut buf = [0u8; 512];
    match rustix::fs::readlinkat_raw(rustix::fs::CWD, exe.as_str(), &mut buf[..]) {
        Ok(n) if n < buf.len() => named(&buf[..n]),
        Ok(_) => std::fs::read_link(exe.as_str()).is_ok_and(|p| named(p.as_os_str().as_bytes())),
        Err(_) => false,
    }
}

/// All that the file at `path` holds, or None. Allocates.
fn read_whole(path: &str) -> Option<Vec<u8>> {
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let (mut whole, mut buf) = (Vec::new(), [0u8; 512]);
    loop {
        match sys::read_fill(&fd, &mut buf).ok()? {
            0 => return Some(whole),
            n => whole.extend_from_slice(&buf[..n]),
        }
    }
}

/// The port the coordinator wrote, once the file holds one.
fn read_port(scratch: BorrowedFd) -> Option<u16> {
    let fd = rustix::fs::openat(
        scratch,
        PORT_FILE,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut buf = [0u8; 16];
    let len = sys::read_fill(&fd, &mut buf).ok()?;
    let port = crate::os::decimal::parse(buf[..len].trim_ascii())?;
    u16::try_from(port).ok().filter(|&p| p != 0)
}

/// ckptrun's children, as /proc lists them, told apart from those it had
/// before it started anything (a process may exec ckptrun with children
/// of its own: those are not ckptrun's to end). Empty, and `new_one`
/// always `None`, where /proc shows another PID namespace. Does not
/// allocate.
pub struct Children {
    proc_is_ours: bool,
    before: heapless::Vec<Pid, 32>,
}

impl Children {
    /// Notes the children ckptrun has now (before anything is started).
    pub fn before_start(proc_is_ours: bool) -> Self {
        let mut before = heapless::Vec::new();
        // More children than noted here, or a children list /proc does
        // not give: ckptrun cannot tell its own, and lists none.
        let mut listable = proc_is_ours && crate::os::procfs::lists_children(me());
        if listable {
            let mut buf = [0u8; 4096];
            for child in crate::os::procfs::children(me(), &mut buf) {
                listable &= before.push(child).is_ok();
            }
        }
        Self {
            proc_is_ours: listable,
            before,
        }
    }

    /// Whether /proc can list them at all.
    pub fn listable(&self) -> bool {
        self.proc_is_ours
    }

    /// Calls `f` with each child ckptrun started or adopted since.
    pub fn each_new(&self, mut f: impl FnMut(Pid)) {
        if !self.proc_is_ours {
            return;
        }
        let mut buf = [0u8; 4096];
        for child in crate::os::procfs::children(me(), &mut buf) {
            if !self.before.contains(&child) {
                f(child);
            }
        }
    }

    fn find_new(&self, mut pick: impl FnMut(Pid) -> bool) -> Option<Pid> {
        let mut found = None;
        self.each_new(|pid| {
            if found.is_none() && pick(pid) {
                found = Some(pid);
            }
        });
        found
    }

    /// SIGKILLs every new child and reaps it (before the job starts).
    fn kill_new(&self) {
        self.each_new(|pid| {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::reap_waiting(pid);
        });
    }
}

fn me() -> Pid {
    rustix::process::getpid().as_raw_nonzero().get()
}
