//! HTCondor's job ad: the submit file's checkpoint settings, as the job's
//! sandbox sees them. HTCondor names a text file in `_CONDOR_JOB_AD`, one
//! `Name = value` per line; ckptrun reads the few attributes it needs and
//! leaves every other value, whatever expression it is, unread.
//!
//! The ad only refines what ckptrun does, so a problem with it is a warning,
//! never an error. Reading and parsing use a fixed buffer and slices of it.

use core::fmt::{self, Write};
use core::time::Duration;
use std::ffi::{OsStr, OsString};

use rustix::fs::{FileType, Mode, OFlags};

use crate::os::log::Log;
use crate::os::sys::{self, Sig};
use crate::run::signals;

pub const ENV: &str = "_CONDOR_JOB_AD";
/// The largest job ad read; a bigger one is warned about and ignored.
pub const MAX_SIZE: usize = 64 * 1024;

/// The longest value echoed in a warning (log lines are cut at 1 KiB).
const SHOWN_MAX: usize = 40;

/// The longest file list (TransferOutput, TransferCheckpoint) kept; a
/// longer one is not checked.
pub const LIST_MAX: usize = 4096;

/// A list of files from the ad, as written (commas and/or spaces between
/// names), in a fixed buffer.
pub type FileList = heapless::Vec<u8, LIST_MAX>;

/// What the job ad says about checkpointing; `None` where it says nothing
/// usable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobAd {
    /// SuccessCheckpointExitCode: 1-255.
    pub exit_code: Option<u8>,
    /// SuccessCheckpointExitSignal, only when SuccessCheckpointExitBySignal is true.
    pub exit_signal: Option<Sig>,
    /// CheckpointSig (WantCheckpointSignal is not required).
    pub checkpoint_sig: Option<Sig>,
    /// KillSig.
    pub kill_sig: Option<Sig>,
    /// JobMaxVacateTime, a positive number of seconds.
    pub max_vacate: Option<Duration>,
    /// ShouldTransferFiles is not NO: the job runs in a sandbox of its own.
    pub transfers_files: Option<bool>,
    /// WhenToTransferOutput is ON_EXIT_OR_EVICT: an eviction uploads files.
    pub transfers_on_evict: Option<bool>,
    /// TransferOutput (submit's transfer_output_files), when given.
    pub transfer_output: Option<FileList>,
    /// TransferCheckpoint (submit's transfer_checkpoint_files), when given.
    pub transfer_checkpoint: Option<FileList>,
    /// TransferInput (submit's transfer_input_files), when given.
    pub transfer_input: Option<FileList>,
    /// Cmd: the executable, as its path on the access point.
    pub executable: Option<FileList>,
    /// CheckpointDestination is set: checkpoints go to URL storage, and
    /// an eviction's upload is not what a restart gets.
    pub checkpoint_destination: bool,
}

/// Reads the job ad named by `_CONDOR_JOB_AD` (through `env`, for tests), if any.
/// Unset or empty variable: None, silently. Unreadable file, file larger than
/// MAX_SIZE, or malformed: one warning through `log.warn` and None. Never an error.
/// Into the caller's `ad` (a fresh one), not returned: moved by value
/// through an `Option`, its 16 KiB would be copied into frame after
/// frame. Whether there was an ad.
pub fn from_env(env: impl Fn(&str) -> Option<OsString>, ad: &mut JobAd, log: &Log) -> bool {
    load(env, ad, &mut |args| log.warn(args))
}

