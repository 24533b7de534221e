//! ckptrun as an init: the raw status for an outside supervisor, signals
//! to the job's whole process group, and following its parent's death.

mod common;

use std::time::Duration;

use common::*;

/// The pid a script wrote into the sandbox's file `name`.
fn pid_in(sandbox: &Sandbox, name: &str) -> i32 {
    let text = std::fs::read_to_string(sandbox.path(name)).unwrap();
    text.trim().parse().unwrap()
}

#[test]
fn the_status_file_holds_the_raw_wait_status() {
    let sandbox = Sandbox::new("status-file");
    let out = run(shell(&sandbox, &["--status-file", "status"], "exit 3"));
    assert_eq!(out.code(), Some(3));
    assert_eq!(
        std::fs::read_to_string(sandbox.path("status")).unwrap(),
        "Exited: 768\n"
    );
    assert!(!sandbox.path("status.tmp").exists());

    // As PID 1 the exit status says 128+11; the file tells the truth.
    let mut unshare = pid_namespace();
    let out = run(unshare
        .args([CKPTRUN, "--status-file", "status", "--"])
        .args(["sh", "-c", "kill -SEGV $$", "sh"])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(128 + libc::SIGSEGV), "{}", out.stderr);
    // Killed by SIGSEGV: the low 7 bits (a core flag may be set where
    // core_pattern pipes to a helper, whatever RLIMIT_CORE says).
    let status = std::fs::read_to_string(sandbox.path("status")).unwrap();
    let raw: i32 = status
        .strip_prefix("Exited: ")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(raw & 0x7f, libc::SIGSEGV, "{status}");

    // A job that never starts leaves no stale status of an earlier run.
    std::fs::write(sandbox.path("not-executable"), b"").unwrap();
    let out = run(sandbox.ckptrun(["--status-file", "status", "./not-executable"]));
    assert_eq!(out.code(), Some(126));
    assert_eq!(
        std::fs::read_to_string(sandbox.path("status")).unwrap(),
        format!("Exited: {}\n", 126 << 8)
    );

    // A symlink planted at FILE.tmp is replaced, not written through.
    std::fs::write(sandbox.path("precious"), b"keep").unwrap();
    std::os::unix::fs::symlink(sandbox.path("precious"), sandbox.path("status.tmp")).unwrap();
    assert_eq!(
        run(shell(&sandbox, &["--status-file", "status"], "exit 4")).code(),
        Some(4)
    );
    assert_eq!(std::fs::read(sandbox.path("precious")).unwrap(), b"keep");
    assert_eq!(
        std::fs::read_to_string(sandbox.path("status")).unwrap(),
        "Exited: 1024\n"
    );

    let out = run(shell(
        &sandbox,
        &["--status-file", "no/such/dir/status"],
        "exit 0",
    ));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "no/such/dir: cannot write the status file there");
}

#[test]
fn pgroup_delivers_to_the_jobs_whole_process_group() {
    // The job's child stays in the job's process group. With --pgroup a
    // SIGTERM reaches it too; without, it outlives the job.
    for pgroup in [true, false] {
        let sandbox = Sandbox::new(&format!("pgroup-{pgroup}"));
        let mut extra = vec!["--map", "TERM:TERM"];
        if pgroup {
            extra.push("--pgroup");
        }
        let script = "sleep 30 >/dev/null 2>&1 & echo $! > grandchild.tmp; mv grandchild.tmp grandchild; wait";
        let mut job = start(shell(&sandbox, &extra, script));
        job.wait_for(&sandbox.path("grandchild"));
        let grandchild = pid_in(&sandbox, "grandchild");
        job.signal(libc::SIGTERM);
        let out = job.finish();
        assert_eq!(out.signal(), Some(libc::SIGTERM), "{}", out.stderr);
        if pgroup {
            wait_until("the grandchild is gone", || !alive(grandchild));
        } else {
            std::thread::sleep(Duration::from_millis(200));
            assert!(
                alive(grandchild),
                "without --pgroup the grandchild is not signalled"
            );
            // SAFETY: kill has no memory arguments.
            unsafe { libc::kill(grandchild, libc::SIGKILL) };
        }
    }
}

