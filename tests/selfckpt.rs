//! `--mode self`: the built ckptrun driving a self-checkpointing job
//! (`examples/self_job.rs`, which rewrites its state in place) as HTCondor
//! would: exit codes, the store's generations, restores, the job ad.
//! The random-eviction run is in tests/harness.rs.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use common::*;

/// A sandbox holding the self-checkpointing fixture as `job`.
fn sandbox(name: &str) -> Sandbox {
    let sandbox = Sandbox::new(name);
    copy_program(&self_fixture(), &sandbox.path("job"));
    sandbox
}

/// `ckptrun --mode self --ckpt state --job-ckpt-exit 17 --ckpt-signal USR1
/// -v EXTRA... -- ./job state STEPS result`, fast steps.
fn self_mode(sandbox: &Sandbox, extra: &[&str], steps: u32) -> Command {
    let mut args = vec![
        "--mode",
        "self",
        "-v",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
        "--ckpt-signal",
        "USR1",
    ];
    args.extend_from_slice(extra);
    let steps = steps.to_string();
    args.extend_from_slice(&["--", "./job", "state", &steps, "result"]);
    let mut cmd = sandbox.ckptrun(&args);
    cmd.env("SELF_JOB_STEP_MS", "2")
        .env("SELF_JOB_PAD", "65536")
        .env("SELF_JOB_WRITE_US", "0")
        .env_remove("_CONDOR_JOB_AD");
    cmd
}

/// `ckptrun --mode self --ckpt state --job-ckpt-exit 17 EXTRA... -- sh -c
/// SCRIPT`: a shell script stands in for the job.
fn self_sh(sandbox: &Sandbox, extra: &[&str], script: &str) -> Command {
    let mut args = vec!["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    sandbox.ckptrun(&args)
}

const STORE: &str = "ckptrun.store";

/// What generation `g` holds for `state`, as GNU tar reads it.
fn committed(sandbox: &Sandbox, g: u64) -> Vec<u8> {
    tar_member(&slot_of(&sandbox.dir, STORE, g), "state").expect("state in the generation")
}

/// What the first commit (generation 1) holds for `state`.
fn first_commit(sandbox: &Sandbox) -> Vec<u8> {
    committed(sandbox, 1)
}

/// What an uninterrupted run writes to RESULT (a directory state: `dir`).
fn reference(steps: u32, dir: bool) -> String {
    let sandbox = sandbox(&format!("reference-{steps}-{dir}"));
    let status = Command::new("./job")
        .args(["state", &steps.to_string(), "result"])
        .current_dir(&sandbox.dir)
        .env("SELF_JOB_STEP_MS", "0")
        .env("SELF_JOB_PAD", "65536")
        .env("SELF_JOB_DIR", if dir { "1" } else { "0" })
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(sandbox.path("result")).unwrap()
}

#[test]
fn checkpoints_commit_and_restarts_resume_to_the_uninterrupted_result() {
    let sandbox = sandbox("self-cycle");
    let mut exits = Vec::new();
    for _ in 0..10 {
        let mut cmd = self_mode(&sandbox, &[], 100);
        cmd.env("SELF_JOB_CKPT_EVERY", "30");
        let out = run(cmd);
        exits.push(out.code());
        if out.code() == Some(0) {
            break;
        }
        assert_eq!(out.code(), Some(85), "{}", out.stderr);
        assert!(
            out.stderr.contains("committed generation"),
            "{}",
            out.stderr
        );
        // The newest and one older generation (--keep 1), in two files.
        assert_eq!(slots(&sandbox.dir, STORE).len(), 2);
    }
    assert_eq!(exits, [Some(85), Some(85), Some(85), Some(0)]);
    assert_eq!(
        std::fs::read_to_string(sandbox.path("result")).unwrap(),
        reference(100, false)
    );
    // The job has ended well: its store is gone.
    assert_eq!(slots(&sandbox.dir, STORE), Vec::<std::path::PathBuf>::new());
    assert!(!sandbox.path(".ckptrun.store").exists());
}

#[test]
fn sigterm_asks_for_a_checkpoint_and_a_torn_working_copy_is_never_used() {
    let sandbox = sandbox("self-evict");
    let running = start(self_mode(&sandbox, &[], 100_000));
    // Early or not: ckptrun holds the request until the job handles it.
    std::thread::sleep(Duration::from_millis(300));
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("received SIGTERM: sent SIGUSR1 to the job")
    );
    let good = first_commit(&sandbox);

    // A torn state in the sandbox (as an eviction transfer might bring
    // back) must be replaced by the committed one before the job starts.
    std::fs::write(sandbox.path("state"), b"SELFJOB1 torn").unwrap();
    let mut cmd = self_mode(
        &sandbox,
        &["--restart-arg", "--resume", "--restart-arg", "{ckpt}"],
        100_000,
    );
    cmd.env("SELF_JOB_EXIT", "9");
    let out = run(cmd);
    assert_eq!(out.code(), Some(9), "{}", out.stderr);
    assert!(
        out.stdout.contains("resumed via --resume"),
        "{}",
        out.stdout
    );
    assert_eq!(std::fs::read(sandbox.path("state")).unwrap(), good);
    assert_eq!(first_commit(&sandbox), good);
}

