//! The fault storm, in the real HTCondor pool of tests/pool: a job of each
//! mode (condor, self, dmtcp) runs side by side with an uninterrupted twin
//! and, at random moments after each of its (re)starts, is given a fault:
//! a soft vacate (`condor_vacate_job`), a hard one (`-fast`), a node crash
//! (its `condor_starter` and every process under it SIGKILLed at once) or
//! a hold, then a release. Each job must end as its twin ended, byte for
//! byte; DMTCP's `--stdout` must hold each line once; and no process of
//! the jobs may be left running.
//!
//! The faults and their moments come from a seed printed first (from the
//! clock); `CKPTRUN_STORM_SEED=N cargo test --test fault_storm` replays
//! the plan (HTCondor's own timing is not replayed). Each moment is a
//! delay after an event of the job log (`001` executing), never a sleep
//! standing in for one.

mod common;
mod pool;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{Rng, clock_seed, processes_under, restarts_follow_commits};
use pool::{
    EVICTED, EXECUTING, Event, HELD, Job, START, STORE_FILES, SubmitDir, TERMINATED, condor_dir,
    dmtcp_dir, same_outputs, self_dir, succeeds,
};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Vacate,
    VacateFast,
    Crash,
    HoldRelease,
}

impl Fault {
    const ALL: [Fault; 4] = [
        Fault::Vacate,
        Fault::VacateFast,
        Fault::Crash,
        Fault::HoldRelease,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::Vacate => "vacate",
            Fault::VacateFast => "vacate -fast",
            Fault::Crash => "node crash",
            Fault::HoldRelease => "hold/release",
        }
    }
}

/// One fault of a job's storm: which, how long after the job's (re)start
/// it strikes and, for a hold, how long the job stays held.
#[derive(Clone, Copy, Debug)]
struct Strike {
    fault: Fault,
    after: Duration,
    held: Duration,
}

/// Faults per job: each kind once, in a random order.
const FAULTS_PER_JOB: usize = 4;
/// A fault strikes at most this long after a (re)start; a hold lasts at
/// most `HELD_MS`.
const STRIKE_MS: u64 = 7000;
const HELD_MS: u64 = 3000;
/// The jobs' `--interval` (the twins' too): periodic exits 85 race with
/// the faults, and a hard fault leaves an upload to resume from.
const INTERVAL: &str = "5";

/// A mode's job in the storm: its submit directory, its submit file (run
/// 20-30 s uninterrupted) and the files that differ with timing.
struct Case {
    mode: &'static str,
    dir: fn(&str) -> Option<SubmitDir>,
    sub: fn() -> String,
    timing: &'static [&'static str],
}

const CASES: [Case; 3] = [
    Case {
        mode: "condor",
        dir: condor_dir,
        sub: || SubmitDir::example("condor").replace("./condor_job 300 50", "./condor_job 500 50"),
        timing: &["condor_job.ckpt"],
    },
    Case {
        mode: "self",
        dir: self_dir,
        sub: || SubmitDir::example("self"),
        timing: &STORE_FILES,
    },
    Case {
        mode: "dmtcp",
        dir: dmtcp_dir,
        sub: || SubmitDir::example("dmtcp"),
        timing: &STORE_FILES,
    },
];

/// A job's faults: each kind once, in an order and at moments drawn from
/// `rng`.
fn plan(rng: &mut Rng) -> Vec<Strike> {
    let mut faults = Fault::ALL;
    for i in (1..faults.len()).rev() {
        faults.swap(i, rng.below(i as u64 + 1) as usize);
    }
    faults[..FAULTS_PER_JOB]
        .iter()
        .map(|&fault| Strike {
            fault,
            after: Duration::from_millis(rng.below(STRIKE_MS)),
            held: Duration::from_millis(rng.below(HELD_MS)),
        })
        .collect()
}

/// What a job went through.
struct Report {
    delivered: Vec<Fault>,
    /// Faults not delivered: the job had ended.
    missed: usize,
    starts: usize,
    /// Submission to end, by the job log (whole seconds), the storm's job
    /// and its uninterrupted twin.
    took: u64,
    took_uninterrupted: u64,
}

