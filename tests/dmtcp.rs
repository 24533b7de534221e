//! `--mode dmtcp`: the built ckptrun driving DMTCP's four tools as
//! HTCondor would drive the shim. CI has no DMTCP, so the tools are the
//! fakes of `examples/fake_dmtcp` (which reproduce DMTCP 4.2.0's command
//! lines and quirks, tested in tests/fake_dmtcp.rs), installed in the
//! sandbox as a user transfers them; the job is `examples/dmtcp_job.rs`.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A sandbox holding the four tools and the job (`./job`).
fn sandbox(name: &str) -> Sandbox {
    let sandbox = Sandbox::new(&format!("dmtcp-{name}"));
    install_dmtcp_tools(&sandbox.dir);
    // A hard link: a copy just written can be "text file busy" to exec
    // while another test's fork still holds it open.
    if std::fs::hard_link(dmtcp_job(), sandbox.path("job")).is_err() {
        std::fs::copy(dmtcp_job(), sandbox.path("job")).unwrap();
    }
    sandbox
}

/// `ckptrun --mode dmtcp -v --stdout out EXTRA... -- ./job STEPS STEP_MS
/// ARGS...`, with a PATH that holds no DMTCP tool and no job ad.
fn dmtcp(sandbox: &Sandbox, extra: &[&str], steps: u32, step_ms: u32, args: &[&str]) -> Command {
    let (steps, step_ms) = (steps.to_string(), step_ms.to_string());
    let mut all = vec!["--mode", "dmtcp", "-v", "--stdout", "out"];
    all.extend_from_slice(extra);
    all.extend_from_slice(&["--", "./job", &steps, &step_ms]);
    all.extend_from_slice(args);
    let mut cmd = sandbox.ckptrun(&all);
    cmd.env("PATH", "/usr/bin:/bin")
        .env("DMTCP_JOB_PIDFILE", "job.pid")
        .env_remove("_CONDOR_JOB_AD")
        .env_remove("DMTCP_JOB_END");
    cmd
}

/// What the job writes to stdout when run to its end, uninterrupted and
/// without DMTCP.
fn reference(steps: u32, args: &[&str]) -> String {
    let out = Command::new(dmtcp_job())
        .arg(steps.to_string())
        .arg("0")
        .args(args)
        .env_remove("FAKE_DMTCP_COORD")
        .env_remove("DMTCP_JOB_END")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The images in a generation.
fn images(generation: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(generation)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("ckpt_") && name.ends_with(".dmtcp")
        })
        .collect();
    found.sort();
    found
}

/// Nothing ckptrun started (coordinator, helpers, the job) runs on.
fn assert_nothing_left(sandbox: &Sandbox) {
    let left = processes_from(&sandbox.dir);
    for (pid, _) in &left {
        // SAFETY: kill has no memory arguments.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "left running: {left:?}");
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

const ARGS: &[&str] = &["two words", "", "--ckptdir", "x"];

#[test]
fn a_job_that_ends_passes_its_status_and_leaves_nothing() {
    let sandbox = sandbox("ends");
    // The job also leaves a child in its process group that never joins
    // the coordinator: --quit does not end it, ckptrun must.
    let out = run(dmtcp(&sandbox, &[], 5, 1, ARGS).env("DMTCP_JOB_CHILD", "1"));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(read(sandbox.path("out")), reference(5, ARGS));
    assert!(out.stderr.contains("dmtcp_launch"), "{}", out.stderr);
    assert_nothing_left(&sandbox);

    for (end, code, signal) in [
        ("exit:3", Some(3), None),
        // The job's own 85 is not a checkpoint: HTCondor would restart it.
        ("exit:85", Some(122), None),
        ("signal:SEGV", None, Some(libc::SIGSEGV)),
        ("signal:KILL", None, Some(libc::SIGKILL)),
    ] {
        let out = run(dmtcp(&sandbox, &[], 2, 1, &[]).env("DMTCP_JOB_END", end));
        assert_eq!(out.code(), code, "{end}: {}", out.stderr);
        assert_eq!(out.signal(), signal, "{end}: {}", out.stderr);
        assert!(!out.status.core_dumped(), "{end}");
        assert_nothing_left(&sandbox);
    }
}

#[test]
fn eviction_checkpoints_commits_and_the_restart_resumes() {
    let sandbox = sandbox("evict");
    let expected = reference(40, ARGS);
    // --log FILE, the shim's option: ckptrun's own lines, appended.
    let mut running = start(dmtcp(&sandbox, &["--log", "shim.log"], 40, 20, ARGS));
    wait_for_lines(&mut running, &sandbox.path("out"), 5);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_nothing_left(&sandbox);
    let store = sandbox.path("ckptrun.store");
    assert!(generations(&store).contains(&"gen.0000000001".to_string()));
    let gen1 = store.join("gen.0000000001");
    assert_eq!(images(&gen1).len(), 1, "{gen1:?}");
    // The restart script is kept, its symlink (which DMTCP may make
    // absolute, into the scratch directory) is not.
    let names: Vec<String> = std::fs::read_dir(&gen1)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("dmtcp_restart_script_")),
        "{names:?}"
    );
    assert!(
        !names.contains(&"dmtcp_restart_script.sh".into()),
        "{names:?}"
    );
    let log = read(sandbox.path("shim.log"));
    assert!(
        log.contains("committed ckptrun.store/gen.0000000001"),
        "{log}"
    );
    assert!(log.contains("exit 85"), "{log}");
    let at_eviction = read(sandbox.path("out")).lines().count();
    assert!(
        at_eviction < 41,
        "the job had finished: {at_eviction} lines"
    );

    // HTCondor starts the same command line again.
    let out = run(dmtcp(&sandbox, &[], 40, 20, ARGS));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("restart from generation 1"),
        "{}",
        out.stderr
    );
    assert_eq!(read(sandbox.path("out")), expected);
    assert_nothing_left(&sandbox);
}

