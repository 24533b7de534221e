//! End to end in a real HTCondor 24 pool (see tests/pool): the README's
//! submit files from examples/htcondor, submitted as they are by the
//! submit account, vacated softly and hard, and the outputs compared
//! byte for byte with an uninterrupted run's in the same pool.
//!
//! A mode's case: a submit directory holding ckptrun (the debug build,
//! which aborts on any allocation after the job started) and the job,
//! `submit_example`, then `wait_for` job log events, `vacate` or
//! `vacate_fast`, and `same_outputs` against a reference job.

mod common;
mod pool;

use std::path::Path;
use std::time::Duration;

use pool::{EVICTED, EXECUTING, Job, SubmitDir, pool, wait_until};

/// How long a job may take to start (2-5 s here), or to end.
const START: Duration = Duration::from_secs(60);
const RUN: Duration = Duration::from_secs(120);

/// A submit directory for examples/htcondor/condor.sub: ckptrun and the
/// condor_compile'd stand-in, as the file expects them.
fn condor_dir(name: &str) -> Option<SubmitDir> {
    let dir = pool()?.submit_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::fixture(), "condor_job");
    Some(dir)
}

/// The step a condor_job image holds (`condor_job image\nSTEP SUM\n...`).
fn image_step(path: &Path) -> u64 {
    let image = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = String::from_utf8_lossy(&image[..64.min(image.len())]).into_owned();
    text.strip_prefix("condor_job image\n")
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{} is not a condor_job image", path.display()))
}

/// Lines of ckptrun's --log (ckptrun.log) that contain `needle`.
fn log_lines<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// Waits until ckptrun in `sandbox` has started the job `starts` times
/// (its log says `started` that often).
fn wait_started(sandbox: &Path, starts: usize) {
    let log = sandbox.join("ckptrun.log");
    wait_until(
        &format!("{} says started x{starts}", log.display()),
        RUN,
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            log_lines(&text, "started ").len() >= starts
        },
    );
}