#[test]
fn pdeathsig_turns_the_parents_death_into_a_signal_for_the_job() {
    // A parent shell starts ckptrun, waits until the job is ready, and
    // exits: ckptrun receives SIGUSR1 and forwards it; the job records it.
    let sandbox = Sandbox::new("pdeathsig");
    // Bounded: if the signal never comes, the job ends by itself in 5 s.
    let job = "trap 'echo parent-died > died; exit 0' USR1; echo ready > ready; \
               i=0; while [ \\$i -lt 500 ]; do sleep 0.01; i=\\$((i+1)); done";
    let parent = format!(
        "'{CKPTRUN}' --pdeathsig USR1 -- sh -c \"{job}\" sh >/dev/null 2>&1 & \
         while [ ! -e ready ]; do sleep 0.01; done; exit 0"
    );
    let out = run(std::process::Command::new("sh")
        .args(["-c", &parent])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(0));
    wait_until("the job got SIGUSR1", || sandbox.path("died").exists());
    assert_eq!(
        std::fs::read_to_string(sandbox.path("died")).unwrap(),
        "parent-died\n"
    );
}

#[test]
fn without_pdeathsig_the_parents_death_changes_nothing() {
    let sandbox = Sandbox::new("no-pdeathsig");
    let job = "trap 'echo parent-died > died; exit 0' USR1; echo ready > ready; sleep 0.5; echo done > done";
    let parent = format!(
        "'{CKPTRUN}' -- sh -c \"{job}\" sh >/dev/null 2>&1 & while [ ! -e ready ]; do sleep 0.01; done; exit 0"
    );
    let out = run(std::process::Command::new("sh")
        .args(["-c", &parent])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(0));
    wait_until("the job ran to its end", || sandbox.path("done").exists());
    assert!(!sandbox.path("died").exists());
}

#[test]
fn init_mode_adds_nothing_to_the_job() {
    let sandbox = Sandbox::new("init-mode");
    let out = run(sandbox.ckptrun(["--mode", "init", "--", "printf", "%s|", "a b", "", "-v"]));
    assert_eq!(
        (out.code(), out.stdout.as_str()),
        (Some(0), "a b||-v|"),
        "{}",
        out.stderr
    );
    let out = run(sandbox.ckptrun(["--mode", "init", "--", "cat", "/proc/self/personality"]));
    assert_eq!(out.stdout, "00000000\n", "no personality change");
    let out = run(sandbox.ckptrun(["--mode", "init", "--ckpt", "x", "--", "true"]));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "--ckpt: is for checkpointing; --mode init has none");
}

#[test]
fn init_mode_passes_every_exit_code_through() {
    let sandbox = Sandbox::new("init-exit-codes");
    for code in 0..=255 {
        let out = run(shell(
            &sandbox,
            &["--mode", "init"],
            &format!("exit {code}"),
        ));
        assert_eq!(out.code(), Some(code), "{}", out.stderr);
    }
}

/// Sends each catchable signal 1-64 but SIGCHLD to ckptrun and checks the
/// job (a shell trapping it) received that very signal. 32 and 33, which
/// glibc keeps for itself (a glibc shell cannot trap them), must kill the
/// job, and ckptrun with it only then: not ckptrun alone, leaving the job
/// running unsupervised (musl keeps 32-34 for itself: 34, glibc's
/// SIGRTMIN, killed ckptrun so).
fn every_signal_reaches_the_job(sandbox_name: &str, extra: &[&str]) {
    let sandbox = Sandbox::new(sandbox_name);
    for sig in 1..=64 {
        if [libc::SIGKILL, libc::SIGSTOP, libc::SIGCHLD].contains(&sig) {
            continue;
        }
        let _ = std::fs::remove_file(sandbox.path("ready"));
        let untrappable = sig == 32 || sig == 33;
        let trap = if untrappable {
            String::new()
        } else {
            format!("trap 'echo {sig} > got; exit 0' {sig};")
        };
        let script =
            format!("{trap} echo $$ > pid; echo ready > ready; while :; do sleep 0.01; done");
        let mut job = start(with_default_32_to_34(shell(&sandbox, extra, &script)));
        job.wait_for(&sandbox.path("ready"));
        job.signal(sig);
        let out = job.finish();
        let (code, signal) = (out.code(), out.signal());
        let shell = pid_in(&sandbox, "pid");
        assert!(!alive(shell), "signal {sig}: the job outlived ckptrun");
        if untrappable {
            assert_eq!(signal, Some(sig), "signal {sig}: {code:?} {}", out.stderr);
            continue;
        }
        assert_eq!(code, Some(0), "signal {sig}: {signal:?} {}", out.stderr);
        assert_eq!(
            std::fs::read_to_string(sandbox.path("got")).unwrap(),
            format!("{sig}\n")
        );
    }
}

