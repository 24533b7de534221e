//! The command line, turned into one `Config`. Everything after `parse`
//! reads `Config` and never argv; all of ckptrun's allocation happens here
//! and in planning, before the job starts.

use std::ffi::OsString;
use std::time::Duration;

use lexopt::prelude::*;

use crate::error::Error;
use crate::personality::{ArchChoice, Flags};
use crate::signals;
use crate::supervise::{Periodic, Supervision};
use crate::sys::Sig;

pub const HELP: &str = "\
Usage: ckptrun [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode init [OPTIONS] [--] PROGRAM [ARG...]

Runs PROGRAM, a condor_compile'd job, the way HTCondor's checkpoint
wrapper did: address randomization off (as `setarch ARCH -L -B -R`),
-_condor_ckpt FILE on a fresh start, -_condor_restart FILE
-_condor_relocatable when FILE exists. SIGTERM makes the job checkpoint
and exit; ckptrun then exits with the checkpoint code (85) so HTCondor
transfers FILE and restarts the job.

With --mode init, ckptrun is only a minimal init (as tini): no
personality, no arguments added, signals and exit status passed on
unchanged; the checkpoint options below are refused.

Options:
      --mode condor|init  the checkpoint protocol [default: condor]
  -c, --ckpt FILE         checkpoint file [default: PROGRAM as given + .ckpt]
      --ckpt-exit-code N  exit code meaning \"checkpointed: transfer and
                          restart me\" [default: 85]
      --arch auto|x86_64|i386
                          personality to run PROGRAM with; auto reads
                          PROGRAM's ELF header [default: auto]
      --keep-aslr         leave address randomization on (drop setarch -R)
      --no-compat-layout  drop setarch -L (ADDR_COMPAT_LAYOUT)
      --no-limit-32bit    drop setarch -B (ADDR_LIMIT_32BIT)
      --personality-optional
                          if the kernel refuses personality(), warn and run
      --map FROM:TO       deliver signal FROM to the job as TO (names or
                          numbers; TO = 0 drops it); repeatable. Built in:
                          TERM:TSTP, TSTP:TSTP, USR2:USR2
      --interval SECS     ask for a checkpoint SECS after the job (re)started:
                          SIGTSTP, so the job checkpoints and exits 85
      --interval-continue with --interval: send SIGUSR2 every SECS instead;
                          the job checkpoints and keeps running
      --pgroup            send forwarded signals to the job's whole process
                          group (tini -g), not only the job
      --pdeathsig SIG     when ckptrun's parent dies, ckptrun receives SIG
                          and handles it like any other signal (tini -p)
      --status-file FILE  when the job ends, write its raw wait status there
                          as `Exited: N` (as HTCondor's condor_pid_ns_init)
      --kill-after SECS   when the job has ended, SIGTERM the processes it
                          left, SIGKILL them after SECS [default: leave them]
  -v, --verbose           report progress on stderr
      --log FILE          append timestamped progress lines to FILE
  -h, --help              print this help
  -V, --version           print the version

Every option also reads from CKPTRUN_<LONG_NAME> (e.g. CKPTRUN_CKPT_EXIT_CODE=17,
CKPTRUN_VERBOSE=1); the command line wins.

Exit status:
  the job's own exit code, or 85 (--ckpt-exit-code) when it checkpointed;
  120  the job stopped on SIGTSTP instead of checkpointing (it is not
       condor_compile'd); ckptrun ended it
  121  the job died by SIGUSR2 but wrote no checkpoint during this run
  122  the job itself exited with the checkpoint code (never passed on:
       HTCondor would restart it forever)
  (the checkpoint code must be 1-128 and not one of these)
  125  ckptrun failed; 126 PROGRAM cannot run; 127 PROGRAM not found
  a job killed by signal N: ckptrun dies by N (exits 128+N as PID 1)
";

/// What the command line asks for.
pub enum Request {
    Run(Config),
    Help,
    Version,
}

/// Which checkpoint protocol the job speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// condor_compile'd: -_condor_ckpt, SIGTSTP, death by SIGUSR2.
    Condor,
    /// None: ckptrun is only an init.
    Init,
}

/// Everything the command line says, checked.
#[derive(Debug)]
pub struct Config {
    pub mode: Mode,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub ckpt: Option<OsString>,
    pub ckpt_exit_code: u8,
    pub arch: ArchChoice,
    pub keep_aslr: bool,
    pub no_compat_layout: bool,
    pub no_limit_32bit: bool,
    pub personality_optional: bool,
    /// User remappings, applied after the built-in ones (later wins).
    pub maps: Vec<(Sig, Sig)>,
    pub interval: Option<Duration>,
    pub interval_continue: bool,
    pub verbose: bool,
    pub log: Option<OsString>,
    pub pgroup: bool,
    pub pdeathsig: Option<Sig>,
    pub status_file: Option<OsString>,
    pub kill_after: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: Mode::Condor,
            program: OsString::new(),
            args: Vec::new(),
            ckpt: None,
            ckpt_exit_code: 85,
            arch: ArchChoice::Auto,
            keep_aslr: false,
            no_compat_layout: false,
            no_limit_32bit: false,
            personality_optional: false,
            maps: Vec::new(),
            interval: None,
            interval_continue: false,
            verbose: false,
            log: None,
            pgroup: false,
            pdeathsig: None,
            status_file: None,
            kill_after: None,
        }
    }
}

