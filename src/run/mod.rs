//! Running a job, whatever its mode: spawning it, supervising it (signals
//! in, children reaped, timers), ending what it left behind, the status
//! file, and ckptrun's own exit. `protocol` is the contract between this
//! machinery and the modes: what a mode decides, `supervise` carries out.
//! `slurm` looks Slurm's SIGTERM up before the mode hears of it.

pub mod exit;
pub mod job_control;
pub mod protocol;
pub mod signals;
pub mod slurm;
pub mod spawn;
pub mod start;
pub mod status_file;
pub mod supervise;
