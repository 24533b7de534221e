//! A fake of DMTCP 4.2.0's four command-line tools, for ckptrun's tests
//! (CI has no DMTCP). One binary; what it does depends on the name it runs
//! under (tests install it as all four, see tests/common/mod.rs):
//!
//! - `dmtcp_coordinator [--coord-port P | --port P | -p P] [--port-file F]
//!   [--exit-on-last] [--daemon] [--interval N] [--ckptdir D]`
//! - `dmtcp_launch [--coord-host H] [--coord-port P] [--join-coordinator | -j]
//!   [--ckptdir D] PROGRAM [ARGS...]`
//! - `dmtcp_command [--coord-host H] [--coord-port P] (--bcheckpoint | -bc |
//!   --checkpoint | -c | --status | -s | --list | -l | --kill | -k | --quit | -q)`
//! - `dmtcp_restart [--coord-host H] [--coord-port P] [--join-coordinator | -j]
//!   [--ckptdir D] IMAGE`
//!
//! Options taking a value also take the `--opt=value` form (and `-pP`).
//! The coordinator's host and port default to `DMTCP_COORD_HOST` and
//! `DMTCP_COORD_PORT`, else 127.0.0.1:7779, as in DMTCP 4.
//!
//! A fake cannot checkpoint an arbitrary process: only a program that links
//! the client side in `proto.rs` (examples/dmtcp_job.rs) joins the
//! coordinator and writes images; anything else launched just runs.
//!
//! # Behaviour of the real tools it reproduces
//!
//! - The coordinator rejects `--background` (what the old `shim_dmtcp`
//!   passes): `dmtcp_coordinator: unrecognized option '--background'`, exit 1.
//! - `--daemon`: the process started exits 0 at once; the daemon (its
//!   child, in a session of its own, stdio on /dev/null) writes the port
//!   file only later, after `FAKE_DMTCP_PORT_DELAY_MS` [30] ms, so a caller
//!   must poll for it. Like the real one it creates the file, then writes the
//!   port (decimal, no newline) in one write: it can be seen empty.
//! - `dmtcp_launch` rejects a `--` before PROGRAM (`dmtcp_launch: Invalid
//!   Argument`, exit 99); everything after PROGRAM is the program's, even
//!   what looks like an option. With `--join-coordinator` and no coordinator
//!   it exits 99. It execs the program (same pid).
//! - `dmtcp_command --bcheckpoint` is meant to block until the checkpoint
//!   is written, but in 4.2.0 returns after about 20 ms
//!   (`FAKE_DMTCP_BCKPT_RETURN_MS`), before the image is complete.
//! - The image `ckpt_<name>_<id>.dmtcp` is written as `<image>.temp` and
//!   renamed when complete; once every process's image is complete the
//!   coordinator writes `dmtcp_restart_script_<id>.sh` in its `--ckptdir`
//!   and then (re)makes `dmtcp_restart_script.sh` a symlink to it: that
//!   symlink appearing is how a caller knows the checkpoint is complete.
//!   A second checkpoint request during one is answered `ok` and ignored.
//! - `dmtcp_restart` truncates files the program held open for writing back
//!   to their checkpoint-time size, then execs the program (same pid), which
//!   restores its state from the image and goes on.
//! - `--exit-on-last`: the coordinator exits when its last process has
//!   gone; `--quit` kills the processes and the coordinator.
//!
//! # Where the fake differs from DMTCP
//!
//! - It listens on 127.0.0.1 only; the real coordinator on all interfaces.
//! - Without a coordinator, the real dmtcp_launch/dmtcp_restart (no
//!   `--join-coordinator`) start one; the fake cannot and exits 99.
//! - `dmtcp_restart` takes one image (the fake supports one process per
//!   restart). The restarted program gets dmtcp_restart's environment,
//!   working directory and file descriptors, not the checkpointed ones; the
//!   real one restores all three.
//! - The image is not gzip-compressed and holds no memory (see proto.rs).
//! - A process that dies or fails during a checkpoint abandons it: no
//!   restart script is written.
//! - The daemon's stdin, stdout and stderr are /dev/null, as in the real
//!   one, so its later errors (port file, restart script) are not seen.
//!
//! # Environment knobs
//!
//! - `FAKE_DMTCP_COORD_FAIL=1`: the coordinator prints an error and exits 3
//!   before binding.
//! - `FAKE_DMTCP_PORT_DELAY_MS` [30], `FAKE_DMTCP_BCKPT_RETURN_MS` [20]: above.
//! - Read by the job's client side (proto.rs): `FAKE_DMTCP_IMAGE_KB` [64],
//!   `FAKE_DMTCP_WRITE_MS_PER_MB` [0], `FAKE_DMTCP_FREEZE_MS` [20],
//!   `FAKE_DMTCP_NEVER_COMPLETE=1`, `FAKE_DMTCP_JOIN_DELAY_MS` [0] (joins
//!   the coordinator that much later).
//! - `FAKE_DMTCP_TRACE=FILE`: `joined NS`, `ckpt-start NS` and
//!   `ckpt-complete NS` lines appended (wall clock), for
//!   scripts/bench-dmtcp.sh.

