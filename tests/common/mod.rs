//! Shared helpers: run the built ckptrun as a user would, in a scratch
//! sandbox, with time limits so a hang fails the test instead of CI.
#![allow(dead_code)]

use std::borrow::BorrowMut;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub const CKPTRUN: &str = env!("CARGO_BIN_EXE_ckptrun");

/// The condor_compile'd stand-in (`examples/condor_job.rs`), x86_64.
pub fn fixture() -> PathBuf {
    build_for("x86_64-unknown-linux-musl", false).join("examples/condor_job")
}

/// The self-checkpointing job (`examples/self_job.rs`), x86_64.
pub fn self_fixture() -> PathBuf {
    build_for("x86_64-unknown-linux-musl", false).join("examples/self_job")
}

/// The fake DMTCP tools (`examples/fake_dmtcp/`), x86_64: one binary that
/// acts as the tool it is named after; see `install_dmtcp_tools`.
pub fn fake_dmtcp() -> PathBuf {
    build_for("x86_64-unknown-linux-musl", false).join("examples/fake_dmtcp")
}

/// The program the fake DMTCP tools can checkpoint
/// (`examples/dmtcp_job.rs`), x86_64.
pub fn dmtcp_job() -> PathBuf {
    build_for("x86_64-unknown-linux-musl", false).join("examples/dmtcp_job")
}

/// The names DMTCP's tools go by.
pub const DMTCP_TOOLS: [&str; 4] = [
    "dmtcp_coordinator",
    "dmtcp_launch",
    "dmtcp_command",
    "dmtcp_restart",
];

/// Puts `from` at `to` (replacing what is there): a hard link, or a copy
/// (`copy_program`) where linking fails.
pub fn link_or_copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_file(to);
    if std::fs::hard_link(from, to).is_err() {
        copy_program(from, to);
    }
}

/// Copies a program (or a job's input) to `to`, by `cp`: a file this
/// process wrote itself could be "text file busy" to exec while another
/// test's fork, not yet exec'd, still holds the descriptor it wrote with;
/// one `cp` wrote cannot be.
/// The directory of a real engine (HTCondor pool, Slurm cluster) that
/// scripts/test.sh started, from `var`; `config` must be set too (as
/// `SCRIPT env DIR` sets it). None, after saying so, when there is none;
/// under CI there must be one: the tests against the real engines fail
/// there rather than skip.
pub fn engine_dir(
    var: &str,
    config: &str,
    script: &str,
    tests: &str,
    what: &str,
) -> Option<PathBuf> {
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    let Some(dir) = std::env::var_os(var).filter(|d| !d.is_empty()) else {
        assert!(
            !ci,
            "CI is set but {var} is not: the {tests} need the {what} scripts/test.sh starts"
        );
        eprintln!("{tests} skipped: no {what} ({var} unset; scripts/test.sh starts one)");
        return None;
    };
    assert!(
        std::env::var_os(config).is_some(),
        "{var} is set but {config} is not: eval \"$({script} env DIR)\" first"
    );
    Some(dir.into())
}

