//! Every option: its names, the modes it is for, and what setting it does
//! to `Config`. Each table entry names an `Opt`, and `set` matches `Opt`
//! exhaustively, so the table and the code cannot drift apart.

use std::ffi::OsString;

use crate::config::settings::{Config, Mode};
use crate::config::values::{Source, Value};
use crate::os::error::Error;
use crate::os::sys::Sig;
use crate::run::signals;
use crate::store::{OnDamage, Packing};

/// The modes an option is for.
pub(super) const C: u8 = 1;
pub(super) const S: u8 = 2;
pub(super) const I: u8 = 4;
pub(super) const D: u8 = 8;
pub(super) const ALL: u8 = C | S | I | D;

/// What an option sets (`--help` and `--version` set nothing: `parse`
/// answers them).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Opt {
    Mode,
    Ckpt,
    CkptExitCode,
    ExitBySignal,
    Arch,
    KeepAslr,
    NoCompatLayout,
    NoLimit32bit,
    PersonalityOptional,
    Map,
    Interval,
    IntervalContinue,
    Store,
    Keep,
    FreshIfDamaged,
    ReturnStore,
    NoCompress,
    JobCkptExit,
    JobCkptSignal,
    CkptSignal,
    CkptContinue,
    CkptTimeout,
    RestartArg,
    RestartGrace,
    DmtcpDir,
    ImagesDir,
    Stdin,
    Stdout,
    Stderr,
    Pgroup,
    Pdeathsig,
    StatusFile,
    KillAfter,
    Verbose,
    Log,
}

/// One option: long name, short name, whether it takes a value, the
/// modes it is for (the others refuse it on the command line and ignore
/// it in the environment), and what it sets.
pub(super) struct Spec {
    pub long: &'static str,
    pub short: Option<char>,
    pub takes_value: bool,
    pub modes: u8,
    pub opt: Opt,
}

const fn spec(
    long: &'static str,
    short: Option<char>,
    takes_value: bool,
    modes: u8,
    opt: Opt,
) -> Spec {
    Spec {
        long,
        short,
        takes_value,
        modes,
        opt,
    }
}

/// `--mode`, which `parse` sets before the others.
pub(super) const MODE: Spec = spec("mode", None, true, ALL, Opt::Mode);

/// Every option but `--help` and `--version`. Each can also come from the
/// environment as `CKPTRUN_` + the long name in capitals with `_` for `-`
/// (see `env_name`). Repeatable options collect every value; for the
/// others the last wins.
#[rustfmt::skip]
pub(super) const OPTIONS: [Spec; 35] = [
    MODE,
    spec("ckpt", Some('c'), true, C | S, Opt::Ckpt),
    spec("ckpt-exit-code", None, true, C | S | D, Opt::CkptExitCode),
    spec("exit-by-signal", None, true, C | S | D, Opt::ExitBySignal),
    spec("arch", None, true, C, Opt::Arch),
    spec("keep-aslr", None, false, C, Opt::KeepAslr),
    spec("no-compat-layout", None, false, C, Opt::NoCompatLayout),
    spec("no-limit-32bit", None, false, C, Opt::NoLimit32bit),
    spec("personality-optional", None, false, C, Opt::PersonalityOptional),
    spec("map", None, true, ALL, Opt::Map),
    spec("interval", None, true, C | S | D, Opt::Interval),
    spec("interval-continue", None, false, C | D, Opt::IntervalContinue),
    spec("store", None, true, S | D, Opt::Store),
    spec("keep", None, true, S | D, Opt::Keep),
    spec("fresh-if-damaged", None, false, C | S | D, Opt::FreshIfDamaged),
    spec("return-store", None, false, S | D, Opt::ReturnStore),
    spec("no-compress", None, false, S | D, Opt::NoCompress),
    spec("job-ckpt-exit", None, true, S, Opt::JobCkptExit),
    spec("job-ckpt-signal", None, true, S, Opt::JobCkptSignal),
    spec("ckpt-signal", None, true, S, Opt::CkptSignal),
    spec("ckpt-continue", None, false, S, Opt::CkptContinue),
    spec("ckpt-timeout", None, true, C | S | D, Opt::CkptTimeout),
    spec("restart-arg", None, true, S, Opt::RestartArg),
    spec("restart-grace", None, true, S, Opt::RestartGrace),
    spec("dmtcp-dir", None, true, D, Opt::DmtcpDir),
    spec("images-dir", None, true, D, Opt::ImagesDir),
    spec("stdin", None, true, ALL, Opt::Stdin),
    spec("stdout", None, true, ALL, Opt::Stdout),
    spec("stderr", None, true, ALL, Opt::Stderr),
    spec("pgroup", None, false, ALL, Opt::Pgroup),
    spec("pdeathsig", None, true, ALL, Opt::Pdeathsig),
    spec("status-file", None, true, ALL, Opt::StatusFile),
    spec("kill-after", None, true, ALL, Opt::KillAfter),
    spec("verbose", Some('v'), false, ALL, Opt::Verbose),
    spec("log", None, true, ALL, Opt::Log),
];