#[test]
fn a_report_without_a_fresh_checkpoint_is_not_passed_on_as_one() {
    // The job exits 17 without writing anything: `sh` stands in for it.
    let sandbox = Sandbox::new("self-no-ckpt");
    let out = run(self_sh(&sandbox, &[], "exit 17"));
    assert_eq!(out.code(), Some(121), "{}", out.stderr);
    assert!(out.stderr.contains("state is missing"), "{}", out.stderr);

    std::fs::write(sandbox.path("state"), b"").unwrap();
    remove_store(&sandbox);
    let out = run(self_sh(&sandbox, &[], "exit 17"));
    assert_eq!(out.code(), Some(121));
    assert!(out.stderr.contains("state is empty"), "{}", out.stderr);

    std::fs::write(sandbox.path("state"), b"old").unwrap();
    remove_store(&sandbox);
    let out = run(self_sh(&sandbox, &[], "exit 17"));
    assert_eq!(out.code(), Some(121));
    assert!(out.stderr.contains("not"), "{}", out.stderr);
    assert!(
        out.stderr.contains("written since the job started"),
        "{}",
        out.stderr
    );
    assert_eq!(generations(&sandbox.dir, STORE), [0]);

    // Written: committed.
    let out = run(self_sh(&sandbox, &[], "echo new > state; exit 17"));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(first_commit(&sandbox), b"new\n");
}

#[test]
fn the_jobs_own_exits_pass_through_except_the_checkpoint_code() {
    let sandbox = Sandbox::new("self-exits");
    let job = |script: &str| run(self_sh(&sandbox, &[], script));
    assert_eq!(job("exit 0").code(), Some(0));
    assert_eq!(job("exit 3").code(), Some(3));
    let out = job("exit 85");
    assert_eq!(out.code(), Some(122));
    assert!(
        out.stderr.contains("which HTCondor reads as a checkpoint"),
        "{}",
        out.stderr
    );
    let out = job("kill -SEGV $$");
    assert_eq!(out.signal(), Some(libc::SIGSEGV));
}

#[test]
fn a_checkpoint_signal_death_and_exit_by_signal() {
    let sandbox = Sandbox::new("self-signals");
    // The job says "checkpointed" by dying by SIGUSR2; ckptrun says it to
    // HTCondor by dying by SIGTERM, without a core dump.
    let out = run(sandbox.ckptrun([
        "--mode",
        "self",
        "--ckpt",
        "state",
        "--job-ckpt-signal",
        "USR2",
        "--exit-by-signal",
        "TERM",
        "--",
        "sh",
        "-c",
        "echo x > state; kill -USR2 $$",
    ]));
    assert_eq!(out.signal(), Some(libc::SIGTERM), "{}", out.stderr);
    assert!(!out.status.core_dumped());
    assert_eq!(first_commit(&sandbox), b"x\n");
    let out = run(sandbox.ckptrun([
        "--mode",
        "self",
        "--ckpt",
        "state",
        "--job-ckpt-signal",
        "KILL",
        "--",
        "true",
    ]));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(
        &out,
        "--job-ckpt-signal KILL: SIGKILL is how killed jobs die",
    );
}

