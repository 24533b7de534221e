//! ckptrun in self mode under a stand-in for HTCondor (PROTOCOLS.md §2,
//! a pool with `when_to_transfer_output = ON_EXIT_OR_EVICT`): a job whose
//! own checkpoints are torn on purpose (`examples/self_job.rs`) is started,
//! evicted, vacated too fast and crashed at random until it finishes. No
//! committed generation may ever be torn, and the result must be the one
//! of an uninterrupted run.
//!
//! Each round: a fresh sandbox copied from the spool; ckptrun in it; then
//! at random let it run, evict it (SIGTERM, then SIGKILL for everything
//! after a "vacate time" sometimes shorter than a checkpoint takes), or
//! crash the machine (SIGKILL for everything, no warning). Exit 85 and an
//! eviction send the sandbox's top-level files to the spool (never a
//! directory: what HTCondor 24.0 was seen to do with no transfer lists),
//! merged over what the spool held, all at once; a crash sends nothing.
//!
//! A third job holds a state large enough (5 MiB, text-like) that each
//! commit compresses it in two processes and each restore expands it in
//! two: kills aimed at a commit strike anywhere in it, the move of the
//! second process's frames included.
//!
//! Random choices come from a seed printed first; rerun a failure with
//! `CKPTRUN_HARNESS_SEED=N cargo test --test harness`.

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{
    CKPTRUN, Rng, clock_seed, copy_program, generation_of, self_fixture, signal, slots, tar_member,
    wait_at_most, wait_until_handled,
};

const STATE: &str = "state";
const STORE: &str = "ckptrun.store";
const RESULT: &str = "result";
const CHECKPOINTED: i32 = 85;
const NO_ANSWER: i32 = 124;
/// Vacate times below this may end before a checkpoint is committed.
const SHORT_VACATE_MS: u64 = 20;
const TIME_LIMIT: Duration = Duration::from_secs(120);
/// A state's padding by default (`SELF_JOB_PAD`): 256 KiB, stored raw.
const PAD: usize = 256 * 1024;
/// Kills aimed at a commit strike this long after it starts, at most:
/// a commit of PAD bytes takes about as long.
const COMMIT_US: u64 = 600;

/// What the job does, and how long the loop may take to finish it.
struct Job {
    name: &'static str,
    dir_state: bool,
    steps: u64,
    max_rounds: u32,
    /// The state's padding: its length, and whether it is text-like
    /// (`SELF_JOB_PAD_TEXT`), which the store compresses.
    pad: usize,
    text: bool,
    /// How long after a commit starts a kill aimed at it may strike (µs).
    commit_us: u64,
}

#[test]
fn evictions_and_crashes_never_tear_a_committed_checkpoint() {
    condor_loop(Job {
        name: "file",
        dir_state: false,
        steps: 600,
        max_rounds: 200,
        pad: PAD,
        text: false,
        commit_us: COMMIT_US,
    });
}

#[test]
fn a_directory_checkpoint_survives_the_same_loop() {
    condor_loop(Job {
        name: "dir",
        dir_state: true,
        steps: 300,
        max_rounds: 100,
        pad: PAD,
        text: false,
        commit_us: COMMIT_US,
    });
}

/// 5 MiB of text: 4 MiB or more is compressed, and expanded, by two
/// processes where there are two CPUs (store::pack); such a commit takes
/// some 80 ms in the debug build.
#[test]
fn a_large_state_compressed_by_two_processes_survives_the_same_loop() {
    condor_loop(Job {
        name: "large",
        dir_state: false,
        steps: 240,
        max_rounds: 100,
        pad: 5 << 20,
        text: true,
        commit_us: 100_000,
    });
}

/// What a round does to ckptrun.
#[derive(Clone, Copy, Debug)]
enum Action {
    RunToExit,
    /// SIGTERM after `after_ms`, then SIGKILL for everything at `vacate`.
    Evict {
        after_ms: u64,
        vacate: When,
    },
    /// SIGKILL for everything, without warning.
    Crash {
        at: When,
    },
}

#[derive(Clone, Copy, Debug)]
enum When {
    /// This many ms from now.
    In(u64),
    /// This many µs after the store first changes: into a commit.
    IntoCommit(u64),
}

impl Action {
    /// Whether the vacate may end before a checkpoint is committed.
    fn short_vacate(self) -> bool {
        match self {
            Action::Evict {
                vacate: When::In(ms),
                ..
            } => ms < SHORT_VACATE_MS,
            Action::Evict { .. } => true,
            _ => false,
        }
    }
}

