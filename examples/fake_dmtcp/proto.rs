//! What the fake DMTCP tools (`main.rs`) and the job that cooperates with
//! them (`examples/dmtcp_job.rs`) share: the private wire protocol, the
//! fake checkpoint image, and the job's client side, which stands in for
//! the library real DMTCP preloads into every process it launches.
//!
//! # Wire protocol
//!
//! Line-based text over TCP to the coordinator at 127.0.0.1. The first line
//! of a connection says who is calling:
//!
//! - a job: `join <pid> <id> <name>` (the name last: it may hold spaces).
//!   The coordinator answers `ok` once the job counts as a client; then it
//!   sends
//!   `ckpt 0` (checkpoint now), `ckpt 1` (checkpoint, then exit) or `kill`
//!   (exit now), and the job answers a `ckpt` with `done <absolute image
//!   path>` once the image is complete, or `fail <why>`.
//! - dmtcp_command (and dmtcp_launch/dmtcp_restart looking for a
//!   coordinator): `cmd <letter>[ARG]`, one request per connection as
//!   DMTCP's dmtcp_command makes them (`s`, `l`, `c`, `K`, `b`, `k`, `q`,
//!   `i SECONDS`); one reply line, `ok [TEXT]`, `err not-running` or `err
//!   invalid`; none to `q`.
//!
//! # Image
//!
//! Not a memory image: the job's own state string plus what `dmtcp_restart`
//! needs to start the same program again. Text header, then padding up to
//! `FAKE_DMTCP_IMAGE_KB` KiB:
//!
//! ```text
//! FAKEDMTCP2
//! program=HEX      what was exec'd, absolute
//! arg=HEX          one line per argv element, argv[0] first
//! id=ID            <hostname hash>-<first pid>-<start time>, all hex/decimal
//! name=HEX         basename of the program
//! state=HEX        the job's state string
//! ckptdir=HEX      the directory the image was written to
//! file=SIZE FLAGS HEX   a regular file open for writing on a descriptor
//!                  3 or up: its size then, its open flags (octal)
//! end
//! ```
//!
//! HEX is the bytes of a path, argument or string in lowercase hex, so that
//! any bytes (spaces, newlines, non-UTF-8) survive.
#![allow(dead_code)] // each of the two binaries uses its own part

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `H:P` of the coordinator; set by dmtcp_launch and dmtcp_restart. A
/// process without it runs uncheckpointable.
pub const ENV_COORD: &str = "FAKE_DMTCP_COORD";
/// Absolute directory the image goes to.
pub const ENV_CKPTDIR: &str = "FAKE_DMTCP_CKPTDIR";
/// Absolute path of the program exec'd (recorded in the image).
pub const ENV_PROGRAM: &str = "FAKE_DMTCP_PROGRAM";
/// Set by dmtcp_restart only: the image to restore from.
pub const ENV_RESTORE: &str = "FAKE_DMTCP_RESTORE";

/// Image size in KiB [64].
pub const ENV_IMAGE_KB: &str = "FAKE_DMTCP_IMAGE_KB";
/// Delay per MiB of image written, in ms [0]: a slow large image.
pub const ENV_WRITE_MS_PER_MB: &str = "FAKE_DMTCP_WRITE_MS_PER_MB";
/// How long the job stays frozen after the image is complete, in ms [20].
pub const ENV_FREEZE_MS: &str = "FAKE_DMTCP_FREEZE_MS";
/// `1`: write the `.temp` image, then stay frozen (still killable).
pub const ENV_NEVER_COMPLETE: &str = "FAKE_DMTCP_NEVER_COMPLETE";
/// `1`: asked to exit after its checkpoint, the process runs on.
pub const ENV_NO_EXIT_AFTER_CKPT: &str = "FAKE_DMTCP_NO_EXIT_AFTER_CKPT";
/// Milliseconds the program waits before joining the coordinator (a slow
/// start: checkpoint requests made meanwhile find no process).
pub const ENV_JOIN_DELAY_MS: &str = "FAKE_DMTCP_JOIN_DELAY_MS";
/// A file to append `EVENT UNIX_NANOSECONDS` lines to, for the benchmark:
/// `joined` when a process has joined the coordinator (it runs under
/// DMTCP), `ckpt-start` when it is frozen for a checkpoint, `ckpt-complete`
/// when the coordinator has written the restart script.
pub const ENV_TRACE: &str = "FAKE_DMTCP_TRACE";