/// HTCondor's output and error files and every other file the job left
/// are identical in both directories; ckptrun's log, the job log, the
/// submit file and the checkpoint (whose step depends on timing) aside.
fn same_outputs(run: &SubmitDir, reference: &SubmitDir, skip: &[&str]) {
    // Directories are inputs (DMTCP's tree): HTCondor brings none back.
    let skip = |name: &str| {
        ["ckptrun.log", "job.log"].contains(&name)
            || name.ends_with(".sub")
            || skip.contains(&name)
            || run.path(name).is_dir()
    };
    let names: Vec<String> = run.names().into_iter().filter(|n| !skip(n)).collect();
    let want: Vec<String> = reference.names().into_iter().filter(|n| !skip(n)).collect();
    assert_eq!(names, want, "the files that came back differ");
    for name in &names {
        let (got, want) = (run.read(name), reference.read(name));
        assert!(
            got == want,
            "{name} differs from the uninterrupted run's:\n--- got\n{}\n--- want\n{}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
    for name in ["job.out", "job.err"] {
        assert!(names.iter().any(|n| n == name), "{name} did not come back");
    }
}

/// The job's end, which must be exit 0.
fn succeeds(job: &Job<'_>) {
    let code = job.exit_code(RUN);
    assert_eq!(
        code,
        0,
        "job {} exited {code}; ckptrun.log:\n{}",
        job.id,
        job.dir.read_text("ckptrun.log")
    );
}

#[test]
fn condor_vacated_twice_resumes_from_each_evictions_checkpoint() {
    let (Some(reference), Some(dir)) = (condor_dir("condor-reference"), condor_dir("condor-twice"))
    else {
        return;
    };
    let uninterrupted = reference.submit_example("condor", &[]);
    let job = dir.submit_example("condor", &[]);

    // The image each restart was given, read from its sandbox before the
    // job rewrites it: the checkpoint taken at the eviction before.
    let mut restored = Vec::new();
    for eviction in 1..=2 {
        let run = job.wait_for(EXECUTING, eviction, START);
        if eviction > 1 {
            restored.push(image_step(&run.scratch_dir().join("condor_job.ckpt")));
        }
        // ckptrun.log comes back with the sandbox: one `started` per run.
        wait_started(&run.scratch_dir(), eviction);
        std::thread::sleep(Duration::from_secs(2)); // some progress
        job.vacate();
        job.wait_for(EVICTED, eviction, START);
    }
    let last = job.wait_for(EXECUTING, 3, START);
    restored.push(image_step(&last.scratch_dir().join("condor_job.ckpt")));
    succeeds(&job);
    succeeds(&uninterrupted);

    assert!(
        0 < restored[0] && restored[0] < restored[1],
        "the second restart got no newer image than the first: steps {restored:?}"
    );
    let log = dir.read_text("ckptrun.log");
    let starts = log_lines(&log, "started ");
    assert_eq!(starts.len(), 3, "{log}");
    assert_eq!(log_lines(&log, "fresh start").len(), 1, "{log}");
    assert_eq!(
        log_lines(&log, "restart from ./condor_job.ckpt").len(),
        2,
        "{log}"
    );
    assert_eq!(
        log_lines(&log, "received SIGTERM: sent SIGTSTP").len(),
        2,
        "{log}"
    );
    assert_eq!(log_lines(&log, "; exit 85").len(), 2, "{log}");
    assert!(log.ends_with(": exit 0\n"), "{log}");
    same_outputs(&dir, &reference, &[]);
    // The job writes nothing to stderr, and ckptrun finds the file right.
    assert_eq!(reference.read_text("job.err"), "");
}

/// examples/htcondor/condor.sub made wrong by `edit`, for a short job.
fn wrong_condor_sub(edit: impl Fn(&str) -> Option<String>) -> String {
    let text = SubmitDir::example("condor").replace("./condor_job 300 50", "./condor_job 20 10");
    let mut wrong: String = text.lines().filter_map(&edit).map(|l| l + "\n").collect();
    assert_ne!(wrong, text, "the edit changed nothing");
    wrong = wrong.replace("\nqueue\n", "\n");
    wrong + "queue\n"
}

#[test]
fn condor_submit_files_that_would_lose_checkpoints_are_named_at_start() {
    let without =
        |command: &'static str| move |l: &str| (!l.starts_with(command)).then(|| l.to_string());
    let adding = |line: &'static str| {
        move |l: &str| {
            Some(if l == "queue" {
                format!("{line}\n{l}")
            } else {
                l.to_string()
            })
        }
    };
    let cases: [(&str, String, &str); 4] = [
        (
            "on-exit",
            wrong_condor_sub(without("when_to_transfer_output")),
            "add `when_to_transfer_output = ON_EXIT_OR_EVICT`",
        ),
        (
            "no-code",
            wrong_condor_sub(without("checkpoint_exit_code")),
            "add `checkpoint_exit_code = 85`",
        ),
        (
            "output-list",
            wrong_condor_sub(adding("transfer_output_files = ckptrun.log")),
            "add condor_job.ckpt to `transfer_output_files`",
        ),
        (
            "checkpoint-list",
            wrong_condor_sub(adding("transfer_checkpoint_files = ckptrun.log")),
            "add condor_job.ckpt to `transfer_checkpoint_files`",
        ),
    ];
    let Some(dirs) = cases
        .iter()
        .map(|(name, _, _)| condor_dir(&format!("condor-wrong-{name}")))
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let jobs: Vec<Job<'_>> = dirs
        .iter()
        .zip(&cases)
        .map(|(dir, (_, sub, _))| dir.write("wrong.sub", sub).submit("wrong.sub", &[]))
        .collect();
    for ((job, dir), (name, _, advice)) in jobs.iter().zip(&dirs).zip(&cases) {
        succeeds(job);
        let err = dir.read_text("job.err");
        eprint!("{name}: {err}");
        let warning = format!("this submit file loses checkpoints: {advice}");
        let want = format!("ckptrun: {warning}");
        assert!(
            err.lines().count() == 1 && err.starts_with(&want),
            "{name}: job.err is not the one line {want:?}...:\n{err}"
        );
        let log = dir.read_text("ckptrun.log");
        assert_eq!(log_lines(&log, &warning).len(), 1, "{name}:\n{log}");
    }
}

#[test]
fn condor_killed_node_resumes_from_the_last_periodic_checkpoint() {
    let (Some(reference), Some(dir)) = (
        condor_dir("condor-reference-interval"),
        condor_dir("condor-fast"),
    ) else {
        return;
    };
    // The submit file's --interval, short enough to see several.
    let interval = [("interval", "4")];
    let uninterrupted = reference.submit_example("condor", &interval);
    let job = dir.submit_example("condor", &interval);

    let first = job.wait_for(EXECUTING, 1, START).scratch_dir();
    // A periodic checkpoint: exit 85, uploaded, restarted in place.
    wait_started(&first, 2);
    std::thread::sleep(Duration::from_secs(1)); // 3 s before the next one
    let periodic = image_step(&first.join("condor_job.ckpt"));
    job.vacate_fast();
    job.wait_for(EVICTED, 1, START);
    // HTCondor counted the checkpoint exits (the schedd learns it late).
    let mut checkpoints = None;
    wait_until("CheckpointNumber is defined", START, || {
        checkpoints = job.attr("CheckpointNumber");
        checkpoints.is_some()
    });
    let second = job.wait_for(EXECUTING, 2, START).scratch_dir();
    assert_ne!(first, second, "a vacated job runs in a new sandbox");
    assert_eq!(
        image_step(&second.join("condor_job.ckpt")),
        periodic,
        "the restart was not given the last periodic checkpoint"
    );
    succeeds(&job);
    succeeds(&uninterrupted);

    let log = dir.read_text("ckptrun.log");
    assert!(
        log_lines(&log, "--interval: asking the job for a checkpoint").len() >= 2,
        "{log}"
    );
    assert_eq!(log_lines(&log, "fresh start").len(), 1, "{log}");
    assert!(
        !log_lines(&log, "restart from ./condor_job.ckpt").is_empty(),
        "{log}"
    );
    assert!(log.ends_with(": exit 0\n"), "{log}");
    eprintln!("CheckpointNumber {checkpoints:?} after the kill; restart from step {periodic}");
    same_outputs(&dir, &reference, &["condor_job.ckpt"]);
}

/// A submit directory for examples/htcondor/self.sub: ckptrun and the
/// self-checkpointing stand-in.
fn self_dir(name: &str) -> Option<SubmitDir> {
    let dir = pool()?.submit_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::self_fixture(), "self_job");
    Some(dir)
}

