//! The operating system as ckptrun uses it: the thin `unsafe` wrappers
//! (`sys`), /proc (`procfs`), personality(2) and ELF architectures,
//! finding a program, the directories ckptrun writes into, errors as
//! values, the log, what happens on an internal error, a computation run
//! in a child beside ckptrun (`beside`), and the stack pages a restore
//! or a commit used handed back (`stack`). Nothing here
//! knows of jobs, modes or checkpoints.

pub mod alloc_guard;
pub mod beside;
pub mod copy;
pub mod decimal;
pub mod dir;
pub mod error;
pub mod internal_error;
pub mod log;
pub mod personality;
pub mod procfs;
pub mod program;
pub mod region;
pub mod stack;
pub mod sys;
#[cfg(test)]
pub mod temp_dir;
pub mod tree;
