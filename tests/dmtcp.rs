//! `--mode dmtcp` where it takes a fake DMTCP: what the real DMTCP cannot
//! be made to do on demand. A coordinator that fails to start or never
//! writes its port, a checkpoint that never completes (at an eviction,
//! under the job ad's vacate time, periodically), a job that joins late or
//! never, a computation DMTCP does not end after its checkpoint, a
//! coordinator that exits (`--exit-on-last`) before the job has ended, a
//! restart script that comes late, an eviction during a periodic
//! checkpoint, a checkpoint that completes after ckptrun gave up on it.
//! Everything else is tested against the real DMTCP 4.2.0
//! (tests/dmtcp_real.rs, tests/dmtcp_harness.rs).
//!
//! The tools are the fakes of `examples/fake_dmtcp` (tested on their own in
//! tests/fake_dmtcp.rs, against what the real one was seen to do),
//! installed in the sandbox as an install tree (`dmtcp/bin`,
//! `dmtcp/lib/dmtcp`); the job is `examples/dmtcp_job.rs`, linked
//! dynamically (ckptrun refuses a static program); images go to the
//! sandbox's `images/` (`--images-dir`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const STORE: &str = "ckptrun.store";

/// A sandbox holding the tools (`dmtcp/bin`), the job (`./job`) and the
/// images directory's parent (`images/`).
fn sandbox(name: &str) -> Sandbox {
    let sandbox = Sandbox::new(&format!("dmtcp-{name}"));
    install_fake_dmtcp(&sandbox.path("dmtcp"));
    link_or_copy(&dmtcp_job_dynamic(), &sandbox.path("job"));
    std::fs::create_dir(sandbox.path("images")).unwrap();
    sandbox
}

/// `ckptrun --mode dmtcp -v --stdout out --dmtcp-dir dmtcp/bin
/// --images-dir images EXTRA... -- ./job STEPS STEP_MS`, with a PATH that
/// holds no DMTCP tool and no job ad.
fn dmtcp(sandbox: &Sandbox, extra: &[&str], steps: u32, step_ms: u32) -> Command {
    let (steps, step_ms) = (steps.to_string(), step_ms.to_string());
    let images = sandbox.path("images");
    let mut all = vec!["--mode", "dmtcp", "-v", "--stdout", "out"];
    all.extend(["--dmtcp-dir", "dmtcp/bin", "--images-dir"]);
    all.push(images.to_str().unwrap());
    all.extend_from_slice(extra);
    all.extend_from_slice(&["--", "./job", &steps, &step_ms]);
    let mut cmd = sandbox.ckptrun(&all);
    cmd.env("PATH", "/usr/bin:/bin")
        .env("DMTCP_JOB_PIDFILE", "job.pid")
        .env_remove("_CONDOR_JOB_AD")
        .env_remove("DMTCP_JOB_END");
    cmd
}

