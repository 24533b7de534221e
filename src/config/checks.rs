//! What a `Config` must hold together, checked once every option is set:
//! the checks that need no file system.

use crate::config::settings::{Config, Mode};
use crate::os::error::Error;

/// PROGRAM and the options that need one another.
pub(super) fn check(config: &Config) -> Result<(), Error> {
    if config.program.is_empty() {
        return Err(Error::usage("PROGRAM", "is empty"));
    }
    if config.interval_continue && config.interval.is_none() {
        return Err(Error::usage("--interval-continue", "needs --interval SECS"));
    }
    match config.mode {
        Mode::Condor if config.ckpt.len() > 1 => Err(Error::usage(
            "--ckpt",
            "a condor_compile'd job has one checkpoint file (several are for --mode self)",
        )),
        Mode::SelfCkpt => check_self(config),
        _ => Ok(()),
    }
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
pub(super) fn not_for_mode(name: &str, modes: u8, mode: Mode) -> Error {
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
