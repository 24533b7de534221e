//! How ckptrun supervises: signals forwarded and remapped, orphans
//! reaped, and the job's end turned into ckptrun's, row by row of the
//! exit table in docs/reference.md.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn exit_codes_pass_through() {
    let sandbox = Sandbox::new("exit-codes");
    for code in [0, 1, 2, 3, 42, 84, 86, 124, 128, 200, 255] {
        let out = run(shell(&sandbox, &[], &format!("exit {code}")));
        assert_eq!(out.code(), Some(code), "{}", out.stderr);
    }
}

#[test]
fn the_jobs_own_checkpoint_code_is_remapped() {
    let sandbox = Sandbox::new("collision");
    let out = run(shell(&sandbox, &[], "exit 85"));
    assert_eq!(out.code(), Some(122));
    assert!(
        out.stderr
            .contains("job exited 85 by itself, which HTCondor reads as a checkpoint"),
        "{}",
        out.stderr
    );
    // With another checkpoint code, 85 is an ordinary exit and 17 collides.
    assert_eq!(
        run(shell(&sandbox, &["--ckpt-exit-code", "17"], "exit 85")).code(),
        Some(85)
    );
    assert_eq!(
        run(shell(&sandbox, &["--ckpt-exit-code", "17"], "exit 17")).code(),
        Some(122)
    );
}

#[test]
fn a_signal_death_is_passed_on_as_the_same_signal_without_a_core() {
    // As an unprivileged user with core dumps allowed (soft and hard limit
    // 10 MB), as on many execute nodes: the job may dump core, ckptrun
    // must not (its core would replace the job's and set the core flag).
    let sandbox = Sandbox::new("signal-death");
    std::fs::set_permissions(
        &sandbox.dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    // A copy nobody can reach wherever the clone is.
    let ckptrun = sandbox.copy_for_anyone(std::path::Path::new(CKPTRUN));
    for sig in [
        libc::SIGSEGV,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGKILL,
        libc::SIGABRT,
        libc::SIGUSR1,
    ] {
        let mut cmd = shell_from(&sandbox, &ckptrun, &[], &format!("kill -{sig} $$"));
        before_exec(&mut cmd, || {
            let limit = libc::rlimit {
                rlim_cur: 10 << 20,
                rlim_max: 10 << 20,
            };
            // SAFETY: async-signal-safe calls with valid arguments.
            unsafe {
                libc::setrlimit(libc::RLIMIT_CORE, &limit);
                if libc::geteuid() == 0 {
                    libc::setgid(65534);
                    libc::setuid(65534);
                }
            }
        });
        let out = run(&mut cmd);
        assert_eq!(out.signal(), Some(sig), "{:?} {}", out.status, out.stderr);
        assert!(
            !out.status.core_dumped(),
            "ckptrun dumped core after the job's {sig}"
        );
    }
}

#[test]
fn signals_ckptrun_raises_itself_are_not_forwarded() {
    // ckptrun's stderr is a pipe whose read end is closed before it
    // starts: each of its --verbose lines raises SIGPIPE at ckptrun. The
    // job must not receive them (its PIPE trap would record one while its
    // USR1 trap waits), nor may ckptrun act on them.
    let sandbox = Sandbox::new("own-sigpipe");
    let script = "trap 'echo pipe >> got' PIPE; trap 'echo usr1 >> got; sleep 0.3; exit 0' USR1; \
                  echo ready > ready; while :; do sleep 0.01; done";
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two descriptors; we own both.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fds[0] and fds[1] are open and owned by nothing else.
    let (read_end, write_end) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read_end);
    let child = shell(&sandbox, &["-v", "--log", "log"], script)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(write_end)
        .spawn()
        .unwrap();
    let mut job = Running::new(child);
    job.wait_for(&sandbox.path("ready"));
    job.signal(libc::SIGUSR1);
    let out = job.finish();
    assert_eq!(out.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(sandbox.path("got")).unwrap(),
        "usr1\n"
    );
    let log = std::fs::read_to_string(sandbox.path("log")).unwrap();
    assert!(log.contains("received SIGUSR1"), "{log}");
    assert!(!log.contains("SIGPIPE"), "{log}");
}

#[test]
fn an_inherited_sa_nocldwait_does_not_hide_the_jobs_status() {
    let sandbox = Sandbox::new("nocldwait");
    let mut cmd = shell(&sandbox, &[], "exit 7");
    before_exec(&mut cmd, || {
        // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_flags = libc::SA_NOCLDWAIT;
            libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        }
    });
    assert_eq!(run(&mut cmd).code(), Some(7));
}