#[test]
fn jobs_of_every_mode_survive_a_storm_of_vacates_crashes_and_holds() {
    if pool::pool().is_none() {
        return;
    }
    let seed = std::env::var("CKPTRUN_STORM_SEED")
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("CKPTRUN_STORM_SEED is a number"))
        .unwrap_or_else(clock_seed);
    eprintln!("storm seed: {seed} (rerun with CKPTRUN_STORM_SEED={seed})");
    let mut rng = Rng(seed);
    let plans: Vec<Vec<Strike>> = CASES.iter().map(|_| plan(&mut rng)).collect();
    for (case, plan) in CASES.iter().zip(&plans) {
        let each: Vec<String> = plan
            .iter()
            .map(|s| match s.fault {
                Fault::HoldRelease => format!("hold +{:?} for {:?}", s.after, s.held),
                fault => format!("{} +{:?}", fault.name(), s.after),
            })
            .collect();
        eprintln!("storm plan: {}: {}", case.mode, each.join(", "));
    }

    let began = Instant::now();
    let sandboxes = Mutex::new(Vec::new());
    let outcomes: Vec<(&str, std::thread::Result<Option<Report>>)> = std::thread::scope(|s| {
        let running: Vec<_> = CASES
            .iter()
            .zip(&plans)
            .map(|(case, plan)| {
                let sandboxes = &sandboxes;
                let thread = std::thread::Builder::new().name(format!("storm-{}", case.mode));
                (
                    case.mode,
                    thread
                        .spawn_scoped(s, move || storm(case, plan, sandboxes))
                        .unwrap(),
                )
            })
            .collect();
        running.into_iter().map(|(m, t)| (m, t.join())).collect()
    });

    // No process of any run is left: not ckptrun, the job, DMTCP's.
    let sandboxes = sandboxes.into_inner().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let left = loop {
        let left: Vec<String> = sandboxes
            .iter()
            .flat_map(|d| processes_under(d))
            .map(|(_, line)| line)
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };

    let mut failures = Vec::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (mode, outcome) in outcomes {
        match outcome {
            Ok(Some(r)) => {
                let names: Vec<&str> = r.delivered.iter().map(|f| f.name()).collect();
                eprintln!(
                    "storm: {mode}: {} faults ({}), {} missed, {} starts, {} s (uninterrupted {} s)",
                    r.delivered.len(),
                    names.join(", "),
                    r.missed,
                    r.starts,
                    r.took,
                    r.took_uninterrupted
                );
                for name in names {
                    *counts.entry(name).or_default() += 1;
                }
                if r.delivered.is_empty() {
                    failures.push(format!("{mode}: no fault was delivered"));
                }
            }
            Ok(None) => eprintln!("storm: {mode}: skipped"),
            Err(panic) => failures.push(format!("{mode}: {}", panic_text(&panic))),
        }
    }
    eprintln!(
        "storm: faults delivered {counts:?} in {:.0?}, seed {seed}",
        began.elapsed()
    );
    if !left.is_empty() {
        failures.push(format!("left running:\n{}", left.join("\n")));
    }
    assert!(
        failures.is_empty(),
        "the fault storm failed, seed {seed} (rerun with CKPTRUN_STORM_SEED={seed}):\n{}",
        failures.join("\n")
    );
}

/// A case's job through its storm: submitted beside its uninterrupted
/// twin, struck by `plan`, then checked against the twin. Pushes the
/// sandbox of each run of either to `sandboxes`. None when skipped.
fn storm(case: &Case, plan: &[Strike], sandboxes: &Mutex<Vec<PathBuf>>) -> Option<Report> {
    let reference = (case.dir)(&format!("storm-{}-uninterrupted", case.mode))?;
    let dir = (case.dir)(&format!("storm-{}", case.mode))?;
    let interval = [("interval", INTERVAL)];
    let sub = (case.sub)();
    let uninterrupted = reference
        .write("storm.sub", &sub)
        .submit("storm.sub", &interval);
    let job = dir.write("storm.sub", &sub).submit("storm.sub", &interval);
    // Whatever happens, the runs' sandboxes are looked at for leftovers.
    let note_sandboxes = |job: &Job<'_>| {
        let runs = job.events().into_iter().filter(|e| e.code == EXECUTING);
        sandboxes
            .lock()
            .unwrap()
            .extend(runs.map(|e| e.scratch_dir()));
    };
    let struck = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        strike(&job, case.mode, plan)
    }));
    let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if struck.is_ok() {
            succeeds(&job);
            succeeds(&uninterrupted);
        }
    }));
    note_sandboxes(&job);
    note_sandboxes(&uninterrupted);
    let (delivered, missed) = struck.unwrap_or_else(|p| std::panic::resume_unwind(p));
    ended.unwrap_or_else(|p| std::panic::resume_unwind(p));

    let log = dir.read_text("ckptrun.log");
    assert!(log.ends_with(": exit 0\n"), "ckptrun.log:\n{log}");
    if case.mode != "condor" {
        restarts_follow_commits(&log);
    }
    if case.mode == "dmtcp" {
        each_line_once(&dir, "counter.out");
    }
    same_outputs(&dir, &reference, case.timing);
    Some(Report {
        delivered,
        missed,
        starts: job.events().iter().filter(|e| e.code == EXECUTING).count(),
        took: seconds_to_end(&job),
        took_uninterrupted: seconds_to_end(&uninterrupted),
    })
}

