//! End to end in a real HTCondor 24 pool (see tests/pool): the guides'
//! submit files from examples/htcondor (docs/condor.md, self.md, dmtcp.md), submitted as they are by the
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

use common::{log_lines, restarts_follow_commits};
use pool::{
    EVICTED, EXECUTING, Job, START, STORE_FILES, SubmitDir, condor_dir, dmtcp_dir, same_outputs,
    self_dir, succeeds, wait_started, wait_until,
};

/// The step a condor_job image holds (`condor_job image\nSTEP SUM\n...`).
fn image_step(path: &Path) -> u64 {
    let image = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = String::from_utf8_lossy(&image[..64.min(image.len())]).into_owned();
    text.strip_prefix("condor_job image\n")
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{} is not a condor_job image", path.display()))
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
    // What the access point holds: the last periodic checkpoint uploaded,
    // the one read above or, if the asynchronous -fast kill came after
    // the next one, that one (nothing is uploaded at a -fast vacate).
    let spool = pool::pool().unwrap().spool_dir(&job.id);
    let spooled = image_step(&spool.join("condor_job.ckpt"));
    assert!(spooled >= periodic, "{spooled} < {periodic}");
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
        spooled,
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
fn the_guides_show_every_submit_file_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut guides = Vec::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            guides.push(std::fs::read_to_string(&path).unwrap());
        }
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("examples/htcondor")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sub") {
            let text = std::fs::read_to_string(&path).unwrap();
            let block = format!("```\n{text}```\n");
            assert!(
                guides.iter().any(|guide| guide.contains(&block)),
                "no docs/*.md shows {} as it is",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no examples/htcondor/*.sub");
}
