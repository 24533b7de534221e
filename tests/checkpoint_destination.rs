//! `checkpoint_destination` (HTCondor 23.1+: checkpoints go to URL storage
//! instead of the access point's spool), in a real HTCondor 24 pool (see
//! tests/pool): examples/htcondor/self-destination.sub submitted as it is,
//! with examples/htcondor/local_plugin.py, the stand-in plug-in that copies
//! `local:///DIR` URLs into a directory, as HTCondor's own
//! src/condor_tests/test_checkpoint_destination.py does.
//!
//! What HTCondor 24.0 does with a destination (seen in this pool): each
//! checkpoint exit (85) uploads `transfer_checkpoint_files` through the
//! plug-in into a directory of its own, `DEST/GLOBALJOBID/NNNN/` (`#` in
//! the id made `_`), and the shadow keeps only its MANIFEST
//! (`_condor_checkpoint_MANIFEST.NNNN`, the files' SHA-256) in the job's
//! spool. A restart in a new sandbox downloads the newest of them. An
//! eviction uploads nothing with `when_to_transfer_output = ON_EXIT`.

mod common;
mod pool;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pool::{EVICTED, EXECUTING, HELD, Pool, START, SubmitDir, self_dir, succeeds, wait_started};

/// The newest checkpoint HTCondor has taken for job `id`: the highest
/// NNNN of the MANIFESTs in its spool (the shadow writes one once a
/// checkpoint is wholly in the destination).
fn newest_checkpoint(pool: &Pool, id: &str) -> Option<u32> {
    std::fs::read_dir(pool.spool_dir(id))
        .ok()?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("_condor_checkpoint_MANIFEST.")?
                .parse()
                .ok()
        })
        .max()
}

/// The MANIFESTs in `sandbox`: those HTCondor downloaded with the
/// checkpoint and left there.
fn manifests_in(sandbox: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(sandbox)
        .unwrap_or_else(|e| panic!("{}: {e}", sandbox.display()))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("_condor_checkpoint_MANIFEST."))
        .collect();
    found.sort();
    found
}

/// The MANIFEST of checkpoint `n`.
fn manifest(n: u32) -> String {
    format!("_condor_checkpoint_MANIFEST.{n:04}")
}

/// The generation a slot file holds, from its `.ckptrun` member
/// (`ckptrun store N\ngeneration G\n...`, docs/store.md); None for an
/// empty slot.
fn generation_of(slot: &Path) -> Option<u64> {
    let bytes = std::fs::read(slot).unwrap_or_else(|e| panic!("{}: {e}", slot.display()));
    let head = &bytes[..bytes.len().min(16 * 1024)];
    let text = String::from_utf8_lossy(head);
    let meta = &text[text.find("ckptrun store ")?..];
    meta.lines()
        .find_map(|l| l.strip_prefix("generation "))?
        .trim()
        .parse()
        .ok()
}

/// The store's slots in a checkpoint directory, with the generation each
/// holds, newest first.
fn generations_in(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut found: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("ckptrun.store.")
        })
        .filter_map(|p| Some((p.clone(), generation_of(&p)?)))
        .collect();
    found.sort_by_key(|(_, g)| std::cmp::Reverse(*g));
    found
}

/// ckptrun's log split into its runs (one per start of ckptrun), by the
/// pid each line names (`... ckptrun[PID]: ...`).
fn runs(log: &str) -> Vec<Vec<&str>> {
    let pid = |l: &str| {
        l.split_once("ckptrun[")
            .and_then(|(_, r)| r.split_once(']'))
            .map(|p| p.0.to_string())
    };
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut last = None;
    for line in log.lines() {
        let this = pid(line);
        if this != last || runs.is_empty() {
            runs.push(Vec::new());
            last = this;
        }
        runs.last_mut().unwrap().push(line);
    }
    runs
}

/// How many times ckptrun started the job in the log `path`.
fn starts_in(path: &Path) -> usize {
    let log = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    common::log_lines(&log, "started ").len()
}