/// Strikes `plan` at `job`, a fault at a time, each some time after the
/// job's (re)start; the faults delivered and the number not delivered
/// because the job had ended by then.
fn strike(job: &Job<'_>, mode: &str, plan: &[Strike]) -> (Vec<Fault>, usize) {
    let mut delivered = Vec::new();
    let mut starts = 0;
    let count = |code| job.events().iter().filter(|e| e.code == code).count();
    for (n, s) in plan.iter().enumerate() {
        let missed = plan.len() - n;
        let run = job.wait_for_first(&[(EXECUTING, starts + 1), (TERMINATED, 1)], START);
        if run.code == TERMINATED {
            return (delivered, missed);
        }
        starts += 1;
        std::thread::sleep(s.after);
        eprintln!(
            "storm: {mode}: run {starts} ({}): {} +{:?}",
            run.slot_name().unwrap_or("?"),
            s.fault.name(),
            s.after
        );
        // Each fault evicts the job (a hold, then holds it); unless the
        // job ended first.
        let (evicted, held) = (count(EVICTED), count(HELD));
        let sent = match s.fault {
            Fault::Vacate => tool(job, "condor_vacate_job", &[]),
            Fault::VacateFast => tool(job, "condor_vacate_job", &["-fast"]),
            Fault::Crash => match job.crash_node(&run) {
                Some(killed) => {
                    let names: Vec<String> =
                        killed.iter().map(|(p, n)| format!("{n} {p}")).collect();
                    eprintln!("storm: {mode}: node crash killed {}", names.join(", "));
                    true
                }
                None => {
                    eprintln!("storm: {mode}: no condor_starter runs {}", run.text);
                    false
                }
            },
            Fault::HoldRelease => tool(job, "condor_hold", &[]),
        };
        let next = match s.fault {
            Fault::HoldRelease => [(HELD, held + 1), (TERMINATED, 1)],
            _ => [(EVICTED, evicted + 1), (TERMINATED, 1)],
        };
        if !sent {
            // Too late: the job must have ended.
            job.wait_for_first(&[(TERMINATED, 1)], Duration::from_secs(10));
            return (delivered, missed);
        }
        if job.wait_for_first(&next, START).code == TERMINATED {
            return (delivered, missed);
        }
        if s.fault == Fault::HoldRelease {
            std::thread::sleep(s.held);
            job.release();
        }
        delivered.push(s.fault);
    }
    (delivered, 0)
}

/// `TOOL [ARGS...] ID` for `job`: whether it succeeded (it fails once
/// the job has left the queue).
fn tool(job: &Job<'_>, tool: &str, args: &[&str]) -> bool {
    let out = job.try_tool(tool, args);
    if !out.status.success() {
        eprintln!(
            "job {}: {tool} {args:?} failed: {}{}",
            job.id,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

/// The job's time from submission to end, by its log.
fn seconds_to_end(job: &Job<'_>) -> u64 {
    let events = job.events();
    let at = |e: Option<&Event>| {
        let time = &e.expect("a submitted, ended job").time;
        let hms: Vec<u64> = time[11..].split(':').map(|n| n.parse().unwrap()).collect();
        hms[0] * 3600 + hms[1] * 60 + hms[2]
    };
    let (start, end) = (
        at(events.first()),
        at(events.iter().find(|e| e.code == TERMINATED)),
    );
    (end + 86400 - start) % 86400
}

/// `name` (DMTCP's --stdout) holds no line twice: a restart did not write
/// again what the run before had written.
fn each_line_once(dir: &SubmitDir, name: &str) {
    let text = dir.read_text(name);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for line in text.lines() {
        *seen.entry(line).or_default() += 1;
    }
    let twice: Vec<&str> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(l, _)| *l)
        .collect();
    assert!(
        twice.is_empty(),
        "{name} holds lines more than once: {twice:?}"
    );
}

/// A panic's message.
fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}
