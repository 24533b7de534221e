//! The settings of one run, as the command line, the environment and
//! the job ad give them: one `Config`, read by everything after `parse`.

use std::ffi::OsString;
use std::time::Duration;

use crate::os::personality::{ArchChoice, Flags};
use crate::os::sys::Sig;
use crate::run::slurm::{Slurm, SlurmJob};
use crate::run::start::Settings;
use crate::run::supervise::Supervision;

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
    pub fn name(self) -> &'static str {
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
    /// Which slot files stay where HTCondor uploads them: all of them
    /// when the job ad's transfer lists name them.
    pub publish: crate::store::Publish,
    /// `--return-store`: the store comes back with the job's outputs at
    /// its successful end too.
    pub return_store: bool,
    /// Whether the store compresses (`--no-compress`: never).
    pub packing: crate::store::Packing,
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
    /// The Slurm job ckptrun runs in (SLURM_JOB_ID), if any.
    pub slurm: Option<SlurmJob>,
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
            publish: crate::store::Publish::Newest,
            return_store: false,
            packing: crate::store::Packing::WherePays,
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
            slurm: None,
        }
    }
}

impl Config {
    /// What the options say of running the job, whatever its mode.
    pub fn start_settings(&self) -> Settings {
        Settings {
            supervision: Supervision {
                pgroup: self.pgroup,
            },
            pdeathsig: self.pdeathsig,
            kill_after: self.kill_after,
            ckpt_exit_code: self.ckpt_exit_code,
            exit_by_signal: self.exit_by_signal,
            slurm: self.slurm(),
        }
    }

    /// Under Slurm: the job, and whether this mode checkpoints it.
    pub fn slurm(&self) -> Option<Slurm> {
        self.slurm.map(|job| Slurm {
            job,
            checkpoints: self.mode != Mode::Init,
        })
    }

    /// How the store is to be kept.
    pub fn store_options(&self) -> crate::store::Options {
        crate::store::Options {
            keep: self.keep,
            on_damage: self.on_damage,
            publish: self.publish,
            return_store: self.return_store,
            packing: self.packing,
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
}