mod proto;

use std::ffi::{OsStr, OsString};
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proto::{ENV_CKPTDIR, ENV_COORD, ENV_PROGRAM, ENV_RESTORE, Image};

const TOOLS: &str = "dmtcp_coordinator, dmtcp_launch, dmtcp_command or dmtcp_restart";
const DEFAULT_PORT: u16 = 7779;

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
// Option parsing, by hand like DMTCP's own.

/// One option of a tool: its spellings, and whether it takes a value.
struct Opt {
    names: &'static [&'static str],
    value: bool,
}

const HOST: Opt = Opt {
    names: &["--coord-host", "-h"],
    value: true,
};
const PORT: Opt = Opt {
    names: &["--coord-port", "--port", "-p"],
    value: true,
};
const JOIN: Opt = Opt {
    names: &["--join-coordinator", "--join", "-j"],
    value: false,
};
const CKPTDIR: Opt = Opt {
    names: &["--ckptdir"],
    value: true,
};

/// Which of `opts` `word` is (its index) and its value, taken from `rest`
/// if not attached (`--name=V`, or `-pV` for a one-letter name). Ok(None):
/// not one of them.
fn match_opt(
    word: &OsStr,
    rest: &mut impl Iterator<Item = OsString>,
    opts: &[Opt],
) -> Result<Option<(usize, Option<OsString>)>, String> {
    let bytes = word.as_bytes();
    for (i, opt) in opts.iter().enumerate() {
        for name in opt.names {
            if bytes == name.as_bytes() {
                if !opt.value {
                    return Ok(Some((i, None)));
                }
                return match rest.next() {
                    Some(value) => Ok(Some((i, Some(value)))),
                    None => Err(format!("option '{name}' requires an argument")),
                };
            }
            if !opt.value {
                continue;
            }
            let attached = if name.starts_with("--") {
                bytes
                    .strip_prefix(name.as_bytes())
                    .and_then(|r| r.strip_prefix(b"="))
            } else {
                bytes
                    .strip_prefix(name.as_bytes())
                    .filter(|r| !r.is_empty())
            };
            if let Some(value) = attached {
                return Ok(Some((i, Some(OsStr::from_bytes(value).to_owned()))));
            }
        }
    }
    Ok(None)
}

fn parse_port(value: &OsStr) -> Option<u16> {
    value.to_str()?.trim().parse().ok()
}

