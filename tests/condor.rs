//! ckptrun driving condor_compile'd jobs, as a user would: a job, a
//! signal, an expected exit and files.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use common::*;

/// An uninterrupted run of the fixture, for comparison.
fn uninterrupted(steps: &str) -> String {
    let sandbox = Sandbox::with_job("uninterrupted");
    let out = run(sandbox.ckptrun(["./job", steps, "5"]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    out.stdout
}

#[test]
fn evicted_twice_then_resumes_with_the_same_result() {
    let expected = uninterrupted("60");
    let sandbox = Sandbox::with_job("cycle");
    let report = sandbox.path("report");
    for eviction in 0..2 {
        let _ = std::fs::remove_file(&report);
        let mut job = start(
            sandbox
                .ckptrun(["--log", "ckptrun.log", "./job", "60", "20"])
                .env("CONDOR_JOB_REPORT", &report),
        );
        job.wait_for(&report);
        std::thread::sleep(Duration::from_millis(300));
        job.signal(libc::SIGTERM); // HTCondor's vacate
        let out = job.finish();
        assert_eq!(out.code(), Some(85), "eviction {eviction}: {}", out.stderr);
        assert!(
            out.stderr.contains("checkpointed at step"),
            "{}",
            out.stderr
        );
        assert!(sandbox.path("job.ckpt").exists());
        assert!(!sandbox.path("job.ckpt.tmp").exists());
        if eviction == 1 {
            let argv = read_report(&report).argv;
            assert_eq!(
                argv[3..],
                [
                    b"-_condor_restart".to_vec(),
                    b"./job.ckpt".to_vec(),
                    b"-_condor_relocatable".to_vec()
                ]
            );
        }
    }
    let out = run(sandbox.ckptrun(["--log", "ckptrun.log", "./job", "60", "20"]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("resumed at step"), "{}", out.stderr);
    assert_eq!(out.stdout, expected);

    let log = std::fs::read_to_string(sandbox.path("ckptrun.log")).unwrap();
    for needle in [
        "fresh start",
        "restart from ./job.ckpt",
        "received SIGTERM",
        "sent SIGTSTP",
        "exit 85",
        "exit 0",
    ] {
        assert!(log.contains(needle), "log lacks {needle:?}:\n{log}");
    }
    assert!(
        log.lines()
            .all(|l| l.starts_with("20") && l.contains("Z ckptrun[")),
        "{log}"
    );
}

#[test]
fn first_start_passes_ckpt_after_the_jobs_own_arguments() {
    let sandbox = Sandbox::with_job("args");
    let report = sandbox.path("report");
    let weird = std::ffi::OsStr::from_bytes(b"caf\xe9 \xff");
    let start_job = || {
        run(sandbox
            .ckptrun(["-c", "state/ck"])
            .arg("./job")
            .args(["0", "1", "two words", ""])
            .arg(weird)
            .env("CONDOR_JOB_REPORT", &report))
    };
    // state/ does not exist: ckptrun refuses before starting anything.
    let out = start_job();
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "state: cannot write checkpoints there");

    std::fs::create_dir(sandbox.path("state")).unwrap();
    let out = start_job();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let argv = read_report(&report).argv;
    let want: Vec<Vec<u8>> = [
        &b"./job"[..],
        b"0",
        b"1",
        b"two words",
        b"",
        b"caf\xe9 \xff",
        b"-_condor_ckpt",
        b"state/ck",
    ]
    .iter()
    .map(|a| a.to_vec())
    .collect();
    assert_eq!(argv, want);
}

#[test]
fn periodic_checkpoint_and_exit() {
    let sandbox = Sandbox::with_job("interval");
    let out = run(sandbox.ckptrun(["--interval", "0.5", "./job", "1000", "10"]));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(sandbox.path("job.ckpt").exists());
    // The next run restarts from it.
    let out = run(sandbox.ckptrun(["--interval", "0.5", "./job", "1000", "10"]));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(out.stderr.contains("resumed at step"), "{}", out.stderr);
}

#[test]
fn periodic_checkpoint_and_continue() {
    let sandbox = Sandbox::with_job("interval-continue");
    let report = sandbox.path("report");
    let mut job = start(
        sandbox
            .ckptrun([
                "--interval",
                "0.2",
                "--interval-continue",
                "./job",
                "60",
                "20",
            ])
            .env("CONDOR_JOB_REPORT", &report),
    );
    job.wait_for(&report);
    let ckpt = sandbox.path("job.ckpt");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ckpt.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no periodic checkpoint written"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = job.finish();
    assert_eq!(
        out.code(),
        Some(0),
        "the job keeps running to its end: {}",
        out.stderr
    );
    assert!(out.stdout.contains("60 steps"));
}

#[test]
fn a_stale_tmp_is_removed_and_logged() {
    let sandbox = Sandbox::with_job("stale");
    std::fs::write(sandbox.path("job.ckpt.tmp"), b"half a checkp").unwrap();
    let out = run(sandbox.ckptrun(["--log", "log", "./job", "1", "1"]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(!sandbox.path("job.ckpt.tmp").exists());
    let log = std::fs::read_to_string(sandbox.path("log")).unwrap();
    assert!(
        log.contains("removed stale ./job.ckpt.tmp (13 bytes)"),
        "{log}"
    );
}

#[test]
fn a_stale_tmp_symlink_is_removed_without_touching_its_target() {
    let sandbox = Sandbox::with_job("stale-link");
    std::fs::write(sandbox.path("precious"), b"user data").unwrap();
    std::os::unix::fs::symlink(sandbox.path("precious"), sandbox.path("job.ckpt.tmp")).unwrap();
    let out = run(sandbox.ckptrun(["./job", "1", "1"]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(std::fs::symlink_metadata(sandbox.path("job.ckpt.tmp")).is_err());
    assert_eq!(
        std::fs::read(sandbox.path("precious")).unwrap(),
        b"user data"
    );
}

#[test]
fn an_empty_checkpoint_file_means_a_fresh_start() {
    // A placeholder listed in transfer_input_files.
    let sandbox = Sandbox::with_job("empty");
    let report = sandbox.path("report");
    std::fs::write(sandbox.path("job.ckpt"), b"").unwrap();
    let out = run(sandbox
        .ckptrun(["./job", "1", "1"])
        .env("CONDOR_JOB_REPORT", &report));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        read_report(&report).argv[3..],
        [b"-_condor_ckpt".to_vec(), b"./job.ckpt".to_vec()]
    );
}

#[test]
fn a_corrupt_image_kills_the_restore_and_ckptrun_dies_the_same_way() {
    let sandbox = Sandbox::with_job("corrupt");
    std::fs::write(sandbox.path("job.ckpt"), b"not an image").unwrap();
    let out = run(sandbox.ckptrun(["./job", "5", "1"]));
    assert_eq!(
        out.signal(),
        Some(libc::SIGKILL),
        "{:?} {}",
        out.status,
        out.stderr
    );
}

#[test]
fn a_signal_sent_before_ckptrun_is_ready_still_checkpoints() {
    // SIGTERM is already pending when ckptrun starts: the earliest
    // instant of the start-up window.
    let sandbox = Sandbox::with_job("startup-signal");
    let mut cmd = sandbox.ckptrun(["./job", "1000", "10"]);
    before_exec(&mut cmd, || {
        let set = sigset(&[libc::SIGTERM]);
        // SAFETY: async-signal-safe calls on a local set.
        unsafe {
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::raise(libc::SIGTERM);
        }
    });
    let out = run(&mut cmd);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(sandbox.path("job.ckpt").exists());
}

#[test]
fn a_signal_at_any_instant_of_start_up_is_forwarded() {
    // SIGTERM sent after spawning ckptrun, at several delays that fall
    // during planning, between fork and exec, after exec and before the
    // job's handlers exist. The test's mask blocks SIGTERM only so that
    // ckptrun has no instant, before its first instruction blocks it, at
    // which SIGTERM could kill it. None may be lost, and the job must not
    // be stopped by a SIGTSTP it cannot handle yet.
    for delay_us in [0u64, 200, 500, 1000, 3000] {
        let sandbox = Sandbox::with_job(&format!("startup-{delay_us}"));
        let mut cmd = sandbox.ckptrun(["./job", "1000", "10"]);
        before_exec(&mut cmd, || {
            let set = sigset(&[libc::SIGTERM]);
            // SAFETY: async-signal-safe call on a local set.
            unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        });
        let job = start(&mut cmd);
        std::thread::sleep(Duration::from_micros(delay_us));
        job.signal(libc::SIGTERM);
        let out = job.finish();
        assert_eq!(out.code(), Some(85), "delay {delay_us} us: {}", out.stderr);
        assert!(sandbox.path("job.ckpt").exists());
    }
}

#[test]
fn an_eviction_before_the_job_handles_sigtstp_waits_for_it() {
    // The job takes 1 s to install its handlers. SIGTSTP sent before
    // that would stop it, and ckptrun would take it for a plain program.
    let sandbox = Sandbox::with_job("slow-init");
    let job = start(
        sandbox
            .ckptrun(["-v", "./job", "1000", "10"])
            .env("CONDOR_JOB_INIT_MS", "1000"),
    );
    // ckptrun has blocked its signals and started the job.
    first_child(job.pid());
    job.signal(libc::SIGTERM);
    let out = job.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("received SIGTERM: held until the job handles it"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_vacate_while_suspended_is_not_lost_to_the_continue() {
    // A job stopped (SIGSTOP, as a suspend does), then evicted and
    // continued: the SIGTSTP ckptrun sends stays pending in the stopped
    // job, and the SIGCONT ckptrun passes on discards it (signal(7)).
    // Slurm's preemption (SIGCONT right behind SIGTERM) does the same to
    // a job that has not run in between, as on a busy machine.
    let sandbox = Sandbox::with_job("suspended");
    let report = sandbox.path("report");
    let mut job = start(
        sandbox
            .ckptrun(["--log", "ckptrun.log", "./job", "1000", "10"])
            .env("CONDOR_JOB_REPORT", &report),
    );
    job.wait_for(&report);
    let pid = first_child(job.pid());
    signal(pid, libc::SIGSTOP);
    wait_until("the job is stopped", || {
        parent_and_state(pid).is_some_and(|(_, state)| state == 'T')
    });
    let log = || std::fs::read_to_string(sandbox.path("ckptrun.log")).unwrap_or_default();
    job.signal(libc::SIGTERM);
    wait_until("ckptrun sent SIGTSTP", || {
        log().contains("received SIGTERM: sent SIGTSTP")
    });
    job.signal(libc::SIGCONT);
    let out = job.finish();
    assert_eq!(out.code(), Some(85), "{}\n{}", out.stderr, log());
    assert!(
        log().contains("SIGCONT discarded the job's pending SIGTSTP: sent it again"),
        "{}",
        log()
    );
}

#[test]
fn an_early_periodic_checkpoint_does_not_kill_the_job() {
    // SIGUSR2 before the handler exists would kill the job.
    let sandbox = Sandbox::with_job("slow-init-usr2");
    let out = run(sandbox
        .ckptrun([
            "--interval",
            "0.1",
            "--interval-continue",
            "./job",
            "40",
            "10",
        ])
        .env("CONDOR_JOB_INIT_MS", "300"));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(sandbox.path("job.ckpt").exists());
}

#[test]
fn sigusr2_sent_to_ckptrun_checkpoints_and_the_job_continues() {
    let sandbox = Sandbox::with_job("usr2-continue");
    let report = sandbox.path("report");
    let mut job = start(
        sandbox
            .ckptrun(["./job", "40", "20"])
            .env("CONDOR_JOB_REPORT", &report),
    );
    job.wait_for(&report);
    job.signal(libc::SIGUSR2);
    job.wait_for(&sandbox.path("job.ckpt"));
    let out = job.finish();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("40 steps"));
}

#[test]
fn the_job_ad_sets_the_code_and_the_eviction_signal() {
    let sandbox = Sandbox::with_job("jobad");
    let ad = sandbox.path(".job.ad");
    std::fs::write(
        &ad,
        "SuccessCheckpointExitCode = 77\nKillSig = \"SIGINT\"\nCmd = \"ckptrun\"\n",
    )
    .unwrap();
    let report = sandbox.path("report");
    let mut job = start(
        sandbox
            .ckptrun(["-v", "./job", "60", "20"])
            .env("CONDOR_JOB_REPORT", &report)
            .env("_CONDOR_JOB_AD", &ad),
    );
    job.wait_for(&report);
    job.signal(libc::SIGINT); // the submit file's kill_sig
    let out = job.finish();
    assert_eq!(out.code(), Some(77), "{}", out.stderr);
    assert!(
        out.stderr.contains("received SIGINT: sent SIGTSTP"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_job_that_does_not_checkpoint_in_time_is_killed() {
    // It ignores SIGTSTP: neither checkpoints nor stops.
    let sandbox = Sandbox::new("ckpt-timeout");
    let mut job = start(sandbox.ckptrun([
        "--ckpt-timeout",
        "0.3",
        "--",
        "sh",
        "-c",
        "trap '' TSTP; echo > ready; sleep 30",
    ]));
    // Once it ignores SIGTSTP: earlier, SIGTSTP would stop it.
    job.wait_for(&sandbox.path("ready"));
    job.signal(libc::SIGTERM);
    let out = job.finish();
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(out.stderr.contains("did not checkpoint and exit in time"));
}

/// An eviction whose job renamed its checkpoint into FILE and was killed
/// in the pause before its SIGUSR2 (exit 124): the checkpoint is whole,
/// and its checksum is recorded. Before, FILE.xxh3 still held the one
/// before it, and the next start refused the good checkpoint (exit 125).
#[test]
fn a_checkpoint_renamed_in_before_a_timeout_is_recorded_and_restarts() {
    let expected = uninterrupted("60");
    let sandbox = Sandbox::with_job("ckpt-timeout-renamed");
    let report = sandbox.path("report");
    let evicted = |extra: &[&str]| {
        let _ = std::fs::remove_file(&report);
        let mut args = extra.to_vec();
        args.extend(["./job", "60", "20"]);
        let mut job = start(
            sandbox
                .ckptrun(args)
                .env("CONDOR_JOB_REPORT", &report)
                .env("CONDOR_JOB_VERBOSE", "1"),
        );
        job.wait_for(&report);
        job.signal(libc::SIGTERM);
        job.finish()
    };
    let out = evicted(&[]);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    // The job pauses 1 s after its rename: killed 0.9 s after the request.
    let out = evicted(&["--ckpt-timeout", "0.9"]);
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(
        out.stderr.contains("checkpointed at step"),
        "renamed in before the kill: {}",
        out.stderr
    );
    assert_sum_checks(&sandbox);
    let out = run(sandbox
        .ckptrun(["./job", "60", "20"])
        .env("CONDOR_JOB_VERBOSE", "1"));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("resumed at step"), "{}", out.stderr);
    assert_eq!(out.stdout, expected);
}

/// Under Slurm a SIGTERM that comes before the job handles its request
/// is held, and tried again every 50 ms (`protocol::when_ready`): Slurm is
/// asked what it means once, not at each try. A review saw 34 `scontrol`
/// runs in 1.9 s for one preemption of a job slow to start, each a request
/// to slurmctld. `scontrol` here is a stand-in that counts its runs and
/// answers with the line Slurm 22.05 prints for a requeued job.
#[test]
fn under_slurm_a_held_sigterm_asks_slurm_once() {
    let sandbox = Sandbox::with_job("slurm-held");
    let runs = sandbox.path("scontrol-runs");
    let path = sandbox.stand_in(
        "scontrol",
        &format!(
            "echo run >> '{}'\necho 'JobId=42 JobName=job UserId=root(0) \
             GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 Account=(null) QOS=(null) \
             JobState=COMPLETING Reason=None Dependency=(null) Requeue=1 Restarts=1 \
             BatchFlag=1 Reboot=0 ExitCode=0:0'",
            runs.display()
        ),
    );
    let job = start(
        sandbox
            .ckptrun(["--log", "ckptrun.log", "./job", "60", "20"])
            .env("PATH", path)
            .env("SLURM_JOB_ID", "42")
            .env_remove("SLURM_RESTART_COUNT")
            .env("CONDOR_JOB_INIT_MS", "1500"),
    );
    let log = || std::fs::read_to_string(sandbox.path("ckptrun.log")).unwrap_or_default();
    wait_until("the job is started", || log().contains("started ./job"));
    job.signal(libc::SIGTERM);
    let out = job.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let log = log();
    assert!(
        log.contains("received SIGTERM: held until the job handles it"),
        "{log}"
    );
    assert_eq!(
        log_lines(&log, "SIGTERM: Slurm job 42 requeued").len(),
        1,
        "{log}"
    );
    let asked = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(asked.lines().count(), 1, "{log}");
}

/// `xxhsum -c job.ckpt.xxh3` passes in `sandbox`: FILE.xxh3 is xxhsum's
/// line, and it checks by hand.
fn assert_sum_checks(sandbox: &Sandbox) {
    let check = std::process::Command::new("xxhsum")
        .args(["-c", "job.ckpt.xxh3"])
        .current_dir(&sandbox.dir)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

/// The modification time of `path`, in whole seconds.
fn mtime(path: &std::path::Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().mtime()
}

#[test]
fn under_htcondor_the_jobs_real_end_marks_stdout_and_stderr_changed() {
    // HTCondor's final transfer returns only files changed in the last
    // run: output from before an eviction must be marked changed.
    let sandbox = Sandbox::with_job("mark-output");
    let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let ckptrun = |end: &str, under_htcondor: bool| {
        let (out, err) = (
            sandbox.path(format!("{end}.out")),
            sandbox.path(format!("{end}.err")),
        );
        for file in [&out, &err] {
            std::fs::write(file, "from before the eviction\n").unwrap();
            std::fs::File::options()
                .write(true)
                .open(file)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let args: &[&str] = match end {
            "exit" => &["--", "true"],                         // writes nothing
            _ => &["--interval", "0.2", "./job", "1000", "5"], // exit 85
        };
        let mut cmd = sandbox.ckptrun(args);
        cmd.env_remove("_CONDOR_SCRATCH_DIR")
            .env_remove("CONDOR_JOB_VERBOSE") // writes nothing itself
            .stdout(std::fs::File::options().append(true).open(&out).unwrap())
            .stderr(std::fs::File::options().append(true).open(&err).unwrap());
        if under_htcondor {
            cmd.env("_CONDOR_SCRATCH_DIR", &sandbox.dir);
        }
        let status = cmd.status().unwrap();
        let _ = std::fs::remove_file(sandbox.path("job.ckpt"));
        (status.code(), mtime(&out), mtime(&err))
    };
    let before = mtime(&sandbox.path("job")) - 60;
    let (code, out, err) = ckptrun("exit", true);
    assert_eq!(code, Some(0));
    assert!(out > before && err > before, "not marked: {out} {err}");
    // A checkpoint is no end: HTCondor uploads stdout and stderr anyway.
    let (code, out, err) = ckptrun("ckpt", true);
    assert_eq!(code, Some(85));
    assert_eq!((out, err), (1_000_000_000, 1_000_000_000));
    // Outside HTCondor nothing is touched.
    let (code, out, err) = ckptrun("exit", false);
    assert_eq!(code, Some(0));
    assert_eq!((out, err), (1_000_000_000, 1_000_000_000));
}

#[test]
fn a_checkpoint_is_recorded_with_its_checksum_and_a_damaged_one_never_restarted() {
    let sandbox = Sandbox::with_job("ckpt-sum");
    let once = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["--interval", "0.5", "./job", "1000", "10"]);
        run(sandbox.ckptrun(args))
    };
    let out = once(&[]);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_sum_checks(&sandbox);

    // One byte changed: refused in one line, before the job runs.
    let image = sandbox.path("job.ckpt");
    let mut bytes = std::fs::read(&image).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&image, &bytes).unwrap();
    let out = once(&[]);
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    assert_one_error_line(
        &out,
        "does not match the checksum recorded when it was made",
    );
    assert_eq!(
        std::fs::read(&image).unwrap(),
        bytes,
        "FILE is left as it is"
    );
    let again = once(&[]);
    assert_eq!(again.code(), Some(125), "refused again: {}", again.stderr);

    // Asked to, it starts afresh, the damaged one kept aside.
    let out = once(&["--fresh-if-damaged"]);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr.contains("kept as ./job.ckpt.damaged"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(sandbox.path("job.ckpt.damaged")).unwrap(),
        bytes
    );
    assert!(!out.stderr.contains("resumed at step"), "{}", out.stderr);

    // Without a recorded checksum (an older ckptrun's checkpoint), the
    // restart goes ahead as before.
    std::fs::remove_file(sandbox.path("job.ckpt.xxh3")).unwrap();
    let out = once(&[]);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(out.stderr.contains("resumed at step"), "{}", out.stderr);
}

#[test]
fn a_sandbox_file_named_in_no_utf_8_that_cannot_be_marked_is_logged_without_allocating() {
    // The job's end under HTCondor marks the sandbox's files changed; one
    // that cannot be (not ckptrun's: EPERM) is logged by name, after the
    // job started, where the debug build aborts on any allocation. A name
    // that is not UTF-8 must be shown without one. ckptrun runs as nobody
    // beside root's file: root is needed to set that up.
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to give the file another owner than ckptrun");
        return;
    }
    let sandbox = Sandbox::new("mark-not-utf8");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.out");
    std::fs::write(sandbox.path(name), "the job's output\n").unwrap();
    // A copy nobody can run, wherever the clone is (a 0700 directory).
    let ckptrun = sandbox.copy_for_anyone(std::path::Path::new(CKPTRUN));
    let mut cmd = sandbox.ckptrun_from(&ckptrun, ["--mode", "init", "-v", "--", "true"]);
    cmd.env("_CONDOR_SCRATCH_DIR", &sandbox.dir);
    before_exec(&mut cmd, || {
        // SAFETY: setgroups, setgid and setuid are async-signal-safe;
        // valid arguments.
        unsafe {
            libc::setgroups(0, std::ptr::null());
            libc::setgid(65534);
            libc::setuid(65534);
        }
    });
    let out = run(&mut cmd);
    assert_eq!(out.code(), Some(0), "{:?} {}", out.status, out.stderr);
    assert!(
        out.stderr
            .contains("cannot mark caf\u{fffd}.out changed for HTCondor's final transfer"),
        "{}",
        out.stderr
    );
}