#[test]
fn the_job_ad_sets_the_code_the_signal_and_options_win() {
    let sandbox = Sandbox::new("self-jobad");
    let ad = sandbox.path(".job.ad");
    std::fs::write(
        &ad,
        "MyType = \"Job\"\nSuccessCheckpointExitCode = 77\nKillSig = \"SIGINT\"\nJobMaxVacateTime = 600\n",
    )
    .unwrap();
    let script = "trap 'echo x > state; exit 17' USR1; echo > ready; while :; do sleep 0.05; done";
    let mut args = vec![
        "--mode",
        "self",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
        "--ckpt-signal",
        "USR1",
        "-v",
        "--",
        "sh",
        "-c",
        script,
    ];
    // KillSig = SIGINT is an eviction: it asks for a checkpoint.
    let mut cmd = sandbox.ckptrun(&args);
    cmd.env("_CONDOR_JOB_AD", &ad);
    let mut running = start(cmd);
    // Once its trap is set: earlier, SIGUSR1 would kill it.
    running.wait_for(&sandbox.path("ready"));
    running.signal(libc::SIGINT);
    let out = running.finish();
    assert_eq!(out.code(), Some(77), "{}", out.stderr);
    assert!(out.stderr.contains("job ad: checkpoint exit code 77"));
    assert!(
        out.stderr.contains("received SIGINT: sent SIGUSR1"),
        "{}",
        out.stderr
    );

    // --ckpt-exit-code beats the ad.
    args.splice(0..0, ["--ckpt-exit-code", "86"]);
    let mut cmd = sandbox.ckptrun(&args);
    cmd.env("_CONDOR_JOB_AD", &ad);
    let _ = std::fs::remove_file(sandbox.path("ready"));
    let mut running = start(cmd);
    running.wait_for(&sandbox.path("ready"));
    running.signal(libc::SIGTERM);
    assert_eq!(running.finish().code(), Some(86));

    // By signal, from the ad.
    std::fs::write(
        &ad,
        "SuccessCheckpointExitBySignal = true\nSuccessCheckpointExitSignal = 10\n",
    )
    .unwrap();
    let mut cmd = self_sh(&sandbox, &[], "echo y > state; exit 17");
    cmd.env("_CONDOR_JOB_AD", &ad);
    let out = run(cmd);
    assert_eq!(out.signal(), Some(libc::SIGUSR1), "{}", out.stderr);

    // A malformed ad is one warning, and the job runs as if there were none.
    std::fs::write(&ad, "this is not a job ad\n").unwrap();
    let mut cmd = self_sh(&sandbox, &[], "echo z > state; exit 17");
    cmd.env("_CONDOR_JOB_AD", &ad);
    let out = run(cmd);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_one_error_line(&out, "is not `Name = value`; ignored");
}

#[test]
fn a_directory_checkpoint_is_committed_and_swapped_back_whole() {
    let sandbox = sandbox("self-dir");
    let run_once = |every: &str| {
        let mut cmd = self_mode(&sandbox, &[], 90);
        cmd.env("SELF_JOB_DIR", "1")
            .env("SELF_JOB_CKPT_EVERY", every);
        run(cmd)
    };
    let out = run_once("40");
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&sandbox.dir, STORE, 1);
    assert!(tar_member(&slot, "state/a").is_some() && tar_member(&slot, "state/b").is_some());
    // Tear the working directory: one half replaced, a stray file added.
    std::fs::create_dir_all(sandbox.path("state")).unwrap();
    std::fs::write(sandbox.path("state/a"), b"torn").unwrap();
    std::fs::write(sandbox.path("state/stray"), b"x").unwrap();
    let out = run_once("0");
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("start step=40"), "{}", out.stdout);
    assert!(
        !sandbox.path("state/stray").exists(),
        "the whole directory was swapped"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path("result")).unwrap(),
        reference(90, true)
    );
}