/// `cmd` with signals 32-34 at their default disposition, as in a
/// container: this test's process (musl, threaded) ignores 32 and 33, an
/// ignored signal stays ignored across exec, and musl's sigaction refuses
/// 32-34, hence the raw system call.
fn with_default_32_to_34(mut cmd: std::process::Command) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: rt_sigaction is async-signal-safe; its argument is a zeroed
    // kernel `struct sigaction` (SIG_DFL, no flags, an empty mask), large
    // enough on x86_64 and i686 alike.
    unsafe {
        cmd.pre_exec(|| {
            let default = [0u64; 4];
            for sig in 32..=34 {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    default.as_ptr(),
                    0usize,
                    8usize,
                );
            }
            Ok(())
        })
    };
    cmd
}

#[test]
fn signals_1_to_64_reach_the_job_in_init_mode() {
    every_signal_reaches_the_job("signals-init", &["--mode", "init"]);
}

#[test]
fn signals_1_to_64_reach_the_job_with_the_condor_map_off() {
    every_signal_reaches_the_job(
        "signals-condor",
        &[
            "--map",
            "TERM:TERM",
            "--map",
            "TSTP:TSTP",
            "--map",
            "USR2:USR2",
        ],
    );
}

#[test]
fn ckptrun_variables_configure_it_and_options_override_them() {
    let sandbox = Sandbox::new("env");
    // The checkpoint code from the environment: the job's own 17 collides.
    let out = run(shell(&sandbox, &[], "exit 17").env("CKPTRUN_CKPT_EXIT_CODE", "17"));
    assert_eq!(out.code(), Some(122), "{}", out.stderr);
    // The command line's code wins.
    let out =
        run(shell(&sandbox, &["--ckpt-exit-code", "18"], "exit 17")
            .env("CKPTRUN_CKPT_EXIT_CODE", "17"));
    assert_eq!(out.code(), Some(17), "{}", out.stderr);
    // A whole image configured as a plain init by ENV.
    let out = run(sandbox
        .ckptrun(["--", "printf", "%s|", "a"])
        .env("CKPTRUN_MODE", "init"));
    assert_eq!(out.stdout, "a|");
    let out = run(shell(&sandbox, &[], "true").env("CKPTRUN_VERBOSE", "maybe"));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "CKPTRUN_VERBOSE=maybe: expected 1 or 0");
}

