//! The command line, turned into one `Config`. Everything after `parse`
//! reads `Config` and never argv; all of ckptrun's allocation happens here
//! and in planning, before the job starts.

use std::ffi::OsString;
use std::time::Duration;

use lexopt::prelude::*;

use crate::htcondor::jobad::JobAd;
use crate::os::error::{Error, RESERVED_CODES};
use crate::os::log::Log;
use crate::os::personality::{ArchChoice, Flags};
use crate::os::sys::Sig;
use crate::run::protocol::Verdict;
use crate::run::signals;
use crate::run::supervise::Supervision;

pub const HELP: &str = "\
Usage: ckptrun [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode self --ckpt PATH --job-ckpt-exit N [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode init [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode dmtcp [OPTIONS] [--] PROGRAM [ARG...]

Runs PROGRAM, a condor_compile'd job, the way HTCondor's checkpoint
wrapper did: address randomization off (as `setarch ARCH -L -B -R`),
-_condor_ckpt FILE on a fresh start, -_condor_restart FILE
-_condor_relocatable when FILE exists. SIGTERM makes the job checkpoint
and exit; ckptrun then exits with the checkpoint code (85) so HTCondor
transfers FILE and restarts the job.

With --mode self, PROGRAM checkpoints itself to --ckpt PATH (in place
if it likes) and says so by exiting N (--job-ckpt-exit) or dying by a
signal (--job-ckpt-signal). ckptrun checks the checkpoint, commits it
atomically and durably to the store, and exits 85. Before each start,
every PATH is replaced by a private copy of the last committed
checkpoint, so a torn one is never used.