#[test]
fn a_restart_that_fails_fast_falls_back_once_to_the_generation_before() {
    let sandbox = sandbox("self-fallback");
    for _ in 0..2 {
        let mut cmd = self_mode(&sandbox, &["--keep", "2"], 200);
        cmd.env("SELF_JOB_CKPT_EVERY", "50");
        assert_eq!(run(cmd).code(), Some(85));
    }
    // Corrupt the newest generation's state (gen 2, step 100) inside its
    // archive: the job will find it torn and exit 3 at once.
    corrupt_state(&slot_of(&sandbox.dir, STORE, 2));
    let mut cmd = self_mode(&sandbox, &["--keep", "2", "--restart-grace", "5"], 200);
    cmd.env("SELF_JOB_CKPT_EVERY", "50");
    let out = run(cmd);
    assert_eq!(out.code(), Some(85), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("failed within --restart-grace (exited 3); falling back once"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("start step=50"), "{}", out.stdout);
    let failed = sandbox.path(".ckptrun.store/failed");
    assert_eq!(generation_of(&failed), Some(2), "the failed one is kept");
    // The checkpoint taken after the fallback is the newest.
    assert_eq!(generations(&sandbox.dir, STORE).last(), Some(&2));

    // Without --restart-grace, no second start.
    corrupt_state(&slot_of(&sandbox.dir, STORE, 2));
    let out = run(self_mode(&sandbox, &["--keep", "2"], 200));
    assert_eq!(out.code(), Some(3), "{}", out.stderr);
}

#[test]
fn a_job_that_does_not_answer_is_killed_after_ckpt_timeout() {
    let sandbox = Sandbox::new("self-timeout");
    let mut running = start(self_sh(
        &sandbox,
        &["--ckpt-signal", "USR1", "--ckpt-timeout", "0.5"],
        "trap '' USR1; echo > ready; sleep 30",
    ));
    // Once it ignores SIGUSR1: earlier, SIGUSR1 would kill it.
    running.wait_for(&sandbox.path("ready"));
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(out.stderr.contains("did not checkpoint and exit in time"));
}

#[test]
fn interval_requests_a_checkpoint_and_continue_mode_commits_while_it_runs() {
    let sandbox = sandbox("self-interval");
    let mut cmd = self_mode(&sandbox, &["--interval", "0.3"], 100_000);
    cmd.env("SELF_JOB_CKPT_EVERY", "0");
    let out = run(cmd);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--interval: asking the job for a checkpoint")
    );

    // A job that replaces its checkpoint by rename and keeps running.
    let sandbox = Sandbox::new("self-continue");
    let script = "n=0; trap 'n=$((n+1)); echo $n > s.tmp; mv s.tmp state' USR1; while :; do sleep 0.05; done";
    let running = start(sandbox.ckptrun([
        "--mode",
        "self",
        "-v",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
        "--ckpt-signal",
        "USR1",
        "--interval",
        "0.2",
        "--ckpt-continue",
        "--keep",
        "5",
        "--",
        "sh",
        "-c",
        script,
    ]));
    wait_until("two commits while the job runs", || {
        generations(&sandbox.dir, STORE).len() >= 3
    });
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let gens = generations(&sandbox.dir, STORE);
    let newest = String::from_utf8(committed(&sandbox, *gens.last().unwrap())).unwrap();
    assert!(newest.trim().parse::<u32>().unwrap() >= 3, "{newest}");
}

#[test]
fn usage_errors_are_one_line_and_125() {
    let sandbox = Sandbox::new("self-usage");
    for (args, says) in [
        (
            &["--mode", "self", "--job-ckpt-exit", "17", "true"][..],
            "--mode self: needs --ckpt PATH",
        ),
        (
            &["--mode", "self", "--ckpt", "s", "true"],
            "needs --job-ckpt-exit N or --job-ckpt-signal SIG",
        ),
        (
            &[
                "--mode",
                "self",
                "--ckpt",
                "s",
                "--job-ckpt-exit",
                "17",
                "--interval",
                "5",
                "true",
            ],
            "--interval: needs --ckpt-signal SIG",
        ),
        (
            &[
                "--mode",
                "self",
                "--ckpt",
                "s",
                "--job-ckpt-exit",
                "0",
                "true",
            ],
            "--job-ckpt-exit 0: expected",
        ),
        (
            &[
                "--mode",
                "self",
                "--ckpt",
                "s",
                "--job-ckpt-exit",
                "17",
                "--keep-aslr",
                "true",
            ],
            "--keep-aslr: is for --mode condor",
        ),
        (&["--store", "x", "true"], "--store: is for --mode self"),
        (
            &[
                "--mode",
                "self",
                "--ckpt",
                "a/s",
                "--ckpt",
                "s",
                "--job-ckpt-exit",
                "17",
                "true",
            ],
            "a/s: cannot use its directory a",
        ),
    ] {
        let out = run(sandbox.ckptrun(args));
        assert_eq!(out.code(), Some(125), "{args:?}: {}", out.stderr);
        assert_one_error_line(&out, says);
    }
    std::fs::create_dir(sandbox.path("a")).unwrap();
    let out = run(sandbox.ckptrun([
        "--mode",
        "self",
        "--ckpt",
        "a/s",
        "--ckpt",
        "s",
        "--job-ckpt-exit",
        "17",
        "true",
    ]));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "has the same name as another --ckpt");
}