#[test]
fn kill_after_ends_what_the_job_left_behind() {
    // The job leaves two processes: one ends on SIGTERM, one ignores it
    // and needs the SIGKILL. Without --kill-after both outlive ckptrun.
    for kill_after in [true, false] {
        let sandbox = Sandbox::new(&format!("kill-after-{kill_after}"));
        // The stubborn one writes its pid only once its trap is set, and
        // the job waits for that: it must really need the SIGKILL.
        let script = r#"sleep 30 >/dev/null 2>&1 & echo $! > polite;
            sh -c 'trap "" TERM; echo $$ > stubborn.tmp; mv stubborn.tmp stubborn; exec sleep 30' >/dev/null 2>&1 &
            while [ ! -e stubborn ]; do sleep 0.01; done; exit 0"#;
        let extra: &[&str] = if kill_after {
            &["--mode", "init", "--kill-after", "0.3"]
        } else {
            &["--mode", "init"]
        };
        let out = run(shell(&sandbox, extra, script));
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        let pid = |name: &str| pid_in(&sandbox, name);
        let (polite, stubborn) = (pid("polite"), pid("stubborn"));
        if kill_after {
            // ckptrun returned only once none was left.
            assert!(
                !alive(polite) && !alive(stubborn),
                "leftovers survived --kill-after"
            );
        } else {
            assert!(
                alive(polite) && alive(stubborn),
                "leftovers are left alone by default"
            );
            for p in [polite, stubborn] {
                // SAFETY: kill has no memory arguments.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
    }
}

#[test]
fn kill_after_sends_each_leftover_one_sigterm() {
    // Two leftovers that count the SIGTERMs they get while they clean up
    // for half a second: one in the job's process group, one in a group
    // of its own. Each once, as the docs say (it was every 20 ms).
    let sandbox = Sandbox::new("kill-after-once");
    // And one that joins the job's group after its SIGTERM: a helper a
    // grouped leftover starts in its own SIGTERM trap, ours once the
    // leftover has seen it ready and exited.
    std::fs::write(
        sandbox.path("late.sh"),
        "trap 'sh helper.sh & while [ ! -e late.ready ]; do sleep 0.01; done; exit 0' TERM
         echo > starter.ready; while :; do sleep 0.01; done\n",
    )
    .unwrap();
    std::fs::write(
        sandbox.path("helper.sh"),
        "trap 'echo t >> late.count' TERM; echo > late.ready
         n=0; while [ $n -lt 50 ]; do sleep 0.01; n=$((n+1)); done\n",
    )
    .unwrap();
    let leftover = |name: &str| {
        format!(
            "trap 'echo t >> {name}.count' TERM; echo > {name}.ready;
             while [ ! -s {name}.count ]; do sleep 0.01; done;
             n=0; while [ $n -lt 50 ]; do sleep 0.01; n=$((n+1)); done"
        )
    };
    let script = format!(
        "sh -c \"{}\" >/dev/null 2>&1 & setsid sh -c \"{}\" >/dev/null 2>&1 &
         sh late.sh >/dev/null 2>&1 &
         while [ ! -e grouped.ready ] || [ ! -e alone.ready ] || [ ! -e starter.ready ]; do
         sleep 0.01; done; exit 0",
        leftover("grouped"),
        leftover("alone")
    );
    let out = run(shell(
        &sandbox,
        &["--mode", "init", "--kill-after", "20"],
        &script,
    ));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    for name in ["grouped", "alone", "late"] {
        let count = std::fs::read_to_string(sandbox.path(format!("{name}.count"))).unwrap();
        assert_eq!(count, "t\n", "{name}: SIGTERMs received");
    }
}

#[test]
fn in_init_mode_a_sigcont_discards_a_pending_sigtstp_as_without_ckptrun() {
    // The job, stopped, is sent SIGTSTP (caught: pending) then SIGCONT,
    // through ckptrun. The kernel discards the pending SIGTSTP, as it
    // would were the two sent to the job itself; ckptrun used to send it
    // again (condor mode's rule for its checkpoint requests), and a job
    // whose handler stops itself then stayed stopped. Under Slurm too
    // (its wrapper once kept the rule).
    for slurm in [false, true] {
        let sandbox = Sandbox::new(&format!("init-cont-{slurm}"));
        let script = "trap 'echo > tstp' TSTP; trap 'exit 0' USR1; echo $$ > pid;
            while :; do sleep 0.01; done";
        let mut cmd = shell(&sandbox, &["--mode", "init", "-v", "--log", "log"], script);
        if slurm {
            cmd.env("SLURM_JOB_ID", "42");
        }
        let mut job = start(cmd);
        job.wait_for(&sandbox.path("pid"));
        let pid = pid_in(&sandbox, "pid");
        let log = || std::fs::read_to_string(sandbox.path("log")).unwrap_or_default();
        // SAFETY: kill has no memory arguments.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        wait_until("the job is stopped", || {
            log().contains("job stopped by SIGSTOP")
        });
        job.signal(libc::SIGTSTP);
        wait_until("SIGTSTP is passed on", || log().contains("sent SIGTSTP"));
        job.signal(libc::SIGCONT);
        wait_until("SIGCONT is passed on", || log().contains("sent SIGCONT"));
        job.signal(libc::SIGUSR1);
        let out = job.finish();
        assert_eq!(out.code(), Some(0), "{}{}", out.stderr, log());
        assert!(!log().contains("sent it again"), "Slurm {slurm}: {}", log());
        assert!(
            !sandbox.path("tstp").exists(),
            "the job got SIGTSTP after SIGCONT"
        );
    }
}