/// `from_env` with the warnings going to `warn`.
fn load(
    env: impl Fn(&str) -> Option<OsString>,
    ad: &mut JobAd,
    warn: &mut dyn FnMut(fmt::Arguments<'_>),
) -> bool {
    let Some(path) = env(ENV).filter(|p| !p.is_empty()) else {
        return false;
    };
    let shown = path.display();
    // On the heap (before the job starts): on the stack, its 64 KiB would
    // be touched, and stay resident, in every run, ad or not, wherever
    // the optimizer inlines this into `main`.
    let mut buf = vec![0u8; MAX_SIZE];
    match read(&path, &mut buf) {
        Ok(len) => parse_into(&buf[..len], ad, &mut |args| {
            warn(format_args!("job ad {shown}: {args}"))
        }),
        Err(why) => {
            warn(format_args!("job ad {shown}: {why}; ignored"));
            false
        }
    }
}

/// Reads the whole file into `buf`; returns its length, or why not.
/// O_NONBLOCK so that opening a FIFO cannot hang; fstat then refuses it.
fn read(path: &OsStr, buf: &mut [u8]) -> Result<usize, &'static str> {
    let os = |e: rustix::io::Errno| sys::strerror(e);
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let file = rustix::fs::open(path, flags, Mode::empty()).map_err(os)?;
    let stat = rustix::fs::fstat(&file).map_err(os)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err("not a regular file");
    }
    let len = sys::read_fill(&file, buf).map_err(os)?;
    if len == buf.len() && sys::read_fill(&file, &mut [0u8; 1]).map_err(os)? > 0 {
        const _: () = assert!(MAX_SIZE == 64 * 1024, "the message below says 64 KiB");
        return Err("larger than 64 KiB");
    }
    Ok(len)
}

/// Parses the text of a job ad into `ad` (a fresh one). `warn` gets one
/// message per problem. False when the whole ad is malformed.
pub fn parse_into(text: &[u8], ad: &mut JobAd, warn: &mut dyn FnMut(fmt::Arguments<'_>)) -> bool {
    let mut by_signal = BySignal::default();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = i + 1;
        if line.contains(&0) {
            warn(format_args!("line {number} holds a NUL byte; ignored"));
            return false;
        }
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let Some((name, raw)) = split(line) else {
            warn(format_args!("line {number} is not `Name = value`; ignored"));
            return false;
        };
        take(ad, &mut by_signal, Attr { name, raw }, warn);
    }
    ad.exit_signal = by_signal.settle(warn);
    true
}

/// The two attributes that together say a checkpoint ends by a signal.
#[derive(Default)]
struct BySignal {
    /// SuccessCheckpointExitBySignal is true.
    asked: bool,
    /// SuccessCheckpointExitSignal, when present: its value, if usable.
    signal: Option<Option<Sig>>,
}