#[test]
fn the_job_gets_the_terminals_foreground() {
    // Under a real pty (script(1) from util-linux): the job is in its own
    // process group, and that group is the terminal's foreground, so it can
    // read the terminal without being stopped by SIGTTIN.
    let sandbox = Sandbox::new("pty");
    let inner = format!(
        "{} -- sh -c 'echo pgid=$(ps -o pgid= -p $$ | tr -d \" \") tpgid=$(ps -o tpgid= -p $$ | tr -d \" \")' sh",
        common::CKPTRUN
    );
    let out = run(std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("pgid="))
        .unwrap_or_else(|| panic!("{:?}", out.stdout));
    let (pgid, tpgid) = line.trim().split_once(' ').unwrap();
    assert_eq!(
        pgid.trim_start_matches("pgid="),
        tpgid.trim_start_matches("tpgid="),
        "{line}"
    );
}

#[test]
fn sigusr2_with_a_fresh_checkpoint_is_the_checkpoint_code() {
    // A job that checkpoints on its own initiative: writes $2.tmp, renames.
    let sandbox = Sandbox::new("usr2-fresh");
    let out = run(shell(
        &sandbox,
        &[],
        r#"echo image > "$2.tmp"; mv "$2.tmp" "$2"; kill -USR2 $$"#,
    ));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    // Again, now restarting from it ($2 is the restart file): a new image.
    let out = run(shell(
        &sandbox,
        &[],
        r#"echo image2 > "$2.tmp"; mv "$2.tmp" "$2"; kill -USR2 $$"#,
    ));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sandbox.path("sh.ckpt")).unwrap(),
        "image2\n"
    );
}

#[test]
fn sigusr2_without_a_new_checkpoint_is_a_failure_never_85() {
    let sandbox = Sandbox::new("usr2-missing");
    let out = run(shell(&sandbox, &[], "kill -USR2 $$"));
    assert_eq!(out.code(), Some(121));
    assert!(
        out.stderr
            .contains("sh.ckpt was not written during this run"),
        "{}",
        out.stderr
    );
    // A checkpoint from an earlier run does not count.
    std::fs::write(sandbox.path("sh.ckpt"), b"old image").unwrap();
    let out = run(shell(&sandbox, &[], "kill -USR2 $$"));
    assert_eq!(out.code(), Some(121), "{}", out.stderr);
    assert_eq!(
        std::fs::read(sandbox.path("sh.ckpt")).unwrap(),
        b"old image"
    );
}

#[test]
fn a_plain_program_stops_on_sigtstp_and_is_ended_not_hung() {
    // `sleep` is not condor_compile'd: the eviction's SIGTSTP stops it.
    // (`exec` from sh: sleep itself would reject the -_condor_* arguments.)
    let sandbox = Sandbox::new("plain-sleep");
    let mut job = start(shell(&sandbox, &[], "echo ready > ready; exec sleep 60"));
    job.wait_for(&sandbox.path("ready"));
    let sent = Instant::now();
    job.signal(libc::SIGTERM);
    let out = job.finish();
    assert_eq!(out.code(), Some(120), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("stopped on SIGTSTP instead of checkpointing"),
        "{}",
        out.stderr
    );
    assert!(
        sent.elapsed() < Duration::from_secs(9),
        "ended by SIGTERM, not by the SIGKILL fallback"
    );
}

#[test]
fn a_program_that_survives_sigterm_after_stopping_is_killed() {
    // It handles SIGTERM and goes on: SIGKILL after END_GRACE.
    let sandbox = Sandbox::new("stubborn");
    let script = "trap : TERM; echo ready > ready; while :; do sleep 0.05; done";
    let mut job = start(shell(&sandbox, &[], script));
    job.wait_for(&sandbox.path("ready"));
    job.signal(libc::SIGTSTP);
    let out = job.finish();
    assert_eq!(out.code(), Some(120), "{}", out.stderr);
    assert!(out.stderr.contains("sending SIGKILL"), "{}", out.stderr);
}

/// `shell` as in Slurm job 42, not requeued, with a stand-in `scontrol`
/// that fails: Slurm unreachable, which is taken for an eviction.
fn under_slurm(sandbox: &Sandbox, extra: &[&str], script: &str) -> std::process::Command {
    let mut cmd = shell(sandbox, extra, script);
    cmd.env("PATH", sandbox.stand_in("scontrol", "exit 1"))
        .env("SLURM_JOB_ID", "42")
        .env_remove("SLURM_RESTART_COUNT");
    cmd
}

/// `script` (`-v`) `under_slurm`, evicted (SIGTERM) once it wrote `ready`:
/// not condor_compile'd, it stops on SIGTSTP and is ended (exit 120).
fn ended_under_slurm(sandbox: &Sandbox, script: &str) -> Finished {
    let mut job = start(under_slurm(sandbox, &["-v"], script));
    job.wait_for(&sandbox.path("ready"));
    job.signal(libc::SIGTERM);
    let out = job.finish();
    assert_eq!(out.code(), Some(120), "{}", out.stderr);
    out
}