/// A fresh, empty directory `/tmp/ckptrun-KIND-PID-NAME` for a job of a
/// real engine: not TMPDIR, which the engine's account may not reach.
pub fn fresh_dir(kind: &str, name: &str) -> PathBuf {
    let dir = Path::new("/tmp").join(format!("ckptrun-{kind}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// Gives `dir` and all it holds to `user`, the account the real pool's
/// or cluster's jobs run as.
pub fn give_to(user: &str, dir: &Path) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{user}:"))
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success(), "chown {}", dir.display());
}

/// Removes a test's directory; a failing test's is kept, and named, for
/// a look.
pub fn remove_unless_panicking(dir: &Path) {
    if std::thread::panicking() {
        eprintln!("kept {} for a look", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

pub fn copy_program(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-f")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(status.success(), "cp {} {}", from.display(), to.display());
}

/// Puts the fake DMTCP tools in `dir` (created if missing) under their
/// four names: hard links, or copies where linking fails.
pub fn install_dmtcp_tools(dir: &Path) {
    let fake = fake_dmtcp();
    std::fs::create_dir_all(dir).unwrap();
    for name in DMTCP_TOOLS {
        link_or_copy(&fake, &dir.join(name));
    }
}

/// The same fixture built for i686, a real ELF32 file.
pub fn fixture_i686() -> PathBuf {
    build_for("i686-unknown-linux-musl", false).join("examples/condor_job")
}

/// ckptrun itself built for i686, as shipped to 32-bit execute nodes.
pub fn ckptrun_i686() -> PathBuf {
    build_for("i686-unknown-linux-musl", false).join("ckptrun")
}

/// ckptrun as released for `target`, built by scripts/build-release.sh
/// (std rebuilt for size, panics as traps): the binary users copy into
/// sandboxes, which the debug builds above do not exercise.
pub fn ckptrun_release(target: &'static str) -> PathBuf {
    build_for(target, true).join("ckptrun")
}

/// Builds ckptrun and the fixtures for `target` (debug, so the allocation
/// guard is in), or with `release` ckptrun alone as shipped, once per test
/// binary. `cargo test --test NAME` does not build examples, so the tests
/// do it themselves, in a target directory of their own so as not to wait
/// on the lock of the build running them.
fn build_for(target: &'static str, release: bool) -> PathBuf {
    type Built = Vec<((&'static str, bool), PathBuf)>;
    static BUILT: OnceLock<std::sync::Mutex<Built>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = built.iter().find(|(t, _)| *t == (target, release)) {
        return dir.clone();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target_dir = fixtures_dir();
    let status = if release {
        Command::new(root.join("scripts/build-release.sh"))
            .arg(target)
            .env("CARGO", env!("CARGO"))
            .env("CARGO_TARGET_DIR", &target_dir)
            .env("CARGO_BUILD_OPTS", "--quiet --locked")
            .status()
            .expect("run scripts/build-release.sh")
    } else {
        Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "--bin",
                "ckptrun",
                "--example",
                "condor_job",
                "--example",
                "self_job",
                "--example",
                "fake_dmtcp",
                "--example",
                "dmtcp_job",
                "--target",
                target,
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(root)
            .status()
            .expect("run cargo")
    };
    assert!(
        status.success(),
        "building for {target} failed: is the target installed? (scripts/setup.sh)"
    );
    let dir = target_dir
        .join(target)
        .join(if release { "release" } else { "debug" });
    built.push(((target, release), dir.clone()));
    dir
}

/// A scratch directory standing in for a job's sandbox.
pub struct Sandbox {
    pub dir: PathBuf,
}

impl Sandbox {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ckptrun-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// Copies the fixture in as `job`, as transfer_input_files would.
    pub fn with_job(name: &str) -> Self {
        let sandbox = Self::new(name);
        copy_program(&fixture(), &sandbox.path("job"));
        sandbox
    }

    pub fn path(&self, name: impl AsRef<Path>) -> PathBuf {
        self.dir.join(name)
    }

    /// `ckptrun ARGS...` with this sandbox as working directory.
    pub fn ckptrun<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.ckptrun_from(Path::new(CKPTRUN), args)
    }

    /// `ckptrun` as above, running the copy at `ckptrun`.
    pub fn ckptrun_from<I, S>(&self, ckptrun: &Path, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(ckptrun);
        cmd.args(args).current_dir(&self.dir);
        // The condor fixture says where it checkpointed and resumed.
        cmd.env("CONDOR_JOB_VERBOSE", "1");
        default_signals(&mut cmd);
        cmd
    }

    /// A PATH that finds `bin/NAME` in the sandbox first, a shell script
    /// of `script`'s lines standing in for a program (Slurm's `scontrol`,
    /// say), then the test's own PATH.
    pub fn stand_in(&self, name: &str, script: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let bin = self.path("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let program = bin.join(name);
        std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
    }

    /// A copy of `program` in the sandbox that any user can run: the
    /// copy 0755 and the sandbox (under /tmp) open to all (at least
    /// 0755), as a user transfers ckptrun. For tests that run as `nobody`,
    /// who cannot reach the build under a clone in a 0700 directory
    /// (`mktemp -d`, /root). Removed with the sandbox.
    pub fn copy_for_anyone(&self, program: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let to = self.path(program.file_name().unwrap());
        copy_program(program, &to);
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mode = std::fs::metadata(&self.dir).unwrap().permissions().mode();
        let open = std::fs::Permissions::from_mode(mode | 0o755);
        std::fs::set_permissions(&self.dir, open).unwrap();
        to
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A running ckptrun. Its output is read as it comes (a full pipe would
/// stall it); dropped before it ended (a test failing half-way), it is
/// killed with every process it started.
pub struct Running {
    pub child: Child,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// The inodes of its stdout and stderr pipes, to find who holds them.
    pipes: Vec<u64>,
}

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    pub fn signal(&self) -> Option<i32> {
        self.status.signal()
    }
}

pub fn start(mut cmd: impl BorrowMut<Command>) -> Running {
    let child = cmd
        .borrow_mut()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ckptrun");
    Running::new(child)
}

/// Runs to the end (at most 30 s).
pub fn run(cmd: impl BorrowMut<Command>) -> Finished {
    start(cmd).finish()
}

/// `cmd.output()` with `run`'s bounds: past them, what it left running
/// is killed and the test fails, instead of waiting for ever.
pub fn output(cmd: impl BorrowMut<Command>) -> Output {
    start(cmd).finish_output()
}

/// How long a finished ckptrun's output pipes may stay open: held by
/// something it left running, which would otherwise block the test for
/// ever.
const PIPES_CLOSE_WITHIN: Duration = Duration::from_secs(10);

impl Running {
    /// Takes over a spawned ckptrun (its stdout and stderr, where piped).
    pub fn new(child: Child) -> Self {
        use std::os::fd::AsRawFd;
        let fds = [
            child.stdout.as_ref().map(|s| s.as_raw_fd()),
            child.stderr.as_ref().map(|s| s.as_raw_fd()),
        ];
        let pipes = fds.into_iter().flatten().filter_map(pipe_inode).collect();
        Self {
            child,
            stdout: Vec::new(),
            stderr: Vec::new(),
            pipes,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill has no memory arguments.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0, "kill {sig}");
    }

    /// Waits until `path` exists (the fixture's report says it is ready).
    pub fn wait_for(&mut self, path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !path.exists() {
            if let Some(status) = self.child.try_wait().unwrap() {
                let out = self.collect(status);
                panic!(
                    "ckptrun ended ({:?}) before {} appeared; stderr:\n{}",
                    out.status,
                    path.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            if Instant::now() >= deadline {
                let left = self.kill_all();
                panic!(
                    "{} never appeared; killed what was still running: {left:#?}; stderr:\n{}",
                    path.display(),
                    String::from_utf8_lossy(&self.stderr)
                );
            }
            self.read_output(Duration::from_millis(10));
        }
    }

    /// Waits for the end (at most 30 s; then kills it, and all it
    /// started, and fails).
    pub fn finish(self) -> Finished {
        let out = self.finish_output();
        Finished {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `finish`, the output as bytes.
    pub fn finish_output(mut self) -> Output {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return self.collect(status);
            }
            if Instant::now() > deadline {
                let left = self.kill_all();
                panic!(
                    "ckptrun did not end within 30 s; killed what was still running: \
                     {left:#?}; stderr:\n{}",
                    String::from_utf8_lossy(&self.stderr)
                );
            }
            self.read_output(Duration::from_millis(5));
        }
    }

    /// The rest of the output of a ckptrun that has ended: until its
    /// pipes close, which must be soon. A process it left holding them is
    /// killed, and the test fails naming it.
    fn collect(&mut self, status: ExitStatus) -> Output {
        let deadline = Instant::now() + PIPES_CLOSE_WITHIN;
        while self.child.stdout.is_some() || self.child.stderr.is_some() {
            if Instant::now() >= deadline {
                let left = self.kill_all();
                panic!(
                    "ckptrun ended ({status:?}) but its output pipes were still open \
                     {} s later; killed what held them: {left:#?}; stderr:\n{}",
                    PIPES_CLOSE_WITHIN.as_secs(),
                    String::from_utf8_lossy(&self.stderr)
                );
            }
            self.read_output(Duration::from_millis(100));
        }
        Output {
            status,
            stdout: std::mem::take(&mut self.stdout),
            stderr: std::mem::take(&mut self.stderr),
        }
    }

    /// Reads what ckptrun's pipes hold, waiting at most `limit` for
    /// something to come (or just sleeping `limit` if both are closed); a
    /// pipe at its end is closed.
    fn read_output(&mut self, limit: Duration) {
        use std::os::fd::AsRawFd;
        let mut fds: Vec<libc::pollfd> = [
            self.child.stdout.as_ref().map(|s| s.as_raw_fd()),
            self.child.stderr.as_ref().map(|s| s.as_raw_fd()),
        ]
        .into_iter()
        .map(|fd| libc::pollfd {
            fd: fd.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
        if fds.iter().all(|p| p.fd < 0) {
            std::thread::sleep(limit);
            return;
        }
        // SAFETY: fds is a valid array of pollfd; a negative fd is skipped.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, limit.as_millis() as i32) };
        if ready <= 0 {
            return;
        }
        let mut buf = [0u8; 65536];
        if fds[0].revents != 0 {
            if let Some(s) = self.child.stdout.as_mut() {
                match s.read(&mut buf) {
                    Ok(n) if n > 0 => self.stdout.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    _ => self.child.stdout = None,
                }
            }
        }
        if fds[1].revents != 0 {
            if let Some(s) = self.child.stderr.as_mut() {
                match s.read(&mut buf) {
                    Ok(n) if n > 0 => self.stderr.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    _ => self.child.stderr = None,
                }
            }
        }
    }

    /// SIGKILL for ckptrun, everything it started (its descendants, found
    /// while it still stands, stopped first so none forks away) and
    /// whatever else holds its output pipes (a daemon that left the
    /// tree); reaps ckptrun. Returns what it killed, described.
    pub fn kill_all(&mut self) -> Vec<String> {
        let mut killed = Vec::new();
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        let me = std::process::id() as i32;
        loop {
            let mut found = if self.child.try_wait().ok().flatten().is_none() {
                signal(self.pid(), libc::SIGSTOP);
                descendants(self.pid())
            } else {
                Vec::new()
            };
            found.extend(holders_of(&self.pipes).into_iter().filter(|&p| p != me));
            found.sort_unstable();
            found.dedup();
            found.retain(|p| !seen.contains(p));
            if found.is_empty() || Instant::now() > deadline {
                break;
            }
            for &pid in &found {
                signal(pid, libc::SIGSTOP);
                killed.push(describe(pid));
            }
            seen.extend(found);
        }
        for &pid in &seen {
            signal(pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Whatever they left unread is of no use now.
        self.child.stdout = None;
        self.child.stderr = None;
        killed
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let left = self.kill_all();
            eprintln!(
                "killed ckptrun {} and what it left running: {left:#?}",
                self.pid()
            );
        }
    }
}

/// The inode of the pipe `fd` is an end of.
fn pipe_inode(fd: i32) -> Option<u64> {
    // SAFETY: fstat fills the zeroed struct we pass.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_ino)
}

/// Processes with the write end of one of the pipes `inodes` open (the
/// read end is the test's, and is in any child it is forking for another
/// test until that child execs).
fn holders_of(inodes: &[u64]) -> Vec<i32> {
    let names: Vec<String> = inodes.iter().map(|i| format!("pipe:[{i}]")).collect();
    let write_only = |fdinfo: PathBuf| {
        let info = std::fs::read_to_string(fdinfo).unwrap_or_default();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"));
        flags
            .and_then(|f| i32::from_str_radix(f.trim(), 8).ok())
            .is_some_and(|f| f & libc::O_ACCMODE == libc::O_WRONLY)
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let fds = std::fs::read_dir(entry.path().join("fd"));
        let holds = fds.into_iter().flatten().flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| names.iter().any(|n| l.as_os_str() == n.as_str()))
                && write_only(entry.path().join("fdinfo").join(fd.file_name()))
        });
        if holds && alive(pid) {
            found.push(pid);
        }
    }
    found
}

/// `PID: ARGV` of a process, for a report.
fn describe(pid: i32) -> String {
    let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv: Vec<String> = argv
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    format!("{pid}: {}", argv.join(" "))
}

/// Resets, in the child before it execs, every signal's disposition to
/// the default and unblocks them all: what the tests expect of ckptrun's
/// start, whatever the environment running them left (a non-interactive
/// shell's background job ignores SIGINT and SIGQUIT, nohup SIGHUP, and
/// ckptrun rightly hands ignored signals on to the job). A test setting
/// dispositions of its own does so after this (`before_exec` runs later).
pub fn default_signals(cmd: &mut Command) {
    // SAFETY: between fork and exec only async-signal-safe calls
    // (sigaction, sigemptyset, sigprocmask) on stack data.
    unsafe {
        cmd.pre_exec(|| {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut dfl.sa_mask);
            for sig in 1..=31 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::sigaction(sig, &dfl, std::ptr::null_mut());
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// What the fixture reported: its personality and its raw argv.
pub struct Report {
    pub personality: String,
    pub argv: Vec<Vec<u8>>,
}

pub fn read_report(path: &Path) -> Report {
    let bytes = std::fs::read(path).unwrap();
    let newline = bytes.iter().position(|&b| b == b'\n').unwrap();
    let personality = String::from_utf8(bytes[..newline].to_vec()).unwrap();
    let mut argv: Vec<Vec<u8>> = bytes[newline + 1..]
        .split(|&b| b == 0)
        .map(<[u8]>::to_vec)
        .collect();
    argv.pop();
    Report { personality, argv }
}

/// `unshare --fork --pid --mount-proc`: what follows runs as PID 1 of a
/// new PID namespace. As root directly; otherwise inside a user
/// namespace of its own (--map-root-user), which needs no privilege.
pub fn pid_namespace() -> std::process::Command {
    let mut cmd = std::process::Command::new("unshare");
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--fork", "--pid", "--mount-proc"]);
    default_signals(&mut cmd);
    cmd
}

/// Runs `pre` in the child before ckptrun is exec'd (signal setup).
pub fn before_exec(cmd: &mut Command, pre: impl Fn() + Send + Sync + 'static) {
    // SAFETY: the closures tests pass make only async-signal-safe libc
    // calls (sigprocmask, sigaction, raise, setuid).
    unsafe {
        cmd.pre_exec(move || {
            pre();
            Ok(())
        });
    }
}

/// A signal set holding `sigs`.
pub fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set; sigaddset fills it.
    unsafe {
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Asserts that stderr is one line of the form `ckptrun: what: why`
/// containing `needle`.
pub fn assert_one_error_line(out: &Finished, needle: &str) {
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "want one line, got {:?}", out.stderr);
    assert!(lines[0].starts_with("ckptrun: "), "{:?}", lines[0]);
    assert!(
        lines[0].matches(": ").count() >= 2,
        "want `ckptrun: what: why`, got {:?}",
        lines[0]
    );
    assert!(lines[0].contains(needle), "{:?} lacks {needle:?}", lines[0]);
}

/// `ckptrun EXTRA... -- sh -c SCRIPT sh`; in condor mode the job's `$1 $2`
/// are `-_condor_ckpt sh.ckpt` (or `-_condor_restart sh.ckpt ...`).
pub fn shell(sandbox: &Sandbox, extra: &[&str], script: &str) -> Command {
    shell_from(sandbox, Path::new(CKPTRUN), extra, script)
}

/// `shell`, running the copy of ckptrun at `ckptrun`.
pub fn shell_from(sandbox: &Sandbox, ckptrun: &Path, extra: &[&str], script: &str) -> Command {
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(["--", "sh", "-c", script, "sh"]);
    sandbox.ckptrun_from(ckptrun, args)
}

/// Polls `cond` every 5 ms for up to 5 s.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The first child of `pid` (from /proc/PID/task/PID/children), once it
/// has one.
pub fn first_child(pid: i32) -> i32 {
    let mut child = None;
    wait_until(&format!("{pid} has a child"), || {
        child = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        child.is_some()
    });
    child.unwrap()
}

/// (parent pid, state letter) of a live or zombie process.
pub fn parent_and_state(pid: i32) -> Option<(i32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    parent_and_state(pid).is_some_and(|(_, state)| state != 'Z')
}

/// The store's slot files in `dir` (`NAME.0`, `NAME.1`, ...), at the
/// top and kept out of HTCondor's uploads in `.NAME/older`, sorted by
/// name.
pub fn slots(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = top_slots(dir, name);
    found.extend(top_slots(&dir.join(format!(".{name}/older")), name));
    found.sort_by_key(|p| p.file_name().unwrap().to_owned());
    found
}

/// The store's slot files at the top of `dir`, where HTCondor uploads
/// them, sorted.
pub fn top_slots(dir: &Path, name: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.strip_prefix(name)
                .and_then(|r| r.strip_prefix('.'))
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    found.sort();
    found
}

/// How many CPUs this process may run on: its affinity, as ckptrun
/// counts them to split a file's work between two processes (a cgroup's
/// CPU quota, which `available_parallelism` also reads, is not counted).
pub fn affinity_cpus() -> usize {
    // SAFETY: cpu_set_t is plain bits, valid all zero; the call fills
    // the set it is given with its size, and CPU_COUNT reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        match libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) {
            0 => libc::CPU_COUNT(&set).max(1) as usize,
            _ => 1,
        }
    }
}

/// A member of a generation's archive as GNU tar gives it: a compressed
/// member's zstd frames, not what they expand to.
pub fn tar_stored(archive: &Path, member: &str) -> Option<Vec<u8>> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(member)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    out.status.success().then_some(out.stdout)
}

/// A member of a generation's archive, read by GNU tar (not ckptrun),
/// and by `zstd -dc` if it is stored compressed (a zstd stream), as a
/// user reads it by hand (docs/store.md).
pub fn tar_member(archive: &Path, member: &str) -> Option<Vec<u8>> {
    let stored = tar_stored(archive, member)?;
    if !stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Some(stored);
    }
    let mut zstd = Command::new("zstd")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("zstd (scripts/setup.sh installs it)");
    let mut input = zstd.stdin.take().unwrap();
    let feed = std::thread::spawn(move || std::io::Write::write_all(&mut input, &stored));
    let expanded = zstd.wait_with_output().unwrap();
    feed.join().unwrap().unwrap();
    expanded.status.success().then_some(expanded.stdout)
}

/// The generation number a slot file holds (None: empty or not whole).
pub fn generation_of(slot: &Path) -> Option<u64> {
    if std::fs::metadata(slot).ok()?.len() == 0 {
        return None;
    }
    let meta = String::from_utf8(tar_member(slot, ".ckptrun")?).ok()?;
    meta.lines()
        .find_map(|l| l.strip_prefix("generation "))?
        .parse()
        .ok()
}

/// The generations in the store `NAME` of `dir`, sorted.
pub fn generations(dir: &Path, name: &str) -> Vec<u64> {
    let mut gens: Vec<u64> = slots(dir, name)
        .iter()
        .filter_map(|s| generation_of(s))
        .collect();
    gens.sort();
    gens
}

/// The slot file holding generation `g` of the store `NAME` in `dir`.
pub fn slot_of(dir: &Path, name: &str, g: u64) -> PathBuf {
    slots(dir, name)
        .into_iter()
        .find(|s| generation_of(s) == Some(g))
        .unwrap_or_else(|| panic!("no generation {g} in {}/{name}.*", dir.display()))
}

/// splitmix64: small, seedable, good enough for the harnesses to pick
/// actions.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// A seed from the clock, for a harness run not replaying one.
pub fn clock_seed() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now.as_nanos() as u64 ^ u64::from(std::process::id())) % 1_000_000_000
}

/// Waits (at most 2 s) until `pid` blocks, catches or waits for `sig`.
/// A signal that comes before a program's first instruction kills any
/// program (the starter has the same race); that is not what the
/// harnesses test. A process in sigtimedwait(2) shows the signals it waits
/// for as unblocked, hence the look at its wait channel.
pub fn wait_until_handled(pid: i32, sig: i32) {
    let bit = 1u64 << (sig - 1);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return;
        };
        let mask = |key: &str| {
            let line = status.lines().find_map(|l| l.strip_prefix(key));
            line.and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        let handled = mask("SigBlk:").unwrap_or(0) | mask("SigCgt:").unwrap_or(0);
        let waiting = std::fs::read_to_string(format!("/proc/{pid}/wchan"))
            .is_ok_and(|w| w.contains("sigtimedwait") || w.contains("sigsuspend"));
        if handled & bit != 0 || waiting || status.contains("State:\tZ") {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Its exit status if `child` exits within `limit`.
pub fn wait_at_most(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(left.min(Duration::from_micros(500)));
    }
}

/// kill(2), for a process that may already be gone.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory arguments; a process already gone is fine.
    unsafe { libc::kill(pid, sig) };
}

/// Live processes running a program from `dir` (the tools, the job), with
/// that program's path.
pub fn processes_from(dir: &Path) -> Vec<(i32, PathBuf)> {
    let Ok(dir) = dir.canonicalize() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(exe) = std::fs::read_link(entry.path().join("exe")) else {
            continue;
        };
        if exe.starts_with(&dir) && alive(pid) {
            found.push((pid, exe));
        }
    }
    found
}

/// Live processes of jobs under `base`: running a program from it (a
/// deleted one too), or in a directory under it (a process restored by
/// DMTCP runs `mtcp_restart`), or naming it in their arguments (the
/// DMTCP coordinator's port file); each with a line describing it.
pub fn processes_under(base: &Path) -> Vec<(i32, String)> {
    let base_text = base.to_string_lossy().into_owned();
    // BASE itself or a path under it, not BASE_2 beside it; a deleted
    // one reads `PATH (deleted)`.
    let names_base = |text: &str| {
        text.match_indices(&base_text).any(|(at, _)| {
            matches!(
                text[at + base_text.len()..].chars().next(),
                None | Some('/' | ' ')
            )
        })
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if !alive(pid) {
            continue;
        }
        let under = |link: &str| {
            std::fs::read_link(entry.path().join(link)).is_ok_and(|p| {
                p.to_string_lossy().starts_with(&base_text) && names_base(&p.to_string_lossy())
            })
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if under("exe") || under("cwd") || names_base(&cmdline) {
            let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push((
                pid,
                format!(
                    "{pid} {} ({}): {}",
                    exe.display(),
                    comm.trim(),
                    cmdline.trim()
                ),
            ));
        }
    }
    found
}

/// (pid, parent pid) of every live process, from /proc.
fn parent_links() -> Vec<(i32, i32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse().ok()?;
            let (parent, state) = parent_and_state(pid)?;
            (state != 'Z').then_some((pid, parent))
        })
        .collect()
}

/// The live children of `pid`.
pub fn children(pid: i32) -> Vec<i32> {
    let links = parent_links();
    links
        .iter()
        .filter(|(_, p)| *p == pid)
        .map(|(c, _)| *c)
        .collect()
}

/// The live descendants of `pid` (its children, theirs, ...), by the
/// parent links in /proc.
pub fn descendants(pid: i32) -> Vec<i32> {
    let links = parent_links();
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for &(child, _) in links.iter().filter(|(_, p)| *p == parent) {
            found.push(child);
            parents.push(child);
        }
    }
    found
}

/// Waits until `done`, `what` (at most `limit`), failing if ckptrun ends
/// first, with the log of ckptrun in `sandbox`.
pub fn while_running(
    run: &mut Running,
    sandbox: &Path,
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + limit;
    let log = || std::fs::read_to_string(sandbox.join("ckptrun.log")).unwrap_or_default();
    while !done() {
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!("ckptrun ended ({status:?}) before {what}\n{}", log());
        }
        assert!(
            Instant::now() < deadline,
            "not within {limit:?}: {what}\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills `root` and every process under it at once, as a crash of their
/// machine would: each is stopped first (SIGSTOP: none can react to the
/// death of another, or fork one more unseen), then all are SIGKILLed.
/// Returns the processes killed, `root` first: pid and name (comm).
pub fn kill_tree(root: i32) -> Vec<(i32, String)> {
    let mut stopped = vec![root];
    signal(root, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let new: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !stopped.contains(p))
            .collect();
        for &pid in &new {
            signal(pid, libc::SIGSTOP);
        }
        stopped.extend(&new);
        // A stop takes effect on the way back to user space: until every
        // one has stopped, one may still fork.
        let running = stopped.iter().any(|&p| {
            parent_and_state(p).is_some_and(|(_, state)| !matches!(state, 'T' | 't' | 'Z'))
        });
        if new.is_empty() && !running || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let comm = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let killed = stopped
        .iter()
        .map(|&p| (p, comm(p).trim().to_string()))
        .collect();
    for &pid in &stopped {
        signal(pid, libc::SIGKILL);
    }
    killed
}

/// The real DMTCP's `bin` directory (built by ../shared/tools/real-dmtcp.sh):
/// `CKPTRUN_DMTCP` names its install prefix, else `dmtcp_launch` is looked
/// for along PATH. Without one, a test is skipped (and says so), except
/// where `CI` is set: there it fails, since CI must run against DMTCP.
pub fn real_dmtcp(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let named = std::env::var_os("CKPTRUN_DMTCP").map(|p| PathBuf::from(p).join("bin"));
        let on_path = || {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .find(|d| d.join("dmtcp_launch").is_file())
        };
        named
            .or_else(on_path)
            .filter(|bin| DMTCP_TOOLS.iter().all(|t| bin.join(t).is_file()))
    });
    if found.is_none() {
        let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
        assert!(
            !ci,
            "{test}: CI is set but there is no DMTCP: build it with \
             ../shared/tools/real-dmtcp.sh PREFIX and set CKPTRUN_DMTCP=PREFIX"
        );
        eprintln!(
            "{test}: SKIPPED: no DMTCP (set CKPTRUN_DMTCP=PREFIX; scripts/test.sh builds it)"
        );
    }
    found.clone()
}

/// tests/jobs/counter.c, compiled once (dynamically: DMTCP preloads
/// itself into the program).
pub fn dmtcp_counter() -> PathBuf {
    c_job("counter")
}

/// tests/jobs/NAME.c, compiled once per test binary (dynamically: DMTCP
/// preloads itself into a program).
pub fn c_job(name: &str) -> PathBuf {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A directory per test binary: they build it side by side.
    let dir = root.join(format!("target/dmtcp-jobs/{}", std::process::id()));
    let bin = dir.join(name);
    if bin.is_file() {
        return bin;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let source = root.join(format!("tests/jobs/{name}.c"));
    let status = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("cc (gcc) to build {}: {e}", source.display()));
    assert!(status.success(), "cc {} failed", source.display());
    bin
}

/// The fake DMTCP tools as an install tree under `prefix` (created): the
/// four tools and `mtcp_restart` in `bin/` (hard links to the fake, or
/// copies where linking fails), an empty `lib/dmtcp/libdmtcp.so` beside
/// it, as ckptrun checks a real install. Returns `bin/`.
pub fn install_fake_dmtcp(prefix: &Path) -> PathBuf {
    let bin = prefix.join("bin");
    install_dmtcp_tools(&bin);
    link_or_copy(&fake_dmtcp(), &bin.join("mtcp_restart"));
    let lib = prefix.join("lib/dmtcp");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libdmtcp.so"), b"").unwrap();
    bin
}

/// Where the test fixtures are built: `fixtures` in cargo's target
/// directory.
fn fixtures_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
            PathBuf::from,
        )
        .join("fixtures")
}

/// `examples/dmtcp_job.rs` built for the host's glibc target, so linked
/// dynamically: ckptrun refuses a static PROGRAM in dmtcp mode (DMTCP
/// could not preload itself into it). Built once per test binary.
pub fn dmtcp_job_dynamic() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            const TARGET: &str = "x86_64-unknown-linux-gnu";
            let target_dir = fixtures_dir();
            let status = Command::new(env!("CARGO"))
                .args([
                    "build",
                    "--quiet",
                    "--example",
                    "dmtcp_job",
                    "--target",
                    TARGET,
                ])
                .arg("--target-dir")
                .arg(&target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo");
            assert!(status.success(), "building dmtcp_job for {TARGET} failed");
            target_dir.join(TARGET).join("debug/examples/dmtcp_job")
        })
        .clone()
}

/// Lines of ckptrun's --log (ckptrun.log) that contain `needle`.
pub fn log_lines<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// The log says each restart resumed from the generation the run before
/// committed: `committed generation N` then `restart from generation N`.
/// Returns the generations restarted from, in order.
pub fn restarts_follow_commits(log: &str) -> Vec<u64> {
    let number = |line: &str, after: &str| -> Option<u64> {
        line.split(after)
            .nth(1)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let mut committed = None;
    let mut restarted = Vec::new();
    for line in log.lines() {
        if let Some(g) = number(line, "committed generation ") {
            committed = Some(g);
        } else if let Some(g) = number(line, "restart from generation ") {
            assert_eq!(
                Some(g),
                committed,
                "a restart not from the last generation committed:\n{log}"
            );
            restarted.push(g);
        }
    }
    restarted
}

/// The executable mappings of the file `exe` in process `pid`: each one's
/// size and resident kilobytes, from /proc/PID/smaps.
pub fn code_mappings(pid: i32, exe: &std::path::Path) -> Vec<(u64, u64)> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let exe = exe.canonicalize().unwrap();
    let kb = |line: &str, key: &str| -> Option<u64> {
        line.strip_prefix(key)?
            .trim()
            .trim_end_matches(" kB")
            .parse()
            .ok()
    };
    let mut found = Vec::new();
    // (size, rss) of the mapping being read, if it is one of `exe`'s code.
    let mut current: Option<(u64, u64)> = None;
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let header = fields
            .first()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'));
        if header {
            found.extend(current.take());
            let ours = fields
                .get(5)
                .is_some_and(|p| std::path::Path::new(p) == exe);
            current = (ours && fields.get(1) == Some(&"r-xp")).then_some((0, 0));
        } else if let Some((size, rss)) = current.as_mut() {
            if let Some(v) = kb(line, "Size:") {
                *size = v;
            }
            if let Some(v) = kb(line, "Rss:") {
                *rss = v;
            }
        }
    }
    found.extend(current);
    found
}