/// Job control under a real terminal (script(1)) and a shell with it on
/// (`set -m`): the job stops itself with SIGTSTP, as Ctrl-Z would stop
/// it. ckptrun stops by SIGTSTP too, so the shell goes on (`$?` is
/// 128+SIGTSTP); `fg` continues ckptrun, which continues the job and
/// gives it the terminal again. Without that the shell waited for ever
/// (as under tini). A ckptrun under ckptrun passes the stop up, and so
/// does one a script runs (the script is stopped with it).
#[test]
fn in_init_mode_a_job_stopped_at_its_terminal_stops_ckptrun_and_fg_resumes_it() {
    let sandbox = Sandbox::new("init-ctrl-z");
    std::fs::write(
        sandbox.path("job.sh"),
        "kill -TSTP $$; echo pgid=$(ps -o pgid= -p $$ | tr -d ' ') \
         tpgid=$(ps -o tpgid= -p $$ | tr -d ' ')\n",
    )
    .unwrap();
    let job = format!("{CKPTRUN} --mode init -- sh job.sh");
    let nested = format!("{CKPTRUN} --mode init -- {job}");
    let in_a_script = format!("sh -c '{job}'");
    for command in [&job, &nested, &in_a_script] {
        let shell = format!("set -m; {command}; echo stopped=$?; fg >/dev/null; echo fg=$?\n");
        std::fs::write(sandbox.path("shell.sh"), shell).unwrap();
        let out = run(std::process::Command::new("script")
            .args(["-qec", "sh shell.sh", "/dev/null"])
            .current_dir(&sandbox.dir));
        assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
        let text = out.stdout.replace('\r', "");
        let stopped = 128 + libc::SIGTSTP;
        assert!(text.contains(&format!("stopped={stopped}\n")), "{text}");
        assert!(text.contains("fg=0\n"), "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("pgid="))
            .unwrap_or_else(|| panic!("{text}"));
        let (pgid, tpgid) = line.split_once(' ').unwrap();
        assert_eq!(
            pgid.trim_start_matches("pgid="),
            tpgid.trim_start_matches("tpgid="),
            "the job lacks the terminal's foreground after fg: {line}"
        );
    }
}

/// ckptrun as a terminal's session leader (script(1) runs it), with no
/// shell's job control above it: its process group is orphaned, and the
/// kernel discards a stop by Ctrl-Z of an orphaned group. The job's is
/// not orphaned (ckptrun is its parent), so ckptrun continues it, rather
/// than leave it stopped with nobody to continue it.
#[test]
fn in_init_mode_with_no_job_control_above_a_terminal_stop_is_undone() {
    let sandbox = Sandbox::new("init-orphaned");
    let inner = format!("{CKPTRUN} -v --mode init -- sh -c 'kill -TSTP $$; echo continued'");
    let out = run(std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(0), "{}{}", out.stdout, out.stderr);
    let text = out.stdout.replace('\r', "");
    assert!(text.contains("continued\n"), "{text}");
    assert!(text.contains("no job control above ckptrun"), "{text}");
}

/// A batch job has no terminal, and its ckptrun must never stop itself:
/// nothing would continue it. As under Slurm, where ckptrun shares the
/// batch script's process group, which is not orphaned (slurmstepd, its
/// parent, leads the session): here Python leads a session without a
/// terminal and starts ckptrun in a group of its own. A job that stops
/// itself stays stopped, as before, and ckptrun goes on: the SIGCONT it
/// passes on ends the test. (2efa8b2 stopped ckptrun there.)
#[test]
fn in_init_mode_without_a_terminal_ckptrun_never_stops() {
    let sandbox = Sandbox::new("init-batch-stop");
    let lead = "import os, subprocess, sys\n\
                os.setsid()\n\
                sys.exit(subprocess.Popen(sys.argv[1:], preexec_fn=os.setpgrp).wait())\n";
    let job = start(
        std::process::Command::new("python3")
            .args(["-c", lead, CKPTRUN, "-v", "--log", "log", "--mode", "init"])
            .args(["--", "sh", "-c", "kill -TSTP $$; echo continued > done"])
            .current_dir(&sandbox.dir),
    );
    let log = || std::fs::read_to_string(sandbox.path("log")).unwrap_or_default();
    wait_until("the job's stop is seen", || {
        log().contains("job stopped by SIGTSTP: nothing sent (no terminal)")
    });
    let ckptrun = first_child(job.pid());
    let state = std::fs::read_to_string(format!("/proc/{ckptrun}/stat")).unwrap();
    let state = state.rsplit(") ").next().unwrap().chars().next();
    assert_ne!(state, Some('T'), "ckptrun stopped itself\n{}", log());
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(ckptrun, libc::SIGCONT) };
    let out = job.finish();
    assert_eq!(out.code(), Some(0), "{}{}", out.stderr, log());
    assert!(sandbox.path("done").exists(), "{}", log());
}