#[derive(Default)]
struct Tally {
    rounds: u32,
    evictions: u32,
    short_vacates: u32,
    crashes: u32,
    exits_85: u32,
    generations: std::collections::BTreeSet<u64>,
    leftovers: u32,
    /// Rounds that started over a torn working copy (killed mid-write).
    torn_starts: u32,
    /// Kills that left scratch in the store (killed mid-commit).
    scratch_left: u32,
}

/// Plays HTCondor until the job finishes; see the top of the file.
fn condor_loop(job: Job) {
    let seed = std::env::var("CKPTRUN_HARNESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(clock_seed);
    eprintln!("harness seed: {seed} (rerun with CKPTRUN_HARNESS_SEED={seed})");
    let mut rng = Rng(seed);
    let base = std::env::temp_dir().join(format!(
        "ckptrun-harness-{}-{}",
        std::process::id(),
        job.name
    ));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).unwrap();
    let expected = reference(&base, &job);

    // transfer_input_files: the job's program.
    let spool = base.join("spool");
    fs::create_dir(&spool).unwrap();
    copy_program(&self_fixture(), &spool.join("self_job"));
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut newest: Option<(u64, u64)> = None;
    let mut previous: Option<PathBuf> = None;
    for round in 1..=job.max_rounds {
        let sandbox = base.join(format!("sandbox.{round:03}"));
        let fail = |what: String| -> ! {
            panic!(
                "{what}\nseed {seed} (rerun with CKPTRUN_HARNESS_SEED={seed}), test {}, \
                 round {round}, files in {}\n--- ckptrun stderr, last lines:\n{}\n\
                 --- ckptrun.log, last lines:\n{}",
                job.name,
                base.display(),
                tail(&sandbox.join("ckptrun.err"), 20),
                tail(&sandbox.join("ckptrun.log"), 30),
            )
        };
        if started.elapsed() > TIME_LIMIT {
            fail(format!("not finished after {TIME_LIMIT:?}"));
        }
        tally.rounds = round;
        copy_tree(&spool, &sandbox);
        let working = sandbox.join(STATE);
        tally.torn_starts += u32::from(
            fs::symlink_metadata(&working).is_ok() && verify_state(&working, &job).is_err(),
        );
        let scratch_at_start = scratch_in(&sandbox);
        if let Some(old) = previous.replace(sandbox.clone()) {
            let _ = fs::remove_dir_all(old);
        }

        let action = pick(&mut rng, &job);
        let mut ckptrun = spawn(&sandbox, &job);
        let Some((status, evicted)) = play(&mut ckptrun, &sandbox, action, &mut tally) else {
            fail(format!("{action:?}: ckptrun did not exit within 20 s"));
        };
        let code = status.code();
        let expected_end = match (code, status.signal()) {
            (Some(0 | CHECKPOINTED), _) => true,
            (Some(NO_ANSWER), _) => evicted && action.short_vacate(),
            (_, Some(libc::SIGKILL)) => !matches!(action, Action::RunToExit),
            _ => false,
        };
        if !expected_end {
            fail(format!("{action:?}: {}", ended(status)));
        }
        tally.exits_85 += u32::from(code == Some(CHECKPOINTED));
        let scratch = scratch_in(&sandbox);
        tally.scratch_left += u32::from(
            status.signal().is_some() && !scratch.is_empty() && scratch != scratch_at_start,
        );
        // Stricter than HTCondor needs: even where nothing is transferred,
        // a kill must never leave a torn generation behind.
        if let Err(why) = check_store(&sandbox, &job) {
            fail(format!(
                "{action:?}, {}, in the sandbox: {why}",
                ended(status)
            ));
        }

        if code == Some(CHECKPOINTED) && slots(&sandbox, STORE).is_empty() {
            fail(format!(
                "{action:?}: exit 85 but no {STORE}.N in the sandbox"
            ));
        }
        if evicted || code == Some(CHECKPOINTED) {
            transfer(&spool, |incoming| upload(&spool, &sandbox, incoming));
            let generations = check_store(&spool, &job)
                .unwrap_or_else(|why| fail(format!("{action:?}, {}: {why}", ended(status))));
            let latest = generations.iter().max().copied();
            if code == Some(CHECKPOINTED) && latest.is_none() {
                fail(format!(
                    "{action:?}: exit 85 but no generation reached the spool"
                ));
            }
            // Without --restart-grace ckptrun never falls back to an older
            // generation, so neither the number nor the step goes back.
            let went_back = match (newest, latest) {
                (Some(old), Some(new)) => new.0 < old.0 || new.1 < old.1,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if went_back {
                fail(format!(
                    "{action:?}: newest (generation, step) in the spool went from {newest:?} \
                     to {latest:?}"
                ));
            }
            newest = latest;
            tally
                .generations
                .extend(generations.iter().map(|g| g.0).filter(|&n| n > 0));
        }

        if code == Some(0) {
            let result = fs::read_to_string(sandbox.join(RESULT))
                .unwrap_or_else(|e| fail(format!("exit 0 but no {RESULT}: {e}")));
            if result != expected {
                fail(format!(
                    "result {result:?}, an uninterrupted run gave {expected:?}"
                ));
            }
            eprintln!(
                "harness {}: finished in {} rounds, {:.1} s: {} evictions ({} with a short \
                 vacate), {} crashes, {} exits 85, {} generations reached the spool (newest \
                 {newest:?}), {} starts over a torn working copy, {} kills left scratch in the \
                 store, {} runs left processes behind; seed {seed}",
                job.name,
                tally.rounds,
                started.elapsed().as_secs_f64(),
                tally.evictions,
                tally.short_vacates,
                tally.crashes,
                tally.exits_85,
                tally.generations.len(),
                tally.torn_starts,
                tally.scratch_left,
                tally.leftovers,
            );
            let _ = fs::remove_dir_all(&base);
            return;
        }
    }
    panic!(
        "not finished in {} rounds; seed {seed} (rerun with CKPTRUN_HARNESS_SEED={seed}), \
         test {}, files in {}",
        job.max_rounds,
        job.name,
        base.display()
    );
}

/// What an eviction or exit 85 uploads with no transfer lists: the
/// sandbox's top-level files (not its directories), laid over the
/// spool's.
fn upload(spool: &Path, sandbox: &Path, incoming: &Path) {
    copy_tree(spool, incoming);
    for entry in fs::read_dir(sandbox).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() && entry.file_name() != "self_job" {
            fs::copy(entry.path(), incoming.join(entry.file_name())).unwrap();
        }
    }
}