impl Config {
    /// Which of setarch's -R, -L, -B the job gets.
    pub fn personality_flags(&self) -> Flags {
        Flags {
            no_randomize: !self.keep_aslr,
            compat_layout: !self.no_compat_layout,
            limit_32bit: !self.no_limit_32bit,
        }
    }

    /// How the supervisor runs: the `--interval` timer and `--pgroup`.
    pub fn supervision(&self) -> Supervision {
        let periodic = self.interval.map(|every| Periodic {
            every,
            repeat: self.interval_continue,
        });
        Supervision {
            periodic,
            pgroup: self.pgroup,
        }
    }
}

/// Exit codes ckptrun gives its own verdicts; a checkpoint code may not be
/// one of them, nor 0, nor above 128.
pub const RESERVED_CODES: [u8; 6] = [120, 121, 122, 125, 126, 127];

/// Every option: long name, short name, whether it takes a value, and
/// whether it configures checkpointing (refused with --mode init). Each
/// can also come from the environment as `CKPTRUN_` + the long name in
/// capitals with `_` for `-` (see `env_name`).
const OPTIONS: [(&str, Option<char>, bool, bool); 19] = [
    ("mode", None, true, false),
    ("ckpt", Some('c'), true, true),
    ("ckpt-exit-code", None, true, true),
    ("arch", None, true, true),
    ("keep-aslr", None, false, true),
    ("no-compat-layout", None, false, true),
    ("no-limit-32bit", None, false, true),
    ("personality-optional", None, false, true),
    ("map", None, true, false),
    ("interval", None, true, true),
    ("interval-continue", None, false, true),
    ("pgroup", None, false, false),
    ("pdeathsig", None, true, false),
    ("status-file", None, true, false),
    ("kill-after", None, true, false),
    ("verbose", Some('v'), false, false),
    ("log", None, true, false),
    ("help", Some('h'), false, false),
    ("version", Some('V'), false, false),
];

/// Where a setting came from, to name it in an error.
enum Source<'a> {
    Arg(&'a str),
    Env(&'a str),
}

impl Source<'_> {
    /// `--interval soon` or `CKPTRUN_INTERVAL=soon`.
    fn with(&self, value: &str) -> String {
        match self {
            Source::Arg(name) => format!("--{name} {value}"),
            Source::Env(var) => format!("{var}={value}"),
        }
    }

    fn name(&self) -> String {
        match self {
            Source::Arg(name) => format!("--{name}"),
            Source::Env(var) => var.to_string(),
        }
    }
}

/// `CKPTRUN_CKPT_EXIT_CODE` for `ckpt-exit-code`.
pub fn env_name(option: &str) -> String {
    format!("CKPTRUN_{}", option.to_ascii_uppercase().replace('-', "_"))
}