#[test]
fn the_jobs_own_death_by_the_checkpoint_signal_is_not_a_checkpoint() {
    let sandbox = Sandbox::new("self-signal-collision");
    let out = run(self_sh(
        &sandbox,
        &["--exit-by-signal", "USR2"],
        "kill -USR2 $$",
    ));
    assert_eq!(out.code(), Some(122), "{}", out.stderr);
    let out = run(self_sh(&sandbox, &["--exit-by-signal", "KILL"], "true"));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "every hard kill would look like a checkpoint");
}

#[test]
fn an_eviction_during_the_restart_grace_is_not_a_failed_restart() {
    let sandbox = Sandbox::new("self-grace-evicted");
    let ckptrun = |script: &str| self_sh(&sandbox, &["-v", "--restart-grace", "30"], script);
    for n in 1..=2 {
        let out = run(ckptrun(&format!("echo {n} > state; exit 17")));
        assert_eq!(out.code(), Some(85), "{}", out.stderr);
    }
    // SIGTERM is passed on as is (no --ckpt-signal); the job dies of it.
    let running = start(ckptrun("exec sleep 30"));
    std::thread::sleep(Duration::from_millis(300));
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.signal(), Some(libc::SIGTERM), "{}", out.stderr);
    assert!(!out.stderr.contains("falling back"), "{}", out.stderr);
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2]);
}

#[test]
fn nothing_the_job_left_running_writes_into_a_committed_generation() {
    let sandbox = Sandbox::new("self-leftover");
    let out = run(self_sh(
        &sandbox,
        &[],
        "exec 3>>state; echo good >&3; ( sleep 0.5; echo LATE >&3 ) & exit 17",
    ));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(first_commit(&sandbox), b"good\n");
}

