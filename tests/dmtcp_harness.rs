//! ckptrun in dmtcp mode against the real DMTCP 4.2.0, under a stand-in
//! for HTCondor and for hard failures. A small C program
//! (`tests/dmtcp_harness_job.c`, compiled with `cc`) is started, evicted,
//! killed while it vacates, vacated with `-fast`, and crashed at random
//! instants, some aimed at a checkpoint or a commit, until it finishes.
//! Nothing committed may be lost or torn, and its output must be an
//! uninterrupted run's, byte for byte.
//!
//! The real DMTCP is found by `real_dmtcp()` (tests/common): without it
//! the harness says it is skipped, except under CI, where it fails.
//!
//! What is modelled, as HTCondor 24.0 was seen to behave (PROTOCOLS.md §5):
//!
//! - The spool holds the top-level files of the sandbox as last uploaded.
//!   Every start is in a new sandbox directory (`dir_N`, a new path; the
//!   old one removed) holding the spool's files and the job (its input).
//! - Each round runs `ckptrun --mode dmtcp --stdout out --dmtcp-dir BIN
//!   --images-dir IMAGES [--interval SECS] [--keep K] -- ./job STEPS MS`
//!   with a job ad giving `JobMaxVacateTime`, then at a random instant (a
//!   quarter of them in the first 150 ms: the coordinator starting, the job
//!   joining, a restart under way), one of:
//!   - an eviction: SIGTERM, then, if ckptrun is still there when the
//!     vacate time is over, SIGKILL for every process of the job (the
//!     starter's hard kill), some of them aimed at the checkpoint's moments
//!     (an image begun, the images complete, the commit being written).
//!     Nothing may be left once the kill has found nothing more to kill,
//!     but a process with a SIGKILL pending or exiting (it runs no code of
//!     its own again) may take GONE_WITHIN to go, as the kernel ends it;
//!     that is noted in the history, with what /proc said of it;
//!   - `condor_vacate_job -fast`: SIGKILL for every process of the job;
//!   - a crash of the machine: SIGKILL to ckptrun alone, at a random
//!     instant or aimed at those moments (after an eviction began, or
//!     during an `--interval` checkpoint). The job must die with ckptrun;
//!     what is left after GONE_WITHIN is reported (the starter then ends
//!     it, as HTCondor does), but for a coordinator alone, which is noted
//!     in the history: ckptrun, killed, cannot end it (see the round);
//!     so is one found only in a later round (`late_coordinators`).
//!
//!   After EVENTS_FOR (or ROUNDS rounds) a last round lets the job end.
//! - Exit 85 and an eviction (however it ended) upload the sandbox's new
//!   and changed top-level files, never a directory, merged over the spool
//!   all at once; a crash or a `-fast` vacate uploads nothing.
//! - A start with no committed checkpoint (generation 0 alone) is a fresh
//!   run: ckptrun appends to `out` (`--stdout`, docs/reference.md), so
//!   the harness removes the `out` a failed attempt uploaded, as a user's
//!   wrapper would.
//!
//! Checked after every round, in the sandbox and in the spool: every slot
//! file is empty or a whole archive (GNU tar reads it) whose generations
//! 1 and up hold an image and a restart script; `out` and `data` are
//! prefixes of an uninterrupted run's; the newest generation never goes
//! back (in a sandbox, nor in the spool); exit 85 means a new generation;
//! a ckptrun that ended by itself started from the newest generation and
//! left no images directory; nothing is left running (no process of the
//! job, no coordinator). At the end, `out` and `data` are an uninterrupted
//! run's. Processes left behind are reported at the end of the run; any
//! other failure stops it at once, with ckptrun's stderr and the history.
//!
//! Random choices come from a seed printed first; rerun a failure with
//! `CKPTRUN_HARNESS_SEED=N cargo test --test dmtcp_harness` (the choices
//! replay; the timing of the real processes does not).
//! `CKPTRUN_HARNESS_HISTORY=1` prints every round's history at the end of
//! a run that passed too.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    CKPTRUN, Rng, clock_seed, copy_program, real_dmtcp, signal, wait_at_most, wait_until_handled,
};

const STEPS: u32 = 500;
const STEP_MS: u32 = 40;
const STORE: &str = "ckptrun.store";
const OUT: &str = "out";
const DATA: &str = "data";
const JOB: &str = "job";
const CHECKPOINTED: i32 = 85;
const NO_ANSWER: i32 = 124;
/// Rounds with a random event, at most; the one after runs to the end.
const ROUNDS: u32 = 40;
/// After this long, the next round runs to the end.
const EVENTS_FOR: Duration = Duration::from_secs(70);
/// How long the processes of a crashed ckptrun may take to go.
const GONE_WITHIN: Duration = Duration::from_secs(3);
/// How long the starter's kill goes on killing.
const KILL_FOR: Duration = Duration::from_secs(5);
/// How long ckptrun may run on its own in a round.
const RUN_LIMIT: Duration = Duration::from_secs(90);
/// How long an aimed event waits for its moment.
const AIM_WITHIN: Duration = Duration::from_secs(15);