/// The coordinator to talk to: `DMTCP_COORD_HOST`/`DMTCP_COORD_PORT`, else
/// DMTCP's defaults, until options say otherwise.
fn default_coordinator() -> (String, u16) {
    let host = std::env::var("DMTCP_COORD_HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port = std::env::var("DMTCP_COORD_PORT")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(DEFAULT_PORT);
    (host, port)
}

fn fail(tool: &str, code: i32, why: &str) -> ! {
    eprintln!("{tool}: {why}");
    exit(code);
}

/// Whether a coordinator answers at host:port (a `status` command).
fn probe(host: &str, port: u16) -> Result<(), String> {
    match proto::command(host, port, "status") {
        Ok(reply) if reply.starts_with("ok") => Ok(()),
        Ok(reply) => Err(format!("unexpected reply {reply:?}")),
        Err(why) => Err(why),
    }
}

/// Exits 99 unless a coordinator answers (the fake cannot start one).
fn require_coordinator(tool: &str, host: &str, port: u16, join: bool) {
    if let Err(why) = probe(host, port) {
        let what = if join {
            "--join-coordinator given"
        } else {
            "and this fake cannot start one"
        };
        fail(
            tool,
            99,
            &format!("no coordinator at {host}:{port} ({what}): {why}"),
        );
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

// ---------------------------------------------------------------------------
// dmtcp_launch

fn launch(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_launch";
    const GZIP: Opt = Opt {
        names: &["--gzip", "--no-gzip"],
        value: false,
    };
    let invalid = || -> ! {
        eprintln!("{TOOL}: Invalid Argument");
        eprintln!(
            "Usage: {TOOL} [--coord-host H] [--coord-port P] [--join-coordinator] \
             [--ckptdir D] PROGRAM [ARGS...]"
        );
        exit(99);
    };
    let (mut host, mut port) = default_coordinator();
    let mut join = false;
    let mut ckptdir = None;
    let mut words = args.into_iter();
    let mut program = None;
    // Options only before PROGRAM, the first word not starting with `-`.
    while let Some(word) = words.next() {
        if word == "--" {
            invalid(); // DMTCP 4.2.0 does not take `--` before PROGRAM
        }
        match match_opt(&word, &mut words, &[HOST, PORT, JOIN, CKPTDIR, GZIP]) {
            Err(why) => fail(TOOL, 99, &why),
            Ok(Some((0, Some(v)))) => host = v.to_string_lossy().into_owned(),
            Ok(Some((1, Some(v)))) => {
                port = parse_port(&v).unwrap_or_else(|| fail(TOOL, 99, "bad --coord-port"))
            }
            Ok(Some((2, _))) => join = true,
            Ok(Some((3, Some(v)))) => ckptdir = Some(absolute(Path::new(&v))),
            Ok(Some(_)) => {} // --gzip/--no-gzip: the fake never compresses
            Ok(None) if word.as_bytes().starts_with(b"-") => invalid(),
            Ok(None) => {
                program = Some(word);
                break;
            }
        }
    }
    let Some(program) = program else {
        eprintln!("{TOOL}: no PROGRAM given");
        invalid();
    };
    let rest: Vec<OsString> = words.collect();

    require_coordinator(TOOL, &host, port, join);
    let ckptdir = match ckptdir {
        Some(dir) => dir,
        None => std::env::current_dir()
            .unwrap_or_else(|e| fail(TOOL, 99, &format!("current directory: {e}"))),
    };
    let Some(resolved) = resolve(&program) else {
        fail(
            TOOL,
            99,
            &format!("{}: command not found", program.to_string_lossy()),
        );
    };
    // exec, as the real one does: the program keeps this pid. Its argv[0]
    // is PROGRAM as given.
    let err = Command::new(&resolved)
        .arg0(&program)
        .args(&rest)
        .env(ENV_COORD, format!("{host}:{port}"))
        .env(ENV_CKPTDIR, &ckptdir)
        .env(ENV_PROGRAM, &resolved)
        .env_remove(ENV_RESTORE)
        .exec();
    fail(TOOL, 99, &format!("{}: {err}", resolved.display()));
}

/// execvp's search: PROGRAM itself if it holds a `/`, else the first
/// executable regular file of that name in PATH; made absolute.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(absolute(Path::new(program)));
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

fn restart(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_restart";
    let (mut host, mut port) = default_coordinator();
    let mut join = false;
    let mut ckptdir = None;
    let mut words = args.into_iter();
    let mut images = Vec::new();
    while let Some(word) = words.next() {
        match match_opt(&word, &mut words, &[HOST, PORT, JOIN, CKPTDIR]) {
            Err(why) => fail(TOOL, 99, &why),
            Ok(Some((0, Some(v)))) => host = v.to_string_lossy().into_owned(),
            Ok(Some((1, Some(v)))) => {
                port = parse_port(&v).unwrap_or_else(|| fail(TOOL, 99, "bad --coord-port"))
            }
            Ok(Some((2, _))) => join = true,
            Ok(Some((_, v))) => ckptdir = v.map(|v| absolute(Path::new(&v))),
            Ok(None) if word.as_bytes().starts_with(b"-") => fail(
                TOOL,
                99,
                &format!("unrecognized option '{}'", word.to_string_lossy()),
            ),
            Ok(None) => {
                images.push(word);
                images.extend(words.by_ref());
            }
        }
    }
    let image_path = match &images[..] {
        [] => fail(TOOL, 99, "no checkpoint image given"),
        [one] => absolute(Path::new(one)),
        _ => fail(
            TOOL,
            99,
            &format!(
                "{} images given: this fake restarts one process only",
                images.len()
            ),
        ),
    };
    let image = Image::read(&image_path)
        .unwrap_or_else(|why| fail(TOOL, 99, &format!("{}: {why}", image_path.display())));
    require_coordinator(TOOL, &host, port, join);

    // DMTCP restores files open for writing as they were at checkpoint
    // time: whatever was appended after the checkpoint is cut off.
    for (path, size) in &image.files {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        if meta.is_file() && meta.len() > *size {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(*size))
                .unwrap_or_else(|e| {
                    fail(
                        TOOL,
                        99,
                        &format!("truncating {} to {size}: {e}", path.display()),
                    )
                });
        }
    }

    let ckptdir = ckptdir.unwrap_or_else(|| image.ckptdir.clone());
    let err = Command::new(&image.program)
        .arg0(&image.argv[0])
        .args(&image.argv[1..])
        .env(ENV_COORD, format!("{host}:{port}"))
        .env(ENV_CKPTDIR, &ckptdir)
        .env(ENV_PROGRAM, &image.program)
        .env(ENV_RESTORE, &image_path)
        .exec();
    fail(TOOL, 99, &format!("{}: {err}", image.program.display()));
}

// ---------------------------------------------------------------------------
// dmtcp_command

fn command(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_command";
    /// The commands, in the order of their options after HOST and PORT.
    const VERBS: [&str; 6] = [
        "bcheckpoint",
        "checkpoint",
        "status",
        "list",
        "kill",
        "quit",
    ];
    const fn flag(names: &'static [&'static str]) -> Opt {
        Opt {
            names,
            value: false,
        }
    }
    const OPTS: [Opt; 8] = [
        HOST,
        PORT,
        flag(&["--bcheckpoint", "-bc"]),
        flag(&["--checkpoint", "-c"]),
        flag(&["--status", "-s"]),
        flag(&["--list", "-l"]),
        flag(&["--kill", "-k"]),
        flag(&["--quit", "-q"]),
    ];
    let usage = || -> ! {
        fail(
            TOOL,
            1,
            "usage: dmtcp_command [--coord-host H] [--coord-port P] \
             (--bcheckpoint | --checkpoint | --status | --list | --kill | --quit)",
        )
    };
    let (mut host, mut port) = default_coordinator();
    let mut verb = None;
    let mut words = args.into_iter();
    while let Some(word) = words.next() {
        match match_opt(&word, &mut words, &OPTS) {
            Err(why) => fail(TOOL, 1, &why),
            Ok(Some((0, Some(v)))) => host = v.to_string_lossy().into_owned(),
            Ok(Some((1, Some(v)))) => {
                port = parse_port(&v).unwrap_or_else(|| fail(TOOL, 1, "bad --coord-port"))
            }
            Ok(Some((i, _))) if verb.is_none() => verb = Some(VERBS[i - 2]),
            Ok(Some(_)) => usage(), // a second command
            Ok(None) => fail(
                TOOL,
                1,
                &format!("unrecognized option '{}'", word.to_string_lossy()),
            ),
        }
    }
    let Some(verb) = verb else { usage() };

    let reply = proto::command(&host, port, verb).unwrap_or_else(|why| {
        fail(
            TOOL,
            1,
            &format!("Coordinator not found at {host}:{port} ({why}). Please check port and host."),
        )
    });
    let text = match reply.split_once(' ') {
        Some(("ok", text)) => text,
        None if reply == "ok" => "",
        Some(("err", why)) => fail(TOOL, 1, &format!("Error: {why}")),
        _ => fail(TOOL, 1, &format!("unexpected reply {reply:?}")),
    };
    match verb {
        "bcheckpoint" => {
            // DMTCP 4.2.0: "blocking" returns early, before the image is written.
            let ms = proto::env_num("FAKE_DMTCP_BCKPT_RETURN_MS", 20);
            std::thread::sleep(Duration::from_millis(ms));
        }
        "status" => {
            println!("Coordinator:\n  Host: {host}\n  Port: {port}\nStatus...");
            for item in text.split_whitespace() {
                println!("  {item}");
            }
        }
        "list" => {
            println!("Client List:\n#, PROG[PID], UNIQUEPID, STATE");
            for client in text.split('\t').filter(|c| !c.is_empty()) {
                println!("{client}");
            }
        }
        _ => {}
    }
    exit(0);
}

// ---------------------------------------------------------------------------
// dmtcp_coordinator

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
    /// Whether any process has ever joined (for --exit-on-last).
    joined: bool,
    ckpt: Option<InProgress>,
    next_conn: u64,
}