/// Mostly evictions, as they are what carries a torn file to the spool;
/// a third of them, and some crashes, aimed at a commit.
fn pick(rng: &mut Rng, job: &Job) -> Action {
    let choice = rng.below(12);
    let (after_ms, ms) = (rng.below(400), rng.below(600));
    let into = rng.below(job.commit_us);
    let vacate = match choice {
        0 | 1 => return Action::RunToExit,
        2 => return Action::Crash { at: When::In(ms) },
        3 => {
            return Action::Crash {
                at: When::IntoCommit(into),
            };
        }
        4 | 5 => When::In(ms % SHORT_VACATE_MS),
        6 | 7 => When::In(SHORT_VACATE_MS + ms % 150),
        8 | 9 => When::In(3000),
        _ => When::IntoCommit(into),
    };
    Action::Evict { after_ms, vacate }
}

/// Plays `action`: how ckptrun ended and whether it was evicted, or None
/// if it had to be killed after running 20 s on its own.
fn play(
    ckptrun: &mut Child,
    sandbox: &Path,
    action: Action,
    tally: &mut Tally,
) -> Option<(ExitStatus, bool)> {
    let (evicted, kill_at) = match action {
        Action::RunToExit => match wait_at_most(ckptrun, Duration::from_secs(20)) {
            Some(status) => (false, Ok(status)),
            None => {
                kill_everything(ckptrun, sandbox);
                return None;
            }
        },
        Action::Crash { at } => (false, Err(at)),
        Action::Evict { after_ms, vacate } => {
            match wait_at_most(ckptrun, Duration::from_millis(after_ms)) {
                Some(status) => (false, Ok(status)),
                None => {
                    tally.evictions += 1;
                    tally.short_vacates += u32::from(action.short_vacate());
                    wait_until_handled(ckptrun.id() as i32, libc::SIGTERM);
                    signal(ckptrun.id() as i32, libc::SIGTERM);
                    (true, Err(vacate))
                }
            }
        }
    };
    let status = kill_at.or_else(|at| wait_for_exit(ckptrun, sandbox, at).ok_or(()));
    let status = match status {
        Ok(status) => {
            tally.leftovers += u32::from(kill_leftovers(sandbox) > 0);
            status
        }
        Err(()) => {
            tally.crashes += u32::from(!evicted);
            kill_everything(ckptrun, sandbox)
        }
    };
    Some((status, evicted))
}