With --mode dmtcp, PROGRAM is any program, checkpointed by DMTCP (4.2):
ckptrun starts a private dmtcp_coordinator, runs PROGRAM under
dmtcp_launch (or dmtcp_restart from the last committed images), and on
eviction (SIGTERM, SIGINT, the job ad's KillSig) has DMTCP checkpoint and
kill the computation, waits until the images are complete, commits them
atomically to the store, and exits 85.

Self and dmtcp mode keep each committed generation as one file at the
top of the sandbox (--store NAME: NAME.0, NAME.1, ...), which is what
HTCondor uploads on eviction and on exit 85.

With --mode init, ckptrun is only a minimal init (as tini): no
personality, no arguments added, signals and exit status passed on
unchanged; the checkpoint options are refused.

When _CONDOR_JOB_AD names HTCondor's job ad, its SuccessCheckpointExitCode,
SuccessCheckpointExitBySignal/Signal, KillSig, CheckpointSig and
JobMaxVacateTime are used where no option says otherwise.

Options for every checkpointing mode:
  -c, --ckpt PATH         condor: the checkpoint file [default: PROGRAM as
                          given + .ckpt]; self: a file or directory the job
                          writes its checkpoint to (repeatable)
      --ckpt-exit-code N  exit code meaning \"checkpointed: transfer and
                          restart me\" [default: 85]
      --exit-by-signal SIG
                          after a checkpoint, die by SIG (no core dump)
                          instead of exiting with the code
      --interval SECS     ask for a checkpoint SECS after the job started,
                          and exit 85 once it is committed (self with
                          --ckpt-continue, condor and dmtcp with
                          --interval-continue: every SECS, running on)
      --ckpt-timeout SECS a job that does not answer a request within SECS
                          is logged, and killed if it was to exit (exit 124;
                          dmtcp: any checkpoint not complete in SECS)
                          [default: the job ad's JobMaxVacateTime less 10%
                          for evictions, else none]

Options for --mode condor:
      --arch auto|x86_64|i386
                          personality to run PROGRAM with; auto reads
                          PROGRAM's ELF header [default: auto]
      --keep-aslr         leave address randomization on (drop setarch -R)
      --no-compat-layout  drop setarch -L (ADDR_COMPAT_LAYOUT)
      --no-limit-32bit    drop setarch -B (ADDR_LIMIT_32BIT)
      --personality-optional
                          if the kernel refuses personality(), warn and run
      --interval-continue with --interval: send SIGUSR2 every SECS instead
                          of SIGTSTP; the job checkpoints and keeps running
                          (dmtcp: checkpoint every SECS, the job running on)

Options for --mode self and --mode dmtcp:
      --store NAME        committed checkpoints, one file per generation:
                          NAME.0 .. NAME.N [default: ckptrun.store]
      --keep N            older generations kept [default: 1]
      --fresh-if-damaged  if no generation is intact (each is verified
                          before a restart), set them aside and start the
                          job afresh instead of refusing (exit 125); also
                          condor mode's FILE, against FILE.xxh3

Options for --mode dmtcp:
      --dmtcp-dir DIR     where dmtcp_launch, dmtcp_coordinator, dmtcp_command
                          and dmtcp_restart are, if not in ./ [then: PATH]
      --images-dir DIR    where DMTCP writes images before ckptrun commits
                          them; must be the same path on every node, as
                          DMTCP records it [default: /tmp]

Options for --mode self:
      --job-ckpt-exit N   the job's own exit code after a checkpoint
      --job-ckpt-signal SIG
                          the job dies by SIG after a checkpoint
      --ckpt-signal SIG   how to ask the job for a checkpoint; sent on
                          eviction (SIGTERM, the job ad's KillSig) and every
                          --interval [default: SIGTERM is passed on as is]
      --ckpt-continue     a --interval request means \"checkpoint and keep
                          running\"; the job must replace each PATH by rename
      --restart-arg ARG   appended after ARG... when restarting from a
                          committed checkpoint; {ckpt} becomes the first
                          --ckpt PATH (repeatable)
      --restart-grace SECS
                          if a restart fails (non-zero) within SECS, restart
                          once from the generation before

Options for every mode:
      --mode condor|self|init|dmtcp
                          the checkpoint protocol [default: condor]
      --map FROM:TO       deliver signal FROM to the job as TO (names or
                          numbers; TO = 0 drops it); repeatable. Built in:
                          condor TERM:TSTP, TSTP:TSTP, USR2:USR2; self
                          TERM:SIG with --ckpt-signal SIG
      --pgroup            send forwarded signals to the job's whole process
                          group (tini -g), not only the job
      --pdeathsig SIG     when ckptrun's parent dies, ckptrun receives SIG
                          and handles it like any other signal (tini -p)
      --status-file FILE  when the job ends, write its raw wait status there
                          as `Exited: N` (as HTCondor's condor_pid_ns_init)
      --kill-after SECS   when the job has ended, SIGTERM the processes it
                          left, SIGKILL them after SECS [default: leave them]
      --stdin FILE        the job reads FILE as its standard input
      --stdout FILE       the job's standard output is appended to FILE
      --stderr FILE       the job's standard error is appended to FILE
  -v, --verbose           report progress on stderr
      --log FILE          append timestamped progress lines to FILE
  -h, --help              print this help
  -V, --version           print the version

Every option also reads from CKPTRUN_<LONG_NAME> (e.g. CKPTRUN_CKPT_EXIT_CODE=17,
CKPTRUN_VERBOSE=1); the command line wins.

Exit status:
  the job's own exit code, or 85 (--ckpt-exit-code) when it checkpointed;
  120  condor: the job stopped on SIGTSTP instead of checkpointing (it is
       not condor_compile'd); ckptrun ended it
  121  condor: the job died by SIGUSR2 but wrote no checkpoint during this
       run; self: the job reported a checkpoint that is missing, empty, or
       not written during this run
  122  the job itself exited with the checkpoint code, or died by the
       checkpoint signal (never passed on: HTCondor would restart it forever)
  123  self, dmtcp: the checkpoint could not be committed (the last one is
       kept)
  124  the job did not checkpoint and exit within --ckpt-timeout (or the
       job ad's eviction budget); ckptrun killed it. dmtcp: the checkpoint
       was not complete in time, or could not be requested
  125  ckptrun failed (dmtcp: also a DMTCP tool missing, or a coordinator
       that did not start)
  (the checkpoint code must be 1-128 and not one of 120-127)
  126 PROGRAM cannot run; 127 PROGRAM not found
  a job killed by signal N: ckptrun dies by N (exits 128+N as PID 1)
";

/// What the command line asks for.
pub enum Request {
    Run(Box<Config>),
    Help,
    Version,
}

/// Which checkpoint protocol the job speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// condor_compile'd: -_condor_ckpt, SIGTSTP, death by SIGUSR2.
    Condor,
    /// The job checkpoints itself; ckptrun commits its checkpoints.
    SelfCkpt,
    /// None: ckptrun is only an init.
    Init,
    /// An unmodified program checkpointed by DMTCP; ckptrun drives the
    /// coordinator and commits its images.
    Dmtcp,
}

impl Mode {
    fn bit(self) -> u8 {
        match self {
            Mode::Condor => C,
            Mode::SelfCkpt => S,
            Mode::Init => I,
            Mode::Dmtcp => D,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Condor => "condor",
            Mode::SelfCkpt => "self",
            Mode::Init => "init",
            Mode::Dmtcp => "dmtcp",
        }
    }
}

/// Everything the command line says, checked.
#[derive(Debug)]
pub struct Config {
    pub mode: Mode,
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Condor mode: at most one (the file); self mode: the working paths.
    pub ckpt: Vec<OsString>,
    pub ckpt_exit_code: u8,
    /// Die by this signal instead of exiting with the checkpoint code.
    pub exit_by_signal: Option<Sig>,
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
    /// --stdin, --stdout, --stderr: the job's standard streams (stdout
    /// and stderr are appended to).
    pub stdin: Option<OsString>,
    pub stdout: Option<OsString>,
    pub stderr: Option<OsString>,
    /// --mode dmtcp: where the DMTCP tools are, after ./ and before PATH.
    pub dmtcp_dir: Option<OsString>,
    /// --mode dmtcp: where DMTCP writes images (a directory per store).
    pub images_dir: OsString,
    /// Under HTCondor: the names the job's input files and executable
    /// have in the sandbox (job ad: TransferInput, Cmd).
    pub sandbox_inputs: Vec<OsString>,
    // --mode self
    pub store: OsString,
    pub keep: u32,
    /// When no generation is intact.
    pub on_damage: crate::store::OnDamage,
    pub job_ckpt_exit: Option<u8>,
    pub job_ckpt_signal: Option<Sig>,
    pub ckpt_signal: Option<Sig>,
    pub ckpt_continue: bool,
    pub restart_args: Vec<OsString>,
    pub restart_grace: Option<Duration>,
    pub ckpt_timeout: Option<Duration>,
    // From the job ad (see `apply_job_ad`).
    /// Signals that mean "checkpoint and exit now": the ad's KillSig
    /// (eviction) and CheckpointSig.
    pub evict_signals: Vec<Sig>,
    pub periodic_signals: Vec<Sig>,
    /// The ad's JobMaxVacateTime: how long an eviction may take.
    pub vacate_time: Option<Duration>,
    /// Options given on the command line or in CKPTRUN_* variables: the
    /// job ad does not override them.
    pub explicit: Vec<&'static str>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: Mode::Condor,
            program: OsString::new(),
            args: Vec::new(),
            ckpt: Vec::new(),
            ckpt_exit_code: 85,
            exit_by_signal: None,
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
            stdin: None,
            stdout: None,
            stderr: None,
            dmtcp_dir: None,
            images_dir: "/tmp".into(),
            sandbox_inputs: Vec::new(),
            store: "ckptrun.store".into(),
            keep: 1,
            on_damage: crate::store::OnDamage::Refuse,
            job_ckpt_exit: None,
            job_ckpt_signal: None,
            ckpt_signal: None,
            ckpt_continue: false,
            restart_args: Vec::new(),
            restart_grace: None,
            ckpt_timeout: None,
            evict_signals: Vec::new(),
            periodic_signals: Vec::new(),
            vacate_time: None,
            explicit: Vec::new(),
        }
    }
}

impl Config {
    /// Whether ckptrun ending so tells HTCondor "checkpointed: transfer
    /// and restart me" rather than the job's end.
    pub fn is_checkpoint(&self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Exit(code) => code == self.ckpt_exit_code,
            Verdict::Signal(sig) => Some(sig) == self.exit_by_signal,
        }
    }

    /// Which of setarch's -R, -L, -B the job gets.
    pub fn personality_flags(&self) -> Flags {
        Flags {
            no_randomize: !self.keep_aslr,
            compat_layout: !self.no_compat_layout,
            limit_32bit: !self.no_limit_32bit,
        }
    }

    /// How the supervisor runs: `--pgroup`.
    pub fn supervision(&self) -> Supervision {
        Supervision {
            pgroup: self.pgroup,
        }
    }
}

impl Config {
    /// Takes what the HTCondor job ad says (see `jobad`) where no option
    /// said otherwise: the checkpoint code or signal, the eviction and
    /// checkpoint signals, and the eviction's time budget.
    pub fn apply_job_ad(&mut self, ad: &JobAd, log: &Log) {
        use std::os::unix::ffi::OsStrExt;
        let inputs = [&ad.transfer_input, &ad.executable];
        self.sandbox_inputs = inputs
            .into_iter()
            .flatten()
            .flat_map(|list| crate::htcondor::jobad::top_names(list))
            .map(|name| std::ffi::OsStr::from_bytes(name).to_os_string())
            .collect();
        let explicit = |name: &str| self.explicit.contains(&name);
        let by_code = explicit("ckpt-exit-code");
        if let Some(code) = ad.exit_code
            && !by_code
        {
            if code > 128 || RESERVED_CODES.contains(&code) {
                log.warn(format_args!(
                    "job ad: SuccessCheckpointExitCode = {code}: ckptrun reserves 120-127 and codes above 128; using {}",
                    self.ckpt_exit_code
                ));
            } else {
                log.info(format_args!("job ad: checkpoint exit code {code}"));
                self.ckpt_exit_code = code;
            }
        }
        if let Some(sig) = ad.exit_signal
            && !by_code
            && !explicit("exit-by-signal")
        {
            match signals::not_kill(sig) {
                Ok(()) => {
                    log.info(format_args!(
                        "job ad: checkpoint exit by {}",
                        signals::Name(sig)
                    ));
                    self.exit_by_signal = Some(sig);
                }
                Err(why) => log.warn(format_args!(
                    "job ad: SuccessCheckpointExitSignal = {}: {why}; ignored",
                    signals::Name(sig)
                )),
            }
        }
        if let Some(sig) = ad.kill_sig.filter(|&s| s != libc::SIGTERM) {
            log.info(format_args!(
                "job ad: eviction signal {}",
                signals::Name(sig)
            ));
            self.evict_signals.push(sig);
        }
        if let Some(sig) = ad.checkpoint_sig {
            log.info(format_args!(
                "job ad: checkpoint signal {}",
                signals::Name(sig)
            ));
            self.periodic_signals.push(sig);
        }
        if let Some(t) = ad.max_vacate {
            self.vacate_time = Some(t);
        }
    }
}

/// The modes an option is for.
const C: u8 = 1;
const S: u8 = 2;
const I: u8 = 4;
const D: u8 = 8;
const ALL: u8 = C | S | I | D;

/// Every option: long name, short name, whether it takes a value, and the
/// modes it is for (the others refuse it on the command line and ignore
/// it in the environment). Each can also come from the environment as
/// `CKPTRUN_` + the long name in capitals with `_` for `-` (see
/// `env_name`). Repeatable options collect every value; for the others
/// the last wins.
const OPTIONS: [(&str, Option<char>, bool, u8); 35] = [
    ("mode", None, true, ALL),
    ("ckpt", Some('c'), true, C | S),
    ("ckpt-exit-code", None, true, C | S | D),
    ("exit-by-signal", None, true, C | S | D),
    ("arch", None, true, C),
    ("keep-aslr", None, false, C),
    ("no-compat-layout", None, false, C),
    ("no-limit-32bit", None, false, C),
    ("personality-optional", None, false, C),
    ("map", None, true, ALL),
    ("interval", None, true, C | S | D),
    ("interval-continue", None, false, C | D),
    ("store", None, true, S | D),
    ("keep", None, true, S | D),
    ("fresh-if-damaged", None, false, C | S | D),
    ("job-ckpt-exit", None, true, S),
    ("job-ckpt-signal", None, true, S),
    ("ckpt-signal", None, true, S),
    ("ckpt-continue", None, false, S),
    ("ckpt-timeout", None, true, C | S | D),
    ("restart-arg", None, true, S),
    ("restart-grace", None, true, S),
    ("dmtcp-dir", None, true, D),
    ("images-dir", None, true, D),
    ("stdin", None, true, ALL),
    ("stdout", None, true, ALL),
    ("stderr", None, true, ALL),
    ("pgroup", None, false, ALL),
    ("pdeathsig", None, true, ALL),
    ("status-file", None, true, ALL),
    ("kill-after", None, true, ALL),
    ("verbose", Some('v'), false, ALL),
    ("log", None, true, ALL),
    ("help", Some('h'), false, ALL),
    ("version", Some('V'), false, ALL),
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
    for &(name, _, takes_value, modes) in &OPTIONS {
        let on_command_line = given.iter().any(|(n, _)| *n == name);
        let skip = matches!(name, "help" | "version" | "mode")
            || (on_command_line && name != "map")
            || modes & config.mode.bit() == 0;
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
        let modes = OPTIONS.iter().find(|o| o.0 == name).map_or(ALL, |o| o.3);
        if modes & config.mode.bit() == 0 {
            return Err(not_for_mode(name, modes, config.mode));
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
    match config.mode {
        Mode::Condor if config.ckpt.len() > 1 => {
            return Err(Error::usage(
                "--ckpt",
                "a condor_compile'd job has one checkpoint file (several are for --mode self)",
            ));
        }
        Mode::SelfCkpt => check_self(&config)?,
        _ => {}
    }
    Ok(Request::Run(Box::new(config)))
}

/// What `--mode self` cannot do without.
fn check_self(config: &Config) -> Result<(), Error> {
    if config.ckpt.is_empty() {
        return Err(Error::usage(
            "--mode self",
            "needs --ckpt PATH, where the job writes its checkpoint",
        ));
    }
    if config.ckpt.len() > crate::store::MAX_CKPTS {
        return Err(Error::usage(
            "--ckpt",
            format_args!("at most {} paths", crate::store::MAX_CKPTS),
        ));
    }
    if config.job_ckpt_exit.is_none() && config.job_ckpt_signal.is_none() {
        return Err(Error::usage(
            "--mode self",
            "needs --job-ckpt-exit N or --job-ckpt-signal SIG: how the job says it checkpointed",
        ));
    }
    for (option, given) in [
        ("--interval", config.interval.is_some()),
        ("--ckpt-continue", config.ckpt_continue),
    ] {
        if given && config.ckpt_signal.is_none() {
            return Err(Error::usage(
                option,
                "needs --ckpt-signal SIG, the signal that asks the job for a checkpoint",
            ));
        }
    }
    if config.store.is_empty() {
        return Err(Error::usage("--store", "needs a non-empty path"));
    }
    Ok(())
}

/// `--keep-aslr: is for --mode condor`.
fn not_for_mode(name: &str, modes: u8, mode: Mode) -> Error {
    if mode == Mode::Init {
        return Error::usage(
            format!("--{name}"),
            "is for checkpointing; --mode init has none",
        );
    }
    let for_modes = [Mode::Condor, Mode::SelfCkpt, Mode::Dmtcp]
        .into_iter()
        .filter(|m| modes & m.bit() != 0)
        .map(Mode::name)
        .collect::<Vec<_>>()
        .join(" or ");
    Error::usage(format!("--{name}"), format!("is for --mode {for_modes}"))
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
    let signal = |allowed: &dyn Fn(Sig) -> Result<(), &'static str>| -> Result<Sig, Error> {
        let text = text()?;
        let sig = signals::parse(&text).filter(|&s| s != 0);
        let sig = sig.ok_or_else(|| Error::usage(from.with(&text), "unknown signal"))?;
        allowed(sig).map_err(|why| Error::usage(from.with(&text), why))?;
        Ok(sig)
    };
    config.explicit.push(name_of(name));
    match name {
        "mode" => {
            let text = text()?;
            config.mode = match text.as_str() {
                "condor" => Mode::Condor,
                "self" => Mode::SelfCkpt,
                "init" => Mode::Init,
                "dmtcp" => Mode::Dmtcp,
                _ => {
                    return Err(Error::usage(
                        from.with(&text),
                        "expected condor, self, init or dmtcp",
                    ));
                }
            };
        }
        "ckpt" => config.ckpt.push(path()?),
        "ckpt-exit-code" => config.ckpt_exit_code = exit_code(&text()?, from)?,
        "exit-by-signal" => config.exit_by_signal = Some(signal(&signals::not_kill)?),
        "store" => config.store = path()?,
        "keep" => {
            let text = text()?;
            config.keep = text
                .parse()
                .ok()
                .filter(|&n| n <= crate::store::MAX_KEEP)
                .ok_or_else(|| {
                    Error::usage(
                        from.with(&text),
                        format_args!("expected 0 to {}", crate::store::MAX_KEEP),
                    )
                })?;
        }
        "fresh-if-damaged" => config.on_damage = crate::store::OnDamage::StartAfresh,
        "job-ckpt-exit" => {
            let text = text()?;
            let code = text.parse::<u8>().ok().filter(|&c| c != 0);
            config.job_ckpt_exit = Some(code.ok_or_else(|| {
                Error::usage(from.with(&text), "expected an exit code from 1 to 255")
            })?);
        }
        "job-ckpt-signal" => {
            config.job_ckpt_signal = Some(signal(&|sig| match sig {
                libc::SIGKILL => Err(
                    "SIGKILL is how killed jobs die (OOM, eviction); pick a signal only the job sends",
                ),
                _ => signals::kills(sig),
            })?);
        }
        "ckpt-signal" => config.ckpt_signal = Some(signal(&signals::catchable)?),
        "ckpt-continue" => config.ckpt_continue = true,
        "ckpt-timeout" => config.ckpt_timeout = Some(duration(&text()?, from)?),
        "restart-arg" => config.restart_args.push(value.clone().unwrap_or_default()),
        "restart-grace" => config.restart_grace = Some(duration(&text()?, from)?),
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
            config.pdeathsig = Some(signal(&|sig| match sig {
                libc::SIGCHLD => Err("SIGCHLD cannot be handled like other signals"),
                _ => signals::catchable(sig),
            })?);
        }
        "status-file" => config.status_file = Some(path()?),
        "stdin" => config.stdin = Some(path()?),
        "stdout" => config.stdout = Some(path()?),
        "stderr" => config.stderr = Some(path()?),
        "dmtcp-dir" => config.dmtcp_dir = Some(path()?),
        "images-dir" => config.images_dir = path()?,
        "kill-after" => config.kill_after = Some(duration(&text()?, from)?),
        "verbose" => config.verbose = true,
        "log" => config.log = Some(path()?),
        _ => unreachable!("option {name} is in OPTIONS but not handled"),
    }
    Ok(())
}

/// The `&'static` name from OPTIONS.
fn name_of(name: &str) -> &'static str {
    OPTIONS.iter().find(|o| o.0 == name).map_or("", |o| o.0)
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
            "ckptrun reports its own verdicts with 120-127",
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
    signals::catchable(from_sig)
        .map_err(|why| Error::usage(what(), format!("{} {why}", signals::Name(from_sig))))?;
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
    use crate::os::error;

    fn run(args: &[&str]) -> Result<Config, Error> {
        match parse(args.iter().map(OsString::from), |_| None)? {
            Request::Run(c) => Ok(*c),
            _ => panic!("not a run"),
        }
    }

    #[test]
    fn job_arguments_are_not_parsed() {
        let c = run(&["-v", "./a.out", "-v", "--ckpt", "x", "--"]).unwrap();
        assert!(c.verbose);
        assert_eq!(c.program, "./a.out");
        assert_eq!(c.args, ["-v", "--ckpt", "x", "--"]);
        assert!(c.ckpt.is_empty());
    }

    #[test]
    fn double_dash_ends_options() {
        let c = run(&["--ckpt=f", "--", "--help", "x"]).unwrap();
        assert_eq!(c.program, "--help");
        assert_eq!(c.ckpt, ["f"]);
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
            Request::Run(c) => Ok(*c),
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
        assert_eq!(c.ckpt, ["from-args"]);
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
            (c.mode, c.ckpt.first().map(|f| f.as_os_str())),
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
    fn the_reference_documents_every_variable() {
        let reference = include_str!("../../docs/reference.md");
        for (name, ..) in OPTIONS
            .iter()
            .filter(|o| !matches!(o.0, "help" | "version"))
        {
            assert!(
                reference.contains(&format!("`{}`", env_name(name))),
                "docs/reference.md does not mention {}",
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
