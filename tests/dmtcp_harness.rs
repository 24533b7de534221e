//! ckptrun in dmtcp mode under a stand-in for HTCondor and for hard
//! failures: an unmodified program (`examples/dmtcp_job.rs`, under the
//! fake DMTCP tools of `examples/fake_dmtcp`, with images large enough that
//! a checkpoint takes about 100 ms) is started, evicted, killed while it
//! vacates, and killed outright at random instants, some aimed at a
//! commit, until it finishes. Nothing committed may ever be lost or torn,
//! and the output must be the one of an uninterrupted run.
//!
//! What is modelled (PROTOCOLS.md §2, the README's DMTCP submit file with
//! `when_to_transfer_output = ON_EXIT_OR_EVICT` and
//! `transfer_checkpoint_files = ckptrun.store, out`):
//!
//! - The spool holds the last upload: `ckptrun.store` and `out`. A start
//!   is a sandbox made anew from it (unless a crash kept the sandbox,
//!   below), with the tools and the job transferred in, always at the same
//!   path: DMTCP reopens files by path and ckptrun does not make it
//!   relocatable (README).
//! - Each round runs `ckptrun --mode dmtcp --stdout out --interval 0.15
//!   -- ./job STEPS STEP_MS "arg with spaces"`, then, at a random instant
//!   (a quarter of them in the first 60 ms: the coordinator starting, the
//!   job joining it): an eviction (SIGTERM, then wait: exit 85, or 0 if the
//!   job had finished); an eviction whose vacate time runs out
//!   (SIGTERM, then SIGKILL for every process of the sandbox after a random
//!   time or just as the eviction's checkpoint becomes complete); or a hard
//!   failure of ckptrun alone (SIGKILL to it, at a random time or a random
//!   moment after a checkpoint becomes complete in `.images`: into a
//!   commit). After a hard failure the job must die with ckptrun and the
//!   coordinator with its last client: every process of the sandbox must
//!   be gone within GONE_WITHIN; but a coordinator no client ever joined
//!   cannot know (README), and must be ended by the next start. After ROUNDS rounds (or EVENTS_FOR), a
//!   last round lets the job run to its end.
//! - Exit 85 uploads the store and `out`; an eviction, however it ended,
//!   uploads the sandbox's files (ON_EXIT_OR_EVICT); a hard failure uploads
//!   nothing. Then either the machine is gone (the next start is made from
//!   the spool, and periodic commits that were never uploaded are lost, as
//!   in HTCondor) or, half the time, the sandbox survives and ckptrun is
//!   started again in it as it was left (a container restarted in place,
//!   as in tests/dmtcp.rs): that is where a kill in a commit must leave a
//!   store a restart can use.
//! - A start from generation 0 (no commit yet) is a fresh run that appends
//!   to `out` (ckptrun appends, as the shim did): the harness removes `out`
//!   first, as a user's wrapper would; a restart from a generation needs
//!   nothing, `dmtcp_restart` cuts `out` back to its size at the checkpoint.
//!
//! Checked after every round, in the sandbox and in every upload: each
//! `gen.N` (N >= 1) holds exactly one `ckpt_*.dmtcp`, of the configured
//! size, no `.temp`, the restart script and not its symlink; the image is of this job (its arguments) and records `out` at
//! exactly the size of the output of the steps it has done; `out` holds at
//! least that and is a prefix of the uninterrupted output. The newest
//! generation (and its step) never goes back within a run, nor in the
//! spool; exit 85 means a new one; a run that ends by itself says it
//! restarted from the newest generation. No process of the sandbox is
//! left after any round. Processes left behind are reported at the end of
//! the run (the loop goes on without them); anything else fails at once,
//! with the round's stderr and the history of the run.
//!
//! Random choices come from a seed printed first; rerun a failure with
//! `CKPTRUN_HARNESS_SEED=N cargo test --test dmtcp_harness`.

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    CKPTRUN, Rng, clock_seed, dmtcp_job, install_dmtcp_tools, processes_from, signal, wait_at_most,
    wait_until_handled,
};