/// What a round does to ckptrun.
#[derive(Clone, Copy, Debug)]
enum Action {
    RunToExit,
    /// SIGTERM after `after_ms`; the starter's SIGKILL for every process
    /// of the job at `kill` (after the SIGTERM) if ckptrun is still there.
    Evict {
        after_ms: u64,
        kill: When,
    },
    /// `condor_vacate_job -fast`: SIGKILL for every process of the job.
    FastVacate {
        at: When,
    },
    /// The machine dies: SIGKILL to ckptrun alone at `at`, after an
    /// eviction's SIGTERM at `evicted_ms` if any.
    Crash {
        evicted_ms: Option<u64>,
        at: When,
    },
}

#[derive(Clone, Copy, Debug)]
enum When {
    /// This many ms from now.
    In(u64),
    /// `delay_us` after `Moment` is first seen.
    After(Moment, u64),
}

/// Moments of a checkpoint that kills are aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Moment {
    /// DMTCP has begun writing an image.
    ImageBegun,
    /// The images are complete (the restart script's symlink is there).
    ImagesComplete,
    /// ckptrun is writing the commit (`.ckptrun.store/building`).
    Committing,
}

/// A round's settings besides its action.
#[derive(Clone, Copy, Debug)]
struct Settings {
    /// `--interval SECS`, in ms.
    interval_ms: Option<u64>,
    /// The job ad's JobMaxVacateTime.
    vacate_s: u64,
}

/// How a round's ckptrun ended.
struct Played {
    status: ExitStatus,
    /// SIGTERM was sent.
    evicted: bool,
    /// The harness SIGKILLed ckptrun (alone, or with everything).
    killed: bool,
    /// ... and the machine is gone: nothing is uploaded.
    crashed: bool,
    /// An aimed event did not see its moment.
    missed: bool,
}

#[derive(Default)]
struct Tally {
    rounds: u32,
    evictions: u32,
    exits_85: u32,
    exits_85_interval: u32,
    exits_124: u32,
    vacate_kills: u32,
    fast_vacates: u32,
    crashes: u32,
    aimed: u32,
    aimed_missed: u32,
    restarts: u32,
    fresh_over_output: u32,
    uploads: u32,
    images_left_by_kills: usize,
    newest: u64,
}

