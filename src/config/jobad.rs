//! What HTCondor's job ad (`htcondor::jobad`) changes in `Config`, where
//! no option said otherwise.

use std::ffi::OsString;

use crate::config::settings::Config;
use crate::htcondor::jobad::JobAd;
use crate::os::error::RESERVED_CODES;
use crate::os::log::Log;
use crate::run::signals;

impl Config {
    /// Takes what the HTCondor job ad says (see `jobad`) where no option
    /// said otherwise: the checkpoint code or signal, the eviction and
    /// checkpoint signals, and the eviction's time budget.
    pub fn apply_job_ad(&mut self, ad: &JobAd, log: &Log) {
        self.sandbox_inputs = sandbox_inputs(ad);
        self.take_checkpoint_exit(ad, log);
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

    /// The ad's SuccessCheckpointExitCode, or its SuccessCheckpointExitSignal,
    /// unless --ckpt-exit-code or --exit-by-signal was given.
    fn take_checkpoint_exit(&mut self, ad: &JobAd, log: &Log) {
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
    }
}

/// The names the job's input files and executable have in the sandbox
/// (the ad's TransferInput and Cmd).
fn sandbox_inputs(ad: &JobAd) -> Vec<OsString> {
    use std::os::unix::ffi::OsStrExt;
    let inputs = [&ad.transfer_input, &ad.executable];
    inputs
        .into_iter()
        .flatten()
        .flat_map(|list| crate::htcondor::jobad::top_names(list))
        .map(|name| std::ffi::OsStr::from_bytes(name).to_os_string())
        .collect()
}