/// Appends `event` and the time to `FAKE_DMTCP_TRACE`, if set.
pub fn trace(event: &str) {
    let Some(path) = std::env::var_os(ENV_TRACE) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let line = format!("{event} {now}\n");
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
}

pub const MAGIC: &str = "FAKEDMTCP2";
const CHUNK: usize = 64 * 1024;

/// A parsed image header.
#[derive(Debug, Clone, Default)]
pub struct Image {
    pub program: PathBuf,
    pub argv: Vec<OsString>,
    pub id: String,
    pub name: OsString,
    pub state: Vec<u8>,
    pub ckptdir: PathBuf,
    /// Regular files open for writing at checkpoint time (descriptors 3
    /// and up).
    pub files: Vec<OpenFile>,
}

/// A regular file a process held open for writing at its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFile {
    pub path: PathBuf,
    /// Its size then.
    pub size: u64,
    /// Its open flags (O_WRONLY, O_RDWR, O_APPEND, ...).
    pub flags: i32,
}

impl Image {
    /// The header, up to and including `end\n`.
    pub fn header(&self) -> Vec<u8> {
        let mut out = format!(
            "{MAGIC}\nprogram={}\n",
            hex(self.program.as_os_str().as_bytes())
        )
        .into_bytes();
        for arg in &self.argv {
            out.extend(format!("arg={}\n", hex(arg.as_bytes())).bytes());
        }
        out.extend(format!("id={}\n", self.id).bytes());
        out.extend(format!("name={}\n", hex(self.name.as_bytes())).bytes());
        out.extend(format!("state={}\n", hex(&self.state)).bytes());
        out.extend(format!("ckptdir={}\n", hex(self.ckptdir.as_os_str().as_bytes())).bytes());
        for f in &self.files {
            let path = hex(f.path.as_os_str().as_bytes());
            out.extend(format!("file={} {:o} {path}\n", f.size, f.flags).bytes());
        }
        out.extend(b"end\n");
        out
    }

    /// Reads the header of the image at `path`; the error says why it is
    /// not one.
    pub fn read(path: &Path) -> Result<Image, String> {
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        // The header is small; do not read a large image's padding.
        let mut reader = BufReader::new(file.take(1 << 24));
        let mut lines = Vec::new();
        loop {
            let mut line = Vec::new();
            if reader
                .read_until(b'\n', &mut line)
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err(if lines.is_empty() {
                    "empty file, not a checkpoint image".into()
                } else {
                    "truncated image: no end of header".into()
                });
            }
            if lines.is_empty() && line != format!("{MAGIC}\n").as_bytes() {
                return Err("bad magic: not a checkpoint image of the fake DMTCP".into());
            }
            if line == b"end\n" {
                break;
            }
            lines.push(line);
        }
        let mut image = Image::default();
        for line in &lines[1..] {
            let line = String::from_utf8_lossy(line);
            let line = line.trim_end_matches('\n');
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("bad header line {line:?}"))?;
            let bytes = || unhex(value).ok_or_else(|| format!("bad hex in {key}="));
            match key {
                "program" => image.program = PathBuf::from(OsString::from_vec(bytes()?)),
                "arg" => image.argv.push(OsString::from_vec(bytes()?)),
                "id" => image.id = value.to_string(),
                "name" => image.name = OsString::from_vec(bytes()?),
                "state" => image.state = bytes()?,
                "ckptdir" => image.ckptdir = PathBuf::from(OsString::from_vec(bytes()?)),
                "file" => {
                    let bad = || format!("bad file line {line:?}");
                    let mut parts = value.splitn(3, ' ');
                    let (Some(size), Some(flags), Some(path)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        return Err(bad());
                    };
                    image.files.push(OpenFile {
                        path: PathBuf::from(OsString::from_vec(unhex(path).ok_or_else(bad)?)),
                        size: size.parse().map_err(|_| bad())?,
                        flags: i32::from_str_radix(flags, 8).map_err(|_| bad())?,
                    });
                }
                _ => return Err(format!("unknown header line {line:?}")),
            }
        }
        if image.program.as_os_str().is_empty() || image.argv.is_empty() || image.id.is_empty() {
            return Err("incomplete header (program, arg or id missing)".into());
        }
        Ok(image)
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A number from the environment, or `default` when unset or not a number.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Connects to `host:port` (a name or an address), at most 2 s per address.
pub fn connect(host: &str, port: u16) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Splits `H:P` (the last colon separates the port).
pub fn split_host_port(text: &str) -> Option<(&str, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    Some((host, port.parse().ok()?))
}

