//! Jobs for `scripts/bench.sh`, run under ckptrun, tini and dumb-init alike.
//!
//! - `bench_job echo`: writes `r` to stdout when ready, then one `x` for
//!   every SIGUSR1 it receives (the signal round trip).
//! - `bench_job orphans N`: leaves N orphans (double fork, each exits at
//!   once), then waits until its parent, the supervisor, has reaped them
//!   all (its only child left is this job) and exits.

use std::time::Duration;

extern "C" fn ack(_: libc::c_int) {
    // SAFETY: write(2) is async-signal-safe.
    unsafe { libc::write(1, b"x".as_ptr().cast(), 1) };
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("echo") => echo(),
        Some("orphans") => orphans(args.get(2).and_then(|n| n.parse().ok()).unwrap_or(10_000)),
        _ => {
            eprintln!("usage: bench_job echo | orphans N");
            std::process::exit(2);
        }
    }
}

fn echo() {
    // SAFETY: the handler only calls write(2); the struct is initialised.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ack as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
        libc::write(1, b"r".as_ptr().cast(), 1);
        loop {
            libc::pause();
        }
    }
}

fn orphans(n: u32) {
    for _ in 0..n {
        // SAFETY: single-threaded; the children only fork and _exit.
        unsafe {
            match libc::fork() {
                0 => {
                    libc::fork();
                    libc::_exit(0);
                }
                pid if pid > 0 => {
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                _ => panic!("fork failed"),
            }
        }
    }
    // SAFETY: getppid/getpid cannot fail.
    let (parent, me) = unsafe { (libc::getppid(), libc::getpid()) };
    let path = format!("/proc/{parent}/task/{parent}/children");
    loop {
        let children = std::fs::read_to_string(&path).unwrap_or_default();
        if children.split_whitespace().all(|c| c == me.to_string()) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
