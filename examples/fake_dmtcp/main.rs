//! A fake of DMTCP 4.2.0's four command-line tools, for the tests of
//! ckptrun that need what the real DMTCP cannot be made to do on demand (a
//! coordinator that fails to start or never writes its port, a checkpoint
//! that never completes, a late join, ...). Everything else is tested
//! against the real DMTCP (tests/dmtcp_real.rs, tests/dmtcp_harness.rs).
//! One binary; what it does depends on the name it runs under (the tests
//! install it as an install tree, `bin/` beside `lib/dmtcp/`, see
//! tests/common/mod.rs).
//!
//! A fake cannot checkpoint an arbitrary process: only a program that links
//! the client side in `proto.rs` (examples/dmtcp_job.rs) joins the
//! coordinator and writes images; anything else launched just runs.
//!
//! # What it does as the real 4.2.0 does (seen, or read in its source)
//!
//! Command lines, parsed as the real tools parse them: options before
//! PROGRAM or the images only, no `--opt=value` form, `-pN` for a port;
//! `-q`/`--quiet` (repeatable) taken by the coordinator, dmtcp_launch and
//! dmtcp_restart (DMTCP_QUIET is passed on to the program). A word starting
//! with `-` that is not an option, and `--` before PROGRAM, is `Invalid
//! Argument` and the usage on *stdout*, exit 99 (launch, restart); the
//! coordinator prints its usage on stderr and exits 1.
//!
//! - `dmtcp_coordinator`: `--daemon` redirects its stdio to /dev/null,
//!   forks, and the process started exits 0; the daemon stays in the
//!   caller's session and process group (4.2.0 does not call setsid). The
//!   port file (`--port-file`, mode 0600, decimal, no newline, fsync'd) is
//!   written *before* the fork. Not quiet, it prints its banner on stderr.
//!   It overwrites its argv[0] with ` -p7779` (or ` --port 7779` where that
//!   fits) and its name (comm) with `dmtcp_coor:7779`, whatever its port
//!   (7779 or DMTCP_COORD_PORT, read before its options). With
//!   `--exit-on-last --daemon` it blocks every signal but SIGALRM: only
//!   SIGKILL ends it (the fake blocks them before its fork, 4.2.0 just
//!   after: a window of microseconds that nothing may rely on). It exits 0 when told to quit, and, with
//!   `--exit-on-last`, when its last client has gone; then it removes its
//!   port file. `--kill-after-ckpt`: every checkpoint ends the computation.
//! - `dmtcp_command`: leading dashes are dropped and the first letter is
//!   the command, the last one given wins: `--quiet` and `-q` mean *quit*.
//!   `-kc`/`--kcheckpoint` sends `K` then `c`: the second finds the
//!   checkpoint under way, so it exits 2 printing `Computation was
//!   checkpointed and killed.` on stdout, as soon as the checkpoint has
//!   begun (also when there was nothing to checkpoint). `--bcheckpoint`
//!   sends `b`, which 4.2.0's coordinator does not know, then `c`: it does
//!   not block, and exits 0 once the checkpoint has begun. A checkpoint
//!   request while one is under way, or with no process, is `Error,
//!   computation not in running state...` on stderr, exit 2. No
//!   coordinator: `Coordinator not found...` on stderr, exit 2. `--status`
//!   prints `Coordinator:`, `  Host: H`, `  Port: P`, `Status...`,
//!   `  NUM_PEERS=N`, `  RUNNING=yes|no` (no while a checkpoint is under way
//!   or nothing runs), `  CKPT_INTERVAL=0 (checkpoint manually)`. `--quit`
//!   does not wait for an answer. Usage errors and `--help`: exit 1.
//! - `dmtcp_launch`: with `--join-coordinator` and no coordinator:
//!   `Coordinator not found, but --join was specified. Exiting.`, exit 99.
//!   It execs the program (same pid). A program not found: exit 99.
//! - Checkpoints: the image `ckpt_<name>_<id>.dmtcp` is written as
//!   `<image>.temp` and renamed when complete; once every process's image
//!   is complete the coordinator writes `dmtcp_restart_script_<id>.sh`
//!   in its `--ckptdir` and then the symlink `dmtcp_restart_script.sh` to
//!   it (relative). As 4.2.0 it first unlinks `dmtcp_restart_script.sh`
//!   in its *working directory*, so an older symlink in the ckptdir stays.
//!   A process asked to exit after the checkpoint (`K`, `--kill-after-ckpt`)
//!   exits 0 as soon as its image is complete and reported, before the
//!   coordinator writes the script. `K` is remembered when no checkpoint
//!   can begin (nothing runs, or one is under way) until a checkpoint is
//!   complete or the first process joins: a `K` sent before the job
//!   joined, then a `c` after, is a checkpoint the computation runs on
//!   from (seen of 4.2.0). Killed (`--kill`, `--quit`), processes exit 0.
//!   A process whose coordinator dies exits 99 (`Did DMTCP coordinator die
//!   uncleanly?` on its stderr). A process joining while a checkpoint is
//!   under way takes part in it.
//! - `dmtcp_restart`: images must end in `.dmtcp` (`*_files` arguments are
//!   skipped), exist and belong to the user unless `--no-strict-checking`
//!   (exit 99 otherwise); as root, unless given `--quiet` twice or
//!   `--no-strict-checking`, it warns on stderr. Files the program held
//!   open for writing on descriptors 3 and up (O_WRONLY, O_RDWR or
//!   O_APPEND) are cut back to their size at the checkpoint when larger
//!   (one missing is created at that size if it was write-only, else the
//!   restart fails, exit 99); descriptors 0-2 are never cut back, nor
//!   files the program reopens per write. Then it execs the program (same
//!   pid), which restores its state from the image and goes on.
//!
//! # Where the fake differs from DMTCP
//!
//! - Its coordinator listens on 127.0.0.1 only; the real one on every
//!   interface. It reads no commands from its stdin.
//! - It cannot start a coordinator: dmtcp_launch/dmtcp_restart without one
//!   (no `--join-coordinator`) exit 99 instead.
//! - dmtcp_launch joins the coordinator from the program (proto.rs), after
//!   the exec, not before; dmtcp_restart's process counts as running at
//!   once (the real one is RESTARTING, RUNNING=no, until restored).
//! - `dmtcp_restart` takes one image (the fake restarts one process). The
//!   restarted program gets dmtcp_restart's environment, working directory
//!   and descriptors, and starts again from `main` with the state in its
//!   image; the real one restores memory, descriptors and environment.
//! - The image is not gzip-compressed and holds no memory (see proto.rs);
//!   no copies of files are saved beside it (`ckpt_*_files/`); the restart
//!   script is a short sh script, not DMTCP's.
//! - A process that dies or fails during a checkpoint abandons it: no
//!   restart script is written.
//! - Options that would change what the fake cannot model are refused
//!   (`... is not implemented by this fake`, exit 99, or 1 for the
//!   coordinator): `--checkpoint-open-files`, `--pathvirt`, plugins,
//!   `--new-coordinator`, `--timeout`, `--status-file`, ...; options with
//!   no effect here (`--gzip`, `--tmpdir`, `--coord-logfile`, ...) are
//!   accepted and ignored. Messages are shorter than DMTCP's, without its
//!   backtraces.
//!
//! # Fault injection (what the real DMTCP does not do on demand)
//!
//! - `FAKE_DMTCP_COORD_FAIL=1`: the coordinator prints an error and exits
//!   3 before binding.
//! - `FAKE_DMTCP_PORT_DELAY_MS=N`: with `--daemon`, the port file is
//!   written by the daemon N ms after the process started has exited.
//! - `FAKE_DMTCP_SCRIPT_DELAY_MS=N`: the coordinator writes the restart
//!   script N ms after the last image is complete.
//! - `FAKE_DMTCP_COMMAND_GAP_MS=N`: dmtcp_command waits N ms between the
//!   two requests of `--kcheckpoint` (`K`, then `c`) and `--bcheckpoint`.
//! - Read by the job's client side (proto.rs): `FAKE_DMTCP_IMAGE_KB` [64],
//!   `FAKE_DMTCP_WRITE_MS_PER_MB` [0] (a slow image),
//!   `FAKE_DMTCP_FREEZE_MS` [20] (frozen that long after its image),
//!   `FAKE_DMTCP_NEVER_COMPLETE=1` (the `.temp` image is written, then the
//!   process stays frozen), `FAKE_DMTCP_JOIN_DELAY_MS` [0] (joins the
//!   coordinator that much later), `FAKE_DMTCP_NO_EXIT_AFTER_CKPT=1` (asked
//!   to exit after its checkpoint, it runs on).
//! - `FAKE_DMTCP_TRACE=FILE`: `joined NS`, `ckpt-start NS` and
//!   `ckpt-complete NS` lines appended (wall clock), for
//!   scripts/bench-dmtcp.sh.