/// Its exit status if ckptrun exits before `when`.
fn wait_for_exit(ckptrun: &mut Child, sandbox: &Path, when: When) -> Option<ExitStatus> {
    let wait = match when {
        When::In(ms) => Duration::from_millis(ms),
        When::IntoCommit(us) => {
            // A commit starts when the job has exited (having written its
            // checkpoint) and shows as an archive begun in the scratch.
            let building = sandbox.join(".ckptrun.store/building");
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut job = None;
            while !building.exists() && Instant::now() < deadline {
                if let Some(status) = ckptrun.try_wait().unwrap() {
                    return Some(status);
                }
                match job {
                    None => job = descendants(ckptrun.id() as i32).first().copied(),
                    Some(pid) if !common::alive(pid) => break,
                    Some(_) => {}
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            Duration::from_micros(us)
        }
    };
    wait_at_most(ckptrun, wait)
}

/// What is in the store's scratch directory.
fn scratch_in(sandbox: &Path) -> Vec<std::ffi::OsString> {
    names_in(&sandbox.join(".ckptrun.store"))
}

fn names_in(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// `ckptrun --mode self` in `sandbox`, output appended to files there.
fn spawn(sandbox: &Path, job: &Job) -> Child {
    let append = |name: &str| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(sandbox.join(name))
            .unwrap()
    };
    let steps = job.steps.to_string();
    let mut cmd = Command::new(CKPTRUN);
    cmd.args(["-v", "--log", "ckptrun.log", "--mode", "self"])
        .args(["--ckpt", STATE, "--store", STORE])
        .args(["--job-ckpt-exit", "17", "--ckpt-signal", "USR1"])
        .args(["--", "./self_job", STATE, &steps, RESULT])
        .current_dir(sandbox)
        .stdin(Stdio::null())
        .stdout(append("ckptrun.out"))
        .stderr(append("ckptrun.err"));
    job_env(&mut cmd, job);
    cmd.spawn().expect("spawn ckptrun")
}

fn job_env(cmd: &mut Command, job: &Job) {
    cmd.env("SELF_JOB_DIR", if job.dir_state { "1" } else { "0" })
        .env("SELF_JOB_STEP_MS", "5")
        .env("SELF_JOB_CKPT_EVERY", "60")
        .env("SELF_JOB_PAD", job.pad.to_string())
        .env("SELF_JOB_PAD_TEXT", if job.text { "1" } else { "0" })
        .env("SELF_JOB_WRITE_US", "300")
        .env_remove("SELF_JOB_EXIT")
        .env_remove("SELF_JOB_CKPT_SIGNAL_DEATH");
}

/// RESULT of an uninterrupted run of the job without ckptrun.
fn reference(base: &Path, job: &Job) -> String {
    let dir = base.join("reference");
    fs::create_dir(&dir).unwrap();
    let mut cmd = Command::new(self_fixture());
    cmd.args([STATE, &job.steps.to_string(), RESULT])
        .current_dir(&dir)
        .stdout(Stdio::null());
    job_env(&mut cmd, job);
    let status = cmd
        .env("SELF_JOB_STEP_MS", "0")
        .env_remove("SELF_JOB_CKPT_EVERY")
        .status()
        .unwrap();
    assert!(status.success(), "reference run: {status}");
    fs::read_to_string(dir.join(RESULT)).unwrap()
}

/// SIGKILL for ckptrun and all it started, at once, as a starter that
/// gives up on a vacate (or a machine that dies) does.
fn kill_everything(ckptrun: &mut Child, sandbox: &Path) -> ExitStatus {
    let family = descendants(ckptrun.id() as i32);
    signal(ckptrun.id() as i32, libc::SIGKILL);
    for &pid in &family {
        signal(-pid, libc::SIGKILL); // the job's own process group
        signal(pid, libc::SIGKILL);
    }
    let status = ckptrun.wait().unwrap();
    kill_leftovers(sandbox);
    status
}

/// All descendants of `pid`, from /proc/PID/task/*/children.
fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(parent) = todo.pop() {
        let Ok(tasks) = fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !found.contains(&child) {
                    found.push(child);
                    todo.push(child);
                }
            }
        }
    }
    found
}

/// Kills whatever still runs in `sandbox` (its cwd), so nothing writes
/// there during the transfer; returns how many there were.
fn kill_leftovers(sandbox: &Path) -> usize {
    let sandbox = sandbox.canonicalize().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let running: Vec<i32> = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|pid| fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == sandbox))
            .collect();
        if running.is_empty() {
            return seen.len();
        }
        assert!(
            Instant::now() < deadline,
            "cannot kill {running:?} in {}",
            sandbox.display()
        );
        for pid in running {
            signal(pid, libc::SIGKILL);
            if !seen.contains(&pid) {
                seen.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Replaces `spool` by what `fill` puts in a fresh directory beside it:
/// the spool is always one whole transfer or the one before.
fn transfer(spool: &Path, fill: impl FnOnce(&Path)) {
    let incoming = spool.with_extension("incoming");
    let old = spool.with_extension("old");
    let _ = fs::remove_dir_all(&incoming);
    let _ = fs::remove_dir_all(&old);
    fill(&incoming);
    fs::rename(spool, &old).unwrap();
    fs::rename(&incoming, spool).unwrap();
    fs::remove_dir_all(&old).unwrap();
}

/// Copies the tree `from` to the new directory `to`. The program is
/// hard-linked, not copied: a copy could be executed while the other
/// test's fork still holds it open for writing (ETXTBSY).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&src, &dst);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if entry.file_name() == "self_job" {
            fs::hard_link(&src, &dst).unwrap();
        } else {
            fs::copy(&src, &dst).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        }
    }
}