const STEPS: u64 = 600;
const STEP_MS: u64 = 10;
const ARG: &str = "arg with spaces";
const INTERVAL: &str = "0.15";
const IMAGE_KB: u64 = 4096;
const WRITE_MS_PER_MB: u64 = 20;
const STORE: &str = "ckptrun.store";
const IMAGES: &str = ".images";
const SCRIPT: &str = "dmtcp_restart_script.sh";
const OUT: &str = "out";
const CHECKPOINTED: i32 = 85;
/// Rounds with a random event; the one after runs to the end.
const ROUNDS: u32 = 20;
/// After this long, the next round runs to the end.
const EVENTS_FOR: Duration = Duration::from_secs(22);
/// How long the processes of a killed ckptrun may take to go.
const GONE_WITHIN: Duration = Duration::from_millis(1500);
/// How long ckptrun may run on its own in a round.
const RUN_LIMIT: Duration = Duration::from_secs(30);

/// What a round does to ckptrun.
#[derive(Clone, Copy, Debug)]
enum Action {
    RunToExit,
    /// SIGTERM after `after_ms`, then wait for ckptrun.
    Evict {
        after_ms: u64,
    },
    /// SIGTERM after `after_ms`, then SIGKILL for every process of the
    /// sandbox at `vacate` (counted from the SIGTERM).
    EvictThenKill {
        after_ms: u64,
        vacate: When,
    },
    /// SIGKILL to ckptrun alone at `at`. `keep`: the sandbox survives and
    /// the next start is made in it; else from the spool.
    Crash {
        at: When,
        keep: bool,
    },
}

#[derive(Clone, Copy, Debug)]
enum When {
    /// This many ms from now.
    In(u64),
    /// `delay_us` after a checkpoint becomes complete in `.images` (its
    /// restart script appears) once `skip` commits have been made in this
    /// run.
    IntoCommit { skip: u64, delay_us: u64 },
}

/// How a round's ckptrun ended.
struct Played {
    status: ExitStatus,
    /// SIGTERM was sent.
    evicted: bool,
    /// The harness SIGKILLed it.
    killed: bool,
}

#[derive(Default)]
struct Tally {
    rounds: u32,
    evictions: u32,
    vacate_kills: u32,
    crashes_kept: u32,
    crashes_lost: u32,
    aimed_kills: u32,
    exits_85: u32,
    restarts: u32,
    fresh_over_output: u32,
    /// Kills that left a complete checkpoint uncommitted in `.images`.
    complete_lost: u32,
    /// Kills that left other scratch in the store.
    scratch_left: u32,
    newest: u64,
}

/// The newest generation of a store and the step it resumes at; (0, 0)
/// when there is none, or only generation 0.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Newest {
    generation: u64,
    step: u64,
}

impl std::fmt::Debug for Newest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gen.{} (step {})", self.generation, self.step)
    }
}