mod proto;

use std::ffi::{OsStr, OsString};
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proto::{ENV_CKPTDIR, ENV_COORD, ENV_PROGRAM, ENV_RESTORE, Image};

const TOOLS: &str = "dmtcp_coordinator, dmtcp_launch, dmtcp_command or dmtcp_restart";
const DEFAULT_PORT: u16 = 7779;
/// dmtcp_launch's and dmtcp_restart's own failures (DMTCP_FAIL_RC).
const FAIL: i32 = 99;
const ENV_HOST: &str = "DMTCP_COORD_HOST";
const ENV_PORT: &str = "DMTCP_COORD_PORT";

fn main() {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let tool = Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<OsString> = args.collect();
    match tool.as_str() {
        "dmtcp_coordinator" => coordinator(args),
        "dmtcp_launch" => launch(args),
        "dmtcp_command" => command(args),
        "dmtcp_restart" => restart(args),
        _ => {
            eprintln!("fake_dmtcp: run me as {TOOLS} (hard link or copy me under that name)");
            exit(2);
        }
    }
}

// ---------------------------------------------------------------------------
// Command lines, read as DMTCP reads them: one word at a time, an option's
// value the next word.

struct Words {
    words: Vec<OsString>,
    at: usize,
}

impl Words {
    fn new(words: Vec<OsString>) -> Self {
        Self { words, at: 0 }
    }

    /// The current word, if any.
    fn peek(&self) -> Option<&OsStr> {
        self.words.get(self.at).map(OsString::as_os_str)
    }

    /// Whether the current word is one of `names` and has a value after it.
    fn with_value(&self, names: &[&str]) -> bool {
        self.is(names) && self.at + 1 < self.words.len()
    }

    fn is(&self, names: &[&str]) -> bool {
        self.peek()
            .is_some_and(|w| names.iter().any(|n| w.as_bytes() == n.as_bytes()))
    }

    /// The current word's value (the next word); moves past both.
    fn value(&mut self) -> OsString {
        let value = self.words[self.at + 1].clone();
        self.at += 2;
        value
    }

    fn skip(&mut self) {
        self.at += 1;
    }

    /// `-pN`, `-iN`: the digits after `-x`, if the current word is that.
    fn attached_number(&self, letter: u8) -> Option<OsString> {
        let w = self.peek()?.as_bytes();
        (w.len() > 2 && w[0] == b'-' && w[1] == letter && w[2].is_ascii_digit())
            .then(|| OsStr::from_bytes(&w[2..]).to_owned())
    }

    fn rest(self) -> Vec<OsString> {
        self.words[self.at..].to_vec()
    }

    fn left(&self) -> usize {
        self.words.len() - self.at
    }
}

fn looks_like_option(word: &OsStr) -> bool {
    let w = word.as_bytes();
    w.len() > 1 && w[0] == b'-'
}

fn parse_port(value: &OsStr) -> Option<u16> {
    value.to_str()?.trim().parse().ok()
}

fn fail(tool: &str, code: i32, why: &str) -> ! {
    eprintln!("{tool}: {why}");
    exit(code);
}

/// An option this fake does not model: refused, so that a test relying on
/// it fails loudly.
fn not_implemented(tool: &str, code: i32, option: &OsStr) -> ! {
    fail(
        tool,
        code,
        &format!(
            "{} is not implemented by this fake (examples/fake_dmtcp)",
            option.to_string_lossy()
        ),
    )
}

/// `Invalid Argument` and the usage on stdout, exit 99: dmtcp_launch's and
/// dmtcp_restart's answer to an option they do not know.
fn invalid_argument(usage: &str) -> ! {
    print!("Invalid Argument\n{usage}");
    let _ = std::io::stdout().flush();
    exit(FAIL);
}

/// The coordinator's host and port as the tools take them: options, else
/// DMTCP_COORD_HOST and DMTCP_COORD_PORT, else localhost:7779.
struct Address {
    host: Option<String>,
    port: Option<String>,
}

impl Address {
    fn from_env() -> Self {
        Self {
            host: std::env::var(ENV_HOST).ok().filter(|h| !h.is_empty()),
            port: std::env::var(ENV_PORT).ok().filter(|p| !p.is_empty()),
        }
    }

