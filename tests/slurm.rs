//! ckptrun in a real Slurm 22.05 (see tests/cluster): the sbatch scripts
//! of examples/slurm (docs/slurm.md), submitted as they are by the submit
//! account, preempted at random moments, signalled ahead of their time
//! limit, `scancel --signal`ed and cancelled; each job's results compared
//! with an uninterrupted run's (the same script run by `sh`, outside
//! Slurm), each restart checked to resume from the checkpoint taken at
//! the eviction before it, and nothing of a job left running after it.
//!
//! When the preemptions come is drawn from a seed, printed once;
//! `CKPTRUN_SLURM_SEED=N` replays it (not Slurm's own timing).

mod cluster;
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use cluster::{Cluster, Job, JobDir, Turn, cluster, nothing_left_in, wait_until};
use common::{Rng, clock_seed, log_lines, restarts_follow_commits};

/// One seed for the whole run, said by every test that draws from it
/// (a failing test's output then has it).
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        std::env::var("CKPTRUN_SLURM_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(clock_seed)
    });
    eprintln!(
        "tests/slurm: seed {seed} (CKPTRUN_SLURM_SEED={seed} replays when the jobs are preempted)"
    );
    seed
}

/// The test's own draws from the seed.
fn rng(test: &str) -> Rng {
    let mut mixed = seed();
    for b in test.bytes() {
        mixed = mixed.rotate_left(5) ^ u64::from(b);
    }
    Rng(mixed)
}

/// A job directory for examples/slurm/self.sh (and self-requeue.sh).
fn self_dir(cluster: &'static Cluster, name: &str) -> JobDir {
    let dir = cluster.job_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::self_fixture(), "self_job");
    dir
}

/// A job directory for examples/slurm/condor.sh.
fn condor_dir(cluster: &'static Cluster, name: &str) -> JobDir {
    let dir = cluster.job_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::fixture(), "condor_job");
    dir
}

/// A job directory for examples/slurm/dmtcp.sh: DMTCP's install tree is
/// `dmtcp`, a link to the real one.
fn dmtcp_dir(cluster: &'static Cluster, name: &str) -> Option<JobDir> {
    let bin = common::real_dmtcp(name)?;
    let dir = cluster.job_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::dmtcp_counter(), "counter")
        .link_in(bin.parent().unwrap(), "dmtcp");
    Some(dir)
}

/// A job directory for examples/slurm/init.sh.
fn init_dir(cluster: &'static Cluster, name: &str) -> JobDir {
    let dir = cluster.job_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::c_job("terms"), "terms");
    dir
}