/// What the job writes to stdout when run to its end, uninterrupted and
/// without DMTCP.
fn reference(steps: u32) -> String {
    let out = output(
        Command::new(dmtcp_job_dynamic())
            .arg(steps.to_string())
            .arg("0")
            .env_remove("FAKE_DMTCP_COORD")
            .env_remove("DMTCP_JOB_END"),
    );
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// `got` is `want`; else says where they first differ, in lines.
fn assert_same_output(got: &str, want: &str) {
    if got == want {
        return;
    }
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let at = g.iter().zip(&w).take_while(|(a, b)| a == b).count();
    panic!(
        "the output differs from an uninterrupted run's: {} lines against {}; line {}: {:?} \
         where {:?}",
        g.len(),
        w.len(),
        at + 1,
        g.get(at),
        w.get(at)
    );
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The slot files' bytes, to see that a run left them as they were.
/// Each slot's name and bytes (wherever the slot file is: a failed end
/// brings the newest back to the top of the sandbox).
fn slot_bytes(sandbox: &Sandbox) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    slots(&sandbox.dir, STORE)
        .into_iter()
        .map(|s| {
            let bytes = std::fs::read(&s).unwrap();
            (s.file_name().unwrap().to_owned(), bytes)
        })
        .collect()
}

/// The images generation `g` holds, read by GNU tar.
fn images_in(sandbox: &Sandbox, g: u64) -> Vec<String> {
    let out = output(
        Command::new("tar")
            .arg("-tf")
            .arg(slot_of(&sandbox.dir, STORE, g)),
    );
    assert!(out.status.success(), "tar -tf generation {g}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|m| m.starts_with("ckpt_") && m.ends_with(".dmtcp"))
        .map(String::from)
        .collect()
}

/// Nothing ckptrun started (coordinator, helpers, the job) runs on, and no
/// images directory is left.
fn assert_nothing_left(sandbox: &Sandbox) {
    assert_nothing_running(sandbox);
    let images = images_dirs(sandbox);
    assert!(images.is_empty(), "images directories left: {images:?}");
}

fn assert_nothing_running(sandbox: &Sandbox) {
    let left = processes_from(&sandbox.dir);
    for (pid, _) in &left {
        signal(*pid, libc::SIGKILL);
    }
    assert!(left.is_empty(), "left running: {left:?}");
}

/// The images directories in the sandbox's `images/`.
fn images_dirs(sandbox: &Sandbox) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(sandbox.path("images"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect()
}

/// Starts ckptrun and waits until the job runs and has joined the
/// coordinator (it writes its pid file then).
fn started(cmd: Command, sandbox: &Sandbox) -> Running {
    let _ = std::fs::remove_file(sandbox.path("job.pid"));
    let mut running = start(cmd);
    running.wait_for(&sandbox.path("job.pid"));
    running
}

/// Waits until the job has written `n` lines of output.
fn wait_for_lines(run: &mut Running, out: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while read(out).lines().count() < n {
        if let Some(status) = run.child.try_wait().unwrap() {
            panic!("ckptrun ended ({status:?}) before {n} lines of output");
        }
        assert!(Instant::now() < deadline, "no {n} lines of output");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An eviction of a run that is under way: exit 85, generation `g`.
fn evict_to(sandbox: &Sandbox, steps: u32, g: u64) {
    let mut running = started(dmtcp(sandbox, &[], steps, 20), sandbox);
    wait_for_lines(&mut running, &sandbox.path("out"), 3 * g as usize);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(generations(&sandbox.dir, STORE).last(), Some(&g));
    assert_nothing_left(sandbox);
}

/// ckptrun exits with its last line saying `what`, before the job
/// started, with nothing left.
fn assert_refused(out: &Finished, sandbox: &Sandbox, what: &str) {
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ckptrun: ") && last.contains(what),
        "{}",
        out.stderr
    );
    assert!(!sandbox.path("job.pid").exists(), "the job started");
    assert_nothing_running(sandbox);
}

#[test]
fn a_coordinator_that_does_not_start_is_125_before_the_job_starts() {
    let sandbox = sandbox("coordfail");
    let out = run(dmtcp(&sandbox, &[], 2, 1).env("FAKE_DMTCP_COORD_FAIL", "1"));
    assert_refused(&out, &sandbox, "dmtcp_coordinator");
    assert!(out.stderr.contains("exited 3"), "{}", out.stderr);
}

#[test]
fn a_coordinator_that_never_says_its_port_is_ended() {
    let sandbox = sandbox("noport");
    // The coordinator detaches, then would write its port after 12 s:
    // ckptrun waits 10 s, then kills it (it is ckptrun's child).
    let out = run(dmtcp(&sandbox, &[], 2, 1).env("FAKE_DMTCP_PORT_DELAY_MS", "12000"));
    assert_refused(&out, &sandbox, "dmtcp_coordinator: wrote no port");
}

#[test]
fn a_start_that_fails_leaves_no_images_directory() {
    for (knob, value) in [
        ("FAKE_DMTCP_COORD_FAIL", "1"),
        ("FAKE_DMTCP_PORT_DELAY_MS", "12000"),
    ] {
        let sandbox = sandbox(&format!("failed-start-{}", value.len()));
        let out = run(dmtcp(&sandbox, &[], 2, 1).env(knob, value));
        assert_eq!(out.code(), Some(125), "{knob}: {}", out.stderr);
        assert_eq!(
            images_dirs(&sandbox),
            Vec::<std::ffi::OsString>::new(),
            "{knob}"
        );
    }
}

#[test]
fn an_eviction_whose_checkpoint_never_completes_is_124_and_keeps_the_last_commit() {
    let sandbox = sandbox("never");
    let expected = reference(60);
    evict_to(&sandbox, 60, 1);
    let before = slot_bytes(&sandbox);

    let mut cmd = dmtcp(&sandbox, &["--ckpt-timeout", "0.5"], 60, 20);
    cmd.env("FAKE_DMTCP_NEVER_COMPLETE", "1");
    let mut running = started(cmd, &sandbox);
    wait_for_lines(&mut running, &sandbox.path("out"), 6);
    running.signal(libc::SIGTERM);
    let asked = Instant::now();
    let out = running.finish();
    assert_out_of_time(&out);
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "{:?}",
        asked.elapsed()
    );
    assert_nothing_left(&sandbox);
    assert!(slot_bytes(&sandbox) == before, "a slot file changed");

    // The last commit still resumes to the uninterrupted result.
    resumes_from_generation_1(&sandbox, 60, &expected);
}

/// A new run resumes from generation 1 and ends as an uninterrupted run
/// of `steps` would (`expected`), leaving nothing behind.
fn resumes_from_generation_1(sandbox: &Sandbox, steps: u32, expected: &str) {
    let out = run(dmtcp(sandbox, &[], steps, 1));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("restart from generation 1 "),
        "{}",
        out.stderr
    );
    assert_same_output(&read(sandbox.path("out")), expected);
    assert_nothing_left(sandbox);
}

#[test]
fn the_job_ads_vacate_time_bounds_a_checkpoint_that_never_completes() {
    let sandbox = sandbox("jobad");
    let ad = sandbox.path("job.ad");
    std::fs::write(&ad, "JobMaxVacateTime = 2\n").unwrap();
    let mut cmd = dmtcp(&sandbox, &[], 400, 10);
    cmd.env("_CONDOR_JOB_AD", &ad)
        .env("FAKE_DMTCP_NEVER_COMPLETE", "1");
    let running = started(cmd, &sandbox);
    // Taken before the signal: a pause between the two would only make
    // `took` shorter than the limit ckptrun kept.
    let asked = Instant::now();
    running.signal(libc::SIGTERM);
    let out = running.finish();
    let took = asked.elapsed();
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    // 2 s less 10 %, then the computation is ended.
    assert!(
        took >= Duration::from_millis(1750) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(generations(&sandbox.dir, STORE), [0]);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_periodic_checkpoint_that_never_completes_is_124() {
    for extra in [&[][..], &["--interval-continue"]] {
        let sandbox = sandbox(&format!("periodic-never-{}", extra.len()));
        let mut args = vec!["--interval", "0.3", "--ckpt-timeout", "0.5"];
        args.extend_from_slice(extra);
        let mut cmd = dmtcp(&sandbox, &args, 400, 10);
        cmd.env("FAKE_DMTCP_NEVER_COMPLETE", "1");
        let started = Instant::now();
        let out = run(cmd);
        assert_eq!(out.code(), Some(124), "{extra:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("checkpoint was not complete in time"),
            "{extra:?}: {}",
            out.stderr
        );
        assert!(started.elapsed() < Duration::from_secs(4), "{extra:?}");
        assert_eq!(generations(&sandbox.dir, STORE), [0], "{extra:?}");
        assert_nothing_left(&sandbox);
    }
}

#[test]
fn an_eviction_before_the_job_joined_is_not_lost() {
    let sandbox = sandbox("early");
    let expected = reference(200);
    let mut cmd = dmtcp(&sandbox, &[], 200, 10);
    // The job joins the coordinator late: the first requests find no
    // process to checkpoint and must be made again. (450 ms: between two
    // of them, see an_eviction_whose_request_straddles_the_join_is_exact.)
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "450");
    let running = start(cmd);
    // As soon as ckptrun holds signals for its supervisor (before that,
    // SIGTERM would kill it as it kills any process): the coordinator may
    // not be started yet, nor the job joined it.
    wait_until_handled(running.pid(), libc::SIGTERM);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(images_in(&sandbox, 1).len(), 1);
    assert_nothing_left(&sandbox);

    let out = run(dmtcp(&sandbox, &[], 200, 1));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_same_output(&read(sandbox.path("out")), &expected);
    assert_nothing_left(&sandbox);
}

#[test]
fn an_eviction_waits_for_a_late_join_as_long_as_its_budget() {
    // The job joins after 7 s (a slow start): requests are made again
    // (every second at most) until it has, within the eviction's budget.
    let sandbox = sandbox("late-join");
    let mut cmd = dmtcp(&sandbox, &["--ckpt-timeout", "30"], 400, 10);
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "7000");
    let mut running = start(cmd);
    running.wait_for(&sandbox.path(".ckptrun.store/coordinator-port"));
    running.signal(libc::SIGTERM);
    let asked = Instant::now();
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    // Not much later than the join: at most a second between requests.
    assert!(
        asked.elapsed() < Duration::from_millis(9500),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(images_in(&sandbox, 1).len(), 1);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_job_that_never_joins_is_ended_125() {
    // ckptrun never lets a job run unprotected: one that has not joined
    // the coordinator within its limit (seconds) is ended.
    let sandbox = sandbox("never-joins");
    let mut cmd = dmtcp(&sandbox, &[], 4000, 10);
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "60000");
    let mut running = start(cmd);
    let deadline = Instant::now() + Duration::from_secs(45);
    let status = loop {
        if let Some(status) = running.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "ckptrun is still there after 45 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = running.finish();
    assert_eq!(status.code(), Some(125), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the job did not join the DMTCP coordinator: it would run unprotected"),
        "{}",
        out.stderr
    );
    assert!(!sandbox.path("job.pid").exists());
    assert_nothing_left(&sandbox);
}

#[test]
fn a_coordinator_that_exits_as_the_job_ends_is_not_a_warning() {
    // A process closes its files, so its connection, before it becomes a
    // zombie, and `--exit-on-last` may end the coordinator in between:
    // ckptrun can reap the coordinator of a job ending of its own
    // accord. A pool run once put a warning in HTCondor's error file so.
    // The job stretches that window to 300 ms; past 1 s it is a warning.
    for (linger_ms, warned) in [(300, false), (1500, true)] {
        let sandbox = sandbox(&format!("lost-{linger_ms}"));
        let mut cmd = dmtcp(&sandbox, &[], 5, 10);
        cmd.env("DMTCP_JOB_LINGER_MS", linger_ms.to_string());
        let out = run(cmd);
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert_same_output(&read(sandbox.path("out")), &reference(5));
        let warning = "the DMTCP coordinator exited 0 while the job runs";
        assert_eq!(
            out.stderr.contains(warning),
            warned,
            "{linger_ms} ms: {}",
            out.stderr
        );
        if !warned {
            assert!(
                out.stderr
                    .contains("the DMTCP coordinator exited 0 as the job ended"),
                "{}",
                out.stderr
            );
        }
        assert_nothing_left(&sandbox);
    }
}

#[test]
fn a_status_question_the_coordinator_does_not_live_to_answer_says_nothing() {
    // A job that ends as soon as it joined takes the coordinator
    // (`--exit-on-last`) with it, and the `--status` questions asked
    // until the job is seen find none: dmtcp_command says so on its
    // standard error. The fault storm in the pool (tests/fault_storm.rs,
    // seed 798945236) found the real one's JASSERT in HTCondor's error
    // file so. The job's 300 ms between leaving the coordinator and its
    // end make that window wide (every run showed it, several times).
    let sandbox = sandbox("status-gone");
    let mut cmd = dmtcp(&sandbox, &[], 0, 10);
    cmd.env("DMTCP_JOB_LINGER_MS", "300");
    let out = run(cmd);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        !out.stderr.contains("Coordinator not found"),
        "{}",
        out.stderr
    );
    assert_nothing_left(&sandbox);
}

#[test]
fn a_computation_dmtcp_does_not_end_after_its_checkpoint_is_killed() {
    let sandbox = sandbox("stays");
    let mut cmd = dmtcp(&sandbox, &[], 400, 10);
    cmd.env("FAKE_DMTCP_NO_EXIT_AFTER_CKPT", "1");
    let mut running = started(cmd, &sandbox);
    wait_for_lines(&mut running, &sandbox.path("out"), 3);
    running.signal(libc::SIGTERM);
    let asked = Instant::now();
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the computation is still there 2000 ms after its checkpoint"),
        "{}",
        out.stderr
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(images_in(&sandbox, 1).len(), 1);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_restart_script_that_comes_after_the_computation_ended() {
    // DMTCP ends the computation as soon as its images are written; the
    // coordinator writes the restart script after that. Here it comes 3 s
    // later: waited for, unless the eviction's time limit comes first.
    let expected = reference(200);
    let sandbox = sandbox("late-script");
    for (limit, code) in [(None, 85), (Some("1.5"), 124)] {
        let extra: Vec<&str> = limit.iter().flat_map(|l| ["--ckpt-timeout", l]).collect();
        let mut cmd = dmtcp(&sandbox, &extra, 200, 10);
        cmd.env("FAKE_DMTCP_SCRIPT_DELAY_MS", "3000");
        let mut running = started(cmd, &sandbox);
        let lines = read(sandbox.path("out")).lines().count();
        wait_for_lines(&mut running, &sandbox.path("out"), 3 + lines);
        let before = slot_bytes(&sandbox);
        running.signal(libc::SIGTERM);
        let asked = Instant::now();
        let out = running.finish();
        assert_eq!(out.code(), Some(code), "{limit:?}: {}", out.stderr);
        if code == 85 {
            assert!(
                asked.elapsed() >= Duration::from_millis(2900),
                "{:?}",
                asked.elapsed()
            );
        } else {
            assert!(
                out.stderr
                    .contains("ended before its checkpoint was complete"),
                "{}",
                out.stderr
            );
            assert!(
                asked.elapsed() < Duration::from_secs(3),
                "{:?}",
                asked.elapsed()
            );
            assert!(slot_bytes(&sandbox) == before, "a slot file changed");
        }
        assert_nothing_left(&sandbox);
    }
    assert_eq!(generations(&sandbox.dir, STORE).last(), Some(&1));
    let out = run(dmtcp(&sandbox, &[], 200, 1));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_same_output(&read(sandbox.path("out")), &expected);
}

/// The eviction's checkpoint was not complete in time: exit 124, said.
fn assert_out_of_time(out: &Finished) {
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the eviction's checkpoint was not complete in time"),
        "{}",
        out.stderr
    );
}

/// Evicts (SIGTERM) a job run with `--interval 0.5 --interval-continue`
/// and `extra`, whose 8 MiB images each take `ms_per_mb` ms a MiB to
/// write, once a periodic checkpoint's image is being written.
fn evicted_during_a_periodic_checkpoint(
    sandbox: &Sandbox,
    extra: &[&str],
    ms_per_mb: &str,
) -> Finished {
    let mut args = vec!["--interval", "0.5", "--interval-continue"];
    args.extend_from_slice(extra);
    let mut cmd = dmtcp(sandbox, &args, 400, 10);
    cmd.env("FAKE_DMTCP_IMAGE_KB", "8192")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", ms_per_mb)
        .env("FAKE_DMTCP_FREEZE_MS", "0");
    let running = started(cmd, sandbox);
    let temp = || {
        std::fs::read_dir(sandbox.path("images"))
            .unwrap()
            .flatten()
            .filter_map(|d| std::fs::read_dir(d.path()).ok())
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".dmtcp.temp"))
    };
    wait_until("a periodic checkpoint is being written", temp);
    running.signal(libc::SIGTERM);
    running.finish()
}

/// The job of `evicted_during_a_periodic_checkpoint` run again (`-v`) in
/// its sandbox: it must end 0 with an uninterrupted run's output
/// (`expected`), leaving nothing behind. Its output, for more checks.
fn resumed_to(sandbox: &Sandbox, expected: &str) -> Finished {
    let out = run(dmtcp(sandbox, &["-v"], 400, 1));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_same_output(&read(sandbox.path("out")), expected);
    assert_nothing_left(sandbox);
    out
}

/// The eviction's time limit (`--ckpt-timeout` here, else the job ad's
/// budget) counts from the eviction, also when it came during a periodic
/// checkpoint: that one's write and commit use part of it, and the one
/// that ends the computation gets what is left, not a limit of its own
/// (a review saw 8.1 s pass against 3.6). Each write takes 4 s, the
/// limit is 6 s: both writes cannot fit, however soon after the first
/// began the eviction comes (up to 2 s), while the first leaves its
/// commit 2 s (a slow debug build under load once needed more than the
/// 1 s that 3 s writes and a 4 s limit left). The periodic checkpoint is
/// committed, and a restart resumes from it to the uninterrupted output:
/// the job ran on after that checkpoint, and its `--stdout` is cut back
/// to its size while the image was written (read at the commit, it once
/// held a line the restart wrote again).
#[test]
fn an_evictions_time_limit_counts_from_the_eviction() {
    let sandbox = sandbox("limit-from-eviction");
    let expected = reference(400);
    let out = evicted_during_a_periodic_checkpoint(&sandbox, &["--ckpt-timeout", "6"], "500");
    assert_out_of_time(&out);
    assert_eq!(generations(&sandbox.dir, STORE).last(), Some(&1));
    assert_nothing_left(&sandbox);

    let out = resumed_to(&sandbox, &expected);
    assert!(
        out.stderr.contains("restart from generation 1"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_eviction_during_a_periodic_checkpoint_takes_that_checkpoint() {
    // --interval-continue: a checkpoint is being written (slowly) when the
    // eviction comes. The job runs on after it (--bcheckpoint), so it is
    // committed, then a --kcheckpoint ends the computation: nothing it
    // writes after the last checkpoint is written again. The restart
    // resumes to the uninterrupted output.
    let sandbox = sandbox("during-periodic");
    let expected = reference(400);
    let out = evicted_during_a_periodic_checkpoint(&sandbox, &[], "100");
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("a checkpoint is under way: it is committed, then the eviction's taken"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("dmtcp_command --kcheckpoint"),
        "{}",
        out.stderr
    );
    assert_eq!(generations(&sandbox.dir, STORE).last(), Some(&2));
    assert_nothing_left(&sandbox);
    resumed_to(&sandbox, &expected);
}

/// The newest generation in the sandbox (0 if none).
fn newest(sandbox: &Sandbox) -> u64 {
    generations(&sandbox.dir, STORE)
        .last()
        .copied()
        .unwrap_or(0)
}

/// `--log ckptrun.log --interval 1 --interval-continue`: for a job of
/// 2500 steps of 10 ms.
const PERIODIC: [&str; 5] = [
    "--log",
    "ckptrun.log",
    "--interval",
    "1",
    "--interval-continue",
];

/// Starts `cmd` (`PERIODIC`), waits for its first commit; the job's pid.
fn first_commit(cmd: Command, sandbox: &Sandbox) -> (Running, i32) {
    let mut running = started(cmd, sandbox);
    let job = read(sandbox.path("job.pid")).trim().parse().unwrap();
    let limit = Duration::from_secs(60);
    while_running(&mut running, &sandbox.dir, "a first commit", limit, || {
        newest(sandbox) >= 1
    });
    (running, job)
}

/// When `lapsed_then_crashed` continues the job.
enum Continue {
    AtOnce,
    AfterTheNextRequest,
}

/// The job of `cmd` (`PERIODIC`, 2500 steps) stopped once a first commit
/// is made, until ckptrun gives its request up (30 s); continued (`when`);
/// then, `commits` commits on, the machine dies. A restart from what the
/// store holds must write an uninterrupted run's output.
fn lapsed_then_crashed(sandbox: &Sandbox, cmd: Command, when: Continue, commits: u64) {
    let expected = reference(2500);
    let (mut running, job) = first_commit(cmd, sandbox);
    signal(job, libc::SIGSTOP);
    let log = || read(sandbox.path("ckptrun.log"));
    let limit = Duration::from_secs(60);
    let given_up = || log().contains("no checkpoint could be taken");
    while_running(
        &mut running,
        &sandbox.dir,
        "the request given up",
        limit,
        given_up,
    );
    if let Continue::AfterTheNextRequest = when {
        let asked = log_lines(&log(), "checkpoint requested").len();
        let next = || log_lines(&log(), "checkpoint requested").len() > asked;
        while_running(&mut running, &sandbox.dir, "the next request", limit, next);
    }
    let before = newest(sandbox);
    signal(job, libc::SIGCONT);
    while_running(
        &mut running,
        &sandbox.dir,
        "the commits after it",
        limit,
        || newest(sandbox) >= before + commits,
    );
    // The machine dies.
    kill_tree(running.pid());
    let _ = running.finish();
    assert_nothing_running(sandbox);
    let out = run(dmtcp(sandbox, &["--log", "ckptrun.log"], 2500, 10));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stderr, log());
    assert_same_output(&read(sandbox.path("out")), &expected);
}

/// A periodic checkpoint ckptrun gave up on (the job stopped past the
/// 30 s it waits, then continued) whose images DMTCP has written by the
/// next tick, its restart script not yet (the fake's comes 2 s late):
/// no request is made until it is complete, and then it is discarded,
/// its outputs' sizes unknown. Before, that tick's request reached the
/// coordinator (1.6 s later here) once the late one was complete and was
/// taken; with no request pending its checkpoint was not seen being
/// written, and the next tick committed it with the outputs' sizes of
/// the commit, so the restart wrote again what the job had written since
/// (a review saw it with the real DMTCP, at a tick some 45 ms before the
/// script; the fake's delays widen that window). Waits out the 30 s.
#[test]
fn no_request_is_made_while_a_checkpoint_given_up_on_completes() {
    let sandbox = sandbox("lapsed-written");
    let mut cmd = dmtcp(&sandbox, &PERIODIC, 2500, 10);
    cmd.env("FAKE_DMTCP_SCRIPT_DELAY_MS", "2000")
        .env("FAKE_DMTCP_COMMAND_GAP_MS", "1600")
        .env("FAKE_DMTCP_IMAGE_KB", "1024")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", "200");
    lapsed_then_crashed(&sandbox, cmd, Continue::AtOnce, 1);
}

/// A checkpoint given up on that shows nothing yet at the next tick:
/// that tick's request is sent (the fake's dmtcp_command takes 0.6 s to
/// make it), the late checkpoint is then seen being written and
/// committed, and the request, still being made, starts one more once
/// it is done. That one is taken as given up on too: discarded, its
/// outputs' sizes unknown. Before, it was committed at the next tick
/// with the sizes of then, and the restart wrote again some 40 lines (a
/// second review found it). Waits out the 30 s.
#[test]
fn a_request_still_being_made_after_a_commit_is_watched_for() {
    let sandbox = sandbox("lapsed-asking");
    let mut cmd = dmtcp(&sandbox, &PERIODIC, 2500, 10);
    cmd.env("FAKE_DMTCP_COMMAND_GAP_MS", "600")
        .env("FAKE_DMTCP_IMAGE_KB", "1024")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", "200");
    lapsed_then_crashed(&sandbox, cmd, Continue::AfterTheNextRequest, 2);
}

/// An eviction that comes while a periodic checkpoint's request is out,
/// ckptrun itself stopped meanwhile for longer than the 30 s it waits
/// for a checkpoint (HTCondor's suspend stops the whole job; its vacate
/// then continues it, the eviction's SIGTERM pending): the 30 s count
/// from the eviction. Before, the request's old start was taken, the
/// checkpoint given up at once, the job killed, and ckptrun exited 124
/// (a review saw it with the real DMTCP). Waits out the 30 s.
#[test]
fn an_eviction_after_ckptrun_was_stopped_is_given_its_own_time() {
    let sandbox = sandbox("stopped-evicted");
    let expected = reference(2500);
    let cmd = dmtcp(&sandbox, &PERIODIC, 2500, 10);
    let (mut running, job) = first_commit(cmd, &sandbox);
    signal(job, libc::SIGSTOP);
    let log = || read(sandbox.path("ckptrun.log"));
    let requests = || log_lines(&log(), "checkpoint requested").len() >= 2;
    let limit = Duration::from_secs(60);
    while_running(
        &mut running,
        &sandbox.dir,
        "the next request",
        limit,
        requests,
    );
    running.signal(libc::SIGSTOP);
    // Longer than ckptrun waits for a checkpoint to show (GIVE_UP).
    std::thread::sleep(Duration::from_secs(31));
    running.signal(libc::SIGTERM);
    running.signal(libc::SIGCONT);
    signal(job, libc::SIGCONT);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}\n{}", out.stderr, log());
    assert_nothing_left(&sandbox);
    let out = run(dmtcp(&sandbox, &["--log", "ckptrun.log"], 2500, 10));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_same_output(&read(sandbox.path("out")), &expected);
}

/// A checkpoint request DMTCP refuses (one is under way: here the test
/// began it, with the fake's own dmtcp_command, once the job joined and
/// before ckptrun's first tick): its `Error, computation not in running state` line goes to
/// `--log`, not to ckptrun's standard error, HTCondor's error file.
/// Before, it was on standard error and not in the log.
#[test]
fn a_refused_request_is_said_in_the_log_not_on_stderr() {
    let sandbox = sandbox("refused");
    let periodic = [
        "--log",
        "ckptrun.log",
        "--interval",
        "2",
        "--interval-continue",
    ];
    let mut cmd = dmtcp(&sandbox, &periodic, 2500, 10);
    cmd.env("FAKE_DMTCP_IMAGE_KB", "8192")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", "500");
    let mut running = started(cmd, &sandbox);
    let log = || read(sandbox.path("ckptrun.log"));
    let limit = Duration::from_secs(30);
    // Joined: ckptrun's requests are sent from then on.
    let joined = || log().contains("the job runs under DMTCP");
    while_running(&mut running, &sandbox.dir, "the job joined", limit, joined);
    let port = log()
        .lines()
        .find_map(|l| Some(l.split("coordinator on port ").nth(1)?.trim().to_string()))
        .unwrap();
    let tool = sandbox.path("dmtcp/bin/dmtcp_command");
    let out = output(Command::new(tool).args(["--coord-port", &port, "--bcheckpoint"]));
    assert!(out.status.success(), "{out:?}");
    let refused = || log().contains("Error, computation not in running state");
    while_running(
        &mut running,
        &sandbox.dir,
        "a request refused",
        limit,
        refused,
    );
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(!out.stderr.contains("Error, computation"), "{}", out.stderr);
    assert_nothing_left(&sandbox);
}

#[test]
fn an_eviction_whose_request_straddles_the_join_is_exact() {
    // DMTCP 4.2.0's --kcheckpoint is two requests, `K` then `c`. Sent
    // before the job has joined, `K` finds nothing to checkpoint; the job
    // joins (which clears the kill DMTCP remembered); `c` is a plain
    // checkpoint and the computation runs on after it. The fake widens
    // the gap between the two requests to 600 ms, and the job joins 300 ms
    // after its start.
    let sandbox = sandbox("straddle");
    let expected = reference(400);
    let mut cmd = dmtcp(&sandbox, &[], 400, 10);
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "300")
        .env("FAKE_DMTCP_COMMAND_GAP_MS", "600");
    let running = start(cmd);
    wait_until_handled(running.pid(), libc::SIGTERM);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_nothing_left(&sandbox);
    let out = run(dmtcp(&sandbox, &[], 400, 1));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let got = read(sandbox.path("out"));
    assert!(
        got == expected,
        "the output differs from an uninterrupted run's: {} lines against {}",
        got.lines().count(),
        expected.lines().count()
    );
    assert_nothing_left(&sandbox);
}

/// `cmd` (a ckptrun) run under `strace -o TRACE`, tracing the signals
/// ckptrun sends, the children it reaps and the ones it forks (its
/// children are not traced); started through `exec_from` (a command that
/// ends by exec'ing its arguments), if not empty.
fn under_strace(cmd: &Command, trace: &Path, exec_from: &[&str]) -> Command {
    let mut strace = Command::new("strace");
    strace
        .arg("-o")
        .arg(trace)
        .args(["-e", "trace=kill,wait4,fork,vfork,clone,clone3", "--"])
        .args(exec_from)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => strace.env(k, v),
            None => strace.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        strace.current_dir(dir);
    }
    strace
}