#[test]
fn evictions_and_crashes_never_lose_or_tear_a_dmtcp_checkpoint() {
    let seed = std::env::var("CKPTRUN_HARNESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(clock_seed);
    eprintln!("dmtcp harness seed: {seed} (rerun with CKPTRUN_HARNESS_SEED={seed})");
    let mut rng = Rng(seed);
    let base = std::env::temp_dir().join(format!("ckptrun-dmtcp-harness-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).unwrap();
    let spool = base.join("spool");
    fs::create_dir(&spool).unwrap();
    let sandbox = base.join("sandbox");
    let reference = reference();
    let mut run = Run {
        seed,
        base: base.clone(),
        sandbox: sandbox.clone(),
        reference,
        history: Vec::new(),
        left_behind: Vec::new(),
        round: 0,
        stderr: String::new(),
    };

    let started = Instant::now();
    let mut tally = Tally::default();
    let mut spool_newest = Newest::default();
    let mut keep_sandbox = false;
    for round in 1..=ROUNDS + 1 {
        run.round = round;
        run.stderr.clear();
        tally.rounds = round;
        if !keep_sandbox {
            make_sandbox(&sandbox, &spool);
        }
        // Where the image records `out`: the sandbox's real path.
        let out_at = sandbox.canonicalize().unwrap().join(OUT);
        let at_start = run
            .check_tree(&sandbox, &out_at)
            .unwrap_or_else(|why| run.fail(&format!("before the start: {why}")));
        if at_start.generation == 0 {
            tally.fresh_over_output += u32::from(fs::remove_file(sandbox.join(OUT)).is_ok());
        } else {
            tally.restarts += 1;
        }

        let action = if round > ROUNDS || started.elapsed() > EVENTS_FOR {
            Action::RunToExit
        } else {
            pick(&mut rng)
        };
        let mut ckptrun = spawn(&sandbox);
        let stderr = capture(&mut ckptrun);
        let played = play(&mut ckptrun, &sandbox, action, at_start.generation);
        // Every process of the sandbox must go: at once when ckptrun
        // exited or all were killed; when ckptrun alone was killed, as
        // soon as the job has died with it and the coordinator after it.
        let limit = match &played {
            Ok(p) if p.killed && !p.evicted => GONE_WITHIN,
            _ => Duration::from_millis(500),
        };
        let left = wait_gone(&sandbox, limit);
        run.stderr = stderr.text();
        let played = played.unwrap_or_else(|why| run.fail(&format!("{action:?}: {why}")));
        let status = played.status;
        // ckptrun killed before the job joined the coordinator: nothing
        // can end a coordinator that never had a client (README); the next
        // start in this sandbox must (it is checked after that round).
        let crashed = played.killed && !played.evicted;
        if crashed && !left.is_empty() && only_coordinators(&sandbox) {
            run.history.push(format!(
                "round {round}: a coordinator with no client yet outlived ckptrun; the next start must end it"
            ));
        } else if !left.is_empty() {
            run.left_behind.push(format!(
                "round {round}, {action:?}, {}: still running {} ms after the end:\n  {}",
                ended(status),
                limit.as_millis(),
                left.join("\n  ")
            ));
            kill_all_from(&sandbox);
        }
        let code = status.code();
        let expected_end = match (code, status.signal()) {
            (Some(0), _) => true,
            (Some(CHECKPOINTED), _) => played.evicted,
            (_, Some(libc::SIGKILL)) => played.killed,
            _ => false,
        };
        run.history.push(format!(
            "round {round}: from {at_start:?}, {action:?}: {}",
            ended(status)
        ));
        if !expected_end {
            run.fail(&format!("{action:?}: unexpected end: {}", ended(status)));
        }
        tally.evictions += u32::from(played.evicted);
        tally.exits_85 += u32::from(code == Some(CHECKPOINTED));
        if played.killed {
            match action {
                Action::EvictThenKill { .. } => tally.vacate_kills += 1,
                Action::Crash { keep: true, .. } => tally.crashes_kept += 1,
                _ => tally.crashes_lost += 1,
            }
            let aimed = matches!(
                action,
                Action::Crash {
                    at: When::IntoCommit { .. },
                    ..
                } | Action::EvictThenKill {
                    vacate: When::IntoCommit { .. },
                    ..
                }
            );
            tally.aimed_kills += u32::from(aimed);
            let store = sandbox.join(STORE);
            if fs::symlink_metadata(store.join(IMAGES).join(SCRIPT)).is_ok() {
                tally.complete_lost += 1;
            } else if names_in(&store)
                .iter()
                .any(|n| n.starts_with('.') && n != IMAGES && n != ".coordinator-port")
            {
                tally.scratch_left += 1;
            }
        }

        // Stricter than HTCondor needs: even where nothing is uploaded,
        // what a kill leaves must be whole.
        let at_end = run
            .check_tree(&sandbox, &out_at)
            .unwrap_or_else(|why| run.fail(&format!("{action:?}, {}: {why}", ended(status))));
        let last = run.history.last_mut().unwrap();
        last.push_str(&format!(", newest now {at_end:?}"));
        if at_end.generation < at_start.generation || at_end.step < at_start.step {
            run.fail(&format!(
                "{action:?}, {}: the newest generation went back from {at_start:?} to {at_end:?}",
                ended(status)
            ));
        }
        if code == Some(CHECKPOINTED) && at_end.generation <= at_start.generation {
            run.fail(&format!(
                "exit 85 but no new generation: newest {at_end:?}, {at_start:?} at the start"
            ));
        }
        if !played.killed {
            // It ended by itself: it started from the newest generation.
            let said = match at_start.generation {
                0 => "fresh start: dmtcp_launch".to_string(),
                g => format!("restart from generation {g} "),
            };
            if !run.stderr.contains(&said) {
                run.fail(&format!(
                    "{action:?}, {}: stderr lacks {said:?}",
                    ended(status)
                ));
            }
        }

        if code == Some(0) {
            let out = fs::read(sandbox.join(OUT)).unwrap_or_default();
            if out != run.reference {
                run.fail(&format!(
                    "exit 0, but {OUT} differs from an uninterrupted run's: {}",
                    difference(&out, &run.reference)
                ));
            }
            tally.newest = tally.newest.max(at_end.generation);
            eprintln!(
                "dmtcp harness: finished in {} rounds, {:.1} s: {} evictions ({} exits 85, {} \
                 killed at the end of their vacate time), {} crashes of ckptrun alone ({} in a \
                 sandbox kept, {} with the machine lost), {} kills aimed at a commit, {} kills \
                 left a complete checkpoint uncommitted, {} left other scratch, {} restarts from a \
                 generation, {} fresh starts over an earlier run's {OUT}, newest generation {}; \
                 seed {seed}",
                tally.rounds,
                started.elapsed().as_secs_f64(),
                tally.evictions,
                tally.exits_85,
                tally.vacate_kills,
                tally.crashes_kept + tally.crashes_lost,
                tally.crashes_kept,
                tally.crashes_lost,
                tally.aimed_kills,
                tally.complete_lost,
                tally.scratch_left,
                tally.restarts,
                tally.fresh_over_output,
                tally.newest,
            );
            if !run.left_behind.is_empty() {
                panic!(
                    "processes were left behind in {} of {} rounds; seed {seed} (rerun with \
                     CKPTRUN_HARNESS_SEED={seed})\n{}\n--- history:\n{}",
                    run.left_behind.len(),
                    tally.rounds,
                    run.left_behind.join("\n"),
                    run.history.join("\n")
                );
            }
            let _ = fs::remove_dir_all(&base);
            return;
        }
        tally.newest = tally.newest.max(at_end.generation);

        // HTCondor's transfers: exit 85, or any eviction, uploads.
        if played.evicted || code == Some(CHECKPOINTED) {
            upload(&sandbox, &spool);
            let uploaded = run
                .check_tree(&spool, &out_at)
                .unwrap_or_else(|why| run.fail(&format!("{action:?}, in the upload: {why}")));
            if uploaded.generation < spool_newest.generation || uploaded.step < spool_newest.step {
                run.fail(&format!(
                    "the spool's newest generation went back from {spool_newest:?} to {uploaded:?}"
                ));
            }
            spool_newest = uploaded;
        }
        keep_sandbox = matches!(action, Action::Crash { keep: true, .. }) && played.killed;
    }
    run.fail(&format!("not finished after {} rounds", ROUNDS + 1));
}

/// The state of the loop, for the checks and for failure messages.
struct Run {
    seed: u64,
    base: PathBuf,
    sandbox: PathBuf,
    reference: Vec<u8>,
    history: Vec<String>,
    left_behind: Vec<String>,
    round: u32,
    /// ckptrun's stderr in this round.
    stderr: String,
}

impl Run {
    fn fail(&self, what: &str) -> ! {
        kill_all_from(&self.sandbox);
        let seed = self.seed;
        panic!(
            "{what}\nseed {seed} (rerun with CKPTRUN_HARNESS_SEED={seed}), round {}, files in {}\n\
             --- ckptrun stderr in this round, last lines:\n{}\n--- history:\n{}\n\
             --- processes left behind in earlier rounds:\n{}",
            self.round,
            self.base.display(),
            last_lines(&self.stderr, 40),
            self.history.join("\n"),
            self.left_behind.join("\n"),
        )
    }

    /// The newest generation of the tree at `dir` (a sandbox or the
    /// spool), after checking every generation and `out` there; `out_at`
    /// is where images record `out`.
    fn check_tree(&self, dir: &Path, out_at: &Path) -> Result<Newest, String> {
        let out = fs::read(dir.join(OUT)).unwrap_or_default();
        if !self.reference.starts_with(&out) {
            return Err(format!(
                "{OUT} is not a prefix of an uninterrupted run's output: {}",
                difference(&out, &self.reference)
            ));
        }
        let store = dir.join(STORE);
        let mut newest = Newest::default();
        for name in names_in(&store) {
            if name.starts_with('.') {
                continue; // scratch: removed at the next start
            }
            let Some(number) = name
                .strip_prefix("gen.")
                .filter(|n| n.len() == 10 && n.bytes().all(|b| b.is_ascii_digit()))
            else {
                return Err(format!("{STORE}/{name}: not ckptrun's"));
            };
            let generation: u64 = number.parse().unwrap();
            let at = store.join(&name);
            let step = if generation == 0 {
                // The starting state: no images.
                match names_in(&at).as_slice() {
                    [] => 0,
                    other => return Err(format!("{}: holds {other:?}", at.display())),
                }
            } else {
                self.check_generation(&at, out.len() as u64, out_at)
                    .map_err(|why| format!("committed {}: {why}", at.display()))?
            };
            newest = newest.max(Newest { generation, step });
        }
        Ok(newest)
    }

    /// The step a committed generation resumes at, once it is found whole
    /// and consistent with `out` (`out_len` bytes).
    fn check_generation(&self, at: &Path, out_len: u64, out_at: &Path) -> Result<u64, String> {
        let names = names_in(at);
        if let Some(temp) = names.iter().find(|n| n.ends_with(".temp")) {
            return Err(format!("holds {temp}, an image not complete"));
        }
        let images: Vec<&String> = names
            .iter()
            .filter(|n| n.starts_with("ckpt_") && n.ends_with(".dmtcp"))
            .collect();
        let [image] = images[..] else {
            return Err(format!("{} images in {names:?}", images.len()));
        };
        let meta = fs::symlink_metadata(at.join(image)).map_err(|e| format!("{image}: {e}"))?;
        if !meta.is_file() || meta.len() != IMAGE_KB * 1024 {
            return Err(format!(
                "{image}: {} bytes ({:?}), not the {} of a whole image",
                meta.len(),
                meta.file_type(),
                IMAGE_KB * 1024
            ));
        }
        // The script is kept; its symlink (DMTCP may make it absolute,
        // into `.images`) is left out of the commit.
        if !names.iter().any(|n| n.starts_with("dmtcp_restart_script_")) {
            return Err(format!("no dmtcp_restart_script_*.sh in {names:?}"));
        }
        if fs::symlink_metadata(at.join(SCRIPT)).is_ok() {
            return Err(format!("{SCRIPT} was committed: {names:?}"));
        }
        let header = read_header(&at.join(image)).map_err(|why| format!("{image}: {why}"))?;
        let args = [STEPS.to_string(), STEP_MS.to_string(), ARG.to_string()];
        let want: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        if header.argv.len() != 4
            || !header.argv[0].ends_with(b"job")
            || header.argv[1..].iter().map(Vec::as_slice).ne(want)
        {
            return Err(format!(
                "{image}: the image of another command line: {:?}",
                header
                    .argv
                    .iter()
                    .map(|a| String::from_utf8_lossy(a))
                    .collect::<Vec<_>>()
            ));
        }
        let step = header.state;
        if step > STEPS {
            return Err(format!("{image}: at step {step} of {STEPS}"));
        }
        let [(path, size)] = &header.files[..] else {
            return Err(format!(
                "{image}: records {:?} open for writing, not {OUT} alone",
                header.files
            ));
        };
        if path != out_at {
            return Err(format!(
                "{image}: records {} open, not {OUT}",
                path.display()
            ));
        }
        let output = prefix_len(step);
        if *size != output {
            return Err(format!(
                "{image}: at step {step}, whose output is {output} bytes, records {OUT} at {size}"
            ));
        }
        if out_len < *size {
            return Err(format!(
                "{OUT} holds {out_len} bytes, fewer than the {size} its image records: output lost"
            ));
        }
        Ok(step)
    }
}

/// Evictions, some cut short, and crashes; a quarter of the instants in the first
/// 60 ms (the coordinator starting, the job joining it).
fn pick(rng: &mut Rng) -> Action {
    fn instant(rng: &mut Rng) -> u64 {
        match rng.below(4) {
            0 => rng.below(60),
            _ => rng.below(1400),
        }
    }
    match rng.below(15) {
        0..=3 => Action::Evict {
            after_ms: instant(rng),
        },
        4..=6 => Action::EvictThenKill {
            after_ms: rng.below(1400),
            vacate: match rng.below(2) {
                0 => When::In(rng.below(200)),
                _ => When::IntoCommit {
                    skip: 0,
                    delay_us: rng.below(15_000),
                },
            },
        },
        7..=10 => Action::Crash {
            at: When::In(instant(rng)),
            keep: rng.below(2) == 0,
        },
        _ => Action::Crash {
            at: When::IntoCommit {
                skip: rng.below(3),
                delay_us: rng.below(15_000),
            },
            keep: rng.below(2) == 0,
        },
    }
}

/// Plays `action` on a running ckptrun.
fn play(
    ckptrun: &mut Child,
    sandbox: &Path,
    action: Action,
    start_generation: u64,
) -> Result<Played, String> {
    let pid = ckptrun.id() as i32;
    let played = |status, evicted, killed| Played {
        status,
        evicted,
        killed,
    };
    let run_out = |ckptrun: &mut Child, evicted| match wait_at_most(ckptrun, RUN_LIMIT) {
        Some(status) => Ok(played(status, evicted, false)),
        None => {
            kill_everything(ckptrun, sandbox);
            Err(format!("ckptrun did not exit within {RUN_LIMIT:?}"))
        }
    };
    match action {
        Action::RunToExit => run_out(ckptrun, false),
        Action::Evict { after_ms } | Action::EvictThenKill { after_ms, .. } => {
            if let Some(status) = wait_at_most(ckptrun, Duration::from_millis(after_ms)) {
                return Ok(played(status, false, false));
            }
            wait_until_handled(pid, libc::SIGTERM);
            signal(pid, libc::SIGTERM);
            let Action::EvictThenKill { vacate, .. } = action else {
                return run_out(ckptrun, true);
            };
            let generation = newest_generation(sandbox);
            match reach(ckptrun, sandbox, vacate, generation) {
                Some(status) => Ok(played(status, true, false)),
                None => Ok(played(kill_everything(ckptrun, sandbox), true, true)),
            }
        }
        Action::Crash { at, .. } => match reach(ckptrun, sandbox, at, start_generation) {
            Some(status) => Ok(played(status, false, false)),
            None => {
                signal(pid, libc::SIGKILL);
                Ok(played(ckptrun.wait().unwrap(), false, true))
            }
        },
    }
}

/// Waits for the moment `when`; ckptrun's status if it exits before.
fn reach(ckptrun: &mut Child, sandbox: &Path, when: When, generation: u64) -> Option<ExitStatus> {
    let (skip, delay_us) = match when {
        When::In(ms) => return wait_at_most(ckptrun, Duration::from_millis(ms)),
        When::IntoCommit { skip, delay_us } => (skip, delay_us),
    };
    let script = sandbox.join(STORE).join(IMAGES).join(SCRIPT);
    let deadline = Instant::now() + Duration::from_secs(5);
    // A script seen before it was first seen absent is one an earlier run
    // left (ckptrun removes it at the start): not this run's checkpoint.
    let mut seen_absent = false;
    while Instant::now() < deadline {
        if let Some(status) = ckptrun.try_wait().unwrap() {
            return Some(status);
        }
        let there = fs::symlink_metadata(&script).is_ok();
        if there && seen_absent && newest_generation(sandbox) >= generation + skip {
            break;
        }
        seen_absent |= !there;
        std::thread::sleep(Duration::from_micros(100));
    }
    wait_at_most(ckptrun, Duration::from_micros(delay_us))
}

/// A new sandbox at `sandbox`, from the spool: the tools and the job
/// (transfer_input_files), then the last upload.
fn make_sandbox(sandbox: &Path, spool: &Path) {
    let _ = fs::remove_dir_all(sandbox);
    fs::create_dir(sandbox).unwrap();
    install_dmtcp_tools(sandbox);
    // A hard link: a copy just written can be "text file busy" to exec.
    if fs::hard_link(dmtcp_job(), sandbox.join("job")).is_err() {
        fs::copy(dmtcp_job(), sandbox.join("job")).unwrap();
    }
    if spool.join(STORE).is_dir() {
        copy_tree(&spool.join(STORE), &sandbox.join(STORE));
    }
    if spool.join(OUT).is_file() {
        fs::copy(spool.join(OUT), sandbox.join(OUT)).unwrap();
    }
}

/// The store and `out` of the sandbox replace the spool's, all at once.
fn upload(sandbox: &Path, spool: &Path) {
    let incoming = spool.with_extension("incoming");
    let old = spool.with_extension("old");
    let _ = fs::remove_dir_all(&incoming);
    let _ = fs::remove_dir_all(&old);
    fs::create_dir(&incoming).unwrap();
    if sandbox.join(STORE).is_dir() {
        copy_tree(&sandbox.join(STORE), &incoming.join(STORE));
    }
    if sandbox.join(OUT).is_file() {
        fs::copy(sandbox.join(OUT), incoming.join(OUT)).unwrap();
    }
    fs::rename(spool, &old).unwrap();
    fs::rename(&incoming, spool).unwrap();
    fs::remove_dir_all(&old).unwrap();
}

/// Copies the tree `from` to the new directory `to`, symlinks as symlinks.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&src, &dst);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            fs::copy(&src, &dst).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        }
    }
}

/// `ckptrun --mode dmtcp` in `sandbox`, its stderr piped, with a PATH
/// holding no DMTCP tool and no job ad.
fn spawn(sandbox: &Path) -> Child {
    let mut cmd = Command::new(CKPTRUN);
    cmd.args([
        "--mode",
        "dmtcp",
        "-v",
        "--stdout",
        OUT,
        "--interval",
        INTERVAL,
    ])
    .arg("--")
    .arg("./job")
    .args([STEPS.to_string(), STEP_MS.to_string(), ARG.to_string()])
    .current_dir(sandbox)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .env("PATH", "/usr/bin:/bin")
    .env("FAKE_DMTCP_IMAGE_KB", IMAGE_KB.to_string())
    .env("FAKE_DMTCP_WRITE_MS_PER_MB", WRITE_MS_PER_MB.to_string())
    .env_remove("_CONDOR_JOB_AD")
    .env_remove("DMTCP_JOB_END");
    for knob in [
        "FAKE_DMTCP_NEVER_COMPLETE",
        "FAKE_DMTCP_JOIN_DELAY_MS",
        "FAKE_DMTCP_FREEZE_MS",
        "FAKE_DMTCP_COORD_FAIL",
        "FAKE_DMTCP_PORT_DELAY_MS",
        "FAKE_DMTCP_BCKPT_RETURN_MS",
    ] {
        cmd.env_remove(knob);
    }
    cmd.spawn().expect("spawn ckptrun")
}

/// ckptrun's stderr, read as it comes (a pipe: the job's stderr is not a
/// file its images would record).
struct Captured {
    text: Arc<Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

fn capture(child: &mut Child) -> Captured {
    let mut pipe = child.stderr.take().unwrap();
    let text = Arc::new(Mutex::new(Vec::new()));
    let into = text.clone();
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    Captured { text, reader }
}

impl Captured {
    /// What was written, once every writer is gone (at most 1 s).
    fn text(self) -> String {
        let deadline = Instant::now() + Duration::from_secs(1);
        while !self.reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        String::from_utf8_lossy(&self.text.lock().unwrap()).into_owned()
    }
}

/// What the job writes to stdout when run to its end, uninterrupted and
/// without DMTCP.
fn reference() -> Vec<u8> {
    let out = Command::new(dmtcp_job())
        .args([STEPS.to_string(), "0".to_string(), ARG.to_string()])
        .env_remove("FAKE_DMTCP_COORD")
        .env_remove("FAKE_DMTCP_RESTORE")
        .env_remove("DMTCP_JOB_END")
        .env_remove("DMTCP_JOB_PIDFILE")
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "reference run: {}", out.status);
    assert!(out.stdout.len() as u64 > prefix_len(STEPS));
    out.stdout
}

/// The size of the job's output after `steps` steps.
fn prefix_len(steps: u64) -> u64 {
    (0..steps).map(|i| format!("step {i}\n").len() as u64).sum()
}

/// What an image's header says (examples/fake_dmtcp/proto.rs, read here
/// independently).
#[derive(Debug)]
struct Header {
    argv: Vec<Vec<u8>>,
    state: u64,
    files: Vec<(PathBuf, u64)>,
}

fn read_header(path: &Path) -> Result<Header, String> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(1 << 16).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    let mut lines = bytes.split(|&b| b == b'\n');
    if lines.next() != Some(b"FAKEDMTCP1") {
        return Err("no header".into());
    }
    let unhex = |text: &[u8]| -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(text).map_err(|e| e.to_string())?;
        (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect::<Option<_>>()
            .ok_or_else(|| format!("bad hex {text:?}"))
    };
    let mut header = Header {
        argv: Vec::new(),
        state: u64::MAX,
        files: Vec::new(),
    };
    for line in lines {
        if line == b"end" {
            if header.state == u64::MAX {
                return Err("no state in the header".into());
            }
            return Ok(header);
        }
        let Some(at) = line.iter().position(|&b| b == b'=') else {
            return Err(format!("bad line {:?}", String::from_utf8_lossy(line)));
        };
        let (key, value) = (&line[..at], &line[at + 1..]);
        match key {
            b"arg" => header.argv.push(unhex(value)?),
            b"state" => {
                let state = String::from_utf8(unhex(value)?).map_err(|e| e.to_string())?;
                header.state = state.parse().map_err(|_| format!("state {state:?}"))?;
            }
            b"file" => {
                let text = String::from_utf8_lossy(value);
                let (size, path) = text.split_once(' ').ok_or("bad file line")?;
                let size = size.parse().map_err(|_| format!("bad size {size:?}"))?;
                let path = String::from_utf8(unhex(path.as_bytes())?).map_err(|e| e.to_string())?;
                header.files.push((PathBuf::from(path), size));
            }
            _ => {}
        }
    }
    Err("the header has no end (torn?)".into())
}