#[test]
fn a_store_inside_a_checkpoint_directory_is_refused() {
    let sandbox = Sandbox::new("self-overlap");
    std::fs::create_dir(sandbox.path("d")).unwrap();
    // Through a symlink too: the paths are compared resolved.
    std::os::unix::fs::symlink("d", sandbox.path("link")).unwrap();
    let with_store = |store: &str| {
        run(sandbox.ckptrun([
            "--mode",
            "self",
            "--ckpt",
            "d",
            "--store",
            store,
            "--job-ckpt-exit",
            "17",
            "true",
        ]))
    };
    for store in ["d/ckptrun.store", "d", "./d", "link/ckptrun.store"] {
        let out = with_store(store);
        assert_eq!(out.code(), Some(125), "{store}: {}", out.stderr);
        assert_one_error_line(&out, "overlap; keep them apart");
    }
    assert_eq!(std::fs::read_dir(sandbox.path("d")).unwrap().count(), 0);
    // A name that only begins as the checkpoint's does is apart from it.
    std::fs::create_dir(sandbox.path("dd")).unwrap();
    let out = with_store("dd/ckptrun.store");
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

/// `ckptrun --mode self --store STORE --ckpt CKPT --job-ckpt-exit 17 true`.
fn self_true(sandbox: &Sandbox, store: &str, ckpt: &str) -> Finished {
    run(sandbox.ckptrun([
        "--mode",
        "self",
        "--store",
        store,
        "--ckpt",
        ckpt,
        "--job-ckpt-exit",
        "17",
        "true",
    ]))
}

#[test]
fn a_checkpoint_inside_the_stores_own_directory_is_refused() {
    // `.NAME/` holds the older generations and the kept copy: a working
    // path in it would be taken for them, or removed with them.
    let sandbox = Sandbox::new("self-in-scratch");
    std::fs::create_dir_all(sandbox.path(".ckptrun.store/older")).unwrap();
    std::fs::create_dir(sandbox.path("ckptrun.store.0")).unwrap();
    std::fs::create_dir(sandbox.path(".st.5")).unwrap();
    // A store named with a leading dot: its slots are `.st.N`.
    for (store, ckpt) in [
        ("ckptrun.store", ".ckptrun.store/state"),
        ("ckptrun.store", ".ckptrun.store/older/state"),
        ("ckptrun.store", "./ckptrun.store.0/x"),
        (".st", ".st.1"),
        (".st", ".st.5/x"),
    ] {
        let out = self_true(&sandbox, store, ckpt);
        assert_eq!(out.code(), Some(125), "{ckpt}: {}", out.stderr);
        assert_one_error_line(&out, "overlap; keep them apart");
    }
    for dir in [".ckptrun.store/older", "ckptrun.store.0", ".st.5"] {
        assert_eq!(std::fs::read_dir(sandbox.path(dir)).unwrap().count(), 0);
    }
}

/// `--store` and `--ckpt` name a file: a path ending in `/`, `.` or `..`
/// is refused, and nothing is made beside the directory it names (`a/.`
/// was once a store named `a`, its slots `a.0` and `a.1` made here).
#[test]
fn a_store_or_checkpoint_path_ending_in_a_directory_is_refused() {
    let sandbox = Sandbox::new("self-dot");
    std::fs::create_dir(sandbox.path("a")).unwrap();
    for (store, ckpt, says) in [
        ("a/.", "s", "a/.: --store needs a file name"),
        ("a/..", "s", "a/..: --store needs a file name"),
        ("a/", "s", "a/: --store needs a file name"),
        ("st", "a/.", "a/.: --ckpt needs a file or directory name"),
        ("st", ".", ".: --ckpt needs a file or directory name"),
        ("st", "a//", "a//: --ckpt needs a file or directory name"),
    ] {
        let out = self_true(&sandbox, store, ckpt);
        assert_eq!(out.code(), Some(125), "{store} {ckpt}: {}", out.stderr);
        assert_one_error_line(&out, says);
    }
    let mut left: Vec<_> = std::fs::read_dir(&sandbox.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["a"]);
    assert_eq!(std::fs::read_dir(sandbox.path("a")).unwrap().count(), 0);
}

/// A run Slurm requeued that finds no generation starts the job from the
/// beginning, and says so: here the slots hold nothing (HTCondor's kind
/// of placeholder). One that finds a generation says nothing. `scontrol`
/// is a stand-in that answers as Slurm 22.05 does for a running job.
#[test]
fn under_slurm_a_requeued_run_that_finds_only_empty_slots_says_so() {
    let sandbox = Sandbox::new("slurm-empty-slots");
    let path = sandbox.stand_in(
        "scontrol",
        "echo \"JobId=42 JobName=job JobState=RUNNING Reason=None Requeue=1 \
         Restarts=$SLURM_RESTART_COUNT BatchFlag=1 ExitCode=0:0\"",
    );
    std::fs::write(sandbox.path("ckptrun.store.0"), b"").unwrap();
    let requeued = |restart: &str, script: &str| {
        run(self_sh(&sandbox, &[], script)
            .env("PATH", &path)
            .env("SLURM_JOB_ID", "42")
            .env("SLURM_RESTART_COUNT", restart))
    };
    let said = "Slurm requeued job 42 (restart 1), yet this start found no checkpoint there";
    let out = requeued("1", "echo 1 > state; exit 17");
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(out.stderr.matches(said).count(), 1, "{}", out.stderr);
    let out = requeued("2", "test \"$(cat state)\" = 1");
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        !out.stderr.contains("found no checkpoint"),
        "{}",
        out.stderr
    );
}