/// A submit directory for examples/htcondor/dmtcp.sub: ckptrun, the C
/// counter and DMTCP's install tree, as the README says to lay them out.
fn dmtcp_dir(name: &str) -> Option<SubmitDir> {
    let pool = pool()?;
    let bin = common::real_dmtcp("htcondor")?;
    let dir = pool.submit_dir(name);
    dir.copy_in(common::CKPTRUN, "ckptrun")
        .copy_in(common::dmtcp_counter(), "counter")
        .copy_tree_in(bin.parent().unwrap(), "dmtcp");
    Some(dir)
}

/// The store's slot files (whose generation numbers depend on timing),
/// and self mode's working copy of the job's state.
const STORE_FILES: [&str; 3] = ["ckptrun.store.0", "ckptrun.store.1", "state"];

/// The log says each restart resumed from the generation the run before
/// committed: `committed generation N` then `restart from generation N`.
/// Returns the generations restarted from, in order.
fn restarts_follow_commits(log: &str) -> Vec<u64> {
    let number = |line: &str, after: &str| -> Option<u64> {
        line.split(after)
            .nth(1)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let mut committed = None;
    let mut restarted = Vec::new();
    for line in log.lines() {
        if let Some(g) = number(line, "committed generation ") {
            committed = Some(g);
        } else if let Some(g) = number(line, "restart from generation ") {
            assert_eq!(
                Some(g),
                committed,
                "a restart not from the last generation committed:\n{log}"
            );
            restarted.push(g);
        }
    }
    restarted
}

/// A job vacated twice, each time some way into a run, resumes each time
/// from the generation ckptrun committed at that eviction, and its
/// outputs equal an uninterrupted run's.
fn vacated_twice(mode: &str, dir: SubmitDir, reference: SubmitDir) {
    let uninterrupted = reference.submit_example(mode, &[]);
    let job = dir.submit_example(mode, &[]);
    for eviction in 1..=2 {
        let run = job.wait_for(EXECUTING, eviction, START);
        wait_started(&run.scratch_dir(), eviction);
        std::thread::sleep(Duration::from_secs(3)); // some progress
        job.vacate();
        job.wait_for(EVICTED, eviction, START);
    }
    job.wait_for(EXECUTING, 3, START);
    succeeds(&job);
    succeeds(&uninterrupted);
    let log = dir.read_text("ckptrun.log");
    assert_eq!(log_lines(&log, "started ").len(), 3, "{log}");
    assert_eq!(log_lines(&log, "fresh start").len(), 1, "{log}");
    assert_eq!(restarts_follow_commits(&log), [1, 2], "{log}");
    assert_eq!(log_lines(&log, "; exit 85").len(), 2, "{log}");
    assert!(log.ends_with(": exit 0\n"), "{log}");
    same_outputs(&dir, &reference, &STORE_FILES);
}

/// A job with a short --interval: periodic commits, each an exit 85 that
/// HTCondor uploads; then its node dies (vacate -fast, no soft signal).
/// The restart resumes from the last periodic generation; the outputs
/// equal an uninterrupted run's with the same interval.
fn killed_node(mode: &str, dir: SubmitDir, reference: SubmitDir) {
    let interval = [("interval", "5")];
    let uninterrupted = reference.submit_example(mode, &interval);
    let job = dir.submit_example(mode, &interval);
    let first = job.wait_for(EXECUTING, 1, START).scratch_dir();
    // One periodic commit, uploaded; the job restarted in place.
    wait_started(&first, 2);
    std::thread::sleep(Duration::from_secs(1));
    let before = std::fs::read_to_string(first.join("ckptrun.log")).unwrap();
    let periodic = *restarts_follow_commits(&before).last().unwrap();
    job.vacate_fast();
    job.wait_for(EVICTED, 1, START);
    let second = job.wait_for(EXECUTING, 2, START).scratch_dir();
    assert_ne!(first, second, "a vacated job runs in a new sandbox");
    succeeds(&job);
    succeeds(&uninterrupted);
    let log = dir.read_text("ckptrun.log");
    let restarts = restarts_follow_commits(&log);
    assert!(restarts.contains(&periodic), "{log}");
    assert!(log_lines(&log, "--interval: ").len() >= 2, "{log}");
    assert!(log.ends_with(": exit 0\n"), "{log}");
    same_outputs(&dir, &reference, &STORE_FILES);
}

#[test]
fn self_vacated_twice_resumes_from_each_evictions_checkpoint() {
    let (Some(reference), Some(dir)) = (self_dir("self-reference"), self_dir("self-twice")) else {
        return;
    };
    vacated_twice("self", dir, reference);
}

#[test]
fn self_killed_node_resumes_from_the_last_periodic_checkpoint() {
    let (Some(reference), Some(dir)) = (self_dir("self-reference-interval"), self_dir("self-fast"))
    else {
        return;
    };
    killed_node("self", dir, reference);
}

#[test]
fn dmtcp_vacated_twice_resumes_from_each_evictions_checkpoint() {
    let (Some(reference), Some(dir)) = (dmtcp_dir("dmtcp-reference"), dmtcp_dir("dmtcp-twice"))
    else {
        return;
    };
    vacated_twice("dmtcp", dir, reference);
}

#[test]
fn dmtcp_killed_node_resumes_from_the_last_periodic_checkpoint() {
    let (Some(reference), Some(dir)) = (
        dmtcp_dir("dmtcp-reference-interval"),
        dmtcp_dir("dmtcp-fast"),
    ) else {
        return;
    };
    killed_node("dmtcp", dir, reference);
}

#[test]
fn the_readme_shows_every_submit_file_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("examples/htcondor")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sub") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                readme.contains(&format!("```\n{text}```\n")),
                "README.md does not show {} as it is",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no examples/htcondor/*.sub");
}