/// Changes the first byte of `member`'s data inside the archive `slot`,
/// where GNU tar says it is: a bit flip on a disk or in a transfer.
pub fn flip_byte_of(slot: &Path, member: &str) {
    flip_byte_at(slot, member, 0);
}

/// GNU tar's listing of the archive `slot`, each member's line led by
/// `block N:` (its header's block), read in the C locale: tar
/// translates that prefix.
pub fn tar_blocks(slot: &Path) -> String {
    let listing = Command::new("tar")
        .env("LC_ALL", "C")
        .arg("-tvRf")
        .arg(slot)
        .output()
        .unwrap();
    String::from_utf8(listing.stdout).unwrap()
}

/// Flips one bit of byte `at` of `member`'s data, as stored, in `slot`.
pub fn flip_byte_at(slot: &Path, member: &str, at: usize) {
    let listing = tar_blocks(slot);
    let block: u64 = listing
        .lines()
        .find(|l| l.ends_with(&format!(" {member}")))
        .and_then(|l| l.strip_prefix("block ")?.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{member} in {listing}"));
    let mut bytes = std::fs::read(slot).unwrap();
    bytes[(block as usize + 1) * 512 + at] ^= 0x04;
    std::fs::write(slot, bytes).unwrap();
}

/// `cmd` with address-space randomisation off (personality
/// ADDR_NO_RANDOMIZE): a process's memory figures are then the same in
/// every run (see tests/launcher.rs, the VmHWM tests).
pub fn no_aslr(mut cmd: Command) -> Command {
    // SAFETY: personality(2) is one system call, async-signal-safe, the
    // only thing run between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            Ok(())
        });
    }
    cmd
}

/// A figure in kB from /proc/PID/status (`key` with its colon).
pub fn status_kb(pid: i32, key: &str) -> u64 {
    status_value(pid, key)
        .and_then(|v| v.trim_end_matches(" kB").parse().ok())
        .unwrap()
}

/// The value of `key` (with its colon) in /proc/PID/status, trimmed.
pub fn status_value(pid: i32, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(key))?;
    Some(value.trim().to_owned())
}

/// Field `n` (1-based, as in proc(5); 3 or more: after the name) of
/// /proc/PID/stat, a number.
pub fn stat_field(pid: i32, n: usize) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split_whitespace().nth(n - 3)?.parse().ok()
}

/// Where `pid` waits in the kernel (/proc/PID/wchan), empty if unknown.
pub fn wchan(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default()
}

/// Whether ckptrun `pid` waits in its supervision loop (sigtimedwait).
pub fn waits(pid: i32) -> bool {
    wchan(pid).starts_with("do_sigtimedwait")
}