#[test]
fn a_signal_between_fork_and_exec_is_delivered() {
    // strace holds the job's execve for 500 ms: the test sees ckptrun's
    // child still running ckptrun's own image (forked, not yet exec'd),
    // and sends SIGTERM into that window. The condor job must still get
    // the eviction and checkpoint.
    let sandbox = Sandbox::with_job("fork-exec-window");
    let mut strace = std::process::Command::new("strace");
    strace
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "trace=execve",
            "-e",
            "inject=execve:delay_enter=500000",
        ])
        .args([CKPTRUN, "./job", "1000", "10"])
        .current_dir(&sandbox.dir);
    let traced = start(&mut strace);
    // The image's path, "... (deleted)" too if cargo has just replaced it.
    let image = |pid: i32| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    // strace may first fork probes of its own: find the child running ckptrun.
    let mut ckptrun = 0;
    wait_until("strace runs ckptrun", || {
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", traced.pid()))
                .unwrap_or_default();
        let found = children
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .find(|&c| image(c).contains("/ckptrun"));
        ckptrun = found.unwrap_or(0);
        found.is_some()
    });
    let forked = first_child(ckptrun);
    assert!(
        image(forked).contains("/ckptrun"),
        "the child has already exec'd {}",
        image(forked)
    );
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(ckptrun, libc::SIGTERM) };
    assert!(
        image(forked).contains("/ckptrun"),
        "the signal missed the window"
    );
    let out = traced.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(sandbox.path("job.ckpt").exists());
}

#[test]
fn as_pid_1_a_thousand_orphans_leave_no_zombie() {
    // In a PID namespace of its own, ckptrun is PID 1 and every orphan's
    // parent. The job leaves 1000 of them, then looks at the namespace's
    // /proc: it exits 0 once no zombie is left, 1 if one stays 5 s.
    let sandbox = Sandbox::new("pid1-orphans");
    let script = "i=0; while [ $i -lt 1000 ]; do (true &); i=$((i+1)); done; \
                  n=0; while [ $n -lt 500 ]; do \
                  z=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l); \
                  [ $z -eq 0 ] && exit 0; n=$((n+1)); sleep 0.01; done; exit 1";
    let mut unshare = pid_namespace();
    let out = run(unshare
        .args([CKPTRUN, "--mode", "init", "--", "sh", "-c", script])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(0), "zombies stayed: {}", out.stderr);
}

#[test]
fn kill_after_does_not_trust_a_proc_of_another_namespace() {
    // In a PID namespace whose /proc was not remounted, /proc shows the
    // outer namespace, where pid numbers are other processes: ckptrun
    // must neither signal them nor wait for them.
    let sandbox = Sandbox::new("foreign-proc");
    let inner =
        format!("unshare --fork --pid '{CKPTRUN}' --mode init --kill-after 0.2 -- sh -c 'exit 3'");
    let mut unshare = pid_namespace();
    let out = run(unshare.args(["sh", "-c", &inner]).current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
    assert!(
        out.stderr.contains("/proc shows another PID namespace"),
        "{}",
        out.stderr
    );
}

#[test]
fn kill_after_ends_the_children_ckptrun_was_execd_with() {
    // A process that was its parent's child before that parent exec'd
    // ckptrun is ckptrun's child too: as subreaper and as PID 1 ckptrun
    // ends it (SIGTERM first: it says so in a file) and reaps it before it
    // exits, as it does the job's leftovers. Killed only by the PID
    // namespace's end, it would never write the file.
    let leftover = "trap 'echo ended > ended; exit 0' TERM; echo $$ > pid; \
                    while :; do sleep 0.05; done";
    for pid_1 in [false, true] {
        let sandbox = Sandbox::new(&format!("execd-with-{pid_1}"));
        let script = format!(
            "sh -c \"$1\" & while [ ! -s pid ]; do sleep 0.01; done; \
             exec '{CKPTRUN}' --mode init --kill-after 2 -- true"
        );
        let mut cmd = if pid_1 {
            let mut unshare = pid_namespace();
            unshare.arg("sh");
            unshare
        } else {
            std::process::Command::new("sh")
        };
        cmd.args(["-c", &script, "sh", leftover])
            .current_dir(&sandbox.dir);
        let out = run(&mut cmd);
        assert_eq!(out.code(), Some(0), "PID 1 {pid_1}: {}", out.stderr);
        let ended = sandbox.path("ended").exists();
        if !pid_1 {
            let pid = pid_in(&sandbox, "pid");
            if alive(pid) {
                signal(pid, libc::SIGKILL);
                panic!("the child ckptrun was exec'd with outlived it");
            }
        }
        assert!(
            ended,
            "PID 1 {pid_1}: the child ckptrun was exec'd with was not ended"
        );
    }
}