/// (number, step) of each generation of the store in `dir`, or why one
/// is not a valid state of the job. GNU tar reads the archives.
fn check_store(dir: &Path, job: &Job) -> Result<Vec<(u64, u64)>, String> {
    let mut generations = Vec::new();
    for slot in slots(dir, STORE) {
        if fs::metadata(&slot).map_or(0, |m| m.len()) == 0 {
            continue; // an empty slot
        }
        let Some(number) = generation_of(&slot) else {
            return Err(format!("{} is not a whole archive", slot.display()));
        };
        let member = |name: &str| {
            tar_member(&slot, name).ok_or_else(|| format!("{} lacks {name}", slot.display()))
        };
        // Generation 0 is the starting state, which may be "none yet".
        if number == 0 && tar_member(&slot, STATE).is_none() {
            generations.push((0, 0));
            continue;
        }
        let torn = |why: String| format!("committed generation {number} is torn: {why}");
        let step = if job.dir_state {
            let (step_a, low) = parse_state(&member("state/a")?, 1, job).map_err(torn)?;
            let (step_b, high) = parse_state(&member("state/b")?, 2, job).map_err(torn)?;
            if step_a != step_b || low >> 32 != 0 || high >> 32 != 0 {
                return Err(torn(format!("halves from steps {step_a}, {step_b}")));
            }
            step_a
        } else {
            parse_state(&member(STATE)?, 0, job).map_err(torn)?.0
        };
        generations.push((number, step));
    }
    Ok(generations)
}

// The fixture's state format (examples/self_job.rs), duplicated.
const MAGIC: &[u8; 8] = b"SELFJOB1";

/// (step, acc) of a whole state: one file, or the directory of `a`, `b`.
fn verify_state(path: &Path, job: &Job) -> Result<(u64, u64), String> {
    let read = |p: PathBuf| fs::read(&p).map_err(|e| format!("{}: {e}", p.display()));
    if !job.dir_state {
        return parse_state(&read(path.to_path_buf())?, 0, job);
    }
    let part = |name: &str, part| {
        parse_state(&read(path.join(name))?, part, job).map_err(|w| format!("{name}: {w}"))
    };
    let (step_a, low) = part("a", 1)?;
    let (step_b, high) = part("b", 2)?;
    if step_a != step_b || low >> 32 != 0 || high >> 32 != 0 {
        return Err(format!(
            "halves from different states (steps {step_a}, {step_b})"
        ));
    }
    Ok((step_a, low | high << 32))
}

/// (step, value) of one state file of `part`: magic, step, value, pad
/// derived from them, FNV-1a 64 of everything before it. A text-like pad
/// is checked by its length and the FNV only: remaking it here, in the
/// debug build, would take longer than a round.
fn parse_state(bytes: &[u8], part: u64, job: &Job) -> Result<(u64, u64), String> {
    let pad = if job.dir_state { job.pad / 2 } else { job.pad };
    if bytes.len() != 32 + pad || &bytes[..8] != MAGIC {
        return Err(format!("{} bytes, no header", bytes.len()));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let fnv = body.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    if fnv != u64::from_le_bytes(sum.try_into().unwrap()) {
        return Err(format!("bad checksum ({} bytes)", bytes.len()));
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (step, value) = (word(8), word(16));
    if job.text {
        return Ok((step, value));
    }
    let mut x = step ^ value.rotate_left(29) ^ part.wrapping_mul(0xd1b5_4a32_d192_ed03);
    for chunk in body[24..].chunks(8) {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        if chunk != &(z ^ (z >> 31)).to_le_bytes()[..chunk.len()] {
            return Err(format!("padding of another state (step {step})"));
        }
    }
    Ok((step, value))
}

fn ended(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("ckptrun exited {code}"),
        None => format!("ckptrun killed by signal {}", status.signal().unwrap_or(0)),
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| format!("({}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
