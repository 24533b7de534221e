//! ckptrun: one static binary that starts a batch job so that it can
//! checkpoint, be evicted, and resume where it left off.
//!
//! The story, step by step: block signals and note what was inherited;
//! parse the command line; under Slurm, have what ckptrun starts ignore
//! SIGTERM; read HTCondor's job ad; plan the launch (find
//! PROGRAM; condor: read its architecture, look for a checkpoint; self:
//! restore the working copy from the store; dmtcp: find the tools, start
//! a coordinator, launch or restart); set the personality (condor);
//! start the job; supervise it, starting it once more if the protocol
//! falls back; turn its end into ckptrun's.
//!
//! `no_main`: the C runtime calls `main` directly, so Rust's start-up code
//! never runs. That code would set SIGPIPE to SIG_IGN (which would leak
//! into the job) and open /dev/null over closed descriptors (which the job
//! would inherit); ckptrun must hand the job exactly what it was given.
#![cfg_attr(not(test), no_main)]
// Unit-test builds use libtest's entry point; `main` and what only it
// calls are then unused.
#![cfg_attr(test, allow(dead_code, unused_imports))]

mod config;
mod htcondor;
mod mode;
mod os;
mod run;
mod store;

use std::ffi::{CStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::config::{Config, Mode, Request};
use crate::htcondor::{jobad, transfers};
use crate::mode::{condor, dmtcp, init, selfckpt};
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::{internal_error, personality, program, sys};
use crate::run::protocol::Verdict;
use crate::run::signals::Inherited;
use crate::run::start::{Outputs, Settings, Start};
use crate::run::{exit, slurm, spawn, status_file, supervise};

#[cfg_attr(not(test), unsafe(no_mangle))]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let mut inherited = Inherited::take();
    internal_error::report_panics();
    sys::hold_standard_fds();
    let argv = args(argc, argv);
    let mut config = match config::parse(argv.clone(), sys::var_os) {
        Ok(Request::Run(config)) => *config,
        Ok(Request::Help) => return print(&config::help()),
        Ok(Request::Version) => return print(version().as_bytes()),
        Err(e) => fail(&Log::stderr_only(), e),
    };
    let log = Log::open(config.log.as_deref(), config.verbose)
        .unwrap_or_else(|e| fail(&Log::stderr_only(), e));
    if let Some(slurm) = config.slurm() {
        slurm::shield(&slurm, &mut inherited, &log);
    }
    if config.mode == Mode::Dmtcp && rustix::process::getpid().is_init() {
        match dmtcp_as_pid_1(&config, &argv, &inherited, &log) {
            Ok(verdict) => exit::finish(verdict, &log),
            Err(e) => fail(&log, e),
        }
    }
    // Its frame is large: entered only when HTCondor gave an ad.
    if config.mode != Mode::Init && sys::var_os(jobad::ENV).is_some() {
        read_job_ad(&mut config, &log);
    }
    match run(&config, &inherited, &log) {
        Ok(verdict) => exit::finish(verdict, &log),
        Err(e) => fail(&log, e),
    }
}

/// Applies the job ad's settings, and warns about what its submit file
/// would lose. Never inlined: the ad (fixed buffers, some 16 KiB) then
/// takes stack only while this runs, not in `main`'s frame in every mode.
#[inline(never)]
fn read_job_ad(config: &mut Config, log: &Log) {
    let mut ad = jobad::JobAd::default();
    if !jobad::from_env(sys::var_os, &mut ad, log) {
        return;
    }
    config.apply_job_ad(&ad, log);
    let files = checkpoint_files(config);
    let files: Vec<&std::ffi::OsStr> = files.iter().map(OsString::as_os_str).collect();
    check_transfers(config, &ad, &files, log);
    // A store whose slots a transfer list names keeps them all where the
    // list says (see store::slots).
    if matches!(config.mode, Mode::SelfCkpt | Mode::Dmtcp) && transfers::lists_any(&ad, &files) {
        config.publish = store::Publish::All;
    }
}

/// The files a checkpoint lives in, which must travel with the job:
/// condor mode's FILE, self and dmtcp mode's store slots.
fn checkpoint_files(config: &Config) -> Vec<OsString> {
    match config.mode {
        Mode::Condor => vec![condor::ckpt_path(config)],
        Mode::SelfCkpt | Mode::Dmtcp => store::slot_paths(&config.store, config.keep),
        Mode::Init => Vec::new(),
    }
}

/// Warns about a submit file that would lose checkpoints: the files
/// that must travel, and how ckptrun exits after a checkpoint of its own.
fn check_transfers(config: &Config, ad: &jobad::JobAd, files: &[&std::ffi::OsStr], log: &Log) {
    // --interval without a "continue" flag: checkpoint and exit.
    let own_exit =
        (config.interval.is_some() && !config.interval_continue && !config.ckpt_continue)
            .then_some(match config.exit_by_signal {
                Some(sig) => transfers::CkptExit::Signal(sig),
                None => transfers::CkptExit::Code(config.ckpt_exit_code),
            });
    transfers::check(ad, files, own_exit, log);
}