/// The first run of ckptrun in `sandbox` (its log begins with the runs
/// the checkpoint's copy of it holds, `before` starts), once it started
/// the job.
fn first_run_in(sandbox: &Path, before: usize) -> Vec<String> {
    wait_started(sandbox, before + 1);
    let log = std::fs::read_to_string(sandbox.join("ckptrun.log")).unwrap();
    let runs = runs(&log);
    let run = runs
        .iter()
        .filter(|r| r.iter().any(|l| l.contains("started ")))
        .nth(before);
    run.unwrap_or_else(|| panic!("no run {before} in:\n{log}"))
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// The result an uninterrupted run of the job of `sub` gives: the
/// stand-in run here, at full speed.
fn uninterrupted_result(sub: &str) -> String {
    let args = pool::submit_value(sub, "arguments").unwrap();
    let job: Vec<&str> = args
        .split(" -- ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(job[0], "./self_job", "{args}");
    let sandbox = common::Sandbox::new("destination-reference");
    let status = std::process::Command::new(common::self_fixture())
        .args(&job[1..])
        .current_dir(&sandbox.dir)
        .env("SELF_JOB_STEP_MS", "0")
        .env("SELF_JOB_QUIET", "1")
        .status()
        .unwrap();
    assert!(status.success(), "the stand-in alone: {status}");
    std::fs::read_to_string(sandbox.path(job[3])).unwrap()
}

/// Changes one byte in the middle of `file` (inside a generation's
/// state: the member headers are at its start and end).
fn damage(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn self_mode_resumes_from_a_checkpoint_destination_and_falls_back_to_an_older_generation() {
    let Some(pool) = pool::pool() else {
        return;
    };
    let Some(dir) = self_dir("destination") else {
        return;
    };
    let started = Instant::now();
    let sub = SubmitDir::example("self-destination");
    let expected = uninterrupted_result(&sub);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    dir.copy_in(
        root.join("examples/htcondor/local_plugin.py"),
        "local_plugin.py",
    );
    // The storage: a directory the job's account writes (submit_example
    // gives the submit directory, and it, to that account).
    let dest = dir.path("checkpoints");
    std::fs::create_dir(&dest).unwrap();
    let url = format!("local://{}", dest.display());
    // A checkpoint every 2 s of the job's 20.
    let job = dir.submit_example(
        "self-destination",
        &[("interval", "2"), ("destination", &url)],
    );
    let global = job.attr("GlobalJobId").expect("the job's GlobalJobId");
    let checkpoints = dest.join(global.replace('#', "_"));
    let checkpoint = |n: u32| checkpoints.join(format!("{n:04}"));
    let newest = || newest_checkpoint(pool, &job.id);
    let wait_checkpoint = |what: &str, above: Option<u32>| {
        let deadline = Instant::now() + pool::RUN;
        while newest() <= above {
            assert!(Instant::now() < deadline, "no checkpoint {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };

    // Periodic checkpoints, then an eviction to a new sandbox.
    let first = job.wait_for(EXECUTING, 1, START).scratch_dir();
    wait_checkpoint("0001 in the first sandbox", Some(0));
    job.vacate();
    job.wait_for(EVICTED, 1, START);
    // What the restart must take: the destination's newest checkpoint
    // and, in it, the newest generation. The generation ckptrun committed
    // at the eviction is lost: with ON_EXIT nothing is uploaded then, and
    // a restart takes the destination's checkpoint whatever else is spooled.
    let m1 = newest().unwrap();
    let held = generations_in(&checkpoint(m1));
    let g1 = held[0].1;
    let second = job.wait_for(EXECUTING, 2, START).scratch_dir();
    assert_ne!(first, second, "a vacated job runs in a new sandbox");
    // (HTCondor leaves the MANIFEST in the sandbox: see below.)
    assert_eq!(
        manifests_in(&second),
        [manifest(m1)],
        "the restart was not given checkpoint {m1:04}"
    );
    let run = first_run_in(&second, starts_in(&checkpoint(m1).join("ckptrun.log")));
    let restart = format!("restart from generation {g1} of ckptrun.store");
    assert!(
        run.iter().any(|l| l.ends_with(&restart)),
        "after the eviction: not `{restart}` (checkpoint {m1:04} holds {held:?}):\n{}",
        run.join("\n")
    );
    let gens: Vec<u64> = held.iter().map(|(_, g)| *g).collect();
    eprintln!("eviction: checkpoint {m1:04} holds generations {gens:?}; {restart}");

    // A checkpoint from the new sandbox; the job held (evicted), its
    // newest generation damaged in the destination's newest checkpoint,
    // then released.
    wait_checkpoint("from the second sandbox", Some(m1));
    job.hold();
    job.wait_for(HELD, 1, START);
    let m2 = newest().unwrap();
    let held = generations_in(&checkpoint(m2));
    assert_eq!(held.len(), 2, "checkpoint {m2:04}: {held:?}");
    let ((newest_slot, g2), (_, older)) = (held[0].clone(), held[1].clone());
    assert_eq!(older + 1, g2, "checkpoint {m2:04}: {held:?}");
    damage(&newest_slot);
    job.release();
    let third = job.wait_for(EXECUTING, 3, START).scratch_dir();
    // HTCondor 24.0.23 does not see the damage. Its starter checks the
    // files it downloaded against the MANIFEST, then removes the MANIFEST,
    // but it looks for the MANIFEST as the condor account, which cannot
    // read the job's sandbox (0700, the job's own): StarterLog says
    // `Can't open directory "." as PRIV_CONDOR`, the MANIFEST stays in
    // the sandbox unchecked, and the job starts with the damaged file. So
    // the fall-back is ckptrun's: it verifies the newest generation,
    // finds it damaged and restarts from the older one beside it, which
    // every checkpoint carries (transfer_checkpoint_files lists every slot).
    // (None here would mean that HTCondor checked and removed it: that it
    // sees the damage itself now.)
    assert_eq!(
        manifests_in(&third),
        [manifest(m2)],
        "the restart was not given checkpoint {m2:04} unchecked"
    );
    let run = first_run_in(&third, starts_in(&checkpoint(m2).join("ckptrun.log")));
    let damaged = format!("generation {g2} is damaged");
    let restart = format!("restart from generation {older} of ckptrun.store");
    assert!(
        run.iter().any(|l| l.contains(&damaged)) && run.iter().any(|l| l.ends_with(&restart)),
        "after damaging generation {g2} of checkpoint {m2:04}: not `{damaged}` then `{restart}`:\n{}",
        run.join("\n")
    );
    eprintln!(
        "fall-back: {}",
        run.iter().find(|l| l.contains(&damaged)).unwrap()
    );

    // The end: the uninterrupted run's result.
    succeeds(&job);
    assert_eq!(dir.read_text("result"), expected);
    let log = dir.read_text("ckptrun.log");
    assert!(log.ends_with(": exit 0\n"), "{log}");
    assert!(
        !dir.names().iter().any(|n| n.starts_with("ckptrun.store")),
        "the store came back: {:?}",
        dir.names()
    );

    // What the destination holds: every checkpoint (nothing here cleans
    // up: this build has no condor_manifest), each with every slot.
    let mut numbers: Vec<String> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    numbers.sort();
    for (n, name) in numbers.iter().enumerate() {
        assert_eq!(*name, format!("{n:04}"), "checkpoints {numbers:?}");
        let at = checkpoints.join(name);
        let mut sizes = Vec::new();
        let mut total = 0;
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let size = entry.metadata().unwrap().len();
            total += size;
            sizes.push(format!("{} {size}", entry.file_name().to_string_lossy()));
        }
        sizes.sort();
        let slots = generations_in(&at);
        assert_eq!(slots.len(), 2, "checkpoint {name}: {sizes:?}");
        eprintln!("checkpoint {name}: {total} bytes: {}", sizes.join(", "));
    }
    eprintln!(
        "{} checkpoints; the test took {:.1?}",
        numbers.len(),
        started.elapsed()
    );
}