/// Reads `args`, and the `CKPTRUN_*` variables through `env` for the
/// options `args` does not give: the command line wins. In init mode the
/// environment's checkpoint options are ignored, the command line's refused.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Request, Error> {
    let mut config = Config::default();
    let mut given: Vec<(&'static str, Option<OsString>)> = Vec::new();
    let mut parser = lexopt::Parser::from_args(args);
    let mut program = None;
    while let Some(arg) = parser.next().map_err(lexopt_error)? {
        let option = match arg {
            Long(long) => OPTIONS.iter().find(|o| o.0 == long),
            Short(short) => OPTIONS.iter().find(|o| o.1 == Some(short)),
            Value(value) => {
                // PROGRAM: everything after it belongs to the job, untouched.
                program = Some(value);
                config.args = parser.raw_args().map_err(lexopt_error)?.collect();
                break;
            }
        };
        let Some(&(name, _, takes_value, _)) = option else {
            return Err(lexopt_error(arg.unexpected()));
        };
        match name {
            "help" => return Ok(Request::Help),
            "version" => return Ok(Request::Version),
            _ => {}
        }
        let value = if takes_value {
            Some(parser.value().map_err(lexopt_error)?)
        } else {
            None
        };
        given.push((name, value));
    }

    // The mode first: it decides which variables count.
    let mode_var = env_name("mode");
    match given.iter().rev().find(|(name, _)| *name == "mode") {
        Some((_, value)) => set(&mut config, "mode", value.clone(), &Source::Arg("mode"))?,
        None => {
            if let Some(value) = env(&mode_var).filter(|v| !v.is_empty()) {
                set(&mut config, "mode", Some(value), &Source::Env(&mode_var))?;
            }
        }
    }
    for &(name, _, takes_value, checkpointing) in &OPTIONS {
        let on_command_line = given.iter().any(|(n, _)| *n == name);
        let skip = matches!(name, "help" | "version" | "mode")
            || (on_command_line && name != "map")
            || (checkpointing && config.mode == Mode::Init);
        if skip {
            continue;
        }
        let var = env_name(name);
        let Some(value) = env(&var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let value = match (takes_value, value.to_str()) {
            (true, _) => Some(value),
            (false, Some("1" | "true" | "yes")) => None,
            (false, Some("0" | "false" | "no")) => continue,
            (false, _) => {
                return Err(Error::usage(
                    format!("{var}={}", value.display()),
                    "expected 1 or 0",
                ));
            }
        };
        set(&mut config, name, value, &Source::Env(&var))?;
    }
    for (name, value) in given {
        let checkpointing = OPTIONS.iter().any(|o| o.0 == name && o.3);
        if checkpointing && config.mode == Mode::Init {
            return Err(Error::usage(
                format!("--{name}"),
                "is for checkpointing; --mode init has none",
            ));
        }
        if name != "mode" {
            set(&mut config, name, value, &Source::Arg(name))?;
        }
    }

    config.program =
        program.ok_or_else(|| Error::usage("PROGRAM", "missing (see ckptrun --help)"))?;
    if config.program.is_empty() {
        return Err(Error::usage("PROGRAM", "is empty"));
    }
    if config.interval_continue && config.interval.is_none() {
        return Err(Error::usage("--interval-continue", "needs --interval SECS"));
    }
    Ok(Request::Run(config))
}

/// Applies one option, from the command line or the environment.
fn set(
    config: &mut Config,
    name: &str,
    value: Option<OsString>,
    from: &Source,
) -> Result<(), Error> {
    let text = || -> Result<String, Error> {
        let value = value.clone().unwrap_or_default();
        value
            .into_string()
            .map_err(|v| Error::usage(from.with(&v.display().to_string()), "not valid UTF-8"))
    };
    let path = || -> Result<OsString, Error> {
        let value = value.clone().unwrap_or_default();
        if value.is_empty() {
            return Err(Error::usage(from.name(), "needs a non-empty path"));
        }
        Ok(value)
    };
    match name {
        "mode" => {
            let text = text()?;
            config.mode = match text.as_str() {
                "condor" => Mode::Condor,
                "init" => Mode::Init,
                _ => return Err(Error::usage(from.with(&text), "expected condor or init")),
            };
        }
        "ckpt" => config.ckpt = Some(path()?),
        "ckpt-exit-code" => config.ckpt_exit_code = exit_code(&text()?, from)?,
        "arch" => {
            let text = text()?;
            config.arch = match text.as_str() {
                "auto" => ArchChoice::Auto,
                "x86_64" => ArchChoice::X86_64,
                "i386" | "i686" => ArchChoice::I386,
                _ => {
                    return Err(Error::usage(
                        from.with(&text),
                        "expected auto, x86_64 or i386",
                    ));
                }
            };
        }
        "keep-aslr" => config.keep_aslr = true,
        "no-compat-layout" => config.no_compat_layout = true,
        "no-limit-32bit" => config.no_limit_32bit = true,
        "personality-optional" => config.personality_optional = true,
        // Several in one variable: CKPTRUN_MAP="TERM:INT HUP:0".
        "map" => {
            let text = text()?;
            match from {
                Source::Env(_) => {
                    for map in text.split([',', ' ']).filter(|m| !m.is_empty()) {
                        config.maps.push(signal_map(map, from)?);
                    }
                }
                Source::Arg(_) => config.maps.push(signal_map(&text, from)?),
            }
        }
        "interval" => config.interval = Some(duration(&text()?, from)?),
        "interval-continue" => config.interval_continue = true,
        "pgroup" => config.pgroup = true,
        "pdeathsig" => {
            let text = text()?;
            let sig = signals::parse(&text).filter(|&s| s != 0);
            let sig = sig.ok_or_else(|| Error::usage(from.with(&text), "unknown signal"))?;
            if [libc::SIGKILL, libc::SIGSTOP, libc::SIGCHLD].contains(&sig) {
                let why = format!(
                    "{} cannot be handled like other signals",
                    signals::Name(sig)
                );
                return Err(Error::usage(from.with(&text), why));
            }
            config.pdeathsig = Some(sig);
        }
        "status-file" => config.status_file = Some(path()?),
        "kill-after" => config.kill_after = Some(duration(&text()?, from)?),
        "verbose" => config.verbose = true,
        "log" => config.log = Some(path()?),
        _ => unreachable!("option {name} is in OPTIONS but not handled"),
    }
    Ok(())
}

fn exit_code(text: &str, from: &Source) -> Result<u8, Error> {
    let what = || from.with(text);
    let code: u8 = text
        .parse()
        .map_err(|_| Error::usage(what(), "expected a number from 1 to 255"))?;
    if code == 0 {
        return Err(Error::usage(
            what(),
            "0 means success; pick a code the job uses for nothing else",
        ));
    }
    if code > 128 {
        return Err(Error::usage(
            what(),
            "codes above 128 mean death by signal 128+N when ckptrun is PID 1",
        ));
    }
    if RESERVED_CODES.contains(&code) {
        return Err(Error::usage(
            what(),
            "ckptrun reports its own verdicts with 120-122 and 125-127",
        ));
    }
    Ok(code)
}

/// `FROM:TO`: FROM must be a signal ckptrun can receive and forward.
fn signal_map(text: &str, from: &Source) -> Result<(Sig, Sig), Error> {
    let what = || from.with(text);
    let (from_name, to) = text
        .split_once(':')
        .ok_or_else(|| Error::usage(what(), "expected FROM:TO"))?;
    let from_sig = signals::parse(from_name)
        .filter(|&s| s != 0)
        .ok_or_else(|| Error::usage(what(), format!("unknown signal {from_name:?}")))?;
    let to_sig =
        signals::parse(to).ok_or_else(|| Error::usage(what(), format!("unknown signal {to:?}")))?;
    if [libc::SIGKILL, libc::SIGSTOP].contains(&from_sig) {
        return Err(Error::usage(
            what(),
            format!("{} cannot be caught", signals::Name(from_sig)),
        ));
    }
    if from_sig == libc::SIGCHLD {
        return Err(Error::usage(
            what(),
            "SIGCHLD is how ckptrun learns that the job ended",
        ));
    }
    Ok((from_sig, to_sig))
}

/// `seconds`, or an error naming where the text came from.
fn duration(text: &str, from: &Source) -> Result<Duration, Error> {
    seconds(text)
        .ok_or_else(|| Error::usage(from.with(text), "expected a positive number of seconds"))
}

/// A positive number of seconds, `30` or `0.5` (at most nanosecond
/// precision), parsed without floating point: float parsing would add
/// some 25 KB to a binary whose size users weigh.
fn seconds(text: &str) -> Option<Duration> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) || frac.len() > 9 {
        return None;
    }
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let nanos: u32 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    let total = Duration::new(secs, nanos);
    (!total.is_zero() && secs < 1_000_000_000).then_some(total)
}