/// The uninterrupted run: `sh SCRIPT` in a directory made as `dir` was
/// (the `#SBATCH` lines are comments to sh), outside Slurm; its standard
/// output and error.
fn uninterrupted(dir: &JobDir, script: &str, env: &[(&str, &str)]) -> String {
    let file = format!("{script}.sh");
    std::fs::write(dir.path(&file), JobDir::example(script)).unwrap();
    let out = Command::new("sh")
        .arg(&file)
        .current_dir(&dir.dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the uninterrupted run of {script}.sh failed ({}):\n{}{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        dir.log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Preempts `jobs`, which run side by side, `times` times: each time, once
/// every one of them has started again, a random moment (0.2-3 s, drawn
/// from `rng`) later. Waits until each has checkpointed and exited.
fn preempt_together(cluster: &Cluster, jobs: &[&Job<'_>], times: usize, rng: &mut Rng) {
    for round in 1..=times {
        for job in jobs {
            job.wait_started(round);
        }
        let after = Duration::from_millis(200 + rng.below(2800));
        eprintln!(
            "preemption {round} of jobs {:?}: {after:?} after their start",
            ids(jobs)
        );
        std::thread::sleep(after);
        cluster.preempt();
        for job in jobs {
            wait_until(
                &format!("job {} has left its run #{round}", job.id),
                cluster::START,
                || runs_ended(&job.dir.log()) >= round,
            );
        }
    }
}

/// How many times ckptrun has ended (its log's last line of a run: `exit
/// N`, or `dying by SIG`).
fn runs_ended(log: &str) -> usize {
    log.lines()
        .filter_map(|l| l.split_once("]: ").map(|(_, said)| said))
        .filter(|said| said.starts_with("exit ") || said.starts_with("dying by "))
        .count()
}

fn ids(jobs: &[&Job<'_>]) -> Vec<u64> {
    jobs.iter().map(|j| j.id).collect()
}

/// What every job Slurm preempted twice shows in ckptrun's log: each
/// SIGTERM taken for Slurm's requeue, each run but the last ending with
/// `checkpoint`'s words (or, in init mode, with the job's end passed on).
fn preempted_twice(job: &Job<'_>, run_end: &str) -> String {
    let end = job.succeeds();
    let log = job.dir.log();
    assert_eq!(end.restarts, 2, "{log}");
    assert_eq!(log_lines(&log, "started ").len(), 3, "{log}");
    let requeues = log_lines(&log, &format!("SIGTERM: Slurm job {} requeued: ", job.id));
    assert_eq!(requeues.len(), 2, "{log}");
    assert_eq!(log_lines(&log, run_end).len(), 2, "{log}");
    assert!(log.ends_with(": exit 0\n"), "{log}");
    nothing_left_in(&job.dir.dir);
    log
}

#[test]
fn self_and_dmtcp_preempted_twice_resume_from_each_preemptions_checkpoint() {
    let Some(cluster) = cluster() else { return };
    let mut rng = rng("self-dmtcp");
    let (dir, reference) = (self_dir(cluster, "self"), self_dir(cluster, "self-ref"));
    let dmtcp = dmtcp_dir(cluster, "dmtcp");
    let dmtcp_reference = dmtcp.as_ref().and_then(|_| dmtcp_dir(cluster, "dmtcp-ref"));
    let references = std::thread::spawn(move || {
        uninterrupted(&reference, "self", &[]);
        if let Some(dmtcp) = &dmtcp_reference {
            uninterrupted(dmtcp, "dmtcp", &[]);
        }
        (reference, dmtcp_reference)
    });
    let _turn = Turn::alone();
    let low = ["-p", "low", "-c", "1"];
    let job = dir.submit_example("self", &low);
    let dmtcp_job = dmtcp.as_ref().map(|d| d.submit_example("dmtcp", &low));
    let mut jobs = vec![&job];
    jobs.extend(dmtcp_job.as_ref());
    preempt_together(cluster, &jobs, 2, &mut rng);
    let (reference, dmtcp_reference) = references.join().unwrap();

    let log = preempted_twice(&job, "; exit 85");
    assert_eq!(restarts_follow_commits(&log), [1, 2], "{log}");
    assert_eq!(dir.read_text("result"), reference.read_text("result"));
    resumes_where_it_checkpointed(&dir.read_text("job.out"), 2);
    if let (Some(job), Some(dir), Some(reference)) = (&dmtcp_job, &dmtcp, &dmtcp_reference) {
        let log = preempted_twice(job, "; exit 85");
        assert_eq!(restarts_follow_commits(&log), [1, 2], "{log}");
        // Each line of the job's output once, as uninterrupted.
        for name in ["counter.out", "counter.err", "data"] {
            assert_eq!(dir.read_text(name), reference.read_text(name), "{name}");
        }
    }
}

#[test]
fn a_job_submitted_by_a_requeued_run_is_checkpointed_at_its_first_preemption() {
    // sbatch passes the submitter's environment on: a job submitted from
    // a run Slurm had requeued twice starts with SLURM_RESTART_COUNT=2
    // before any requeue of its own. Its first preemption was taken for a
    // cancel (Restarts=1 is not above 2): no checkpoint, work lost.
    let Some(cluster) = cluster() else { return };
    let mut rng = rng("inherited-count");
    let (dir, reference) = (
        self_dir(cluster, "self-chained"),
        self_dir(cluster, "self-chained-ref"),
    );
    let reference = std::thread::spawn(move || {
        uninterrupted(&reference, "self", &[]);
        reference
    });
    let _turn = Turn::alone();
    let job = dir.submit_example(
        "self",
        &["-p", "low", "-c", "1", "--export=ALL,SLURM_RESTART_COUNT=2"],
    );
    preempt_together(cluster, &[&job], 1, &mut rng);
    let reference = reference.join().unwrap();
    let end = job.succeeds();
    let log = dir.log();
    assert_eq!(end.restarts, 1, "{log}");
    assert_eq!(
        log_lines(&log, "SLURM_RESTART_COUNT=2 is inherited").len(),
        1,
        "{log}"
    );
    let requeues = log_lines(&log, &format!("SIGTERM: Slurm job {} requeued: ", job.id));
    assert_eq!(requeues.len(), 1, "{log}");
    assert_eq!(restarts_follow_commits(&log), [1], "{log}");
    assert_eq!(dir.read_text("result"), reference.read_text("result"));
    resumes_where_it_checkpointed(&dir.read_text("job.out"), 1);
    nothing_left_in(&dir.dir);
}

/// A run Slurm requeued that finds no store (here each run names its own,
/// as a store on a node's own disk would be lost) says so: it makes a new
/// one, and the job does not resume. It used to start over in silence.
#[test]
fn a_requeued_run_that_finds_no_store_says_so() {
    let Some(cluster) = cluster() else { return };
    let mut rng = rng("lost-store");
    let dir = self_dir(cluster, "self-lost-store");
    let script = JobDir::example("self").replace("--mode self", "--mode self --store lost.$$");
    assert_ne!(script, JobDir::example("self"));
    let _turn = Turn::alone();
    let job = dir.submit_script("self-lost", &script, &["-p", "low", "-c", "1"]);
    preempt_together(cluster, &[&job], 1, &mut rng);
    let end = job.succeeds();
    let out = dir.read_text("job.out");
    assert_eq!(end.restarts, 1, "{out}");
    let said = format!(
        "Slurm requeued job {} (restart 1), yet this start found no checkpoint there",
        job.id
    );
    assert_eq!(
        out.lines().filter(|l| l.contains(&said)).count(),
        1,
        "{out}\n{}",
        dir.log()
    );
}

/// self_job's output over its runs (Slurm's output file, appended to):
/// each `start step=N` after the first resumes at the step of the
/// `checkpoint step=N` before it; `times` of them past step 0.
fn resumes_where_it_checkpointed(out: &str, times: usize) {
    let step = |line: &str, word: &str| {
        line.strip_prefix(word)
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    let mut last = None;
    let mut resumed = 0;
    for line in out.lines() {
        if let Some(n) = step(line, "checkpoint step=") {
            last = Some(n);
        } else if let Some(n) = step(line, "start step=") {
            assert_eq!(last.unwrap_or(0), n, "a run resumed elsewhere:\n{out}");
            resumed += usize::from(n > 0);
        }
    }
    assert_eq!(resumed, times, "{out}");
}

#[test]
fn condor_and_init_preempted_twice_resume_or_rerun_as_they_should() {
    let Some(cluster) = cluster() else { return };
    let mut rng = rng("condor-init");
    let (condor, condor_ref) = (
        condor_dir(cluster, "condor"),
        condor_dir(cluster, "condor-ref"),
    );
    let (init, init_ref) = (init_dir(cluster, "init"), init_dir(cluster, "init-ref"));
    let verbose = [("CONDOR_JOB_VERBOSE", "1")];
    let references = std::thread::spawn(move || {
        let out = uninterrupted(&condor_ref, "condor", &verbose);
        uninterrupted(&init_ref, "init", &[]);
        (out, condor_ref, init_ref)
    });
    let _turn = Turn::alone();
    let low = ["-p", "low", "-c", "1"];
    let condor_job = condor.submit_example(
        "condor",
        &["-p", "low", "-c", "1", "--export=ALL,CONDOR_JOB_VERBOSE=1"],
    );
    let init_job = init.submit_example("init", &low);
    preempt_together(cluster, &[&condor_job, &init_job], 2, &mut rng);
    let (reference_out, _condor_ref, init_ref) = references.join().unwrap();

    let log = preempted_twice(&condor_job, "; exit 85");
    assert_eq!(
        log_lines(&log, "restart from ./condor_job.ckpt").len(),
        2,
        "{log}"
    );
    let out = condor.read_text("job.out");
    let result = |text: &str| log_lines(text, " steps, checksum ").concat();
    assert_eq!(result(&out), result(&reference_out), "{out}");
    let checkpointed = steps(&out, "condor_job: checkpointed at step ");
    let resumed = steps(&out, "condor_job: resumed at step ");
    assert_eq!(checkpointed.len(), 2, "{out}");
    assert_eq!(checkpointed, resumed, "a run resumed elsewhere:\n{out}");

    // Init mode: each preemption reached the job once (from Slurm, not a
    // second time from ckptrun), which died by it and was run again.
    let log = preempted_twice(&init_job, "job killed by SIGTERM");
    let not_again = log_lines(&log, " requeued: not sent again");
    assert_eq!(not_again.len(), 2, "{log}");
    let runs = init.read_text("runs");
    let want = "start\nsigterm 1\nstart\nsigterm 1\n".to_string() + &init_ref.read_text("runs");
    assert_eq!(runs, want, "the job's own record of its runs");
}

/// The numbers after `prefix` on the lines of `text` that have it.
fn steps(text: &str, prefix: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
        .collect()
}

#[test]
fn a_time_limit_signal_is_checkpointed_and_the_script_requeues_the_job() {
    let Some(cluster) = cluster() else { return };
    let (dir, reference) = (self_dir(cluster, "limit"), self_dir(cluster, "limit-ref"));
    // 3000 steps of 15 ms: 45 s, more than a minute's time limit less
    // 55 s and the 30 s slurmctld may take to see it has come.
    let pace = [("SELF_JOB_STEP_MS", "15")];
    let references = std::thread::spawn(move || {
        uninterrupted(&reference, "self-requeue", &pace);
        reference
    });
    let _turn = Turn::shared();
    let job = dir.submit_example(
        "self-requeue",
        &[
            "-p",
            "high",
            "-c",
            "1",
            "--time=1",
            "--signal=B:TERM@55",
            "--export=ALL,SELF_JOB_STEP_MS=15",
        ],
    );
    let end = job.succeeds();
    let reference = references.join().unwrap();
    let log = dir.log();
    assert!(end.restarts >= 1, "{end:?}\n{log}");
    let signalled = log_lines(&log, " running: checkpoint and exit");
    assert!(!signalled.is_empty(), "{log}");
    assert_eq!(
        restarts_follow_commits(&log).len(),
        signalled.len(),
        "{log}"
    );
    assert_eq!(dir.read_text("result"), reference.read_text("result"));
    nothing_left_in(&dir.dir);
}

#[test]
fn scancel_signal_is_checkpointed_and_requeue_exit_requeues_the_job() {
    let Some(cluster) = cluster() else { return };
    let (dir, reference) = (
        condor_dir(cluster, "signal"),
        condor_dir(cluster, "signal-ref"),
    );
    let references = std::thread::spawn(move || uninterrupted(&reference, "condor", &[]));
    let _turn = Turn::shared();
    let job = dir.submit_example(
        "condor",
        &["-p", "high", "-c", "1", "--export=ALL,CONDOR_JOB_VERBOSE=1"],
    );
    job.wait_started(1);
    std::thread::sleep(Duration::from_millis(500 + rng("signal").below(2000)));
    job.scancel(&["--batch", "--signal=TERM"]);
    let end = job.succeeds();
    let reference_out = references.join().unwrap();
    let log = dir.log();
    assert_eq!(end.restarts, 1, "{log}");
    let signalled = log_lines(&log, " running: checkpoint and exit");
    assert_eq!(signalled.len(), 1, "{log}");
    assert_eq!(log_lines(&log, "; exit 85").len(), 1, "{log}");
    let out = dir.read_text("job.out");
    let checkpointed = steps(&out, "condor_job: checkpointed at step ");
    assert_eq!(
        checkpointed,
        steps(&out, "condor_job: resumed at step "),
        "{out}"
    );
    let result = |text: &str| log_lines(text, " steps, checksum ").concat();
    assert_eq!(result(&out), result(&reference_out), "{out}");
    nothing_left_in(&dir.dir);
}

#[test]
fn a_plain_scancel_ends_everything_at_once() {
    let Some(cluster) = cluster() else { return };
    let Some(dir) = dmtcp_dir(cluster, "scancel") else {
        return;
    };
    let _turn = Turn::shared();
    let job = dir.submit_example("dmtcp", &["-p", "high", "-c", "1"]);
    job.wait_started(1);
    wait_until("the job runs under DMTCP", cluster::START, || {
        dir.log().contains("the job runs under DMTCP")
    });
    let cancelled = std::time::Instant::now();
    job.scancel(&[]);
    let end = job.wait_end();
    let log = dir.log();
    assert_eq!(
        (end.state.as_str(), end.restarts),
        ("CANCELLED", 0),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "SIGTERM: Slurm job {} cancelled: ending the job",
            job.id
        )),
        "{log}"
    );
    assert!(!log.contains("committed generation"), "{log}");
    // Not KillWait's SIGKILL (30 s): ckptrun ended it.
    nothing_left_in(&dir.dir);
    let took = cancelled.elapsed();
    eprintln!("scancel to nothing left: {took:?}");
    assert!(log.contains("received SIGTERM: killing the job"), "{log}");
}

#[test]
fn the_guide_shows_every_script_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/slurm.md")).unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("examples/slurm")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sh") {
            let text = std::fs::read_to_string(&path).unwrap();
            let block = format!("```sh\n{text}```\n");
            assert!(
                guide.contains(&block),
                "docs/slurm.md does not show {} as it is",
                path.display()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 5, "examples/slurm/*.sh");
}