/// Under Slurm every process ckptrun starts ignores SIGTERM
/// (`run::slurm::shield`): a plain program the eviction's SIGTSTP stopped
/// is killed at once, not after END_GRACE's 10 s (a review waited them
/// out).
#[test]
fn a_program_that_ignores_sigterm_after_stopping_is_killed_at_once() {
    let sandbox = Sandbox::new("slurm-plain-sleep");
    let out = ended_under_slurm(&sandbox, "echo ready > ready; exec sleep 60");
    assert!(
        out.stderr
            .contains("stopped by SIGTSTP: ending the job (SIGKILL: it ignores SIGTERM)"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("10s after SIGTERM"), "{}", out.stderr);
}

/// A program may take SIGTERM with sigwait, blocked, and install no
/// handler: under Slurm it still ignores SIGTERM, yet the kernel queues a
/// blocked signal, so it gets the end's SIGTERM. It is not taken for one
/// that cannot (a review saw it SIGKILLed at once, its cleanup lost).
#[test]
fn a_program_that_takes_sigterm_by_sigwait_gets_it_at_its_end() {
    let sandbox = Sandbox::new("slurm-sigwait");
    copy_program(&c_job("sigwaits"), &sandbox.path("sigwaits"));
    let out = ended_under_slurm(&sandbox, "exec ./sigwaits");
    assert!(
        out.stderr
            .contains("stopped by SIGTSTP: ending the job (SIGTERM, SIGCONT)"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path("got")).unwrap(),
        "SIGTERM\n"
    );
}

/// What the job runs in its group may handle SIGTERM, although the
/// shell that leads it cannot under Slurm (a review saw a program's
/// cleanup cut short): with `--pgroup` the group gets SIGTERM; without,
/// the shell alone gets SIGKILL, and the program SIGTERM as a process
/// the job left (`--kill-after`). Either way the program
/// (tests/jobs/terms.c) records its SIGTERM.
#[test]
fn a_program_a_shell_runs_gets_sigterm_when_the_shell_is_killed() {
    for (name, extra) in [("group", "--pgroup"), ("alone", "--kill-after=3")] {
        let sandbox = Sandbox::new(&format!("slurm-shell-{name}"));
        copy_program(&c_job("terms"), &sandbox.path("terms"));
        let script = "echo ready > ready; ./terms 6000 10; echo ended $? > ended";
        let mut job = start(under_slurm(&sandbox, &["-v", extra], script));
        job.wait_for(&sandbox.path("ready"));
        // `start` is written once its handler is in place.
        wait_until("terms runs", || {
            std::fs::read_to_string(sandbox.path("runs")).is_ok_and(|r| r.contains("start"))
        });
        job.signal(libc::SIGTERM);
        let out = job.finish();
        assert_eq!(out.code(), Some(120), "{name}: {}", out.stderr);
        let shortcut = out.stderr.contains("(SIGKILL: it ignores SIGTERM)");
        assert_eq!(shortcut, name == "alone", "{name}: {}", out.stderr);
        let runs = std::fs::read_to_string(sandbox.path("runs")).unwrap();
        assert!(runs.contains("sigterm 1"), "{name}: {runs}\n{}", out.stderr);
    }
}

#[test]
fn a_sigstop_suspend_is_left_alone() {
    // HTCondor suspends with SIGSTOP and resumes with SIGCONT.
    let sandbox = Sandbox::new("suspend");
    let mut job = start(shell(
        &sandbox,
        &[],
        "echo ready > ready; sleep 0.5; exit 4",
    ));
    job.wait_for(&sandbox.path("ready"));
    let job_pid = first_child(job.pid());
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(job_pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(job_pid, libc::SIGCONT) };
    assert_eq!(job.finish().code(), Some(4));
}

#[test]
fn other_signals_are_forwarded_unchanged() {
    let sandbox = Sandbox::new("forward");
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGALRM,
        libc::SIGWINCH,
        libc::SIGCONT,
        libc::SIGURG,
        // ckptrun leaves SIGILL unblocked to report its own traps
        // (internal_error.rs); one sent to it is still the job's.
        libc::SIGILL,
    ] {
        let _ = std::fs::remove_file(sandbox.path("ready"));
        let script = format!(
            "trap 'echo got; exit 0' {sig}; echo ready > ready; while :; do sleep 0.01; done"
        );
        let mut job = start(shell(&sandbox, &[], &script));
        job.wait_for(&sandbox.path("ready"));
        job.signal(sig);
        let out = job.finish();
        assert_eq!(
            (out.code(), out.stdout.as_str()),
            (Some(0), "got\n"),
            "signal {sig}: {}",
            out.stderr
        );
    }
}