    /// Where to connect: the fake's coordinator listens on 127.0.0.1.
    fn host(&self) -> &str {
        match self.host.as_deref() {
            None | Some("localhost") => "127.0.0.1",
            Some(h) => h,
        }
    }

    fn port(&self) -> Option<u16> {
        match &self.port {
            None => Some(DEFAULT_PORT),
            Some(p) => parse_port(OsStr::new(p)),
        }
    }
}

/// Whether a coordinator answers at the address (a status request).
fn reachable(address: &Address) -> Result<u16, String> {
    let port = address.port().ok_or("bad port")?;
    match proto::command(address.host(), port, "s") {
        Ok(reply) if reply.starts_with("ok") => Ok(port),
        Ok(reply) => Err(format!("unexpected reply {reply:?}")),
        Err(why) => Err(why),
    }
}

/// Exits 99 unless a coordinator answers (the fake cannot start one).
fn require_coordinator(tool: &str, address: &Address, join: bool) -> u16 {
    match reachable(address) {
        Ok(port) => port,
        Err(_) if join => fail(
            tool,
            FAIL,
            "Coordinator not found, but --join was specified. Exiting.",
        ),
        Err(why) => fail(
            tool,
            FAIL,
            &format!("no coordinator, and this fake cannot start one: {why}"),
        ),
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// DMTCP_QUIET, raised by one for each `--quiet`.
fn quieter(quiet: &mut u32) {
    *quiet += 1;
}

fn quiet_from_env() -> u32 {
    std::env::var("DMTCP_QUIET")
        .ok()
        .and_then(|q| q.parse().ok())
        .unwrap_or(0)
}

/// `--port-file F` of dmtcp_launch and dmtcp_restart: the coordinator's
/// port, as the coordinator writes it.
fn write_port_file(tool: &str, file: &Path, port: u16) {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)
        .and_then(|mut f| {
            f.write_all(port.to_string().as_bytes())?;
            f.sync_all()
        })
        .unwrap_or_else(|e| fail(tool, FAIL, &format!("{}: {e}", file.display())));
}

/// The options dmtcp_launch and dmtcp_restart share: how to reach the
/// coordinator, where images go, how quiet to be.
struct ClientOptions {
    address: Address,
    join: bool,
    ckptdir: Option<OsString>,
    port_file: Option<PathBuf>,
    quiet: u32,
}

impl ClientOptions {
    fn new() -> Self {
        Self {
            address: Address::from_env(),
            join: false,
            ckptdir: std::env::var_os("DMTCP_CHECKPOINT_DIR"),
            port_file: None,
            quiet: quiet_from_env(),
        }
    }

    /// The coordinator's port (see `require_coordinator`), also written to
    /// `--port-file`.
    fn coordinator(&self, tool: &str) -> u16 {
        let port = require_coordinator(tool, &self.address, self.join);
        if let Some(file) = &self.port_file {
            write_port_file(tool, file, port);
        }
        port
    }

    /// Takes the option at `words` if it is one of the shared ones.
    fn take(&mut self, words: &mut Words) -> bool {
        if words.is(&["-j", "--join-coordinator", "--join"]) {
            self.join = true;
            words.skip();
        } else if words.is(&["--any-coordinator"]) {
            words.skip();
        } else if words.is(&["-i", "--interval", "--coord-logfile"]) {
            // Their value is taken whether or not there is one, as DMTCP does.
            words.at += 2;
        } else if words.attached_number(b'i').is_some() {
            words.skip();
        } else if words.with_value(&["-h", "--coord-host", "--host"]) {
            self.address.host = Some(words.value().to_string_lossy().into_owned());
        } else if words.with_value(&["-p", "--coord-port", "--port"]) {
            self.address.port = Some(words.value().to_string_lossy().into_owned());
        } else if let Some(port) = words.attached_number(b'p') {
            self.address.port = Some(port.to_string_lossy().into_owned());
            words.skip();
        } else if words.with_value(&["--port-file"]) {
            self.port_file = Some(PathBuf::from(words.value()));
        } else if words.with_value(&["-c", "--ckptdir"]) {
            self.ckptdir = Some(words.value());
        } else if words.with_value(&["-t", "--tmpdir"]) {
            words.value();
        } else if words.is(&["-q", "--quiet"]) {
            quieter(&mut self.quiet);
            words.skip();
        } else {
            return false;
        }
        true
    }
}

// ---------------------------------------------------------------------------
// dmtcp_launch

const LAUNCH_USAGE: &str = "Usage: dmtcp_launch [OPTIONS] <command> [args...]\n\
Start a process under DMTCP control. (fake: examples/fake_dmtcp)\n";

fn launch(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_launch";
    let mut client = ClientOptions::new();
    let mut words = Words::new(args);
    while let Some(word) = words.peek() {
        let word = word.to_owned();
        if words.is(&["--help"]) && words.left() == 1 {
            print!("{LAUNCH_USAGE}");
            exit(0);
        } else if client.take(&mut words) {
        } else if words.is(&["--gzip", "--no-gzip"]) {
            words.skip();
        } else if words.is(&[
            "--new-coordinator",
            "--ckpt-signal",
            "--checkpoint-open-files",
            "--ckpt-open-files",
            "--allow-file-overwrite",
            "--modify-env",
            "--pathvirt",
            "--disable-alloc-plugin",
            "--disable-dl-plugin",
            "--no-plugins",
            "--disable-all-plugins",
            "--with-plugin",
            "--kernel-loader",
            "--version",
        ]) {
            not_implemented(TOOL, FAIL, &word);
        } else if looks_like_option(&word) {
            // `--` too: DMTCP 4.2.0 does not take it before PROGRAM.
            invalid_argument(LAUNCH_USAGE);
        } else {
            break;
        }
    }
    let rest = words.rest();
    let Some((program, program_args)) = rest.split_first() else {
        eprint!("{LAUNCH_USAGE}");
        exit(FAIL);
    };

    let port = client.coordinator(TOOL);
    let ckptdir = match client.ckptdir {
        Some(dir) => absolute(Path::new(&dir)),
        None => std::env::current_dir()
            .unwrap_or_else(|e| fail(TOOL, FAIL, &format!("current directory: {e}"))),
    };
    let Some(resolved) = resolve(program) else {
        if client.quiet < 2 {
            eprintln!("{TOOL}: {}: command not found", program.to_string_lossy());
        }
        exit(FAIL);
    };
    // exec, as the real one does: the program keeps this pid. Its argv[0]
    // is PROGRAM as given.
    let err = Command::new(&resolved)
        .arg0(program)
        .args(program_args)
        .env(ENV_COORD, format!("{}:{port}", client.address.host()))
        .env(ENV_CKPTDIR, &ckptdir)
        .env(ENV_PROGRAM, &resolved)
        .env("DMTCP_QUIET", client.quiet.to_string())
        .env_remove(ENV_RESTORE)
        .exec();
    fail(TOOL, FAIL, &format!("{}: {err}", resolved.display()));
}

/// execvp's search: PROGRAM itself if it holds a `/`, else the first
/// executable regular file of that name in PATH; made absolute.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        let path = absolute(Path::new(program));
        return is_executable(&path).then_some(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/bin:/usr/bin".into());
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { b"." } else { dir };
            Path::new(OsStr::from_bytes(dir)).join(program)
        })
        .find(|candidate| is_executable(candidate))
        .map(|found| absolute(&found))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c_path is a valid NUL-terminated string.
    path.is_file() && unsafe { libc::access(c_path.as_ptr(), libc::X_OK) } == 0
}