/// The `kill(PID, SIG)` calls in an strace output that signal a pid
/// already reaped (`wait4(...) = PID`) and not forked again since.
fn signals_to_reaped_pids(trace: &str) -> Vec<String> {
    let mut reaped = std::collections::HashSet::new();
    let mut wrong = Vec::new();
    for line in trace.lines() {
        let result = line
            .rsplit_once(" = ")
            .and_then(|(_, r)| r.split_whitespace().next()?.parse::<i32>().ok());
        if line.starts_with("wait4(") && result.is_some_and(|p| p > 0) {
            reaped.insert(result.unwrap());
        } else if ["fork(", "vfork(", "clone(", "clone3("]
            .iter()
            .any(|f| line.starts_with(f))
        {
            result.map(|p| reaped.remove(&p));
        } else if let Some(args) = line.strip_prefix("kill(") {
            let mut args = args.split([',', ')']).map(str::trim);
            let pid = args.next().and_then(|p| p.parse::<i32>().ok());
            let sig = args.next().unwrap_or("0");
            if sig != "0" && pid.is_some_and(|p| reaped.contains(&p)) {
                wrong.push(line.to_string());
            }
        }
    }
    wrong
}

#[test]
fn kill_after_ends_leftovers_before_the_end_is_judged_and_signals_no_reaped_pid() {
    // --kill-after: at an eviction, what is left when the job has ended
    // (here the coordinator, its restart script still to come) is ended
    // and reaped before the end is judged, and the protocol hears of it:
    // the checkpoint cannot complete any more, which is said at once (124,
    // nothing committed), not after waiting 30 s for a coordinator already
    // reaped. And the pids ckptrun has reaped are never signalled again:
    // they may be someone else's by then.
    let sandbox = sandbox("kill-after");
    let trace = sandbox.path("trace");
    let mut cmd = dmtcp(&sandbox, &["--kill-after", "0.1"], 200, 10);
    cmd.env("FAKE_DMTCP_SCRIPT_DELAY_MS", "3000");
    let mut running = started(under_strace(&cmd, &trace, &[]), &sandbox);
    wait_for_lines(&mut running, &sandbox.path("out"), 3);
    let ckptrun = first_child(running.pid());
    signal(ckptrun, libc::SIGTERM);
    let asked = Instant::now();
    let out = running.finish();
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("ended before its checkpoint was complete"),
        "{}",
        out.stderr
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    let committed = generations(&sandbox.dir, STORE);
    assert!(committed.iter().all(|&g| g == 0), "{committed:?}");
    let wrong = signals_to_reaped_pids(&read(&trace));
    assert!(wrong.is_empty(), "signalled after reaping: {wrong:?}");
    assert_nothing_left(&sandbox);
}