#[test]
fn evictions_and_crashes_under_the_real_dmtcp_never_lose_or_tear_a_checkpoint() {
    let Some(bin) = real_dmtcp("dmtcp_harness") else {
        return;
    };
    let seed = std::env::var("CKPTRUN_HARNESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(clock_seed);
    eprintln!("dmtcp harness seed: {seed} (rerun with CKPTRUN_HARNESS_SEED={seed})");
    let mut rng = Rng(seed);
    let base = std::env::temp_dir().join(format!("ckptrun-dmtcp-harness-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(base.join("images")).unwrap();
    let job = compile_job(&base);
    let (reference_out, reference_data) = reference(&base, &job);
    let keep = rng.below(3);
    let mut run = Run {
        seed,
        base: base.clone(),
        bin,
        job,
        keep,
        reference_out,
        reference_data,
        history: vec![format!("--keep {keep}")],
        left_behind: Vec::new(),
        round: 0,
        crashed: Vec::new(),
        stderr: String::new(),
        spool: BTreeMap::new(),
    };

    let started = Instant::now();
    let mut tally = Tally::default();
    let mut spool_newest = 0;
    let mut sandbox = PathBuf::new();
    for round in 1..=ROUNDS + 1 {
        run.round = round;
        run.stderr.clear();
        tally.rounds = round;
        if !sandbox.as_os_str().is_empty() {
            fs::remove_dir_all(&sandbox).unwrap();
        }
        sandbox = base.join(format!("dir_{round}"));
        let given = run.make_sandbox(&sandbox);
        let at_start = run
            .check_tree(&sandbox)
            .unwrap_or_else(|why| run.fail(&format!("before the start: {why}")));
        if at_start.generation == 0 {
            tally.fresh_over_output += u32::from(fs::remove_file(sandbox.join(OUT)).is_ok());
        } else {
            tally.restarts += 1;
        }
        let images_before = names_in(&base.join("images"));
        let stale = run.late_coordinators(wait_gone(&base, Duration::ZERO));
        if !stale.is_empty() {
            run.left_behind.push(format!(
                "round {round}: running at its start:\n  {}",
                stale.join("\n  ")
            ));
            kill_all_under(&base);
        }

        let last = round > ROUNDS || started.elapsed() > EVENTS_FOR;
        let (action, settings) = match last {
            true => (
                Action::RunToExit,
                Settings {
                    interval_ms: None,
                    vacate_s: 60,
                },
            ),
            false => pick(&mut rng),
        };
        let mut ckptrun = run.spawn(&sandbox, settings);
        let stderr = capture(&mut ckptrun);
        let own_images = at_start.images_dir.clone();
        let played = play(
            &mut ckptrun,
            &Where {
                base: &base,
                sandbox: &sandbox,
                images_before: &images_before,
                own_images: own_images.as_deref(),
            },
            action,
            settings,
        );
        // Once ckptrun has ended: whatever is left of the job.
        let limit = match &played {
            Ok(p) if p.killed && !p.crashed => Duration::ZERO,
            Ok(p) if p.killed => GONE_WITHIN,
            _ => Duration::from_millis(500),
        };
        let mut left = run.late_coordinators(wait_gone(&base, limit));
        if played.as_ref().is_ok_and(|p| p.killed && !p.crashed) && !left.is_empty() {
            // The starter's kill left something: what the kill already
            // doomed (a SIGKILL pending, from it or from ckptrun's
            // PR_SET_PDEATHSIG, or exiting) runs no code of its own
            // again; the kernel may still be ending it (a write being
            // finished, a file freed). Whatever is not going must fail
            // the round.
            let seen = left.join("\n  ");
            let doomed = left.iter().all(|p| p.contains(", doomed: "));
            left = wait_gone(&base, if doomed { GONE_WITHIN } else { Duration::ZERO });
            left = run.late_coordinators(left);
            if doomed && left.is_empty() {
                run.history.push(format!(
                    "round {round}: still ending after the kill:\n  {seen}"
                ));
            } else if !left.is_empty() {
                left.insert(0, format!("right after the kill:\n  {seen}\n and then:"));
            }
        }
        run.stderr = stderr.text();
        let played = played.unwrap_or_else(|why| run.fail(&format!("{action:?}: {why}")));
        if played.crashed {
            run.crashed.push(round);
        }
        let status = played.status;
        let said_joined = run.stderr.contains("the job runs under DMTCP")
            || run.stderr.contains("restart complete");
        if !left.is_empty() {
            let coordinators_only = left.iter().all(|p| p.contains("dmtcp_coordinator"));
            if played.crashed && coordinators_only {
                // docs/dmtcp.md: a coordinator no client joined cannot know to
                // exit. One whose clients had joined exits after the last
                // (DMTCP's --exit-on-last), but one run of this test saw
                // one still there 3 s after the job had gone (a restarted
                // job, ckptrun killed 1952 ms in), not reproduced with its
                // seed. Either way
                // ckptrun, SIGKILLed, can do nothing: the next start in
                // the sandbox ends it (tests/dmtcp_real.rs), and HTCondor
                // ends it with the job.
                run.history.push(format!(
                    "round {round}: a coordinator {} outlived ckptrun",
                    if said_joined {
                        "whose clients had joined"
                    } else {
                        "no client had joined"
                    }
                ));
            } else {
                run.left_behind.push(format!(
                    "round {round}, {action:?}, {}: still running {} ms after the end:\n  {}",
                    ended(status),
                    limit.as_millis(),
                    left.join("\n  ")
                ));
            }
            // The starter ends every process of the job.
            kill_all_under(&base);
        }
        let code = status.code();
        run.history.push(format!(
            "round {round}: from generation {}, {action:?}, {settings:?}: {}",
            at_start.generation,
            ended(status)
        ));
        let expected_end = match (code, status.signal()) {
            (Some(0), _) => true,
            (Some(CHECKPOINTED), _) => played.evicted || settings.interval_ms.is_some(),
            (Some(NO_ANSWER), _) => played.evicted,
            (_, Some(libc::SIGKILL)) => played.killed,
            _ => false,
        };
        if !expected_end {
            run.fail(&format!("{action:?}: unexpected end: {}", ended(status)));
        }
        tally.evictions += u32::from(played.evicted);
        tally.exits_85 += u32::from(code == Some(CHECKPOINTED));
        tally.exits_85_interval += u32::from(code == Some(CHECKPOINTED) && !played.evicted);
        tally.exits_124 += u32::from(code == Some(NO_ANSWER));
        match action {
            Action::Evict { .. } if played.killed => tally.vacate_kills += 1,
            Action::FastVacate { .. } if played.killed => tally.fast_vacates += 1,
            Action::Crash { .. } if played.killed => tally.crashes += 1,
            _ => {}
        }
        let aimed = matches!(
            action,
            Action::Evict {
                kill: When::After(..),
                ..
            } | Action::FastVacate {
                at: When::After(..)
            } | Action::Crash {
                at: When::After(..),
                ..
            }
        );
        tally.aimed += u32::from(aimed && !played.missed);
        tally.aimed_missed += u32::from(aimed && played.missed);

        // Stricter than HTCondor needs: even where nothing is uploaded,
        // what a kill leaves must be whole.
        let at_end = run
            .check_tree(&sandbox)
            .unwrap_or_else(|why| run.fail(&format!("{action:?}, {}: {why}", ended(status))));
        run.history
            .last_mut()
            .unwrap()
            .push_str(&format!(", newest now {}", at_end.generation));
        if code == Some(0) {
            // The job has ended well: its store goes with it.
            let left = common::slots(&sandbox, STORE);
            if !left.is_empty() || sandbox.join(format!(".{STORE}/older")).exists() {
                run.fail(&format!("exit 0, but the store is left: {left:?}"));
            }
        } else if at_end.generation < at_start.generation {
            run.fail(&format!(
                "the newest generation went back from {} to {}",
                at_start.generation, at_end.generation
            ));
        }
        if code == Some(CHECKPOINTED) && at_end.generation <= at_start.generation {
            run.fail(&format!(
                "exit 85 but no new generation: newest {}, {} at the start",
                at_end.generation, at_start.generation
            ));
        }
        if !played.killed {
            // It ended by itself: it started from the newest generation,
            // and removed its images directory.
            let said = match at_start.generation {
                0 => "fresh start: dmtcp_launch".to_string(),
                g => format!("restart from generation {g} "),
            };
            if !run.stderr.contains(&said) {
                run.fail(&format!("{}: stderr lacks {said:?}", ended(status)));
            }
            let used = own_images.or_else(|| images_dir_said(&run.stderr));
            match used {
                Some(dir) if dir.exists() => run.fail(&format!(
                    "{}: its images directory {} is left",
                    ended(status),
                    dir.display()
                )),
                Some(_) => {}
                None => run.fail("which images directory it used is not known"),
            }
        }
        tally.newest = tally.newest.max(at_end.generation);

        if code == Some(0) {
            let out = fs::read(sandbox.join(OUT)).unwrap_or_default();
            let data = fs::read(sandbox.join(DATA)).unwrap_or_default();
            for (name, got, want) in [
                (OUT, &out, &run.reference_out),
                (DATA, &data, &run.reference_data),
            ] {
                if got != want {
                    run.fail(&format!(
                        "exit 0, but {name} differs from an uninterrupted run's: {}",
                        difference(got, want)
                    ));
                }
            }
            tally.images_left_by_kills = names_in(&base.join("images")).len();
            eprintln!(
                "dmtcp harness: finished in {} rounds, {:.1} s, --keep {keep}: {} evictions, {} \
                 exits 85 ({} of them --interval), {} exits 124, {} killed at the end of their \
                 vacate time, {} -fast vacates, {} crashes; {} kills aimed at a checkpoint's \
                 moment ({} more missed it); {} restarts from a generation, {} fresh starts \
                 over an earlier attempt's {OUT}; {} uploads; newest generation {}; {} images \
                 directories left by killed runs; seed {seed}",
                tally.rounds,
                started.elapsed().as_secs_f64(),
                tally.evictions,
                tally.exits_85,
                tally.exits_85_interval,
                tally.exits_124,
                tally.vacate_kills,
                tally.fast_vacates,
                tally.crashes,
                tally.aimed,
                tally.aimed_missed,
                tally.restarts,
                tally.fresh_over_output,
                tally.uploads,
                tally.newest,
                tally.images_left_by_kills,
            );
            if std::env::var_os("CKPTRUN_HARNESS_HISTORY").is_some() {
                eprintln!("--- history:\n{}", run.history.join("\n"));
            }
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

        // HTCondor's transfers: exit 85, or an eviction the machine
        // survived.
        let evicted = played.evicted && !played.crashed;
        if evicted || code == Some(CHECKPOINTED) {
            run.upload(&sandbox, &given);
            tally.uploads += 1;
            let spool_dir = run.write_spool();
            let uploaded = run
                .check_tree(&spool_dir)
                .unwrap_or_else(|why| run.fail(&format!("{action:?}, in the upload: {why}")));
            if uploaded.generation < spool_newest {
                run.fail(&format!(
                    "the spool's newest generation went back from {spool_newest} to {}",
                    uploaded.generation
                ));
            }
            spool_newest = uploaded.generation;
        }
    }
    run.fail(&format!("not finished after {} rounds", ROUNDS + 1));
}

/// A random action, and the round's settings.
fn pick(rng: &mut Rng) -> (Action, Settings) {
    fn instant(rng: &mut Rng) -> u64 {
        match rng.below(4) {
            0 => rng.below(150),
            _ => 150 + rng.below(2500),
        }
    }
    fn moment(rng: &mut Rng) -> When {
        let (moment, delay_us) = match rng.below(3) {
            0 => (Moment::ImageBegun, rng.below(400_000)),
            1 => (Moment::ImagesComplete, rng.below(30_000)),
            _ => (Moment::Committing, rng.below(20_000)),
        };
        When::After(moment, delay_us)
    }
    let mut settings = Settings {
        interval_ms: None,
        vacate_s: [1, 2, 4, 8, 8, 30][rng.below(6) as usize],
    };
    if rng.below(4) == 0 {
        settings.interval_ms = Some(800 + rng.below(2200));
    }
    let action = match rng.below(16) {
        0..=5 => Action::Evict {
            after_ms: instant(rng),
            kill: When::In(settings.vacate_s * 1000),
        },
        6..=7 => Action::Evict {
            after_ms: instant(rng),
            kill: moment(rng),
        },
        8 => Action::FastVacate {
            at: When::In(instant(rng)),
        },
        9..=11 => Action::Crash {
            evicted_ms: None,
            at: When::In(instant(rng)),
        },
        12..=13 => Action::Crash {
            evicted_ms: Some(instant(rng)),
            at: moment(rng),
        },
        _ => {
            // A checkpoint of its own to aim at: --interval.
            settings.interval_ms = Some(800 + rng.below(1200));
            match rng.below(2) {
                0 => Action::Crash {
                    evicted_ms: None,
                    at: moment(rng),
                },
                _ => Action::FastVacate { at: moment(rng) },
            }
        }
    };
    (action, settings)
}

/// Where a round's processes and files are.
struct Where<'a> {
    base: &'a Path,
    sandbox: &'a Path,
    /// The images directories there were before ckptrun started.
    images_before: &'a [String],
    /// The images directory of the generation it restarts from.
    own_images: Option<&'a Path>,
}

impl Where<'_> {
    /// The run's images directory: the generation's, or the new one.
    fn images(&self) -> Option<PathBuf> {
        if let Some(dir) = self.own_images {
            return Some(dir.to_path_buf());
        }
        let now = names_in(&self.base.join("images"));
        now.into_iter()
            .find(|n| !self.images_before.contains(n))
            .map(|n| self.base.join("images").join(n))
    }

    fn seen(&self, moment: Moment) -> bool {
        if moment == Moment::Committing {
            return self.sandbox.join(".ckptrun.store/building").exists();
        }
        let Some(images) = self.images() else {
            return false;
        };
        let names = names_in(&images);
        match moment {
            Moment::ImageBegun => names
                .iter()
                .any(|n| n.starts_with("ckpt_") && n.contains(".dmtcp")),
            _ => names.iter().any(|n| n == "dmtcp_restart_script.sh"),
        }
    }
}

/// Plays `action` on a running ckptrun.
fn play(
    ckptrun: &mut Child,
    at: &Where,
    action: Action,
    settings: Settings,
) -> Result<Played, String> {
    let pid = ckptrun.id() as i32;
    let mut played = Played {
        status: ExitStatus::from_raw(0),
        evicted: false,
        killed: false,
        crashed: false,
        missed: false,
    };
    let finish = |ckptrun: &mut Child, mut played: Played| match wait_at_most(ckptrun, RUN_LIMIT) {
        Some(status) => {
            played.status = status;
            Ok(played)
        }
        None => {
            kill_everything(ckptrun, at.base);
            Err(format!("ckptrun did not exit within {RUN_LIMIT:?}"))
        }
    };
    let evict = |ckptrun: &mut Child, played: &mut Played, after_ms: u64| {
        if let Some(status) = wait_at_most(ckptrun, Duration::from_millis(after_ms)) {
            played.status = status;
            return false;
        }
        wait_until_handled(pid, libc::SIGTERM);
        signal(pid, libc::SIGTERM);
        played.evicted = true;
        true
    };
    match action {
        Action::RunToExit => finish(ckptrun, played),
        Action::Evict { after_ms, kill } => {
            if !evict(ckptrun, &mut played, after_ms) {
                return Ok(played);
            }
            // The starter's hard kill comes at the vacate time at the latest.
            let vacate = Instant::now() + Duration::from_secs(settings.vacate_s);
            match reach(ckptrun, at, kill, vacate, &mut played) {
                Some(status) => played.status = status,
                None => {
                    played.status = kill_everything(ckptrun, at.base);
                    played.killed = true;
                }
            }
            Ok(played)
        }
        Action::FastVacate { at: when } => {
            let never = Instant::now() + RUN_LIMIT;
            match reach(ckptrun, at, when, never, &mut played) {
                Some(status) => played.status = status,
                None => {
                    played.status = kill_everything(ckptrun, at.base);
                    played.killed = true;
                    played.crashed = true;
                }
            }
            Ok(played)
        }
        Action::Crash {
            evicted_ms,
            at: when,
        } => {
            if let Some(after_ms) = evicted_ms
                && !evict(ckptrun, &mut played, after_ms)
            {
                return Ok(played);
            }
            let never = Instant::now() + RUN_LIMIT;
            match reach(ckptrun, at, when, never, &mut played) {
                Some(status) => played.status = status,
                None => {
                    signal(pid, libc::SIGKILL);
                    played.status = ckptrun.wait().unwrap();
                    played.killed = true;
                    played.crashed = true;
                }
            }
            Ok(played)
        }
    }
}

/// Waits for the moment `when` (at the latest `limit`); ckptrun's status
/// if it exits before.
fn reach(
    ckptrun: &mut Child,
    at: &Where,
    when: When,
    limit: Instant,
    played: &mut Played,
) -> Option<ExitStatus> {
    let left = |from: Instant| limit.saturating_duration_since(from);
    let (moment, delay_us) = match when {
        When::In(ms) => {
            return wait_at_most(ckptrun, Duration::from_millis(ms).min(left(Instant::now())));
        }
        When::After(moment, delay_us) => (moment, delay_us),
    };
    let give_up = (Instant::now() + AIM_WITHIN).min(limit);
    loop {
        if let Some(status) = ckptrun.try_wait().unwrap() {
            return Some(status);
        }
        if at.seen(moment) {
            break;
        }
        if Instant::now() >= give_up {
            played.missed = true;
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let delay = Duration::from_micros(delay_us).min(left(Instant::now()));
    wait_at_most(ckptrun, delay)
}

/// The state of the loop, for the checks and for failure messages.
struct Run {
    seed: u64,
    base: PathBuf,
    /// The real DMTCP's bin directory.
    bin: PathBuf,
    /// The job, compiled.
    job: PathBuf,
    keep: u64,
    reference_out: Vec<u8>,
    reference_data: Vec<u8>,
    history: Vec<String>,
    left_behind: Vec<String>,
    round: u32,
    /// The rounds that killed ckptrun alone, or everything of the job.
    crashed: Vec<u32>,
    /// ckptrun's stderr in this round.
    stderr: String,
    /// The top-level files HTCondor holds for the job.
    spool: BTreeMap<String, Vec<u8>>,
}

/// The newest generation of a tree, and the images directory it records.
struct Newest {
    generation: u64,
    images_dir: Option<PathBuf>,
}

impl Run {
    fn fail(&self, what: &str) -> ! {
        kill_all_under(&self.base);
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

    /// A new sandbox: the spool's files and the job. Returns what it was
    /// given, to tell new and changed files from it at the upload.
    fn make_sandbox(&self, sandbox: &Path) -> BTreeMap<String, Vec<u8>> {
        fs::create_dir(sandbox).unwrap();
        for (name, bytes) in &self.spool {
            fs::write(sandbox.join(name), bytes).unwrap();
        }
        copy_program(&self.job, &sandbox.join(JOB));
        let mut given = self.spool.clone();
        given.insert(JOB.to_string(), fs::read(&self.job).unwrap());
        given
    }

    /// HTCondor's upload: the sandbox's new and changed top-level files
    /// (not directories), merged over the spool at once.
    fn upload(&mut self, sandbox: &Path, given: &BTreeMap<String, Vec<u8>>) {
        let mut changed = BTreeMap::new();
        for entry in fs::read_dir(sandbox).unwrap().flatten() {
            if !entry.file_type().unwrap().is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = fs::read(entry.path()).unwrap();
            if given.get(&name) != Some(&bytes) {
                changed.insert(name, bytes);
            }
        }
        changed.remove(JOB);
        self.spool.extend(changed);
    }

    /// The spool as files, to be checked with the same tools.
    fn write_spool(&self) -> PathBuf {
        let dir = self.base.join("spool");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        for (name, bytes) in &self.spool {
            fs::write(dir.join(name), bytes).unwrap();
        }
        dir
    }

    /// `ckptrun --mode dmtcp ...` in `sandbox`, its stderr piped.
    fn spawn(&self, sandbox: &Path, settings: Settings) -> Child {
        let ad = self.base.join("job.ad");
        fs::write(&ad, format!("JobMaxVacateTime = {}\n", settings.vacate_s)).unwrap();
        let mut cmd = Command::new(CKPTRUN);
        cmd.args(["--mode", "dmtcp", "-v", "--stdout", OUT, "--dmtcp-dir"])
            .arg(&self.bin)
            .arg("--images-dir")
            .arg(self.base.join("images"))
            .args(["--keep", &self.keep.to_string()]);
        if let Some(ms) = settings.interval_ms {
            cmd.args(["--interval", &format!("{:.3}", ms as f64 / 1000.0)]);
        }
        cmd.args(["--", "./job", &STEPS.to_string(), &STEP_MS.to_string()])
            .current_dir(sandbox)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env("PATH", "/usr/bin:/bin")
            .env("_CONDOR_JOB_AD", &ad)
            .env_remove("_CONDOR_SCRATCH_DIR")
            .env_remove("DMTCP_COORD_HOST")
            .env_remove("DMTCP_COORD_PORT")
            .env_remove("DMTCP_CHECKPOINT_DIR");
        cmd.spawn().expect("spawn ckptrun")
    }

    /// Takes out of `left` (as `wait_gone` describes them) the
    /// coordinators of earlier rounds that crashed, seen only now, and
    /// ends them: the crash's round notes a coordinator it finds (see
    /// `docs/dmtcp.md`), and one run under load found one at the end of
    /// the next round: the crashed round's one look had missed it as it
    /// started (see `jobs_processes`, which now looks twice). What is
    /// not such is returned.
    fn late_coordinators(&mut self, left: Vec<String>) -> Vec<String> {
        let (late, rest): (Vec<_>, Vec<_>) = left.into_iter().partition(|p| {
            p.contains("dmtcp_coordinator")
                && round_named(&self.base, p)
                    .is_some_and(|r| r < self.round && self.crashed.contains(&r))
        });
        for p in &late {
            if let Some(pid) = p.split_whitespace().next().and_then(|n| n.parse().ok()) {
                signal(pid, libc::SIGKILL);
            }
        }
        if !late.is_empty() {
            self.history.push(format!(
                "round {}: a coordinator of a crashed round, found only now:\n  {}",
                self.round,
                late.join("\n  ")
            ));
        }
        rest
    }

    /// The newest generation of the tree at `dir` (a sandbox or the
    /// spool), after checking every slot file there and `out` and `data`.
    fn check_tree(&self, dir: &Path) -> Result<Newest, String> {
        for (name, want) in [(OUT, &self.reference_out), (DATA, &self.reference_data)] {
            let got = fs::read(dir.join(name)).unwrap_or_default();
            if !want.starts_with(&got) {
                return Err(format!(
                    "{name} is not a prefix of an uninterrupted run's: {}",
                    difference(&got, want)
                ));
            }
        }
        let mut newest = Newest {
            generation: 0,
            images_dir: None,
        };
        for slot in common::slots(dir, STORE) {
            let shown = slot.file_name().unwrap().to_string_lossy().into_owned();
            if fs::metadata(&slot)
                .map_err(|e| format!("{shown}: {e}"))?
                .len()
                == 0
            {
                continue;
            }
            let members = tar_list(&slot).map_err(|why| format!("{shown}: {why}"))?;
            let meta = common::tar_member(&slot, ".ckptrun")
                .ok_or_else(|| format!("{shown}: no .ckptrun member"))?;
            let meta = String::from_utf8_lossy(&meta).into_owned();
            let value = |key: &str| {
                meta.lines()
                    .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                    .map(str::to_string)
            };
            let generation: u64 = value("generation")
                .and_then(|g| g.parse().ok())
                .ok_or_else(|| format!("{shown}: no generation in {meta:?}"))?;
            if generation >= 1 {
                let image = members.iter().find(|(name, size)| {
                    name.starts_with("ckpt_") && name.ends_with(".dmtcp") && *size > 0
                });
                if image.is_none() {
                    return Err(format!(
                        "{shown}: generation {generation} holds no image: {members:?}"
                    ));
                }
                if !members
                    .iter()
                    .any(|(name, _)| name.starts_with("dmtcp_restart_script_"))
                {
                    return Err(format!(
                        "{shown}: generation {generation} holds no restart script: {members:?}"
                    ));
                }
                if value("images-dir").is_none_or(|d| !d.starts_with('/')) {
                    return Err(format!("{shown}: no images-dir in {meta:?}"));
                }
            }
            if generation >= newest.generation {
                newest = Newest {
                    generation,
                    images_dir: value("images-dir").map(PathBuf::from),
                };
            }
        }
        Ok(newest)
    }
}

/// The members of an archive and their sizes, as GNU tar lists them; an
/// error if tar cannot read it whole.
fn tar_list(archive: &Path) -> Result<Vec<(String, u64)>, String> {
    let out = Command::new("tar")
        .env("LC_ALL", "C")
        .arg("-tvf")
        .arg(archive)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "GNU tar cannot read it: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(text
        .lines()
        .filter_map(|line| {
            // MODE OWNER SIZE DATE TIME NAME [-> TARGET]
            let fields: Vec<&str> = line.split_whitespace().collect();
            let size = fields.get(2)?.parse().ok()?;
            Some((fields.get(5)?.to_string(), size))
        })
        .collect())
}

/// tests/dmtcp_harness_job.c, compiled into `dir` (dynamically: DMTCP
/// preloads itself).
fn compile_job(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dmtcp_harness_job.c");
    let bin = dir.join("dmtcp_harness_job");
    let status = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&source)
        .status()
        .expect("cc to build tests/dmtcp_harness_job.c");
    assert!(status.success(), "cc tests/dmtcp_harness_job.c failed");
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// What the job writes when run to its end, uninterrupted and without
/// DMTCP: its stdout and `data`.
fn reference(base: &Path, job: &Path) -> (Vec<u8>, Vec<u8>) {
    let dir = base.join("reference");
    fs::create_dir(&dir).unwrap();
    let out = Command::new(job)
        .args([STEPS.to_string(), "0".to_string()])
        .current_dir(&dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "reference run: {}", out.status);
    let data = fs::read(dir.join(DATA)).unwrap();
    fs::remove_dir_all(&dir).unwrap();
    assert!(out.stdout.ends_with(b"done\n") && out.stdout == data);
    (out.stdout, data)
}

/// ckptrun's stderr, read as it comes.
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

/// The images directory a fresh start says it uses.
fn images_dir_said(stderr: &str) -> Option<PathBuf> {
    stderr
        .lines()
        .find_map(|l| l.split_once("fresh start: dmtcp_launch, images in "))
        .map(|(_, dir)| PathBuf::from(dir.trim()))
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

/// The harness's jobs' processes; empty only if two looks 5 ms apart
/// find none. One look at /proc can miss a process: once the kernel has
/// listed the last pid, the rest of the listing is a snapshot, and a
/// coordinator's launcher may fork its daemon after it and then exit
/// before it is looked at (a review saw 2 of 100 coordinator starts
/// escape one look idle, 7 under stress-ng, none two looks).
fn jobs_processes(base: &Path) -> Vec<(i32, String)> {
    let left = common::processes_under(base);
    if !left.is_empty() {
        return left;
    }
    std::thread::sleep(Duration::from_millis(5));
    common::processes_under(base)
}

/// Waits at most `limit` until no process of the harness's jobs runs;
/// describes those still there.
fn wait_gone(base: &Path, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let left = jobs_processes(base);
        if left.is_empty() {
            return Vec::new();
        }
        if Instant::now() >= deadline {
            return left
                .into_iter()
                .map(|(pid, what)| format!("{what} [{}]", how_it_is(pid)))
                .collect();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What /proc tells of `pid`: its state, parent, where it waits in the
/// kernel, and whether it is doomed, never to run its own code again: a
/// SIGKILL pending, or exiting already (PF_EXITING, once the SIGKILL is
/// taken: the kernel then frees what it held, a large file's blocks
/// say).
fn how_it_is(pid: i32) -> String {
    let field = |key: &str| common::status_value(pid, key).unwrap_or_default();
    let kill_bit = 1u64 << (libc::SIGKILL - 1);
    let pending = ["SigPnd:", "ShdPnd:"]
        .iter()
        .any(|f| u64::from_str_radix(&field(f), 16).is_ok_and(|m| m & kill_bit != 0));
    // PF_EXITING in the flags, field 9.
    let exiting = common::stat_field(pid, 9).is_some_and(|f| f & 0x4 != 0);
    format!(
        "state {}, parent {}, waits in {:?}{}",
        field("State:"),
        field("PPid:"),
        common::wchan(pid),
        match (pending, exiting) {
            (_, true) => ", doomed: exiting",
            (true, false) => ", doomed: SIGKILL pending",
            _ => "",
        }
    )
}

/// The round whose sandbox (`BASE/dir_N`) a process's description names.
fn round_named(base: &Path, what: &str) -> Option<u32> {
    let prefix = format!("{}/dir_", base.display());
    let at = what.find(&prefix)? + prefix.len();
    let digits: String = what[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// SIGKILL for every process of the harness's jobs, until none is left
/// (at most KILL_FOR: what is left then is reported by the caller).
fn kill_all_under(base: &Path) {
    let deadline = Instant::now() + KILL_FOR;
    loop {
        let left = jobs_processes(base);
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for (pid, _) in left {
            signal(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// SIGKILL for ckptrun and every process of the job, as a starter does.
fn kill_everything(ckptrun: &mut Child, base: &Path) -> ExitStatus {
    signal(ckptrun.id() as i32, libc::SIGKILL);
    kill_all_under(base);
    ckptrun.wait().unwrap()
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