impl BySignal {
    /// The signal a checkpoint ends by, when the ad asks for one.
    fn settle(self, warn: &mut dyn FnMut(fmt::Arguments<'_>)) -> Option<Sig> {
        if !self.asked {
            return None;
        }
        if self.signal.is_none() {
            warn(format_args!(
                "SuccessCheckpointExitBySignal is true but SuccessCheckpointExitSignal is missing"
            ));
        }
        self.signal.flatten()
    }
}

/// Stores one attribute in `ad` (or `by_signal`) when ckptrun reads it.
fn take(
    ad: &mut JobAd,
    by_signal: &mut BySignal,
    attr: Attr<'_>,
    warn: &mut dyn FnMut(fmt::Arguments<'_>),
) {
    let is = |wanted: &str| attr.name.eq_ignore_ascii_case(wanted.as_bytes());
    if is("SuccessCheckpointExitCode") {
        ad.exit_code = attr.get(exit_code, "an exit code 1-255", warn);
    } else if is("SuccessCheckpointExitBySignal") {
        by_signal.asked = attr.get(boolean, "true or false", warn).unwrap_or(false);
    } else if is("SuccessCheckpointExitSignal") {
        by_signal.signal = Some(attr.get(signal, "a signal name or number 1-64", warn));
    } else if is("CheckpointSig") {
        ad.checkpoint_sig = attr.get(catchable, CATCHABLE, warn);
    } else if is("KillSig") {
        ad.kill_sig = attr.get(catchable, CATCHABLE, warn);
    } else if is("JobMaxVacateTime") {
        ad.max_vacate = attr.get(seconds, "a positive number of seconds", warn);
    } else if is("ShouldTransferFiles") {
        ad.transfers_files = attr.get(not_no, "YES, IF_NEEDED or NO", warn);
    } else if is("WhenToTransferOutput") {
        ad.transfers_on_evict = attr.get(on_evict, "a word such as ON_EXIT", warn);
    } else if is("TransferOutput") {
        ad.transfer_output = attr.get(list, LIST, warn);
    } else if is("TransferCheckpoint") {
        ad.transfer_checkpoint = attr.get(list, LIST, warn);
    } else if is("TransferInput") {
        ad.transfer_input = attr.get(list, LIST, warn);
    } else if is("Cmd") {
        ad.executable = attr.get(list, LIST, warn);
    } else if is("CheckpointDestination") {
        let url = attr.get(list, LIST, warn);
        ad.checkpoint_destination = url.is_some_and(|u| !u.is_empty());
    }
}

/// Splits `Name = value` (a trimmed line); None when it is not that shape.
fn split(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let eq = line.iter().position(|&b| b == b'=')?;
    let (name, value) = (line[..eq].trim_ascii(), line[eq + 1..].trim_ascii());
    let starts_well = name
        .first()
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_');
    (starts_well && is_word(name) && !value.is_empty()).then_some((name, value))
}

fn is_word(text: &[u8]) -> bool {
    text.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// One line of the ad whose attribute ckptrun wants.
struct Attr<'a> {
    name: &'a [u8],
    raw: &'a [u8],
}

impl Attr<'_> {
    /// The value, converted; or a warning naming the attribute and None.
    fn get<T>(
        &self,
        convert: fn(&Value<'_>) -> Option<T>,
        expected: &str,
        warn: &mut dyn FnMut(fmt::Arguments<'_>),
    ) -> Option<T> {
        let value = Value::of(self.raw);
        let got = convert(&value);
        let (name, raw) = (Shown(self.name), Shown(self.raw));
        match (&got, value) {
            (Some(_), _) => {}
            (None, Value::Expr) => warn(format_args!("{name} = {raw}: not a plain value; ignored")),
            (None, _) => warn(format_args!("{name} = {raw}: expected {expected}; ignored")),
        }
        got
    }
}

/// A plain ClassAd value; anything else is an expression ckptrun does not
/// evaluate.
enum Value<'a> {
    Int(i64),
    Bool(bool),
    /// A string in double quotes (without them), or a bare word.
    Text(&'a [u8]),
    Expr,
}

impl<'a> Value<'a> {
    fn of(raw: &'a [u8]) -> Self {
        if let Some(inner) = raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\"")) {
            // Escapes and embedded quotes are never needed for our values.
            let plain = !inner.iter().any(|&b| b == b'"' || b == b'\\');
            return if plain { Self::Text(inner) } else { Self::Expr };
        }
        if raw.eq_ignore_ascii_case(b"true") || raw.eq_ignore_ascii_case(b"false") {
            return Self::Bool(raw.eq_ignore_ascii_case(b"true"));
        }
        let digits = raw.strip_prefix(b"-").unwrap_or(raw);
        if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
            // Saturating: a huge number is out of range, not an expression.
            let n = digits.iter().fold(0i64, |n, &d| {
                n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
            });
            return Self::Int(if digits.len() < raw.len() { -n } else { n });
        }
        if is_word(raw) {
            return Self::Text(raw);
        }
        Self::Expr
    }
}

fn exit_code(value: &Value<'_>) -> Option<u8> {
    match *value {
        Value::Int(n) => u8::try_from(n).ok().filter(|&c| c != 0),
        _ => None,
    }
}

/// Whether a text value is `word`, in any case; `None` if not a text.
fn text_is(value: &Value<'_>, word: &[u8]) -> Option<bool> {
    match *value {
        Value::Text(text) => Some(text.eq_ignore_ascii_case(word)),
        _ => None,
    }
}

/// ShouldTransferFiles: YES or IF_NEEDED transfer, NO does not.
fn not_no(value: &Value<'_>) -> Option<bool> {
    text_is(value, b"NO").map(|no| !no)
}

/// WhenToTransferOutput: ON_EXIT_OR_EVICT, or another word (ON_EXIT,
/// ON_SUCCESS) that uploads nothing on eviction.
fn on_evict(value: &Value<'_>) -> Option<bool> {
    text_is(value, b"ON_EXIT_OR_EVICT")
}

const LIST: &str = "a list of files of at most 4096 bytes";

/// A list's entries, as written (separated by commas and/or spaces);
/// empty ones are kept.
pub fn entries(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    list.split(|&b| b == b',' || b.is_ascii_whitespace())
}