#[test]
fn the_end_signals_no_pid_ckptrun_has_reaped() {
    // At the job's end ckptrun kills what is left of its process group
    // (here the job's child) and reaps it, then ends the coordinator and
    // the helpers. Reaping any child there (the coordinator, which exits
    // as the job ends, among them) without telling the protocol left the
    // coordinator's pid to be SIGKILLed afterwards, when it may be
    // someone else's: whenever a child outlived the job, here one ckptrun
    // was exec'd with (not ckptrun's to end without --kill-after). Several
    // runs: the coordinator's exit races the job's.
    let sandbox = sandbox("no-reaped-pid");
    let trace = sandbox.path("trace");
    for round in 0..12 {
        let _ = std::fs::remove_file(&trace);
        let mut cmd = dmtcp(&sandbox, &[], 3, 1);
        // A process left in the job's group, for ckptrun to end.
        cmd.env("DMTCP_JOB_CHILD", "1");
        // A child of ckptrun's from before it was exec'd, which outlives
        // the job.
        let before_exec = "sleep 30 >/dev/null 2>&1 & echo $! > before; exec \"$0\" \"$@\"";
        let mut cmd = under_strace(&cmd, &trace, &["sh", "-c", before_exec]);
        let out = run(&mut cmd);
        let before: i32 = read(sandbox.path("before")).trim().parse().unwrap();
        signal(before, libc::SIGKILL);
        assert_eq!(out.code(), Some(0), "round {round}: {}", out.stderr);
        let wrong = signals_to_reaped_pids(&read(&trace));
        assert!(
            wrong.is_empty(),
            "round {round}: signalled after reaping, {} times: {:?}",
            wrong.len(),
            wrong.first()
        );
        assert_nothing_left(&sandbox);
    }
}