/// Reads one line without its newline; None at end of stream or error.
pub fn read_line(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    match reader.read_until(b'\n', &mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            Some(line)
        }
    }
}

/// Sends `cmd REQUEST` and returns the reply line (`ok ...` / `err ...`).
pub fn command(host: &str, port: u16, request: &str) -> Result<String, String> {
    let mut stream = connect(host, port).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(format!("cmd {request}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let reply = read_line(&mut BufReader::new(stream))
        .ok_or("the coordinator closed the connection without a reply")?;
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// Sends `cmd REQUEST` and waits for no reply (`q`).
pub fn send_only(host: &str, port: u16, request: &str) -> Result<(), String> {
    let mut stream = connect(host, port).map_err(|e| e.to_string())?;
    stream
        .write_all(format!("cmd {request}\n").as_bytes())
        .map_err(|e| e.to_string())
}

/// The image dmtcp_restart names in `FAKE_DMTCP_RESTORE`, if any.
pub fn restored() -> Result<Option<Image>, String> {
    let Some(path) = std::env::var_os(ENV_RESTORE) else {
        return Ok(None);
    };
    Image::read(Path::new(&path))
        .map(Some)
        .map_err(|why| format!("{}: {why}", Path::new(&path).display()))
}

/// What the serving thread needs to checkpoint the process.
struct Session {
    program: PathBuf,
    argv: Vec<OsString>,
    id: String,
    name: OsString,
    ckptdir: PathBuf,
    freeze: &'static Mutex<()>,
    state: fn() -> String,
}

/// The client side of the fake's preloaded library. Without
/// `FAKE_DMTCP_COORD` it does nothing and returns Ok(false). Otherwise it
/// joins the coordinator (with the id and name of `restored`, when
/// restoring) and starts a thread serving its requests; `freeze` is the
/// lock the program holds around each step of work, taken to freeze it
/// during a checkpoint; `state` gives the program's state to record.
/// Returns once the coordinator has counted this process as a client.
pub fn join(
    restored: Option<&Image>,
    freeze: &'static Mutex<()>,
    state: fn() -> String,
) -> Result<bool, String> {
    let Some(coord) = std::env::var(ENV_COORD).ok() else {
        return Ok(false);
    };
    let (host, port) =
        split_host_port(&coord).ok_or_else(|| format!("{ENV_COORD}={coord:?} is not HOST:PORT"))?;
    let ckptdir = match std::env::var_os(ENV_CKPTDIR) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::current_dir().map_err(|e| format!("current directory: {e}"))?,
    };
    // What was exec'd, as dmtcp_launch resolved it (/proc/self/exe would
    // name the interpreter of a script).
    let program = match std::env::var_os(ENV_PROGRAM) {
        Some(p) => PathBuf::from(p),
        None => std::fs::read_link("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?,
    };
    let (id, name) = match restored {
        Some(image) => (image.id.clone(), image.name.clone()),
        None => (
            new_id(),
            program
                .file_name()
                .unwrap_or(OsStr::new("program"))
                .to_owned(),
        ),
    };
    if let Some(ms) = std::env::var(ENV_JOIN_DELAY_MS)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let mut stream =
        connect(host, port).map_err(|e| format!("cannot reach the coordinator at {coord}: {e}"))?;
    let mut hello = format!("join {} {id} ", std::process::id()).into_bytes();
    hello.extend(name.as_bytes());
    hello.push(b'\n');
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .and_then(|()| stream.write_all(&hello))
        .map_err(|e| format!("coordinator at {coord}: {e}"))?;
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    match read_line(&mut reader).as_deref() {
        Some(b"ok") => {}
        _ => {
            return Err(format!(
                "the coordinator at {coord} did not accept the join"
            ));
        }
    }
    trace("joined");
    let _ = stream.set_read_timeout(None);
    let session = Session {
        program,
        argv: std::env::args_os().collect(),
        id,
        name,
        ckptdir,
        freeze,
        state,
    };
    *CONNECTION.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(stream.try_clone().map_err(|e| e.to_string())?);
    std::thread::spawn(move || serve(reader, stream, session));
    Ok(true)
}

/// The connection to the coordinator, for `disconnect`.
static CONNECTION: Mutex<Option<TcpStream>> = Mutex::new(None);
/// Set by `disconnect`: the connection's end is the process's own doing.
static DISCONNECTING: AtomicBool = AtomicBool::new(false);

/// Closes the connection to the coordinator, as a process's exit does
/// before it becomes a zombie (the kernel closes its files first): a
/// caller that then lingers stretches that window.
pub fn disconnect() {
    DISCONNECTING.store(true, Ordering::SeqCst);
    if let Some(stream) = CONNECTION.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Serves the coordinator's requests. A coordinator that goes away
/// without killing the process first died uncleanly: as with DMTCP, the
/// process exits 99.
fn serve(mut reader: BufReader<TcpStream>, mut stream: TcpStream, session: Session) {
    while let Some(line) = read_line(&mut reader) {
        match &line[..] {
            b"ckpt 0" => checkpoint(&session, &mut stream, false),
            b"ckpt 1" => checkpoint(&session, &mut stream, true),
            b"kill" => exit_now(0),
            _ => {}
        }
    }
    if DISCONNECTING.load(Ordering::SeqCst) {
        return;
    }
    eprintln!(
        "fake DMTCP: read invalid message from the coordinator. Did DMTCP coordinator die \
         uncleanly? Terminating..."
    );
    exit_now(99);
}

/// `_exit(code)`: no destructors, no buffers flushed, as DMTCP's threads do.
fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no memory arguments and does not return.
    unsafe { libc::_exit(code) }
}

/// Freezes the program, writes the image (a `.temp`, renamed when
/// complete), then answers. Asked to exit after it (and not told
/// otherwise by FAKE_DMTCP_NO_EXIT_AFTER_CKPT), the process exits 0 as
/// soon as it has answered; otherwise it stays frozen
/// `FAKE_DMTCP_FREEZE_MS` more and runs on. FAKE_DMTCP_NEVER_COMPLETE: it
/// stays frozen for good, answering nothing (a `kill` still ends it).
fn checkpoint(session: &Session, stream: &mut TcpStream, then_exit: bool) {
    let frozen = session.freeze.lock().unwrap_or_else(|e| e.into_inner());
    trace("ckpt-start");
    let then_exit = then_exit && env_num(ENV_NO_EXIT_AFTER_CKPT, 0) != 1;
    let mut reply = match write_image(session) {
        Ok(None) => {
            std::mem::forget(frozen);
            return;
        }
        Ok(Some(path)) => {
            if !then_exit {
                std::thread::sleep(Duration::from_millis(env_num(ENV_FREEZE_MS, 20)));
            }
            let mut reply = b"done ".to_vec();
            reply.extend(path.as_os_str().as_bytes());
            reply
        }
        Err(why) => {
            eprintln!("fake DMTCP: checkpoint failed: {why}");
            format!("fail {why}").into_bytes()
        }
    };
    reply.push(b'\n');
    let _ = stream.write_all(&reply);
    if then_exit {
        exit_now(0);
    }
    drop(frozen);
}

/// The image's path once it is complete; None if it never will be
/// (FAKE_DMTCP_NEVER_COMPLETE).
fn write_image(session: &Session) -> Result<Option<PathBuf>, String> {
    // Before the image is open, so that it is not one of them.
    let files = open_for_writing();
    let image = Image {
        program: session.program.clone(),
        argv: session.argv.clone(),
        id: session.id.clone(),
        name: session.name.clone(),
        state: (session.state)().into_bytes(),
        ckptdir: session.ckptdir.clone(),
        files,
    };
    let mut file_name = OsString::from("ckpt_");
    file_name.push(&session.name);
    file_name.push(format!("_{}.dmtcp", session.id));
    let path = session.ckptdir.join(&file_name);
    let mut temp = path.clone().into_os_string();
    temp.push(".temp");
    let temp = PathBuf::from(temp);

    let mut bytes = image.header();
    let total = env_num(ENV_IMAGE_KB, 64) as usize * 1024;
    if bytes.len() < total {
        bytes.resize(total, 0);
    }
    let ms_per_mb = env_num(ENV_WRITE_MS_PER_MB, 0);
    let mut file = std::fs::File::create(&temp).map_err(|e| format!("{}: {e}", temp.display()))?;
    for chunk in bytes.chunks(CHUNK) {
        file.write_all(chunk)
            .map_err(|e| format!("{}: {e}", temp.display()))?;
        if ms_per_mb > 0 {
            let us = ms_per_mb * 1000 * chunk.len() as u64 / (1024 * 1024);
            std::thread::sleep(Duration::from_micros(us));
        }
    }
    drop(file);
    if env_num(ENV_NEVER_COMPLETE, 0) == 1 {
        return Ok(None);
    }
    std::fs::rename(&temp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(path))
}

/// Regular files this process holds open for writing (O_WRONLY, O_RDWR
/// or O_APPEND in /proc/self/fdinfo) on descriptors 3 and up, with their
/// current size and flags, each path once. Descriptors 0-2 are left out:
/// DMTCP does not cut them back at a restart.
fn open_for_writing() -> Vec<OpenFile> {
    let mut found: Vec<OpenFile> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return found;
    };
    for entry in dir.flatten() {
        let fd = entry.file_name();
        if fd
            .to_str()
            .and_then(|f| f.parse::<i32>().ok())
            .is_none_or(|f| f < 3)
        {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(&fd)) else {
            continue; // closed meanwhile (read_dir's own descriptor)
        };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| i32::from_str_radix(f.trim(), 8).ok());
        let Some(flags) = flags else { continue };
        let mode = flags & libc::O_ACCMODE;
        if mode != libc::O_WRONLY && mode != libc::O_RDWR && flags & libc::O_APPEND == 0 {
            continue;
        }
        let link = Path::new("/proc/self/fd").join(&fd);
        let (Ok(meta), Ok(path)) = (std::fs::metadata(&link), std::fs::read_link(&link)) else {
            continue;
        };
        if !meta.is_file() || meta.nlink() == 0 || found.iter().any(|f| f.path == path) {
            continue;
        }
        found.push(OpenFile {
            path,
            size: meta.len(),
            flags: flags & (libc::O_ACCMODE | libc::O_APPEND),
        });
    }
    found
}

/// `<8 hex of a hash of the hostname>-<pid>-<hex of the time>`, like
/// DMTCP's unique process ids.
fn new_id() -> String {
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most host.len() bytes into host.
    unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) };
    let host = &host[..host.iter().position(|&b| b == 0).unwrap_or(0)];
    let hash = host.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{hash:08x}-{}-{micros:x}", std::process::id())
}