/// Under Slurm the job's shell ignores SIGTERM (`run::slurm::shield`),
/// but the program it runs may handle it, and Slurm signals every process
/// of the job. Its checkpoint on Slurm's SIGTERM is committed: ckptrun
/// must not take the shell's deafness for the job's (a first try at
/// ending such jobs at once SIGKILLed the shell, and the checkpoint was
/// lost).
#[test]
fn under_slurm_a_program_a_shell_runs_checkpoints_on_slurms_sigterm() {
    let on_term = "    time.sleep(0.5)\n";
    let script = "python3 ckpt.py; exit $?";
    under_slurm_an_eviction_commits("slurm-shell-child", on_term, script, "0");
}

/// Under Slurm, SIGTERM to ckptrun and to every process of the job, as
/// Slurm sends it at a preemption; the stand-in scontrol makes it an
/// eviction, after `answer_s` seconds. `script` runs under `sh -c`; its
/// Python program `ckpt.py` runs `on_term` (lines of Python, each
/// indented by 4) on SIGTERM, then checkpoints and exits 17: ckptrun
/// must exit 85 with its state committed.
fn under_slurm_an_eviction_commits(name: &str, on_term: &str, script: &str, answer_s: &str) {
    let sandbox = Sandbox::new(name);
    let program = format!(
        "import os, signal, time\n\
         def on_term(sig, frame):\n{on_term}    open('state.tmp', 'w').write('checkpointed\\n')\n    \
             os.rename('state.tmp', 'state')\n    \
             os._exit(17)\n\
         signal.signal(signal.SIGTERM, on_term)\n\
         open('ready', 'w').close()\n\
         while True:\n    \
             time.sleep(0.01)\n"
    );
    std::fs::write(sandbox.path("ckpt.py"), program).unwrap();
    let mut job = start(
        self_sh(&sandbox, &["-v"], script)
            .env(
                "PATH",
                sandbox.stand_in("scontrol", &format!("sleep {answer_s}; exit 1")),
            )
            .env("SLURM_JOB_ID", "42")
            .env_remove("SLURM_RESTART_COUNT"),
    );
    job.wait_for(&sandbox.path("ready"));
    let top = first_child(job.pid());
    job.signal(libc::SIGTERM);
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(-top, libc::SIGTERM) };
    let out = job.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(committed(&sandbox, 1), b"checkpointed\n");
}

/// A handler that ignores SIGTERM while it checkpoints (so that another
/// cannot interrupt it): by the time ckptrun looks, no process of the
/// job hears SIGTERM, yet the checkpoint is coming. (A first try at
/// killing such jobs at once lost it, in the real Slurm too.)
#[test]
fn under_slurm_a_handler_that_ignores_sigterm_while_it_checkpoints_commits() {
    let on_term = "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    time.sleep(1)\n";
    under_slurm_an_eviction_commits("slurm-ign-handler", on_term, "exec python3 ckpt.py", "0");
}

/// A program that checkpoints at once and exits 17, under a shell that
/// relays its code a while later: the shell, alone and deaf by the time
/// Slurm answers (0.5 s here), must not be taken for a job that cannot
/// checkpoint.
#[test]
fn under_slurm_a_shell_that_relays_its_programs_checkpoint_late_commits() {
    let script = "python3 ckpt.py; rc=$?; sleep 2; exit $rc";
    under_slurm_an_eviction_commits("slurm-relay-late", "", script, "0.5");
}

/// The optimized builds users ship, for both architectures, through a
/// whole checkpoint cycle (the other tests use debug builds).
#[test]
fn the_release_builds_commit_and_restore() {
    for target in ["x86_64-unknown-linux-musl", "i686-unknown-linux-musl"] {
        let ckptrun = ckptrun_release(target);
        let sandbox = sandbox(&format!("self-release-{target}"));
        let mut codes = Vec::new();
        for _ in 0..5 {
            let out = run(Command::new(&ckptrun)
                .args(["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"])
                .args(["--", "./job", "state", "90", "result"])
                .current_dir(&sandbox.dir)
                .env("SELF_JOB_STEP_MS", "0")
                .env("SELF_JOB_PAD", "65536")
                .env("SELF_JOB_DIR", "1")
                .env("SELF_JOB_CKPT_EVERY", "40"));
            codes.push(out.code());
            assert!(
                matches!(out.code(), Some(0 | 85)),
                "{target}: {}",
                out.stderr
            );
            if out.code() == Some(0) {
                break;
            }
        }
        assert_eq!(codes, [Some(85), Some(85), Some(0)], "{target}");
        assert_eq!(
            std::fs::read_to_string(sandbox.path("result")).unwrap(),
            reference(90, true),
            "{target}"
        );
    }
}