fn lexopt_error(err: lexopt::Error) -> Error {
    match err {
        lexopt::Error::MissingValue { option: Some(o) } => Error::usage(o, "needs a value"),
        lexopt::Error::UnexpectedOption(o) => {
            Error::usage(o, "unknown option (see ckptrun --help)")
        }
        lexopt::Error::UnexpectedValue { option, .. } => Error::usage(option, "takes no value"),
        other => Error::usage("usage", other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error;

    fn run(args: &[&str]) -> Result<Config, Error> {
        match parse(args.iter().map(OsString::from), |_| None)? {
            Request::Run(c) => Ok(c),
            _ => panic!("not a run"),
        }
    }

    #[test]
    fn job_arguments_are_not_parsed() {
        let c = run(&["-v", "./a.out", "-v", "--ckpt", "x", "--"]).unwrap();
        assert!(c.verbose);
        assert_eq!(c.program, "./a.out");
        assert_eq!(c.args, ["-v", "--ckpt", "x", "--"]);
        assert_eq!(c.ckpt, None);
    }

    #[test]
    fn double_dash_ends_options() {
        let c = run(&["--ckpt=f", "--", "--help", "x"]).unwrap();
        assert_eq!(c.program, "--help");
        assert_eq!(c.ckpt.as_deref(), Some("f".as_ref()));
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for args in [
            &["--bogus", "x"][..],
            &[],
            &["--ckpt-exit-code", "0", "x"],
            &["--ckpt-exit-code", "256", "x"],
            &["--ckpt-exit-code", "126", "x"],
            &["--ckpt-exit-code", "143", "x"],
            &["--map", "TERM", "x"],
            &["--map", "KILL:TERM", "x"],
            &["--map", "CHLD:TERM", "x"],
            &["--map", "TERM:NOPE", "x"],
            &["--interval", "0", "x"],
            &["--interval", "-3", "x"],
            &["--interval-continue", "x"],
            &["--arch", "arm", "x"],
            &["--ckpt", "", "x"],
        ] {
            let err = run(args).unwrap_err();
            assert_eq!(err.code, error::LAUNCHER_FAILED, "{args:?}");
        }
    }

    fn with_env(args: &[&str], vars: &[(&str, &str)]) -> Result<Config, Error> {
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        };
        match parse(args.iter().map(OsString::from), env)? {
            Request::Run(c) => Ok(c),
            _ => panic!("not a run"),
        }
    }

    #[test]
    fn the_environment_configures_and_the_command_line_wins() {
        let vars = [
            ("CKPTRUN_CKPT_EXIT_CODE", "17"),
            ("CKPTRUN_CKPT", "from-env"),
            ("CKPTRUN_VERBOSE", "1"),
            ("CKPTRUN_PGROUP", "0"),
            ("CKPTRUN_MAP", "TERM:INT HUP:0"),
            ("CKPTRUN_INTERVAL", ""),
        ];
        let c = with_env(&["--ckpt", "from-args", "--map", "TERM:USR1", "p"], &vars).unwrap();
        assert_eq!(c.ckpt_exit_code, 17);
        assert_eq!(c.ckpt.as_deref(), Some("from-args".as_ref()));
        assert!(c.verbose);
        assert!(!c.pgroup);
        assert_eq!(c.interval, None, "empty means unset");
        // The command line's map comes last, so it wins for SIGTERM.
        assert_eq!(
            c.maps,
            [
                (libc::SIGTERM, libc::SIGINT),
                (libc::SIGHUP, 0),
                (libc::SIGTERM, libc::SIGUSR1)
            ]
        );
    }

    #[test]
    fn a_bad_variable_is_named_in_the_error() {
        let err = with_env(&["p"], &[("CKPTRUN_KEEP_ASLR", "maybe")]).unwrap_err();
        assert_eq!(err.to_string(), "CKPTRUN_KEEP_ASLR=maybe: expected 1 or 0");
        let err = with_env(&["p"], &[("CKPTRUN_INTERVAL", "soon")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CKPTRUN_INTERVAL=soon: expected a positive number of seconds"
        );
        // In init mode the environment's checkpoint options are ignored.
        let c = with_env(&["--mode", "init", "p"], &[("CKPTRUN_INTERVAL", "5")]).unwrap();
        assert_eq!(c.interval, None);
    }

    #[test]
    fn the_command_line_wins_even_over_a_bad_variable() {
        let c = with_env(&["--interval", "5", "p"], &[("CKPTRUN_INTERVAL", "soon")]).unwrap();
        assert_eq!(c.interval, Some(Duration::from_secs(5)));
        let vars = [("CKPTRUN_VERBOSE", "maybe")];
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        };
        assert!(matches!(
            parse(["--version"].map(OsString::from), env),
            Ok(Request::Version)
        ));
        let c = with_env(
            &["--mode", "condor", "p"],
            &[("CKPTRUN_MODE", "init"), ("CKPTRUN_CKPT", "f")],
        )
        .unwrap();
        assert_eq!(
            (c.mode, c.ckpt.as_deref()),
            (Mode::Condor, Some("f".as_ref()))
        );
    }

    #[test]
    fn only_the_environment_lists_several_maps_in_one() {
        assert!(run(&["--map", "TERM:INT,HUP:0", "p"]).is_err());
        assert!(run(&["--map", "", "p"]).is_err());
        let c = with_env(&["p"], &[("CKPTRUN_MAP", "TERM:INT,HUP:0")]).unwrap();
        assert_eq!(c.maps.len(), 2);
    }

    #[test]
    fn pdeathsig_refuses_what_cannot_be_forwarded() {
        for sig in ["KILL", "STOP", "CHLD"] {
            assert!(run(&["--pdeathsig", sig, "p"]).is_err(), "{sig}");
        }
        assert_eq!(
            run(&["--pdeathsig", "TERM", "p"]).unwrap().pdeathsig,
            Some(libc::SIGTERM)
        );
    }

    #[test]
    fn the_readme_documents_every_variable() {
        let readme = include_str!("../README.md");
        for (name, ..) in OPTIONS
            .iter()
            .filter(|o| !matches!(o.0, "help" | "version"))
        {
            assert!(
                readme.contains(&env_name(name)),
                "README.md does not mention {}",
                env_name(name)
            );
        }
    }

    #[test]
    fn init_mode_refuses_checkpoint_options() {
        let c = run(&["--mode", "init", "--map", "TERM:INT", "--pgroup", "p"]).unwrap();
        assert_eq!(c.mode, Mode::Init);
        for option in [
            &["-c", "f"][..],
            &["--ckpt=f"],
            &["--interval", "1"],
            &["--keep-aslr"],
            &["--arch", "i386"],
        ] {
            let mut args = vec!["--mode", "init"];
            args.extend_from_slice(option);
            args.push("p");
            let err = run(&args).unwrap_err();
            assert!(
                err.why.contains("--mode init has none"),
                "{option:?}: {err}"
            );
        }
    }

    #[test]
    fn maps_and_interval() {
        let c = run(&[
            "--map",
            "term:0",
            "--map",
            "USR1:SIGHUP",
            "--interval",
            "0.5",
            "p",
        ])
        .unwrap();
        assert_eq!(c.maps, [(libc::SIGTERM, 0), (libc::SIGUSR1, libc::SIGHUP)]);
        assert_eq!(c.interval, Some(Duration::from_millis(500)));
    }

    #[test]
    fn seconds_are_decimal() {
        assert_eq!(seconds("30"), Some(Duration::from_secs(30)));
        assert_eq!(seconds("0.25"), Some(Duration::from_millis(250)));
        assert_eq!(seconds(".5"), Some(Duration::from_millis(500)));
        assert_eq!(seconds("2."), Some(Duration::from_secs(2)));
        for bad in [
            "",
            ".",
            "0",
            "0.0",
            "-1",
            "+1",
            "1e3",
            "1.2.3",
            "nan",
            "inf",
            "0.0000000001",
            "9999999999",
        ] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }
}