/// The names a list's files have at the top of the sandbox: each entry's
/// last component (HTCondor puts `sub/x` in the sandbox as `x`).
pub fn top_names(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    entries(list)
        .map(|entry| {
            let entry = entry.strip_suffix(b"/").unwrap_or(entry);
            entry.rsplit(|&b| b == b'/').next().unwrap_or(entry)
        })
        .filter(|name| !name.is_empty())
}

/// A list of files, kept as written.
fn list(value: &Value<'_>) -> Option<FileList> {
    match *value {
        Value::Text(text) => FileList::from_slice(text).ok(),
        _ => None,
    }
}

fn boolean(value: &Value<'_>) -> Option<bool> {
    match *value {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

fn seconds(value: &Value<'_>) -> Option<Duration> {
    match *value {
        Value::Int(n) if n > 0 => Some(Duration::from_secs(n as u64)),
        _ => None,
    }
}

/// A real signal, 1-64, by number or name (`15`, `"15"`, `"SIGTERM"`, `TERM`).
fn signal(value: &Value<'_>) -> Option<Sig> {
    let sig = match *value {
        Value::Int(n) => Sig::try_from(n).ok()?,
        Value::Text(text) => signals::parse(core::str::from_utf8(text).ok()?)?,
        _ => return None,
    };
    (1..=signals::MAX).contains(&sig).then_some(sig)
}

const CATCHABLE: &str = "a signal other than SIGKILL and SIGSTOP";

/// A signal the job can catch: KillSig and CheckpointSig ask it to act.
fn catchable(value: &Value<'_>) -> Option<Sig> {
    signal(value).filter(|&s| signals::catchable(s).is_ok())
}

/// Bytes from the ad shown as printable ASCII (`?` for anything else) and
/// cut at SHOWN_MAX bytes, without allocating.
struct Shown<'a>(&'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0.iter().take(SHOWN_MAX) {
            let printable = b == b' ' || b.is_ascii_graphic();
            f.write_char(if printable { char::from(b) } else { '?' })?;
        }
        if self.0.len() > SHOWN_MAX {
            f.write_str("...")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of an HTCondor 24 `.job.ad` for a self-checkpointing job.
    const REAL: &str = r#"Args = "--steps 1000"
CheckpointSig = 10
ClusterId = 42
Cmd = "/home/u/ckptrun"
CurrentHosts = 1
Environment = ""
GlobalJobId = "ap.example.org#42.0#1732290574"
In = "/dev/null"
Iwd = "/home/u/run"
JobMaxVacateTime = 600
JobUniverse = 5
KillSig = "SIGTERM"
MyType = "Job"
OnExitHold = false
Owner = "u"
ProcId = 0
QDate = 1732290574
Rank = 0.0
ShouldTransferFiles = "YES"
RequestMemory = ifthenelse(MemoryUsage =!= undefined,MemoryUsage,(ImageSize + 1023) / 1024)
Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.HasFileTransfer)
SuccessCheckpointExitBySignal = true
SuccessCheckpointExitCode = 85
SuccessCheckpointExitSignal = 12
TargetType = "Machine"
TransferCheckpoint = "state.ckpt"
WantCheckpointSignal = true
WantFTOnCheckpoint = true
WhenToTransferOutput = "ON_EXIT_OR_EVICT"
"#;

    /// Parses `text`, returning the ad and the warnings.
    fn parsed(text: &str) -> (Option<JobAd>, Vec<String>) {
        let mut warnings = Vec::new();
        let mut ad = JobAd::default();
        let parsed = parse_into(text.as_bytes(), &mut ad, &mut |args| {
            warnings.push(args.to_string())
        });
        (parsed.then_some(ad), warnings)
    }

    /// Parses an ad that must be well formed.
    fn ad(text: &str) -> (JobAd, Vec<String>) {
        let (ad, warnings) = parsed(text);
        (ad.expect("well formed"), warnings)
    }

    #[test]
    fn a_real_ad() {
        let (got, warnings) = ad(REAL);
        assert!(warnings.is_empty(), "{warnings:?}");
        let want = JobAd {
            exit_code: Some(85),
            exit_signal: Some(libc::SIGUSR2),
            checkpoint_sig: Some(libc::SIGUSR1),
            kill_sig: Some(libc::SIGTERM),
            max_vacate: Some(Duration::from_secs(600)),
            transfers_files: Some(true),
            transfers_on_evict: Some(true),
            transfer_output: None,
            transfer_checkpoint: Some(FileList::from_slice(b"state.ckpt").unwrap()),
            transfer_input: None,
            executable: Some(FileList::from_slice(b"/home/u/ckptrun").unwrap()),
            checkpoint_destination: false,
        };
        assert_eq!(got, want);
        let (got, _) = ad("CheckpointDestination = \"local:///tmp/c\"\n");
        assert!(got.checkpoint_destination);
    }

    #[test]
    fn transfer_settings_as_htcondor_24_writes_them() {
        // Seen in a pool's .job.ad: TransferOutput normalised, TransferCheckpoint as submitted.
        let text = "ShouldTransferFiles = \"NO\"\nWhenToTransferOutput = \"ON_EXIT\"\n\
                    TransferOutput = \"x,y,sub/z\"\nTransferCheckpoint = \"x ,y\"\n";
        let (got, warnings) = ad(text);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(got.transfers_files, Some(false));
        assert_eq!(got.transfers_on_evict, Some(false));
        assert_eq!(got.transfer_output.as_deref(), Some(&b"x,y,sub/z"[..]));
        assert_eq!(got.transfer_checkpoint.as_deref(), Some(&b"x ,y"[..]));
        let (got, _) = ad("TransferOutput = \"\"\nShouldTransferFiles = \"IF_NEEDED\"");
        let inputs = "TransferInput = \"in1,sub/in2, dir/\"\nCmd = \"/tmp/probe2/p.sh\"\n";
        let (with_inputs, _) = ad(inputs);
        let names: Vec<&[u8]> = top_names(with_inputs.transfer_input.as_deref().unwrap()).collect();
        assert_eq!(names, [&b"in1"[..], b"in2", b"dir"]);
        let cmd: Vec<&[u8]> = top_names(with_inputs.executable.as_deref().unwrap()).collect();
        assert_eq!(cmd, [&b"p.sh"[..]]);
        assert_eq!(got.transfer_output.as_deref(), Some(&b""[..]));
        assert_eq!(got.transfers_files, Some(true));
        // Too long to keep: not checked, and said.
        let long = format!("TransferOutput = \"{}\"", "f,".repeat(LIST_MAX));
        let (got, warnings) = ad(&long);
        assert_eq!(got.transfer_output, None);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn names_are_case_insensitive_and_the_last_wins() {
        let text = "killsig = \"sigusr1\"\nSUCCESSCHECKPOINTEXITCODE = 17\n\
                    jobmaxvacatetime=30\nKillSig = 2\n";
        let (got, warnings) = ad(text);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(got.kill_sig, Some(libc::SIGINT));
        assert_eq!(got.exit_code, Some(17));
        assert_eq!(got.max_vacate, Some(Duration::from_secs(30)));
    }

    #[test]
    fn signals_by_name_and_number() {
        for value in [
            "15",
            "\"15\"",
            "\"SIGTERM\"",
            "\"TERM\"",
            "\"sigterm\"",
            "SIGTERM",
        ] {
            let (got, warnings) = ad(&format!("KillSig = {value}"));
            assert_eq!(got.kill_sig, Some(libc::SIGTERM), "{value}");
            assert!(warnings.is_empty(), "{value}: {warnings:?}");
        }
        let (got, _) = ad("CheckpointSig = \"RTMIN+2\"");
        assert_eq!(got.checkpoint_sig, Some(36));
        // A job may promise to die by SIGKILL; it cannot be asked to catch it.
        let by_kill =
            "SuccessCheckpointExitBySignal = TRUE\nSuccessCheckpointExitSignal = \"KILL\"";
        assert_eq!(ad(by_kill).0.exit_signal, Some(libc::SIGKILL));
        for bad in [
            "KillSig = \"SIGKILL\"",
            "KillSig = 9",
            "CheckpointSig = 19",
            "KillSig = 0",
        ] {
            let (got, warnings) = ad(bad);
            assert_eq!(got, JobAd::default(), "{bad}");
            assert_eq!(warnings.len(), 1, "{bad}");
        }
        for bad in ["0", "65", "-1", "\"BOGUS\"", "\"\""] {
            let text = format!(
                "SuccessCheckpointExitBySignal = true\nSuccessCheckpointExitSignal = {bad}"
            );
            let (got, warnings) = ad(&text);
            assert_eq!(got.exit_signal, None, "{bad}");
            assert_eq!(warnings.len(), 1, "{bad}: {warnings:?}");
        }
    }

    #[test]
    fn exit_signal_only_when_by_signal() {
        let (got, warnings) =
            ad("SuccessCheckpointExitBySignal = false\nSuccessCheckpointExitSignal = 12");
        assert_eq!(got.exit_signal, None);
        assert!(warnings.is_empty());
        assert_eq!(ad("SuccessCheckpointExitSignal = 12").0.exit_signal, None);
        let (got, warnings) = ad("SuccessCheckpointExitBySignal = true");
        assert_eq!(got.exit_signal, None);
        assert_eq!(
            warnings,
            ["SuccessCheckpointExitBySignal is true but SuccessCheckpointExitSignal is missing"]
        );
    }

    #[test]
    fn a_bad_line_makes_the_whole_ad_malformed() {
        for bad in [
            "Foo",
            "= 5",
            "1Abc = 2",
            "Name =",
            "Na me = 1",
            "Na-me = 1",
            "\"x\" = 1",
        ] {
            let (got, warnings) = parsed(&format!("KillSig = 15\n\n{bad}\nJobUniverse = 5\n"));
            assert_eq!(got, None, "{bad}");
            assert_eq!(warnings, ["line 3 is not `Name = value`; ignored"], "{bad}");
        }
    }

    #[test]
    fn a_nul_byte_makes_the_whole_ad_malformed() {
        let (got, warnings) = parsed("KillSig = 15\nOwner = \"u\0\"\n");
        assert_eq!(got, None);
        assert_eq!(warnings, ["line 2 holds a NUL byte; ignored"]);
    }

    #[test]
    fn a_bad_value_is_ignored_alone() {
        let text = "KillSig = 15\nSuccessCheckpointExitCode = 300\n";
        let (got, warnings) = ad(text);
        assert_eq!(got.kill_sig, Some(libc::SIGTERM));
        assert_eq!(got.exit_code, None);
        assert_eq!(
            warnings,
            ["SuccessCheckpointExitCode = 300: expected an exit code 1-255; ignored"]
        );
        for bad in [
            "SuccessCheckpointExitCode = \"abc\"",
            "SuccessCheckpointExitCode = 0",
            "SuccessCheckpointExitCode = 99999999999999999999999",
            "JobMaxVacateTime = -5",
            "JobMaxVacateTime = 0",
            "JobMaxVacateTime = \"600\"",
            "SuccessCheckpointExitBySignal = maybe",
            "KillSig = \"SIG\\\"TERM\"",
            "KillSig = \"SIG\"TERM\"",
        ] {
            let (got, warnings) = ad(&format!("CheckpointSig = 12\n{bad}\n"));
            assert_eq!(got.checkpoint_sig, Some(libc::SIGUSR2), "{bad}");
            assert_eq!(got.exit_code, None, "{bad}");
            assert_eq!(got.max_vacate, None, "{bad}");
            assert_eq!(warnings.len(), 1, "{bad}: {warnings:?}");
        }
        // A bad last value undoes a good earlier one: the ad's last word counts.
        assert_eq!(ad("KillSig = 15\nKillSig = 9").0.kill_sig, None);
    }

    #[test]
    fn an_expression_is_not_a_plain_value() {
        let (got, warnings) = ad("JobMaxVacateTime = 10 * 60\nKillSig = 15");
        assert_eq!(got.max_vacate, None);
        assert_eq!(got.kill_sig, Some(libc::SIGTERM));
        assert_eq!(
            warnings,
            ["JobMaxVacateTime = 10 * 60: not a plain value; ignored"]
        );
    }

    #[test]
    fn crlf_and_blank_lines() {
        let (got, warnings) = ad("\r\n  \r\nKillSig = \"SIGINT\"\r\n\r\nJobMaxVacateTime = 5\r\n");
        assert!(warnings.is_empty());
        assert_eq!(got.kill_sig, Some(libc::SIGINT));
        assert_eq!(got.max_vacate, Some(Duration::from_secs(5)));
        assert_eq!(ad("").0, JobAd::default());
    }

    #[test]
    fn warnings_echo_values_short_and_printable() {
        let long = format!("KillSig = \"{}\u{e9}\"", "x".repeat(100));
        let (_, warnings) = ad(&long);
        let want = format!(
            "KillSig = \"{}...: expected {CATCHABLE}; ignored",
            "x".repeat(39)
        );
        assert_eq!(warnings, [want]);
        let (_, warnings) = ad("KillSig = \"\u{e9}\"");
        assert_eq!(
            warnings,
            [format!("KillSig = \"??\": expected {CATCHABLE}; ignored")]
        );
    }

    /// A fresh path in the temporary directory, removed when dropped.
    struct Temp(std::path::PathBuf);

    impl Temp {
        fn new(name: &str) -> Self {
            let path =
                std::env::temp_dir().join(format!("ckptrun-jobad-{}-{name}", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_dir(&path);
            Self(path)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    /// `load` with `_CONDOR_JOB_AD` set to `path` (None: unset).
    fn loaded(path: Option<&OsStr>) -> (Option<JobAd>, Vec<String>) {
        let env = |name: &str| path.filter(|_| name == ENV).map(OsStr::to_os_string);
        let mut warnings = Vec::new();
        let mut ad = JobAd::default();
        let found = load(env, &mut ad, &mut |args| warnings.push(args.to_string()));
        (found.then_some(ad), warnings)
    }

    #[test]
    fn from_env_reads_the_file() {
        let temp = Temp::new("real");
        std::fs::write(&temp.0, REAL).unwrap();
        let (got, warnings) = loaded(Some(temp.0.as_os_str()));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(got.unwrap().exit_code, Some(85));
        let env = |name: &str| (name == ENV).then(|| temp.0.clone().into_os_string());
        let mut ad = JobAd::default();
        assert!(from_env(env, &mut ad, &Log::stderr_only()));
        assert_eq!(ad.exit_code, Some(85));
    }

    #[test]
    fn from_env_without_a_job_ad_is_silent() {
        assert_eq!(loaded(None), (None, vec![]));
        assert_eq!(loaded(Some(OsStr::new(""))), (None, vec![]));
        assert!(!from_env(
            |_| None,
            &mut JobAd::default(),
            &Log::stderr_only()
        ));
    }

    #[test]
    fn from_env_warns_once_about_a_missing_file() {
        let temp = Temp::new("missing");
        let (got, warnings) = loaded(Some(temp.0.as_os_str()));
        assert_eq!(got, None);
        let want = format!(
            "job ad {}: No such file or directory; ignored",
            temp.0.display()
        );
        assert_eq!(warnings, [want]);
    }

    #[test]
    fn from_env_takes_exactly_max_size_but_not_more() {
        let temp = Temp::new("big");
        let head = "KillSig = 15\nPad = \"";
        let mut text = format!("{head}{}\"\n", "x".repeat(MAX_SIZE - head.len() - 2));
        assert_eq!(text.len(), MAX_SIZE);
        std::fs::write(&temp.0, &text).unwrap();
        let (got, warnings) = loaded(Some(temp.0.as_os_str()));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(got.unwrap().kill_sig, Some(libc::SIGTERM));

        text.push('\n');
        std::fs::write(&temp.0, &text).unwrap();
        let (got, warnings) = loaded(Some(temp.0.as_os_str()));
        assert_eq!(got, None);
        let want = format!("job ad {}: larger than 64 KiB; ignored", temp.0.display());
        assert_eq!(warnings, [want]);
    }

    #[test]
    fn from_env_refuses_a_directory_and_a_fifo() {
        let dir = Temp::new("dir");
        std::fs::create_dir(&dir.0).unwrap();
        let fifo = Temp::new("fifo");
        let mode = Mode::from_raw_mode(0o600);
        rustix::fs::mknodat(rustix::fs::CWD, &fifo.0, FileType::Fifo, mode, 0).unwrap();
        for temp in [&dir, &fifo] {
            let (got, warnings) = loaded(Some(temp.0.as_os_str()));
            assert_eq!(got, None);
            let want = format!("job ad {}: not a regular file; ignored", temp.0.display());
            assert_eq!(warnings, [want]);
        }
    }
}