// ---------------------------------------------------------------------------
// dmtcp_restart

const RESTART_USAGE: &str = "Usage:       dmtcp_restart [OPTIONS] <ckpt1.dmtcp> [ckpt2.dmtcp...]\n\
Restart processes from a checkpoint image. (fake: examples/fake_dmtcp)\n";

fn restart(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_restart";
    if args.is_empty() {
        println!("dmtcp_restart (DMTCP) 4.2.0 (fake: examples/fake_dmtcp)");
        exit(FAIL);
    }
    let mut client = ClientOptions::new();
    let mut no_strict = false;
    let mut restart_dir = None;
    let mut words = Words::new(args);
    while let Some(word) = words.peek() {
        let word = word.to_owned();
        if words.is(&["--help"]) && words.left() == 1 {
            print!("{RESTART_USAGE}");
            exit(0);
        } else if client.take(&mut words) {
        } else if words.is(&["--no-strict-checking"]) {
            no_strict = true;
            words.skip();
        } else if words.with_value(&["-r", "--restartdir"]) {
            restart_dir = Some(PathBuf::from(words.value()));
        } else if words.is(&[
            "--new-coordinator",
            "--debug-restart-pause",
            "--gdb",
            "--version",
        ]) {
            not_implemented(TOOL, FAIL, &word);
        } else if looks_like_option(&word) {
            invalid_argument(RESTART_USAGE);
        } else {
            break;
        }
    }
    if client.quiet < 2 && !no_strict && rustix_is_root() {
        eprint!(
            "WARNING:  Running dmtcp_restart as root can be dangerous.\n  \
             An unknown checkpoint image or bugs in DMTCP may lead to unforeseen\n  \
             consequences.  Continuing as root ....\n"
        );
    }
    let rest = words.rest();
    // Images, or --restartdir: one of the two.
    if restart_dir.is_some() != rest.is_empty() {
        eprint!("{RESTART_USAGE}");
        exit(FAIL);
    }
    let candidates: Vec<PathBuf> = match &restart_dir {
        Some(dir) => std::fs::read_dir(dir)
            .unwrap_or_else(|e| fail(TOOL, FAIL, &format!("{}: {e}", dir.display())))
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.as_os_str().as_bytes().ends_with(b".dmtcp"))
            .collect(),
        None => rest.iter().map(PathBuf::from).collect(),
    };
    let mut images = Vec::new();
    for image in candidates {
        let meta = std::fs::metadata(&image)
            .unwrap_or_else(|e| fail(TOOL, FAIL, &format!("{}: {e}", image.display())));
        let name = image.as_os_str().as_bytes();
        if name.ends_with(b"_files") {
            continue;
        }
        if !name.ends_with(b".dmtcp") {
            eprint!("{RESTART_USAGE}");
            exit(FAIL);
        }
        // SAFETY: getuid has no arguments and cannot fail.
        if meta.uid() != unsafe { libc::getuid() } && !no_strict {
            fail(
                TOOL,
                FAIL,
                &format!(
                    "{}: Process uid doesn't match uid of checkpoint image. Aborting \
                     (--no-strict-checking allows it)",
                    image.display()
                ),
            );
        }
        images.push(absolute(&image));
    }
    let image_path = match &images[..] {
        [] => {
            eprint!("{RESTART_USAGE}");
            exit(FAIL);
        }
        [one] => one.clone(),
        _ => fail(
            TOOL,
            FAIL,
            &format!(
                "{} images given: this fake restarts one process only",
                images.len()
            ),
        ),
    };
    let image = Image::read(&image_path)
        .unwrap_or_else(|why| fail(TOOL, FAIL, &format!("{}: {why}", image_path.display())));
    let port = client.coordinator(TOOL);
    restore_files(TOOL, &image);

    let ckptdir = client
        .ckptdir
        .map_or_else(|| image.ckptdir.clone(), |d| absolute(Path::new(&d)));
    let err = Command::new(&image.program)
        .arg0(&image.argv[0])
        .args(&image.argv[1..])
        .env(ENV_COORD, format!("{}:{port}", client.address.host()))
        .env(ENV_CKPTDIR, &ckptdir)
        .env(ENV_PROGRAM, &image.program)
        .env(ENV_RESTORE, &image_path)
        .env("DMTCP_QUIET", client.quiet.to_string())
        .exec();
    fail(TOOL, FAIL, &format!("{}: {err}", image.program.display()));
}

fn rustix_is_root() -> bool {
    // SAFETY: getuid and geteuid have no arguments and cannot fail.
    unsafe { libc::getuid() == 0 || libc::geteuid() == 0 }
}