#[test]
fn sigint_is_an_eviction_as_in_the_shims_submit_files() {
    let sandbox = sandbox("sigint");
    let mut running = start(dmtcp(&sandbox, &[], 40, 20, &[]));
    wait_for_lines(&mut running, &sandbox.path("out"), 3);
    running.signal(libc::SIGINT);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(
        images(&sandbox.path("ckptrun.store/gen.0000000001")).len(),
        1
    );
    assert_nothing_left(&sandbox);
}

#[test]
fn a_slow_large_image_is_waited_for_and_committed_whole() {
    let sandbox = sandbox("slow");
    let mut cmd = dmtcp(&sandbox, &[], 400, 20, &[]);
    cmd.env("FAKE_DMTCP_IMAGE_KB", "8192")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", "100");
    let mut running = start(cmd);
    wait_for_lines(&mut running, &sandbox.path("out"), 3);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let image = &images(&sandbox.path("ckptrun.store/gen.0000000001"))[0];
    assert_eq!(std::fs::metadata(image).unwrap().len(), 8192 * 1024);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_checkpoint_never_complete_ends_in_124_and_keeps_the_last_commit() {
    let sandbox = sandbox("never");
    let expected = reference(60, &[]);
    let mut running = start(dmtcp(&sandbox, &[], 60, 20, &[]));
    wait_for_lines(&mut running, &sandbox.path("out"), 3);
    running.signal(libc::SIGTERM);
    assert_eq!(running.finish().code(), Some(85));
    let store = sandbox.path("ckptrun.store");
    let before = generations(&store);
    let image = images(&store.join("gen.0000000001"))[0].clone();
    let committed = std::fs::read(&image).unwrap();

    let mut cmd = dmtcp(&sandbox, &["--ckpt-timeout", "0.5"], 60, 20, &[]);
    cmd.env("FAKE_DMTCP_NEVER_COMPLETE", "1");
    let running = started(cmd, &sandbox);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(out.stderr.contains("not complete"), "{}", out.stderr);
    assert_nothing_left(&sandbox);
    assert_eq!(generations(&store), before);
    assert_eq!(std::fs::read(&image).unwrap(), committed);

    // The last commit still resumes to the uninterrupted result.
    let out = run(dmtcp(&sandbox, &[], 60, 1, &[]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(read(sandbox.path("out")), expected);
}

#[test]
fn the_job_ad_sets_the_signal_the_code_and_the_budget() {
    let sandbox = sandbox("jobad");
    let ad = sandbox.path("job.ad");
    std::fs::write(
        &ad,
        "KillSig = \"SIGUSR1\"\nSuccessCheckpointExitCode = 77\nJobMaxVacateTime = 1\n",
    )
    .unwrap();
    let mut cmd = dmtcp(&sandbox, &[], 40, 20, &[]);
    cmd.env("_CONDOR_JOB_AD", &ad);
    let mut running = start(cmd);
    wait_for_lines(&mut running, &sandbox.path("out"), 3);
    running.signal(libc::SIGUSR1);
    let out = running.finish();
    assert_eq!(out.code(), Some(77), "{}", out.stderr);
    assert_nothing_left(&sandbox);

    // JobMaxVacateTime = 1: 0.9 s for a checkpoint that never completes.
    let mut cmd = dmtcp(&sandbox, &[], 40, 20, &[]);
    cmd.env("_CONDOR_JOB_AD", &ad)
        .env("FAKE_DMTCP_NEVER_COMPLETE", "1");
    let running = started(cmd, &sandbox);
    running.signal(libc::SIGUSR1);
    let out = running.finish();
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert_nothing_left(&sandbox);
}

#[test]
fn interval_commits_while_the_job_runs_and_a_crash_resumes_from_there() {
    let sandbox = sandbox("interval");
    let expected = reference(120, ARGS);
    let mut running = start(dmtcp(&sandbox, &["--interval", "0.3"], 120, 25, ARGS));
    let store = sandbox.path("ckptrun.store");
    wait_until("two periodic commits", || {
        store.exists()
            && generations(&store)
                .iter()
                .any(|g| g >= &"gen.0000000002".to_string())
    });
    // ckptrun is killed (SIGKILL, no cleanup): the job dies with it
    // (PR_SET_PDEATHSIG), and the coordinator when its last client has.
    running.child.kill().unwrap();
    let _ = running.child.wait();
    // Within 1 s: the job had 2 s or more of steps left, so it did not
    // just end by itself.
    let gone_by = Instant::now() + Duration::from_secs(1);
    while !processes_from(&sandbox.dir).is_empty() {
        assert!(
            Instant::now() < gone_by,
            "still running after ckptrun was killed: {:?}",
            processes_from(&sandbox.dir)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let newest = generations(&store).pop().unwrap();
    assert!(newest.as_str() >= "gen.0000000002", "{newest}");

    // The restored job runs with its own arguments (25 ms steps).
    let out = run(dmtcp(&sandbox, &[], 120, 25, ARGS));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let generation: u64 = newest["gen.".len()..].parse().unwrap();
    assert!(
        out.stderr
            .contains(&format!("restart from generation {generation}")),
        "{}",
        out.stderr
    );
    assert_eq!(read(sandbox.path("out")), expected);
    assert_nothing_left(&sandbox);
}

#[test]
fn an_eviction_right_at_the_start_is_not_lost() {
    let sandbox = sandbox("early");
    let mut cmd = dmtcp(&sandbox, &[], 200, 10, &[]);
    // The job joins the coordinator late: the first requests find no
    // process to checkpoint and must be made again.
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "300");
    let running = start(cmd);
    // As soon as ckptrun holds signals for its supervisor (before that,
    // SIGTERM would kill it as it kills any process): the coordinator may
    // not be started yet, nor the job joined it.
    let blocked = || {
        let status = read(format!("/proc/{}/status", running.pid()));
        let mask = status.lines().find_map(|l| l.strip_prefix("SigBlk:"));
        mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
    };
    wait_until("ckptrun blocks SIGTERM", blocked);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(out.stderr.contains("trying again"), "{}", out.stderr);
    assert_eq!(
        images(&sandbox.path("ckptrun.store/gen.0000000001")).len(),
        1
    );
    assert_nothing_left(&sandbox);
}

#[test]
fn other_signals_reach_the_job() {
    let sandbox = sandbox("forward");
    let mut running = start(dmtcp(&sandbox, &[], 200, 10, &[]));
    wait_for_lines(&mut running, &sandbox.path("out"), 2);
    running.signal(libc::SIGHUP);
    let out = running.finish();
    assert_eq!(out.signal(), Some(libc::SIGHUP), "{}", out.stderr);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_missing_tool_is_named_and_dmtcp_dir_is_searched() {
    let sandbox = sandbox("tools");
    std::fs::create_dir(sandbox.path("dmtcp-bin")).unwrap();
    std::fs::rename(
        sandbox.path("dmtcp_restart"),
        sandbox.path("dmtcp-bin/dmtcp_restart"),
    )
    .unwrap();
    let out = run(dmtcp(&sandbox, &[], 2, 1, &[]));
    assert_eq!(out.code(), Some(125));
    assert_one_error_line(&out, "dmtcp_restart: not found in ./");
    assert!(!sandbox.path("job.pid").exists(), "the job started");
    assert_nothing_left(&sandbox);

    let out = run(dmtcp(&sandbox, &["--dmtcp-dir", "dmtcp-bin"], 2, 1, &[]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

#[test]
fn a_coordinator_that_does_not_start_is_reported() {
    let sandbox = sandbox("coordfail");
    let out = run(dmtcp(&sandbox, &[], 2, 1, &[]).env("FAKE_DMTCP_COORD_FAIL", "1"));
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ckptrun: ")
            && last.contains("dmtcp_coordinator")
            && last.contains("exited 3"),
        "{}",
        out.stderr
    );
    assert!(!sandbox.path("job.pid").exists(), "the job started");
    assert_nothing_left(&sandbox);
}

#[test]
fn as_pid_1_an_eviction_still_exits_85() {
    let sandbox = sandbox("pid1");
    let mut cmd = pid_namespace();
    cmd.arg(CKPTRUN)
        .args([
            "--mode", "dmtcp", "--stdout", "out", "--", "./job", "200", "10",
        ])
        .current_dir(&sandbox.dir)
        .env("PATH", "/usr/bin:/bin")
        .env_remove("_CONDOR_JOB_AD");
    let mut running = start(cmd);
    wait_for_lines(&mut running, &sandbox.path("out"), 2);
    let ckptrun = first_child(running.pid());
    // SAFETY: kill has no memory arguments.
    assert_eq!(unsafe { libc::kill(ckptrun, libc::SIGTERM) }, 0);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(
        images(&sandbox.path("ckptrun.store/gen.0000000001")).len(),
        1
    );
}

#[test]
fn without_its_own_proc_ckptrun_still_ends_the_coordinator_once() {
    // A PID namespace whose /proc shows the outer one: ckptrun cannot list
    // its children there, so it cannot tell the coordinator's pid.
    let sandbox = sandbox("foreign-proc");
    let mut cmd = Command::new("unshare");
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        cmd.arg("--map-root-user");
    }
    cmd.args([
        "--fork", "--pid", CKPTRUN, "--mode", "dmtcp", "--stdout", "out",
    ])
    .args(["--", "./job", "3", "10"])
    .current_dir(&sandbox.dir)
    .env("PATH", "/usr/bin:/bin")
    .env_remove("_CONDOR_JOB_AD");
    let out = run(cmd);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(read(sandbox.path("out")), reference(3, &[]));
    let quits = out.stderr.matches("dmtcp_command").count();
    assert!(
        quits <= 1,
        "{quits} dmtcp_command messages:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("still there"), "{}", out.stderr);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_coordinator_that_never_says_its_port_is_ended() {
    let sandbox = sandbox("noport");
    // The coordinator detaches, then would write its port after 12 s:
    // ckptrun waits 10 s.
    let out = run(dmtcp(&sandbox, &[], 2, 1, &[]).env("FAKE_DMTCP_PORT_DELAY_MS", "12000"));
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .last()
            .unwrap_or_default()
            .contains("dmtcp_coordinator: wrote no port"),
        "{}",
        out.stderr
    );
    assert!(!sandbox.path("job.pid").exists(), "the job started");
    assert_nothing_left(&sandbox);
}

#[test]
fn a_periodic_checkpoint_never_complete_ends_in_124() {
    let sandbox = sandbox("periodic-never");
    let mut cmd = dmtcp(
        &sandbox,
        &["--interval", "0.2", "--ckpt-timeout", "0.5"],
        400,
        10,
        &[],
    );
    cmd.env("FAKE_DMTCP_NEVER_COMPLETE", "1");
    let out = run(cmd);
    assert_eq!(out.code(), Some(124), "{}", out.stderr);
    assert!(
        out.stderr.contains("periodic checkpoint was not complete"),
        "{}",
        out.stderr
    );
    assert_eq!(
        generations(&sandbox.path("ckptrun.store")),
        ["gen.0000000000"]
    );
    assert_nothing_left(&sandbox);
}

#[test]
fn an_eviction_waits_for_a_late_join_as_long_as_its_budget() {
    // The job joins after 6 s (a slow restart, say): more than the 50
    // tries allowed without a time limit, well within this one.
    let sandbox = sandbox("late-join");
    let mut cmd = dmtcp(&sandbox, &["--ckpt-timeout", "30"], 400, 10, &[]);
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "6000");
    let mut running = start(cmd);
    running.wait_for(&sandbox.path("ckptrun.store/.coordinator-port"));
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(
        !out.stderr.contains("could not be requested"),
        "{}",
        out.stderr
    );
    assert_eq!(
        images(&sandbox.path("ckptrun.store/gen.0000000001")).len(),
        1
    );
    assert_nothing_left(&sandbox);
}

#[test]
fn a_missing_program_is_127_before_anything_starts() {
    let sandbox = sandbox("noprogram");
    let out = run(sandbox
        .ckptrun(["--mode", "dmtcp", "--", "./nojob"])
        .env("PATH", "/usr/bin:/bin"));
    assert_eq!(out.code(), Some(127), "{}", out.stderr);
    assert_one_error_line(&out, "./nojob: No such file or directory");
    assert!(!sandbox.path("ckptrun.store").exists());
    assert_nothing_left(&sandbox);
}

#[test]
fn children_ckptrun_was_started_with_are_not_its_to_end() {
    // `sh -c 'sleep & exec ckptrun ...'`: ckptrun starts with children of
    // its own, which it must take neither for the coordinator nor for
    // something the computation left. 40 are more than it notes: it then
    // lists none of its children and ends only what it knows it started.
    for sleeps in [1, 40] {
        let sandbox = sandbox(&format!("inherited-{sleeps}"));
        let script = format!(
            "for i in $(seq {sleeps}); do sleep 30 >/dev/null 2>&1 & echo $! >> sleep.pids; done; \
             exec {CKPTRUN} --mode dmtcp --stdout out --ckpt-timeout 20 -- ./job 400 10"
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .current_dir(&sandbox.dir)
            .env("PATH", "/usr/bin:/bin")
            .env("DMTCP_JOB_PIDFILE", "job.pid")
            .env("FAKE_DMTCP_JOIN_DELAY_MS", "500")
            .env_remove("_CONDOR_JOB_AD");
        let mut running = start(cmd);
        running.wait_for(&sandbox.path("ckptrun.store/.coordinator-port"));
        running.signal(libc::SIGTERM);
        let out = running.finish();
        assert_eq!(out.code(), Some(85), "{sleeps}: {}", out.stderr);
        assert!(!out.stderr.contains("coordinator exited"), "{}", out.stderr);
        assert!(!out.stderr.contains("SIGKILL"), "{}", out.stderr);
        let pids: Vec<i32> = read(sandbox.path("sleep.pids"))
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        let killed = pids.iter().filter(|&&p| !alive(p)).count();
        for &pid in &pids {
            // SAFETY: kill has no memory arguments.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert_eq!(
            killed, 0,
            "{sleeps}: ckptrun ended processes it did not start"
        );
        assert_nothing_left(&sandbox);
    }
}

#[test]
fn a_store_is_used_by_one_run_at_a_time() {
    let sandbox = sandbox("locked");
    let mut first = started(dmtcp(&sandbox, &[], 400, 10, &[]), &sandbox);
    let second = run(dmtcp(&sandbox, &[], 3, 1, &[]));
    assert_eq!(second.code(), Some(125), "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains("ckptrun.store: is in use by another ckptrun"),
        "{}",
        second.stderr
    );
    // The first run is untouched: its coordinator too.
    wait_for_lines(&mut first, &sandbox.path("out"), 3);
    first.signal(libc::SIGTERM);
    let out = first.finish();
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(!out.stderr.contains("while the job runs"), "{}", out.stderr);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_coordinator_left_by_a_killed_run_is_ended_by_the_next_start() {
    // ckptrun is killed before the job joined: the coordinator, with no
    // client ever, does not know to exit (README). The next start does it.
    let sandbox = sandbox("stale");
    let mut cmd = dmtcp(&sandbox, &[], 100, 10, &[]);
    cmd.env("FAKE_DMTCP_JOIN_DELAY_MS", "3000");
    let mut running = start(cmd);
    running.wait_for(&sandbox.path("ckptrun.store/.coordinator-port"));
    running.child.kill().unwrap();
    let _ = running.child.wait();
    let coordinator = || {
        processes_from(&sandbox.dir)
            .into_iter()
            .filter(|(_, exe)| exe.ends_with("dmtcp_coordinator"))
            .count()
    };
    wait_until("the job died with ckptrun", || {
        processes_from(&sandbox.dir).len() == coordinator()
    });
    assert_eq!(coordinator(), 1, "{:?}", processes_from(&sandbox.dir));

    let out = run(dmtcp(&sandbox, &[], 3, 1, &[]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("an earlier run left"), "{}", out.stderr);
    assert_nothing_left(&sandbox);
}

#[test]
fn exit_by_signal_after_a_checkpoint() {
    let sandbox = sandbox("by-signal");
    let cmd = dmtcp(&sandbox, &["--exit-by-signal", "USR1"], 400, 10, &[]);
    let mut running = started(cmd, &sandbox);
    wait_for_lines(&mut running, &sandbox.path("out"), 2);
    running.signal(libc::SIGTERM);
    let out = running.finish();
    assert_eq!(out.signal(), Some(libc::SIGUSR1), "{}", out.stderr);
    assert!(!out.status.core_dumped());
    assert_eq!(
        images(&sandbox.path("ckptrun.store/gen.0000000001")).len(),
        1
    );
    assert_nothing_left(&sandbox);
}
