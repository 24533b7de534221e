//! The modes, one per checkpoint protocol. Each answers the same three
//! questions, through `run::protocol::Protocol`: how the job starts, what
//! an eviction or a tick asks of it, and how its end is judged.
//!
//! - `condor`: condor_compile'd programs (PROTOCOLS.md §1);
//! - `selfckpt`: self-checkpointing jobs and their store (§2);
//! - `dmtcp`: unmodified programs under DMTCP (§3);
//! - `init`: no checkpoints, only a correct PID 1.
//!
//! `request` is the policy they share: evictions, time limits, ticks;
//! `stores` is what the modes that keep a store share of it: the tag
//! its generations carry, and what is left of it at the job's end.

pub mod condor;
pub mod dmtcp;
pub mod init;
pub mod request;
pub mod selfckpt;
pub mod stores;