/// Applies one option, from the command line or the environment.
pub(super) fn set(
    config: &mut Config,
    spec: &'static Spec,
    raw: Option<OsString>,
    from: &Source,
) -> Result<(), Error> {
    let value = Value { raw, from };
    config.explicit.push(spec.long);
    match spec.opt {
        Opt::Mode => config.mode = value.mode()?,
        Opt::Ckpt => config.ckpt.push(value.path()?),
        Opt::CkptExitCode => config.ckpt_exit_code = value.exit_code()?,
        Opt::ExitBySignal => config.exit_by_signal = Some(value.signal(signals::not_kill)?),
        Opt::Store => config.store = value.path()?,
        Opt::Keep => config.keep = value.keep()?,
        Opt::FreshIfDamaged => config.on_damage = OnDamage::StartAfresh,
        Opt::ReturnStore => config.return_store = true,
        Opt::NoCompress => config.packing = Packing::Raw,
        Opt::JobCkptExit => config.job_ckpt_exit = Some(value.job_exit_code()?),
        Opt::JobCkptSignal => config.job_ckpt_signal = Some(value.signal(job_ckpt_signal)?),
        Opt::CkptSignal => config.ckpt_signal = Some(value.signal(signals::catchable)?),
        Opt::CkptContinue => config.ckpt_continue = true,
        Opt::CkptTimeout => config.ckpt_timeout = Some(value.duration()?),
        Opt::RestartArg => config.restart_args.push(value.raw.unwrap_or_default()),
        Opt::RestartGrace => config.restart_grace = Some(value.duration()?),
        Opt::Arch => config.arch = value.arch()?,
        Opt::KeepAslr => config.keep_aslr = true,
        Opt::NoCompatLayout => config.no_compat_layout = true,
        Opt::NoLimit32bit => config.no_limit_32bit = true,
        Opt::PersonalityOptional => config.personality_optional = true,
        Opt::Map => value.maps(&mut config.maps)?,
        Opt::Interval => config.interval = Some(value.duration()?),
        Opt::IntervalContinue => config.interval_continue = true,
        Opt::Pgroup => config.pgroup = true,
        Opt::Pdeathsig => config.pdeathsig = Some(value.signal(pdeathsig)?),
        Opt::StatusFile => config.status_file = Some(value.path()?),
        Opt::Stdin => config.stdin = Some(value.path()?),
        Opt::Stdout => config.stdout = Some(value.path()?),
        Opt::Stderr => config.stderr = Some(value.path()?),
        Opt::DmtcpDir => config.dmtcp_dir = Some(value.path()?),
        Opt::ImagesDir => config.images_dir = value.path()?,
        Opt::KillAfter => config.kill_after = Some(value.duration()?),
        Opt::Verbose => config.verbose = true,
        Opt::Log => config.log = Some(value.path()?),
    }
    Ok(())
}

/// `--job-ckpt-signal`: a signal that kills, and that only the job sends.
fn job_ckpt_signal(sig: Sig) -> Result<(), &'static str> {
    match sig {
        libc::SIGKILL => {
            Err("SIGKILL is how killed jobs die (OOM, eviction); pick a signal only the job sends")
        }
        _ => signals::kills(sig),
    }
}

/// `--pdeathsig`: a signal ckptrun handles like any other.
fn pdeathsig(sig: Sig) -> Result<(), &'static str> {
    match sig {
        libc::SIGCHLD => Err("SIGCHLD cannot be handled like other signals"),
        _ => signals::catchable(sig),
    }
}

impl Mode {
    /// Its bit in an option's `modes`.
    pub fn bit(self) -> u8 {
        match self {
            Mode::Condor => C,
            Mode::SelfCkpt => S,
            Mode::Init => I,
            Mode::Dmtcp => D,
        }
    }
}