#[test]
fn a_checkpoint_finished_just_before_the_request_is_committed() {
    // The job checkpoints on its own, then the eviction's request arrives
    // and it exits 17 at once: the checkpoint is new in this run, so it
    // is good (the harness hit this race about once in 80 runs).
    let sandbox = Sandbox::new("self-race");
    let mut running = start(self_sh(
        &sandbox,
        &["--ckpt-signal", "USR1"],
        "trap 'exit 17' USR1; echo done > state; while :; do sleep 0.05; done",
    ));
    running.wait_for(&sandbox.path("state"));
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(first_commit(&sandbox), b"done\n");
}

#[test]
fn as_pid_1_a_checkpoint_by_signal_is_the_exit_code() {
    // PID 1 cannot die by its own signal, and 128+N would read as an
    // ordinary exit: the checkpoint code is used instead, and said.
    let sandbox = Sandbox::new("self-pid1");
    let mut unshare = pid_namespace();
    let out = run(unshare
        .arg(CKPTRUN)
        .args(["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"])
        .args(["--exit-by-signal", "USR1", "--", "sh", "-c"])
        .arg("echo x > state; exit 17")
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("as PID 1 ckptrun cannot die by SIGUSR1: exit 85"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_commit_that_fails_keeps_the_last_one_and_exits_123() {
    // The store on a 16 KiB tmpfs (a mount namespace of its own): the
    // job's 100 KB checkpoint cannot be moved there (another filesystem)
    // nor copied (no space).
    let sandbox = Sandbox::new("self-commit-fails");
    let mut unshare = Command::new("unshare");
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        unshare.arg("--map-root-user");
    }
    let script = format!(
        "mkdir small && mount -t tmpfs -o size=16k tmpfs small && exec '{CKPTRUN}' --mode self \
         --ckpt state --store small/store --job-ckpt-exit 17 -- sh -c \
         'head -c 100000 /dev/zero > state; exit 17'"
    );
    let out = run(unshare
        .args(["--mount", "sh", "-c", &script])
        .current_dir(&sandbox.dir));
    assert_eq!(out.code(), Some(123), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("cannot commit the checkpoint to small/store")
            && out.stderr.contains("No space left on device"),
        "{}",
        out.stderr
    );
    // The working copy is still there for the next attempt.
    assert_eq!(
        std::fs::metadata(sandbox.path("state")).unwrap().len(),
        100_000
    );
}

/// Removes the store (its slots and scratch) from the sandbox.
fn remove_store(sandbox: &Sandbox) {
    for slot in slots(&sandbox.dir, STORE) {
        std::fs::remove_file(slot).unwrap();
    }
    let _ = std::fs::remove_dir_all(sandbox.path(".ckptrun.store"));
}

/// Flips a byte in the middle of the job's state inside a generation's
/// archive, leaving the archive whole.
fn corrupt_state(archive: &std::path::Path) {
    let mut bytes = std::fs::read(archive).unwrap();
    let at = bytes
        .windows(8)
        .position(|w| w == b"SELFJOB1")
        .expect("the job's state in the archive");
    bytes[at + 1000] ^= 0xff;
    // The job wrote it so: ckptrun committed it faithfully, and its
    // manifest agrees (the line recomputed by xxhsum, independently).
    std::fs::write(archive, &bytes).unwrap();
    let state = tar_member(archive, "state").unwrap();
    let copy = archive.with_extension("state-copy");
    std::fs::write(&copy, state).unwrap();
    let out = Command::new("xxhsum")
        .arg("-H3")
        .arg(&copy)
        .output()
        .unwrap();
    std::fs::remove_file(&copy).unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    let hex = out.trim_end().rsplit(' ').next().unwrap().as_bytes();
    assert_eq!(hex.len(), 16, "xxhsum -H3 said {out}");
    let line = b"XXH3 (state) = ";
    let at = bytes
        .windows(line.len())
        .position(|w| w == line)
        .expect("state in the manifest")
        + line.len();
    bytes[at..at + 16].copy_from_slice(hex);
    std::fs::write(archive, bytes).unwrap();
}