/// The newest `gen.N` in the sandbox's store, 0 if none.
fn newest_generation(sandbox: &Path) -> u64 {
    names_in(&sandbox.join(STORE))
        .iter()
        .filter_map(|n| n.strip_prefix("gen.")?.parse().ok())
        .max()
        .unwrap_or(0)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// SIGKILL for ckptrun and every process of the sandbox, as a starter
/// whose vacate time has run out does.
fn kill_everything(ckptrun: &mut Child, sandbox: &Path) -> ExitStatus {
    signal(ckptrun.id() as i32, libc::SIGKILL);
    let status = ckptrun.wait().unwrap();
    kill_all_from(sandbox);
    status
}

/// Whether every process of `dir` still running is a coordinator.
fn only_coordinators(dir: &Path) -> bool {
    processes_from(dir).into_iter().all(|(pid, _)| {
        let argv = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv0 = argv.split(|&b| b == 0).next().unwrap_or_default();
        argv0.ends_with(b"dmtcp_coordinator")
    })
}

/// Waits at most `limit` until no process of `dir` runs; describes those
/// still there.
fn wait_gone(dir: &Path, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_from(dir);
        if left.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            return left.into_iter().map(|(pid, _)| describe(pid)).collect();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// SIGKILL for every process of `dir`, until none is left (at most 5 s).
fn kill_all_from(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_from(dir);
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for (pid, _) in left {
            signal(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `PID (PROGRAM) parent PPID: ARGV`, for a failure message.
fn describe(pid: i32) -> String {
    let argv = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv: Vec<String> = argv
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let parent = common::parent_and_state(pid).map_or(0, |(ppid, _)| ppid);
    format!("{pid} parent {parent}: {}", argv.join(" "))
}

fn ended(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("ckptrun exited {code}"),
        None => format!("ckptrun killed by signal {}", status.signal().unwrap_or(0)),
    }
}

/// Where `got` first differs from `want`, in lines.
fn difference(got: &[u8], want: &[u8]) -> String {
    let at = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    let line = got[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let show = |b: &[u8]| {
        let rest = &b[at.min(b.len())..];
        let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end.min(60)]).into_owned()
    };
    format!(
        "{} bytes against {}; first difference at byte {at} (line {line}): {:?} where {:?}",
        got.len(),
        want.len(),
        show(got),
        show(want)
    )
}

fn last_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].join("\n")
}