/// dmtcp mode as PID 1. DMTCP restores a process whose parent was PID 1
/// as an orphan, detached from whatever restarts it (dmtcp_restart's
/// isOrphan). So ckptrun stays a plain init and runs itself, as pid 2,
/// to drive DMTCP; that ckptrun does everything else (the job ad, the
/// files, the status file, HTCondor's outputs), once. `argv` is
/// ckptrun's own arguments.
fn dmtcp_as_pid_1(
    config: &Config,
    argv: &[OsString],
    inherited: &Inherited,
    log: &Log,
) -> Result<Verdict, Error> {
    log.info(format_args!(
        "PID 1: running dmtcp mode in a child (DMTCP would take the job for an orphan)"
    ));
    let me = spawn::Command::new(Path::new("/proc/self/exe"), "ckptrun".as_ref(), argv, &[])?;
    let start = Start {
        program: config.program.as_os_str(),
        // The ckptrun it runs looks Slurm's SIGTERM up.
        settings: Settings {
            slurm: None,
            ..config.start_settings()
        },
        inherited,
        log,
        status_file: None,
        outputs: None,
    };
    start.supervise(me, &mut init::Init::plain())
}

/// Plans, starts and supervises the job; returns how ckptrun should end.
fn run(config: &Config, inherited: &Inherited, log: &Log) -> Result<Verdict, Error> {
    let path = program::locate(&config.program, sys::var_os("PATH"))?;
    let stdio = spawn::Stdio::files(
        config.stdin.as_deref(),
        config.stdout.as_deref(),
        config.stderr.as_deref(),
    )?;
    let status_file = config
        .status_file
        .as_ref()
        .map(status_file::StatusFile::prepare)
        .transpose()?;
    let job = |extra: &[OsString]| spawn::Command::new(&path, &config.program, &config.args, extra);
    let start = Start {
        program: config.program.as_os_str(),
        settings: config.start_settings(),
        inherited,
        log,
        status_file,
        outputs: outputs_under_htcondor(config),
    };
    match config.mode {
        Mode::Condor => {
            let arch = program::arch(config.arch, &path, log);
            let (mut protocol, extra) = condor::Condor::plan(config, log)?;
            let persona = personality::persona(arch, config.personality_flags());
            personality::apply(persona, config.personality_optional, log)?;
            start.supervise(job(&extra)?.with_stdio(stdio), &mut protocol)
        }
        Mode::SelfCkpt => {
            let (mut protocol, extra) = selfckpt::SelfCkpt::plan(config, log)?;
            start.supervise(job(&extra)?.with_stdio(stdio), &mut protocol)
        }
        Mode::Init => start.supervise(job(&[])?.with_stdio(stdio), &mut init::Init::new(config)),
        Mode::Dmtcp => {
            // Orphans (the coordinator, once it detaches) must be ours
            // before it starts.
            supervise::adopt_orphans(log);
            let (mut protocol, command) =
                dmtcp::Dmtcp::plan(config, &path, &stdio, inherited, log)?;
            start.supervise(command.with_stdio(stdio), &mut protocol)
        }
    }
}

/// Under HTCondor: the sandbox, and the names in it that are not the
/// job's outputs, to mark changed at its end.
fn outputs_under_htcondor(config: &Config) -> Option<Outputs> {
    let dir = sys::var_os("_CONDOR_SCRATCH_DIR")?;
    let sandbox = rustix::fs::open(
        dir.as_os_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok();
    // Not the job's outputs: its inputs, and the checkpoint, of no
    // use once the job has ended (HTCondor need not carry it back).
    let not_outputs = config
        .sandbox_inputs
        .iter()
        .cloned()
        .chain(
            checkpoint_files(config)
                .iter()
                .filter_map(|f| Path::new(f).file_name().map(|n| n.to_os_string())),
        )
        .collect();
    Some(Outputs {
        sandbox,
        not_outputs,
    })
}

fn fail(log: &Log, err: Error) -> ! {
    log.warn(format_args!("{err}"));
    sys::exit_now(err.code.into())
}

fn print(text: &[u8]) -> c_int {
    let _ = rustix::io::write(rustix::stdio::stdout(), text);
    0
}

fn version() -> String {
    format!(
        "ckptrun {} ({}, commit {})\n",
        env!("CARGO_PKG_VERSION"),
        env!("CKPTRUN_TARGET"),
        env!("CKPTRUN_COMMIT")
    )
}

/// The arguments after argv[0], as the kernel gave them (any bytes).
fn args(argc: c_int, argv: *const *const c_char) -> Vec<OsString> {
    (1..argc.max(0) as usize)
        .map(|i| {
            // SAFETY: the C runtime passes argc valid pointers to
            // NUL-terminated strings that live as long as the process.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            std::ffi::OsStr::from_bytes(arg.to_bytes()).to_os_string()
        })
        .collect()
}