struct Hub {
    state: Mutex<State>,
    ckptdir: PathBuf,
    exit_on_last: bool,
}

fn coordinator(args: Vec<OsString>) -> ! {
    const TOOL: &str = "dmtcp_coordinator";
    const OPTS: [Opt; 6] = [
        PORT,
        Opt {
            names: &["--port-file"],
            value: true,
        },
        Opt {
            names: &["--exit-on-last"],
            value: false,
        },
        Opt {
            names: &["--daemon"],
            value: false,
        },
        Opt {
            names: &["--interval", "-i"],
            value: true,
        },
        Opt {
            names: &["--ckptdir", "-c"],
            value: true,
        },
    ];
    let (_, mut port) = default_coordinator();
    let (mut port_file, mut exit_on_last, mut daemon, mut interval, mut ckptdir) =
        (None, false, false, 0u64, PathBuf::from("."));
    let mut words = args.into_iter();
    while let Some(word) = words.next() {
        match match_opt(&word, &mut words, &OPTS) {
            Err(why) => fail(TOOL, 1, &why),
            Ok(Some((0, Some(v)))) => {
                port = parse_port(&v).unwrap_or_else(|| fail(TOOL, 1, "bad --port"))
            }
            Ok(Some((1, Some(v)))) => port_file = Some(PathBuf::from(v)),
            Ok(Some((2, _))) => exit_on_last = true,
            Ok(Some((3, _))) => daemon = true,
            Ok(Some((4, Some(v)))) => {
                interval = v
                    .to_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| fail(TOOL, 1, "bad --interval"))
            }
            Ok(Some((_, v))) => ckptdir = v.map_or(ckptdir, PathBuf::from),
            Ok(None) => fail(
                TOOL,
                1,
                &format!("unrecognized option '{}'", word.to_string_lossy()),
            ),
        }
    }
    if proto::env_num("FAKE_DMTCP_COORD_FAIL", 0) == 1 {
        fail(
            TOOL,
            3,
            "FAKE_DMTCP_COORD_FAIL=1: failing to start, as asked",
        );
    }
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| {
        fail(
            TOOL,
            1,
            &format!("Failed to create listen socket on port {port}: {e}"),
        )
    });
    let port = listener.local_addr().map_or(port, |a| a.port());

    if daemon {
        // SAFETY: no other thread exists yet; the child only goes on in Rust.
        match unsafe { libc::fork() } {
            -1 => fail(TOOL, 1, "fork failed"),
            0 => {}
            _ => exit(0),
        }
        // SAFETY: setsid has no arguments; a fresh child is never a group
        // leader, so it cannot fail.
        unsafe { libc::setsid() };
        // Like the real one: nothing of the caller's stdio is kept (a
        // caller reading the coordinator's output to its end is not held up).
        to_dev_null(&[0, 1, 2]);
        let delay = proto::env_num("FAKE_DMTCP_PORT_DELAY_MS", 30);
        std::thread::sleep(Duration::from_millis(delay));
    }
    if let Some(file) = &port_file {
        // Created (empty) first, then the port in one write, as DMTCP does.
        std::fs::File::create(file)
            .and_then(|mut f| f.write_all(port.to_string().as_bytes()))
            .unwrap_or_else(|e| fail(TOOL, 1, &format!("{}: {e}", file.display())));
    }
    if !daemon {
        eprintln!(
            "dmtcp_coordinator starting... (fake)\n    Port: {port}\n    Exit on last client: {}",
            u8::from(exit_on_last)
        );
    }

    let hub = Arc::new(Hub {
        state: Mutex::new(State::default()),
        ckptdir,
        exit_on_last,
    });
    if interval > 0 {
        let hub = hub.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(interval));
                let _ = hub.start_checkpoint();
            }
        });
    }
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let hub = hub.clone();
        std::thread::spawn(move || hub.serve(stream));
    }
    exit(1);
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
        } else if let Some(verb) = first.strip_prefix(b"cmd ") {
            self.serve_command(stream, verb);
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
            state.joined = true;
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
        if self.exit_on_last && state.joined && state.clients.is_empty() {
            exit(0);
        }
    }

    /// A process's image is complete; with the last one, the restart
    /// script and its symlink say the checkpoint is.
    fn image_done(&self, conn: u64, image: PathBuf) {
        let mut state = self.lock();
        let Some(ckpt) = state.ckpt.as_mut() else {
            return;
        };
        let Some(at) = ckpt.waiting.iter().position(|&c| c == conn) else {
            return;
        };
        ckpt.waiting.remove(at);
        ckpt.images.push(image);
        if ckpt.waiting.is_empty() {
            let ckpt = state.ckpt.take().unwrap();
            if let Err(e) = self.write_restart_script(&ckpt) {
                eprintln!("dmtcp_coordinator: writing the restart script: {e}");
            }
        }
    }

    /// `dmtcp_restart_script_<id>.sh` (0755), then the symlink
    /// `dmtcp_restart_script.sh` to it (relative), an old one removed first.
    fn write_restart_script(&self, ckpt: &InProgress) -> std::io::Result<()> {
        let name = format!("dmtcp_restart_script_{}.sh", ckpt.id);
        let mut script = b"#!/bin/sh\n\
            # Written by the fake dmtcp_coordinator (ckptrun's test fixture).\n\
            # Options given to this script go to dmtcp_restart.\n\
            exec dmtcp_restart --join-coordinator \"$@\""
            .to_vec();
        for image in &ckpt.images {
            script.extend(b" \\\n  ");
            script.extend(shell_quote(image.as_os_str().as_bytes()));
        }
        script.push(b'\n');
        let path = self.ckptdir.join(&name);
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o755)
            .open(&path)?
            .write_all(&script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        let link = self.ckptdir.join("dmtcp_restart_script.sh");
        match std::fs::remove_file(&link) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        std::os::unix::fs::symlink(&name, &link)?;
        proto::trace("ckpt-complete");
        Ok(())
    }

    /// Asks every process to checkpoint, unless one is under way.
    fn start_checkpoint(&self) -> String {
        let mut state = self.lock();
        if state.clients.is_empty() {
            return "err no processes to checkpoint".into();
        }
        if state.ckpt.is_some() {
            return "ok checkpoint already in progress".into();
        }
        state.ckpt = Some(InProgress {
            waiting: state.clients.iter().map(|c| c.conn).collect(),
            images: Vec::new(),
            id: state.clients[0].id.clone(),
        });
        for client in &mut state.clients {
            let _ = client.stream.write_all(b"ckpt\n");
        }
        "ok".into()
    }

    /// `kill` to every process, and SIGKILL to be sure.
    fn kill_all(&self) {
        let mut state = self.lock();
        for client in &mut state.clients {
            let _ = client.stream.write_all(b"kill\n");
            // SAFETY: kill has no memory arguments.
            unsafe { libc::kill(client.pid, libc::SIGKILL) };
        }
    }

    fn serve_command(&self, mut stream: TcpStream, verb: &[u8]) {
        let reply = match verb {
            b"checkpoint" | b"bcheckpoint" => self.start_checkpoint(),
            b"status" => {
                let state = self.lock();
                let running = !state.clients.is_empty() && state.ckpt.is_none();
                format!(
                    "ok NUM_PEERS={} RUNNING={}",
                    state.clients.len(),
                    if running { "yes" } else { "no" }
                )
            }
            b"list" => {
                let state = self.lock();
                let checkpointing = |c: &Client| {
                    state
                        .ckpt
                        .as_ref()
                        .is_some_and(|ck| ck.waiting.contains(&c.conn))
                };
                let entries: Vec<String> = state
                    .clients
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let what = if checkpointing(c) {
                            "CHECKPOINTING"
                        } else {
                            "RUNNING"
                        };
                        format!("{}, {}[{}], {}, {what}", i + 1, c.name, c.pid, c.id)
                    })
                    .collect();
                format!("ok {}", entries.join("\t"))
            }
            b"kill" | b"quit" => {
                self.kill_all();
                "ok".into()
            }
            _ => format!("err unknown command {:?}", String::from_utf8_lossy(verb)),
        };
        let _ = stream.write_all(format!("{reply}\n").as_bytes());
        if verb == b"quit" {
            exit(0);
        }
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