/// The files the program held open for writing (descriptors 3 and up), as
/// DMTCP's FileConnection::refill() leaves them at a restart: cut back to
/// their size at the checkpoint when larger; a missing write-only one
/// created at that size; any other missing one is a failed restart.
fn restore_files(tool: &str, image: &Image) {
    for file in &image.files {
        let writes = file.flags & (libc::O_APPEND | libc::O_WRONLY | libc::O_RDWR) != 0;
        match std::fs::metadata(&file.path) {
            Ok(meta) if meta.is_file() && meta.len() > file.size && writes => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&file.path)
                    .and_then(|f| f.set_len(file.size))
                    .unwrap_or_else(|e| {
                        fail(
                            tool,
                            FAIL,
                            &format!("truncating {} to {}: {e}", file.path.display(), file.size),
                        )
                    });
            }
            Ok(_) => {}
            Err(_) if file.flags & libc::O_ACCMODE == libc::O_WRONLY => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&file.path)
                    .and_then(|f| f.set_len(file.size))
                    .unwrap_or_else(|e| fail(tool, FAIL, &format!("{}: {e}", file.path.display())));
            }
            Err(_) => fail(
                tool,
                FAIL,
                &format!("{}: File not found.", file.path.display()),
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// dmtcp_command

const COMMAND_USAGE: &str = "Usage:  dmtcp_command [OPTIONS] COMMAND [COMMAND...]\n\
Send a command to the dmtcp_coordinator remotely. (fake: examples/fake_dmtcp)\n\n\
Commands for Coordinator:\n\
\x20   -s, --status:          Print status message\n\
\x20   -l, --list:            List connected clients\n\
\x20   -c, --checkpoint:      Checkpoint all nodes\n\
\x20   -bc, --bcheckpoint:    Checkpoint all nodes, dmtcp_command blocks until done\n\
\x20   -kc, --kcheckpoint     Checkpoint all nodes, kill all nodes when done\n\
\x20   -i, --interval <val>   Update ckpt interval to <val> seconds (0=never)\n\
\x20   -k, --kill             Kill all nodes\n\
\x20   -q, --quit             Kill all nodes and quit\n";

/// What the coordinator answered one request.
enum Answer {
    Ok(String),
    NotFound,
    Invalid,
    NotRunning,
}

fn ask(address: &Address, request: &str) -> Answer {
    let Some(port) = address.port() else {
        return Answer::NotFound;
    };
    if request.starts_with('q') {
        // As dmtcp_command does: the coordinator closes the connection
        // without an answer.
        return match proto::send_only(address.host(), port, request) {
            Ok(()) => Answer::Ok(String::new()),
            Err(_) => Answer::NotFound,
        };
    }
    match proto::command(address.host(), port, request) {
        Err(_) => Answer::NotFound,
        Ok(reply) => match reply.split_once(' ').unwrap_or((&reply, "")) {
            ("ok", text) => Answer::Ok(text.to_string()),
            ("err", "not-running") => Answer::NotRunning,
            _ => Answer::Invalid,
        },
    }
}

fn command(args: Vec<OsString>) -> ! {
    let usage_error = || -> ! {
        eprint!("{COMMAND_USAGE}");
        exit(1);
    };
    let mut address = Address::from_env();
    let mut request = String::from("h");
    let mut interval = String::new();
    let mut words = Words::new(args);
    while let Some(word) = words.peek() {
        let word = word.to_owned();
        let last = words.left() == 1;
        if words.is(&["--help", "-h"]) && last {
            print!("{COMMAND_USAGE}");
            exit(1);
        } else if words.is(&["--version"]) && last {
            println!("dmtcp_command (DMTCP) 4.2.0 (fake: examples/fake_dmtcp)");
            exit(1);
        } else if words.with_value(&["-h", "--coord-host", "--host"]) {
            // dmtcp_command passes them on through the environment.
            address.host = Some(words.value().to_string_lossy().into_owned());
            // SAFETY: single-threaded; nothing reads the environment meanwhile.
            unsafe { std::env::set_var(ENV_HOST, address.host.as_deref().unwrap_or_default()) };
        } else if words.with_value(&["-p", "--coord-port", "--port"]) {
            address.port = Some(words.value().to_string_lossy().into_owned());
            // SAFETY: as above.
            unsafe { std::env::set_var(ENV_PORT, address.port.as_deref().unwrap_or_default()) };
        } else if let Some(port) = words.attached_number(b'p') {
            address.port = Some(port.to_string_lossy().into_owned());
            // SAFETY: as above.
            unsafe { std::env::set_var(ENV_PORT, address.port.as_deref().unwrap_or_default()) };
            words.skip();
        } else if words.is(&["h", "-h", "--help", "?"]) {
            usage_error();
        } else {
            // Leading dashes dropped; the first letter is the command (its
            // second one must be `c` for `b` and `K`): `--quiet` is quit.
            let mut cmd = word.to_string_lossy().trim_start_matches('-').to_string();
            if cmd.starts_with("kc") {
                cmd.replace_range(0..1, "K");
            }
            let mut letters = cmd.chars();
            let (first, second) = (letters.next(), letters.next());
            match first {
                Some('b' | 'K') if second != Some('c') => usage_error(),
                Some('s' | 'i' | 'c' | 'b' | 'K' | 'k' | 'q' | 'l') => {}
                _ => usage_error(),
            }
            if first == Some('i') {
                if second.is_some_and(|c| c.is_ascii_digit()) {
                    interval = cmd[1..].to_string();
                } else {
                    if last {
                        usage_error();
                    }
                    words.skip();
                    interval = words.peek().unwrap().to_string_lossy().into_owned();
                }
            }
            request = cmd;
            words.skip();
        }
    }

    let letter = request.chars().next().unwrap_or('h');
    let answer = match letter {
        'h' => usage_error(),
        'i' => ask(&address, &format!("i {interval}")),
        // A prefix, then the checkpoint itself; the second answer counts.
        'b' | 'K' => {
            let _ = ask(&address, &letter.to_string());
            let gap = proto::env_num("FAKE_DMTCP_COMMAND_GAP_MS", 0);
            if gap > 0 {
                std::thread::sleep(Duration::from_millis(gap));
            }
            ask(&address, "c")
        }
        other => ask(&address, &other.to_string()),
    };
    let text = match answer {
        Answer::Ok(text) => text,
        Answer::NotFound => {
            if std::env::var_os(ENV_PORT).is_some() || std::env::var_os("DMTCP_PORT").is_some() {
                eprintln!("Coordinator not found. Please check port and host.");
            } else {
                eprintln!("Coordinator not found. Try specifying port with '--port'.");
            }
            exit(2);
        }
        Answer::Invalid => {
            eprintln!("Unknown command: {letter}, try 'dmtcp_command --help'");
            exit(2);
        }
        Answer::NotRunning if letter == 'K' => {
            println!("Computation was checkpointed and killed.");
            exit(2);
        }
        Answer::NotRunning => {
            eprint!(
                "Error, computation not in running state.  Either a checkpoint is\n \
                 currently happening or there are no connected processes.\n"
            );
            exit(2);
        }
    };
    match letter {
        'i' => println!("Interval changed to {interval}"),
        's' | 'l' => {
            println!("Coordinator:");
            let host = std::env::var(ENV_HOST).unwrap_or_else(|_| "localhost".into());
            println!("  Host: {host}");
            match std::env::var(ENV_PORT) {
                Ok(port) => println!("  Port: {port}"),
                Err(_) => println!("  Port: {DEFAULT_PORT} (default port)"),
            }
            if letter == 's' {
                let field = |key: &str| {
                    text.split_whitespace()
                        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
                        .unwrap_or("0")
                        .to_string()
                };
                println!("Status...");
                println!("  NUM_PEERS={}", field("NUM_PEERS"));
                println!("  RUNNING={}", field("RUNNING"));
                match field("CKPT_INTERVAL").as_str() {
                    "0" => println!("  CKPT_INTERVAL=0 (checkpoint manually)"),
                    n => println!("  CKPT_INTERVAL={n}"),
                }
            } else {
                let list = proto::unhex(&text).unwrap_or_default();
                print!("{}", String::from_utf8_lossy(&list));
            }
        }
        _ => {}
    }
    exit(0);
}

// ---------------------------------------------------------------------------
// dmtcp_coordinator

const COORDINATOR_USAGE: &str = "Usage: dmtcp_coordinator [OPTIONS] [port]\n\
Coordinates checkpoints between multiple processes. (fake: examples/fake_dmtcp)\n";

/// A joined process.
struct Client {
    conn: u64,
    pid: i32,
    id: String,
    name: String,
    /// For sending it `ckpt` and `kill`.
    stream: TcpStream,
}

/// A checkpoint under way.
struct InProgress {
    /// Connections that have not answered `done` yet.
    waiting: Vec<u64>,
    images: Vec<PathBuf>,
    /// The first client's id, which names the restart script.
    id: String,
}

#[derive(Default)]
struct State {
    clients: Vec<Client>,
    ckpt: Option<InProgress>,
    next_conn: u64,
    /// Seconds between checkpoints; 0: none.
    interval: u64,
    /// `K` was asked: the next checkpoint ends the computation, even if it
    /// could not begin then (4.2.0's killAfterCkptOnce; cleared when a
    /// checkpoint is complete, and when the first process joins).
    kill_once: bool,
}

struct Hub {
    state: Mutex<State>,
    ckptdir: PathBuf,
    port_file: Option<PathBuf>,
    exit_on_last: bool,
    kill_after_ckpt: bool,
}

/// The coordinator's settings, as given.
struct Settings {
    quiet: u32,
    exit_on_last: bool,
    kill_after_ckpt: bool,
    daemon: bool,
    interval: u64,
    port: u16,
    port_file: Option<PathBuf>,
    ckptdir: PathBuf,
}

fn coordinator(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_coordinator";
    // Read before the options, as DMTCP's CoordFlags does.
    let env_port = std::env::var(ENV_PORT)
        .ok()
        .and_then(|p| parse_port(OsStr::new(&p)));
    rename_like_dmtcp(env_port.unwrap_or(DEFAULT_PORT));
    let usage = || -> ! {
        eprint!("{COORDINATOR_USAGE}");
        exit(1);
    };
    let mut s = Settings {
        quiet: 0,
        exit_on_last: false,
        kill_after_ckpt: false,
        daemon: false,
        interval: 0,
        port: env_port.unwrap_or(DEFAULT_PORT),
        port_file: None,
        ckptdir: std::env::var_os("DMTCP_CHECKPOINT_DIR").map_or_else(|| ".".into(), PathBuf::from),
    };
    let mut words = Words::new(args);
    while let Some(word) = words.peek() {
        let word = word.to_owned();
        if words.is(&["-h", "--help"]) {
            print!("{COORDINATOR_USAGE}");
            exit(0);
        } else if words.is(&["-q", "--quiet"]) {
            s.quiet += 1;
            words.skip();
        } else if words.is(&["--exit-on-last"]) {
            s.exit_on_last = true;
            words.skip();
        } else if words.is(&["--kill-after-ckpt"]) {
            s.kill_after_ckpt = true;
            words.skip();
        } else if words.is(&["--daemon"]) {
            s.daemon = true;
            words.skip();
        } else if words.with_value(&["-i", "--interval"]) {
            s.interval = words
                .value()
                .to_str()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        } else if let Some(n) = words.attached_number(b'i') {
            s.interval = n.to_str().and_then(|v| v.parse().ok()).unwrap_or(0);
            words.skip();
        } else if words.with_value(&["-p", "--port", "--coord-port"]) {
            s.port = parse_port(&words.value()).unwrap_or_else(|| usage());
        } else if let Some(port) = words.attached_number(b'p') {
            s.port = parse_port(&port).unwrap_or_else(|| usage());
            words.skip();
        } else if words.with_value(&["--port-file"]) {
            s.port_file = Some(PathBuf::from(words.value()));
        } else if words.with_value(&["-c", "--ckptdir"]) {
            s.ckptdir = PathBuf::from(words.value());
        } else if words.with_value(&["-t", "--tmpdir"]) {
            words.value();
        } else if words.is(&["--write-kv-data"]) {
            words.skip();
        } else if words.is(&[
            "--timeout",
            "--stale-timeout",
            "--coord-logfile",
            "--status-file",
            "--version",
        ]) {
            not_implemented(TOOL, 1, &word);
        } else if words.left() == 1
            && !word.is_empty()
            && word.as_bytes().iter().all(u8::is_ascii_digit)
        {
            // The last word may be the port.
            s.port = parse_port(&word).unwrap_or_else(|| usage());
            words.skip();
        } else {
            usage();
        }
    }
    if proto::env_num("FAKE_DMTCP_COORD_FAIL", 0) == 1 {
        fail(
            TOOL,
            3,
            "FAKE_DMTCP_COORD_FAIL=1: failing to start, as asked",
        );
    }
    let listener = TcpListener::bind(("127.0.0.1", s.port)).unwrap_or_else(|e| {
        fail(
            TOOL,
            1,
            &format!("Failed to create listen socket on port {}: {e}", s.port),
        )
    });
    let port = listener.local_addr().map_or(s.port, |a| a.port());
    let port_delay = match s.daemon {
        true => proto::env_num("FAKE_DMTCP_PORT_DELAY_MS", 0),
        false => 0,
    };
    if port_delay == 0 {
        coordinator_port_file(&s, port);
    }
    if s.quiet == 0 {
        eprint!(
            "dmtcp_coordinator starting... (fake)\n    Host: localhost (127.0.0.1)\n    \
             Port: {port}\n    Checkpoint Interval: {}\n    Exit on last client: {}\n",
            match s.interval {
                0 => "disabled (checkpoint manually instead)".to_string(),
                n => n.to_string(),
            },
            u8::from(s.exit_on_last)
        );
    }
    if s.exit_on_last && s.daemon {
        // As DMTCP: everything but SIGALRM blocked (threads inherit it).
        // Before the fork, so the daemon has them blocked from its first
        // instruction: 4.2.0 blocks them just after its fork, and a
        // signal sent as soon as the process started has exited (as a
        // test does) could land in between, more often here than there.
        // SAFETY: sigfillset/sigdelset initialise the set; sigprocmask reads it.
        unsafe {
            let mut set = std::mem::zeroed();
            libc::sigfillset(&mut set);
            libc::sigdelset(&mut set, libc::SIGALRM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
    }
    if s.daemon {
        if s.quiet == 0 {
            eprintln!("Backgrounding...");
        }
        // Like the real one: nothing of the caller's stdio is kept, and no
        // new session.
        to_dev_null(&[0, 1, 2]);
        // SAFETY: no other thread exists yet; the child only goes on in Rust.
        match unsafe { libc::fork() } {
            -1 => fail(TOOL, 1, "fork failed"),
            0 => {}
            _ => exit(0),
        }
        if port_delay > 0 {
            std::thread::sleep(Duration::from_millis(port_delay));
            coordinator_port_file(&s, port);
        }
    }
    let hub = Arc::new(Hub {
        state: Mutex::new(State {
            interval: s.interval,
            ..State::default()
        }),
        ckptdir: s.ckptdir.clone(),
        port_file: s.port_file.clone(),
        exit_on_last: s.exit_on_last,
        kill_after_ckpt: s.kill_after_ckpt,
    });
    {
        let hub = hub.clone();
        std::thread::spawn(move || hub.checkpoint_every_interval());
    }
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let hub = hub.clone();
        std::thread::spawn(move || hub.serve(stream));
    }
    exit(1);
}

/// The port file: created (0600, truncated), the port written in one
/// write, fsync'd, as Util::writeCoordPortToFile does.
fn coordinator_port_file(s: &Settings, port: u16) {
    if let Some(file) = &s.port_file {
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(file)
            .and_then(|mut f| {
                f.write_all(port.to_string().as_bytes())?;
                f.sync_all()
            });
        if let Err(e) = written {
            // A JWARNING in DMTCP: it goes on.
            if s.quiet < 2 {
                eprintln!(
                    "dmtcp_coordinator: Failed to open port file {}: {e}",
                    file.display()
                );
            }
        }
    }
}

/// What DMTCP 4.2.0's coordinator does to its name first thing: argv[0]
/// becomes ` --port PORT` if that fits in it, else ` -pPORT` (if that
/// does), padded with NULs; comm becomes argv[0]'s last component cut to
/// fit before `:PORT` in 15 bytes (`dmtcp_coor:7779`).
fn rename_like_dmtcp(port: u16) {
    let Some((start, end)) = arg_area() else {
        return;
    };
    // SAFETY: [start, end) is this process's argument area (from
    // /proc/self/stat), writable memory; argv[0] is its first string.
    let argv0: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let len = argv0.iter().position(|&b| b == 0).unwrap_or(argv0.len());
    let base = {
        let path = &argv0[..len];
        let at = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        path[at..].to_vec()
    };
    let mut comm = base.clone();
    let suffix = format!(":{port}");
    comm.truncate(15 - suffix.len());
    comm.extend(suffix.as_bytes());
    comm.push(0);
    // SAFETY: comm is NUL-terminated, at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr()) };

    let long = format!(" --port {port}");
    let short = format!(" -p{port}");
    let flag = if base.len() + long.len() <= len && 6 + long.len() <= len {
        long
    } else if 6 + short.len() <= len {
        short
    } else {
        return;
    };
    argv0[..len].fill(0);
    let n = flag.len().min(len - 1);
    argv0[..n].copy_from_slice(&flag.as_bytes()[..n]);
}

/// arg_start and arg_end of this process (proc(5), /proc/self/stat fields
/// 48 and 49).
fn arg_area() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after_name starts at field 3.
    let start = fields.get(48 - 3)?.parse().ok()?;
    let end = fields.get(49 - 3)?.parse().ok()?;
    (start < end).then_some((start, end))
}

/// Points each of `fds` at /dev/null.
fn to_dev_null(fds: &[i32]) {
    // SAFETY: open and dup2 with a valid path and descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for &fd in fds {
                libc::dup2(null, fd);
            }
            if !fds.contains(&null) {
                libc::close(null);
            }
        }
    }
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the coordinator as DMTCP's preExitCleanup does: the port file
    /// removed, exit 0.
    fn exit(&self) -> ! {
        if let Some(file) = &self.port_file {
            let _ = std::fs::remove_file(file);
        }
        exit(0);
    }

    /// One connection: a job (`join`) or a command (`cmd`).
    fn serve(&self, stream: TcpStream) {
        let Ok(read_half) = stream.try_clone() else {
            return;
        };
        let mut reader = BufReader::new(read_half);
        let Some(first) = proto::read_line(&mut reader) else {
            return;
        };
        if let Some(rest) = first.strip_prefix(b"join ") {
            self.serve_client(reader, stream, rest);
        } else if let Some(request) = first.strip_prefix(b"cmd ") {
            self.serve_command(stream, request);
        }
    }

    fn serve_client(&self, mut reader: BufReader<TcpStream>, mut stream: TcpStream, hello: &[u8]) {
        let hello = String::from_utf8_lossy(hello);
        let mut fields = hello.splitn(3, ' ');
        let (Some(Ok(pid)), Some(id), Some(name)) = (
            fields.next().map(str::parse::<i32>),
            fields.next(),
            fields.next(),
        ) else {
            return;
        };
        let conn = {
            let mut state = self.lock();
            if state.clients.is_empty() {
                // DMTCP's initializeComputation().
                state.kill_once = false;
            }
            // `ok` before anything else can be sent to it (under the lock).
            if stream.write_all(b"ok\n").is_err() {
                return;
            }
            state.next_conn += 1;
            let conn = state.next_conn;
            let Ok(send_half) = stream.try_clone() else {
                return;
            };
            state.clients.push(Client {
                conn,
                pid,
                id: id.to_string(),
                name: name.to_string(),
                stream: send_half,
            });
            // Joining during a checkpoint, it takes part in it (DMTCP's
            // ResendDoCheckpointMsgToWorker).
            if state.ckpt.is_some() {
                let request = format!("ckpt {}\n", u8::from(self.exits(&state)));
                let _ = stream.write_all(request.as_bytes());
                if let Some(ckpt) = state.ckpt.as_mut() {
                    ckpt.waiting.push(conn);
                }
            }
            conn
        };
        while let Some(line) = proto::read_line(&mut reader) {
            if let Some(path) = line.strip_prefix(b"done ") {
                self.image_done(conn, PathBuf::from(OsStr::from_bytes(path)));
            } else if line.starts_with(b"fail") {
                self.lock().ckpt = None; // abandoned
            }
        }
        // Gone (exited, killed, or closed the connection).
        let mut state = self.lock();
        state.clients.retain(|c| c.conn != conn);
        if state
            .ckpt
            .as_ref()
            .is_some_and(|ck| ck.waiting.contains(&conn))
        {
            state.ckpt = None; // abandoned: its image will never come
        }
        if self.exit_on_last && state.clients.is_empty() && state.ckpt.is_none() {
            self.exit();
        }
    }

    /// A process's image is complete; with the last one, the restart
    /// script and its symlink say the checkpoint is.
    fn image_done(&self, conn: u64, image: PathBuf) {
        let ckpt = {
            let mut state = self.lock();
            let Some(ckpt) = state.ckpt.as_mut() else {
                return;
            };
            let Some(at) = ckpt.waiting.iter().position(|&c| c == conn) else {
                return;
            };
            ckpt.waiting.remove(at);
            ckpt.images.push(image);
            if !ckpt.waiting.is_empty() {
                return;
            }
            // Still "under way" (RUNNING=no, no new checkpoint) until the
            // script is written.
            ckpt.images.clone()
        };
        let delay = proto::env_num("FAKE_DMTCP_SCRIPT_DELAY_MS", 0);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        let mut state = self.lock();
        let id = state
            .ckpt
            .as_ref()
            .map_or_else(String::new, |c| c.id.clone());
        if let Err(e) = self.write_restart_script(&id, &ckpt) {
            eprintln!("dmtcp_coordinator: writing the restart script: {e}");
        }
        state.ckpt = None;
        state.kill_once = false;
        if self.exit_on_last && state.clients.is_empty() {
            self.exit();
        }
    }

    /// `dmtcp_restart_script_<id>.sh` (u+x), then the symlink
    /// `dmtcp_restart_script.sh` to it (relative). As 4.2.0: the symlink
    /// is first unlinked in the working directory, not in the ckptdir, and
    /// one already in the ckptdir is left as it is.
    fn write_restart_script(&self, id: &str, images: &[PathBuf]) -> std::io::Result<()> {
        let name = format!("dmtcp_restart_script_{id}.sh");
        let mut script = b"#!/bin/sh\n\
            # Written by the fake dmtcp_coordinator (ckptrun's test fixture).\n\
            # Options given to this script go to dmtcp_restart.\n\
            exec dmtcp_restart --join-coordinator \"$@\""
            .to_vec();
        for image in images {
            script.extend(b" \\\n  ");
            script.extend(shell_quote(image.as_os_str().as_bytes()));
        }
        script.push(b'\n');
        let path = self.ckptdir.join(&name);
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&path)?
            .write_all(&script)?;
        let mode = std::fs::metadata(&path)?.permissions().mode();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o100))?;
        let _ = std::fs::remove_file("dmtcp_restart_script.sh");
        let _ = std::os::unix::fs::symlink(&name, self.ckptdir.join("dmtcp_restart_script.sh"));
        proto::trace("ckpt-complete");
        Ok(())
    }

    /// Whether a checkpoint begun now ends the computation.
    fn exits(&self, state: &State) -> bool {
        self.kill_after_ckpt || state.kill_once
    }

    /// Asks every process to checkpoint (and then to exit, if `K` was
    /// asked, now or before); false if nothing runs or a checkpoint is
    /// under way.
    fn start_checkpoint(&self, kill: bool) -> bool {
        let mut state = self.lock();
        if kill {
            state.kill_once = true;
        }
        if state.clients.is_empty() || state.ckpt.is_some() {
            return false;
        }
        state.ckpt = Some(InProgress {
            waiting: state.clients.iter().map(|c| c.conn).collect(),
            images: Vec::new(),
            id: state.clients[0].id.clone(),
        });
        let request = format!("ckpt {}\n", u8::from(self.exits(&state)));
        for client in &mut state.clients {
            let _ = client.stream.write_all(request.as_bytes());
        }
        true
    }

    /// `kill` to every process: each exits 0.
    fn kill_all(&self) {
        let mut state = self.lock();
        for client in &mut state.clients {
            let _ = client.stream.write_all(b"kill\n");
        }
    }

    fn checkpoint_every_interval(&self) {
        let mut waited = 0;
        loop {
            std::thread::sleep(Duration::from_secs(1));
            waited += 1;
            let every = self.lock().interval;
            if every > 0 && waited >= every {
                waited = 0;
                let _ = self.start_checkpoint(false);
            }
        }
    }

    /// One `dmtcp_command` request: a letter (and the interval for `i`).
    fn serve_command(&self, mut stream: TcpStream, request: &[u8]) {
        let reply = match request.first() {
            // 4.2.0's coordinator knows `K` (kill after) but not `b`: the
            // `c` that follows is a plain checkpoint.
            Some(b'K') | Some(b'c') => match self.start_checkpoint(request[0] == b'K') {
                true => "ok".to_string(),
                false => "err not-running".to_string(),
            },
            Some(b's') => {
                let state = self.lock();
                let running = !state.clients.is_empty() && state.ckpt.is_none();
                format!(
                    "ok NUM_PEERS={} RUNNING={} CKPT_INTERVAL={}",
                    state.clients.len(),
                    if running { "yes" } else { "no" },
                    state.interval
                )
            }
            Some(b'l') => {
                let state = self.lock();
                let mut list = String::from(
                    "Client List:\n#, PROG[virtPID:realPID]@HOST, DMTCP-UNIQUEPID, STATE, BARRIER\n",
                );
                for (i, c) in state.clients.iter().enumerate() {
                    let what = match &state.ckpt {
                        Some(ck) if ck.waiting.contains(&c.conn) => "CHECKPOINTING",
                        _ => "RUNNING",
                    };
                    list.push_str(&format!(
                        "{}, {}[{}:{}]@localhost, {}, {what}, \n",
                        i + 1,
                        c.name,
                        c.pid,
                        c.pid,
                        c.id
                    ));
                }
                list.push('\n');
                format!("ok {}", proto::hex(list.as_bytes()))
            }
            Some(b'i') => {
                let every = String::from_utf8_lossy(&request[1..])
                    .trim()
                    .parse()
                    .unwrap_or(0);
                self.lock().interval = every;
                "ok".into()
            }
            Some(b'k') => {
                self.kill_all();
                "ok".into()
            }
            Some(b'q') => {
                self.kill_all();
                drop(stream);
                self.exit();
            }
            _ => "err invalid".into(),
        };
        let _ = stream.write_all(format!("{reply}\n").as_bytes());
    }
}

/// `'bytes'` for sh, with `'` written as `'\''`.
fn shell_quote(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![b'\''];
    for &b in bytes {
        if b == b'\'' {
            out.extend(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}