#[test]
fn a_sigill_that_arrives_while_ckptrun_is_busy_is_forwarded() {
    // ckptrun is started with a SIGILL pending and blocked: it arrives the
    // moment ckptrun unblocks SIGILL for its trap handler, long before the
    // supervisor waits for signals. The handler must keep it for the job.
    let sandbox = Sandbox::new("busy-sigill");
    let mut cmd = shell(
        &sandbox,
        &["--mode", "init"],
        "trap 'echo got; exit 0' ILL; i=0; while [ $i -lt 300 ]; do sleep 0.01; i=$((i+1)); done; exit 1",
    );
    before_exec(&mut cmd, || {
        let set = sigset(&[libc::SIGILL]);
        // SAFETY: async-signal-safe calls with valid arguments.
        unsafe {
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::raise(libc::SIGILL);
        }
    });
    let out = run(&mut cmd);
    assert_eq!(
        (out.code(), out.stdout.as_str()),
        (Some(0), "got\n"),
        "{:?} {}",
        out.status,
        out.stderr
    );
}

#[test]
fn map_remaps_and_drops() {
    let sandbox = Sandbox::new("map");
    // TERM delivered as INT.
    let script = "trap 'echo int; exit 0' INT; trap 'echo term; exit 0' TERM; echo ready > ready; while :; do sleep 0.01; done";
    let mut job = start(shell(&sandbox, &["--map", "TERM:INT"], script));
    job.wait_for(&sandbox.path("ready"));
    job.signal(libc::SIGTERM);
    assert_eq!(job.finish().stdout, "int\n");

    // HUP dropped: the job runs on to its own end.
    let _ = std::fs::remove_file(sandbox.path("ready"));
    let mut job = start(shell(
        &sandbox,
        &["--map", "SIGHUP:0"],
        "echo ready > ready; sleep 0.5; exit 3",
    ));
    job.wait_for(&sandbox.path("ready"));
    job.signal(libc::SIGHUP);
    assert_eq!(job.finish().code(), Some(3));
}

#[test]
fn orphans_are_adopted_and_reaped() {
    // The job leaves a grandchild that outlives its parent: it must be
    // reparented to ckptrun (subreaper) and reaped there, never a zombie.
    let sandbox = Sandbox::new("orphans");
    let script = "(sleep 1 & echo $! > orphan.tmp; mv orphan.tmp orphan); sleep 3";
    let mut job = start(shell(&sandbox, &[], script));
    job.wait_for(&sandbox.path("orphan"));
    let ckptrun = job.pid();
    let orphan: i32 = std::fs::read_to_string(sandbox.path("orphan"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until("the orphan is adopted by ckptrun", || {
        parent_and_state(orphan).map(|(ppid, _)| ppid) == Some(ckptrun)
    });
    wait_until("the orphan is reaped, not left a zombie", || {
        parent_and_state(orphan).is_none()
    });
    assert_eq!(job.finish().code(), Some(0));
}

#[test]
fn a_thousand_orphans_leave_no_zombie() {
    let sandbox = Sandbox::new("many-orphans");
    let script =
        "i=0; while [ $i -lt 1000 ]; do (true &); i=$((i+1)); done; echo ready > ready; sleep 3";
    let mut job = start(shell(&sandbox, &[], script));
    job.wait_for(&sandbox.path("ready"));
    let ckptrun = job.pid();
    let zombies = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| parent_and_state(pid) == Some((ckptrun, 'Z')))
            .count()
    };
    // A zombie may exist for the instant between an exit and its reaping;
    // none may stay.
    wait_until("no zombie left under ckptrun", || zombies() == 0);
    job.signal(libc::SIGINT);
    assert_eq!(job.finish().signal(), Some(libc::SIGINT));
}

#[test]
fn as_pid_1_a_signal_death_is_128_plus_n() {
    let sandbox = Sandbox::new("pid1");
    let out = run(pid_namespace()
        .args([common::CKPTRUN, "--", "sh", "-c", "kill -SEGV $$", "sh"])
        .current_dir(&sandbox.dir));
    assert_eq!(
        out.code(),
        Some(128 + libc::SIGSEGV),
        "{:?} {}",
        out.status,
        out.stderr
    );

    // Eviction still works as PID 1: SIGTERM reaches ckptrun (blocked,
    // not dropped) and becomes the checkpoint code.
    copy_program(&fixture(), &sandbox.path("job"));
    let report = sandbox.path("report");
    let mut job = start(
        pid_namespace()
            .args(["--kill-child", common::CKPTRUN, "./job", "1000", "10"])
            .env("CONDOR_JOB_REPORT", &report)
            .current_dir(&sandbox.dir),
    );
    job.wait_for(&report);
    let init = first_child(job.pid());
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{init}/status"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .unwrap()
            .split_whitespace()
            .last(),
        Some("1")
    );
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(init, libc::SIGTERM) };
    let out = job.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
}
