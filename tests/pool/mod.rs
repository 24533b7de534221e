//! A real HTCondor pool for the end-to-end tests (tests/htcondor.rs):
//! the one `scripts/test.sh` starts with ../shared/tools/htcondor-pool.sh
//! and names in `HTCONDOR_TEST_POOL` (its DIR), with the pool's
//! `CONDOR_CONFIG`, `PATH` and `CONDOR_USER` exported. By hand:
//!
//! ```sh
//! eval "$(../shared/tools/htcondor-pool.sh env /tmp/ckptrun-pool)"
//! HTCONDOR_TEST_POOL=/tmp/ckptrun-pool cargo test --test htcondor
//! ```
//!
//! Without `HTCONDOR_TEST_POOL` the tests say they were skipped and pass,
//! unless `CI` is set: then they fail.
//!
//! A test makes a submit directory owned by the submit account, copies in
//! what the job needs, submits one of `examples/htcondor/*.sub` as it is
//! (`condor_submit -append` may set the file's own macros, such as
//! `interval`), then waits on the job log's events (never on JobStatus,
//! which lags), vacates, and reads what came back.
//!
//! Below the pool: what the tests of tests/htcondor.rs and
//! tests/fault_storm.rs share, the submit directories of each mode, waits
//! on ckptrun's log and the checks of what came back. A test binary that
//! has `mod pool` has `mod common` too.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::log_lines;

/// Job log event codes.
pub const EXECUTING: u32 = 1;
pub const EVICTED: u32 = 4;
pub const TERMINATED: u32 = 5;
pub const ABORTED: u32 = 9;
pub const HELD: u32 = 12;

pub struct Pool {
    pub dir: PathBuf,
    /// The account that submits jobs.
    pub user: String,
}

/// The pool to test against, or None (after saying so) when there is
/// none and `CI` is not set. Under CI without a pool it panics: the
/// end-to-end tests must not be skipped there.
pub fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = crate::common::engine_dir(
            "HTCONDOR_TEST_POOL",
            "CONDOR_CONFIG",
            "htcondor-pool.sh",
            "HTCondor end-to-end tests",
            "pool",
        )?;
        let user = std::env::var("CONDOR_USER").unwrap_or_else(|_| "ckptrun-test".into());
        Some(Pool { dir, user })
    })
    .as_ref()
}

impl Pool {
    /// A fresh, empty submit directory under /tmp, owned by the submit
    /// account (which must reach it: /tmp is fine).
    pub fn submit_dir(&'static self, name: &str) -> SubmitDir {
        let dir = crate::common::fresh_dir("e2e", name);
        let dir = SubmitDir { pool: self, dir };
        dir.give_to_user();
        dir
    }

    /// `PROGRAM ARGS...` as the submit account, in `dir`. su keeps PATH
    /// and CONDOR_CONFIG.
    pub fn as_user(&self, dir: &Path, program: &str, args: &[&str]) -> Output {
        Command::new("su")
            .args([
                &self.user,
                "-s",
                "/bin/sh",
                "-c",
                r#"cd "$0" && exec "$@""#,
                "--",
            ])
            .arg(dir)
            .arg(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("su {} -c {program}: {e}", self.user))
    }

    /// `as_user`, which must succeed; its stdout.
    fn run_as_user(&self, dir: &Path, program: &str, args: &[&str]) -> String {
        let out = self.as_user(dir, program, args);
        assert_ran(&out, program, args);
        String::from_utf8(out.stdout).unwrap()
    }

    /// The pid of the `condor_starter` that runs `run` (an `executing`
    /// event) while it does: the child of this pool's startd (its master's
    /// child) started for the run's slot (`-a SLOT`), whose pid names the
    /// run's sandbox (`execute/dir_PID`). None once that run is over.
    pub fn starter_of(&self, run: &Event) -> Option<i32> {
        let slot = run.slot_name().expect("an executing event names its slot");
        let sandbox = run.scratch_dir();
        let master: i32 = std::fs::read_to_string(self.dir.join("local/run/master.pid"))
            .expect("the pool's master.pid")
            .trim()
            .parse()
            .unwrap();
        let comm =
            |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let children = crate::common::children;
        let startd = children(master)
            .into_iter()
            .find(|&p| comm(p).trim() == "condor_startd")?;
        let starter = children(startd).into_iter().find(|&p| {
            let argv = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = argv.split(|&b| b == 0).collect();
            comm(p).trim() == "condor_starter"
                && argv.windows(2).any(|w| w == [b"-a", slot.as_bytes()])
        })?;
        (sandbox.file_name() == Some(format!("dir_{starter}").as_ref())).then_some(starter)
    }

    /// Where HTCondor keeps job `id`'s files on the access point (its
    /// spool directory).
    pub fn spool_dir(&self, id: &str) -> PathBuf {
        let (cluster, proc) = id.split_once('.').unwrap();
        let cluster: u64 = cluster.parse().unwrap();
        self.dir
            .join("local/spool")
            .join((cluster % 10000).to_string())
            .join(proc)
            .join(format!("cluster{cluster}.proc{proc}.subproc0"))
    }

    /// The last `lines` lines of one of the daemons' logs (`ShadowLog`, ...).
    pub fn daemon_log(&self, name: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join("local/log").join(name)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// A submit directory, removed at the end unless the test failed.
pub struct SubmitDir {
    pool: &'static Pool,
    pub dir: PathBuf,
}

impl SubmitDir {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Copies `from` in as `name`, as the user would before submitting.
    pub fn copy_in(&self, from: impl AsRef<Path>, name: &str) -> &Self {
        let from = from.as_ref();
        std::fs::copy(from, self.path(name))
            .unwrap_or_else(|e| panic!("copy {} in: {e}", from.display()));
        self
    }

    /// Copies the directory `from` in as `name` (`cp -a`).
    pub fn copy_tree_in(&self, from: impl AsRef<Path>, name: &str) -> &Self {
        let status = Command::new("cp")
            .arg("-a")
            .arg(from.as_ref())
            .arg(self.path(name))
            .status()
            .unwrap();
        assert!(status.success(), "cp -a {}", from.as_ref().display());
        self
    }

    /// Writes `name` (a submit file made by the test, say).
    pub fn write(&self, name: &str, text: &str) -> &Self {
        std::fs::write(self.path(name), text).unwrap();
        self
    }

    /// `examples/htcondor/NAME.sub` from the repository, as it is.
    pub fn example(name: &str) -> String {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/htcondor/{name}.sub"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Copies in `examples/htcondor/NAME.sub` and submits it as the submit
    /// account; `set` gives the file's own macros other values
    /// (`condor_submit -append 'NAME = VALUE'`).
    pub fn submit_example(&self, name: &str, set: &[(&str, &str)]) -> Job<'_> {
        let file = format!("{name}.sub");
        self.write(&file, &Self::example(name));
        self.submit(&file, set)
    }

    /// Submits `file` (already in the directory) as the submit account.
    pub fn submit(&self, file: &str, set: &[(&str, &str)]) -> Job<'_> {
        let text = std::fs::read_to_string(self.path(file)).unwrap();
        let log = submit_value(&text, "log").expect("the submit file names a log");
        self.give_to_user();
        let appended: Vec<String> = set.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let mut args = vec!["-terse"];
        for line in &appended {
            args.extend(["-append", line]);
        }
        args.push(file);
        let out = self.pool.run_as_user(&self.dir, "condor_submit", &args);
        // -terse: "1.0 - 1.0"
        let id = out
            .split_whitespace()
            .next()
            .expect("condor_submit prints the job id");
        Job {
            dir: self,
            id: id.to_string(),
            log: self.path(&log),
            ended: std::cell::Cell::new(false),
            holds: std::cell::Cell::new(0),
        }
    }

    /// A file HTCondor brought back (or that the test put there).
    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name))
            .unwrap_or_else(|e| panic!("{}: {e}", self.path(name).display()))
    }

    pub fn read_text(&self, name: &str) -> String {
        String::from_utf8(self.read(name)).unwrap()
    }

    /// The names of the files in the directory, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn give_to_user(&self) {
        crate::common::give_to(&self.pool.user, &self.dir);
    }
}

impl Drop for SubmitDir {
    fn drop(&mut self) {
        crate::common::remove_unless_panicking(&self.dir);
    }
}

/// The value of `name = value` in a submit file (the last one).
pub fn submit_value(text: &str, name: &str) -> Option<String> {
    text.lines()
        .rev()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
}

/// A submitted job; removed from the queue when dropped unless it ended.
pub struct Job<'d> {
    pub dir: &'d SubmitDir,
    /// `CLUSTER.PROC`.
    pub id: String,
    log: PathBuf,
    ended: std::cell::Cell<bool>,
    /// How many times the test held the job (`hold`): as many `held`
    /// events are expected, any more is a failure.
    holds: std::cell::Cell<usize>,
}

/// One event of the job log.
#[derive(Clone, Debug)]
pub struct Event {
    pub code: u32,
    /// `YYYY-MM-DD HH:MM:SS` (whole seconds).
    pub time: String,
    /// The whole event, first line included.
    pub text: String,
}

impl Event {
    /// The sandbox the job runs in (an `executing` event's CondorScratchDir).
    pub fn scratch_dir(&self) -> PathBuf {
        self.text
            .lines()
            .find_map(|l| l.trim().strip_prefix("CondorScratchDir = "))
            .map(|v| PathBuf::from(v.trim_matches('"')))
            .unwrap_or_else(|| panic!("no CondorScratchDir in {}", self.text))
    }

    /// The slot the job runs on (an `executing` event's SlotName, without
    /// `@host`): `slot1_3`.
    pub fn slot_name(&self) -> Option<&str> {
        let value = self
            .text
            .lines()
            .find_map(|l| l.trim().strip_prefix("SlotName: "))?;
        Some(value.split('@').next().unwrap_or(value).trim())
    }

    /// A `terminated` event's exit code; None for a death by a signal.
    pub fn exit_code(&self) -> Option<i32> {
        let (_, rest) = self.text.split_once("(return value ")?;
        rest.split(')').next()?.parse().ok()
    }
}

impl Job<'_> {
    /// The job log's events for this job, in order.
    pub fn events(&self) -> Vec<Event> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let (cluster, proc) = self.id.split_once('.').unwrap();
        let prefix = format!(
            "({:03}.{:03}.",
            cluster.parse::<u32>().unwrap(),
            proc.parse::<u32>().unwrap()
        );
        // Each event ends with a line "..."; one still being written is left out.
        let complete = &text[..text.rfind("\n...\n").map_or(0, |end| end + 1)];
        complete
            .split("\n...\n")
            .filter_map(|block| {
                let block = block.trim_start_matches('\n');
                let mut words = block.lines().next()?.split_whitespace();
                let code = words.next()?.parse().ok()?;
                if !words.next()?.starts_with(&prefix) {
                    return None;
                }
                let time = format!("{} {}", words.next()?, words.next()?);
                Some(Event {
                    code,
                    time,
                    text: block.to_string(),
                })
            })
            .collect()
    }

    /// Waits (at most `limit`) for the `nth` event (1-based) of kind
    /// `code`; fails at once if the job is held (more often than `hold`
    /// held it) or aborted instead.
    pub fn wait_for(&self, code: u32, nth: usize, limit: Duration) -> Event {
        self.wait_for_first(&[(code, nth)], limit)
    }

    /// Waits (at most `limit`) for the first of several events to happen:
    /// `(code, nth)`, the `nth` event (1-based) of kind `code`; returns
    /// it. Fails at once as `wait_for` does.
    pub fn wait_for_first(&self, wanted: &[(u32, usize)], limit: Duration) -> Event {
        let deadline = Instant::now() + limit;
        let what = || {
            let each: Vec<String> = wanted
                .iter()
                .map(|(code, nth)| format!("{code:03} #{nth}"))
                .collect();
            format!("event {}", each.join(" or "))
        };
        loop {
            let events = self.events();
            for &(code, nth) in wanted {
                if let Some(e) = events.iter().filter(|e| e.code == code).nth(nth - 1) {
                    if code == TERMINATED || code == ABORTED {
                        self.ended.set(true);
                    }
                    return e.clone();
                }
            }
            let aborted_too = wanted.iter().any(|&(code, _)| code == ABORTED);
            let unexpected = events
                .iter()
                .filter(|e| e.code == HELD)
                .nth(self.holds.get())
                .or_else(|| events.iter().find(|e| e.code == ABORTED && !aborted_too));
            if let Some(e) = unexpected {
                panic!(
                    "job {} was held or removed while waiting for {}:\n{}\nHoldReason: {}",
                    self.id,
                    what(),
                    e.text,
                    self.attr("HoldReason").unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "job {}: no {} within {limit:?}; job log:\n{}\nSchedLog:\n{}",
                    self.id,
                    what(),
                    std::fs::read_to_string(&self.log).unwrap_or_default(),
                    self.dir.pool.daemon_log("SchedLog", 20)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the job's end; its exit code.
    pub fn exit_code(&self, limit: Duration) -> i32 {
        let end = self.wait_for(TERMINATED, 1, limit);
        end.exit_code()
            .unwrap_or_else(|| panic!("job {} did not exit normally:\n{}", self.id, end.text))
    }

    /// `condor_vacate_job`: the job gets its soft kill signal (SIGTERM),
    /// then goes back to idle and runs again, in a new sandbox.
    pub fn vacate(&self) {
        self.dir
            .pool
            .run_as_user(&self.dir.dir, "condor_vacate_job", &[&self.id]);
    }

    /// `condor_vacate_job -fast`: killed at once, as when its node dies.
    pub fn vacate_fast(&self) {
        self.dir
            .pool
            .run_as_user(&self.dir.dir, "condor_vacate_job", &["-fast", &self.id]);
    }

    /// `TOOL [ARGS...] ID` as the submit account (`condor_vacate_job`,
    /// `condor_hold`, ...), which may fail (the job has just left the
    /// queue, say): its output. `hold` counts the holds it asks for.
    pub fn try_tool(&self, tool: &str, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.push(&self.id);
        let out = self.dir.pool.as_user(&self.dir.dir, tool, &all);
        if tool == "condor_hold" && out.status.success() {
            self.holds.set(self.holds.get() + 1);
        }
        out
    }

    /// `condor_hold`: HTCondor evicts the job as `vacate` does (with
    /// `ON_EXIT_OR_EVICT` the sandbox's changed files come back) and holds
    /// it; the `held` event that follows is expected by `wait_for`.
    pub fn hold(&self) {
        assert_ran(
            &self.try_tool("condor_hold", &[]),
            "condor_hold",
            &[&self.id],
        );
    }

    /// `condor_release`: a held job goes back to idle, then runs again.
    pub fn release(&self) {
        assert_ran(
            &self.try_tool("condor_release", &[]),
            "condor_release",
            &[&self.id],
        );
    }

    /// The job's node dies while it runs `run` (an `executing` event): its
    /// `condor_starter` and every process under it (ckptrun, the job,
    /// DMTCP's coordinator) are SIGKILLed at once; HTCondor sees the job
    /// gone (`evicted`, "Job not found at execution machine") and runs it
    /// again elsewhere from what was uploaded before. The processes
    /// killed (pid, name); None when that run was already over.
    pub fn crash_node(&self, run: &Event) -> Option<Vec<(i32, String)>> {
        let starter = self.dir.pool.starter_of(run)?;
        Some(crate::common::kill_tree(starter))
    }

    /// An attribute of the job's ad, while it is in the queue, then from
    /// the history; None when undefined.
    pub fn attr(&self, name: &str) -> Option<String> {
        for tool in ["condor_q", "condor_history"] {
            let out = self
                .dir
                .pool
                .as_user(&self.dir.dir, tool, &[&self.id, "-af", name]);
            let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !value.is_empty() {
                return (value != "undefined").then_some(value);
            }
        }
        None
    }
}

impl Drop for Job<'_> {
    fn drop(&mut self) {
        if !self.ended.get() {
            let _ = self
                .dir
                .pool
                .as_user(&self.dir.dir, "condor_rm", &[&self.id]);
        }
    }
}

/// `PROGRAM ARGS...`, which gave `out`, succeeded.
fn assert_ran(out: &Output, program: &str, args: &[&str]) {
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `cond` every 50 ms for up to `limit`; panics saying `what` then.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting until {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long a job may take to start (2-5 s here), or to end.
pub const START: Duration = Duration::from_secs(60);
pub const RUN: Duration = Duration::from_secs(120);

/// A submit directory for examples/htcondor/condor.sub: ckptrun and the
/// condor_compile'd stand-in, as the file expects them.
pub fn condor_dir(name: &str) -> Option<SubmitDir> {
    let dir = pool()?.submit_dir(name);
    dir.copy_in(crate::common::CKPTRUN, "ckptrun")
        .copy_in(crate::common::fixture(), "condor_job");
    Some(dir)
}

/// Waits until ckptrun in `sandbox` has started the job `starts` times
/// (its log says `started` that often).
pub fn wait_started(sandbox: &Path, starts: usize) {
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
pub fn same_outputs(run: &SubmitDir, reference: &SubmitDir, skip: &[&str]) {
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
pub fn succeeds(job: &Job<'_>) {
    let code = job.exit_code(RUN);
    assert_eq!(
        code,
        0,
        "job {} exited {code}; ckptrun.log:\n{}",
        job.id,
        job.dir.read_text("ckptrun.log")
    );
}

/// A submit directory for examples/htcondor/self.sub: ckptrun and the
/// self-checkpointing stand-in.
pub fn self_dir(name: &str) -> Option<SubmitDir> {
    let dir = pool()?.submit_dir(name);
    dir.copy_in(crate::common::CKPTRUN, "ckptrun")
        .copy_in(crate::common::self_fixture(), "self_job");
    Some(dir)
}

/// A submit directory for examples/htcondor/dmtcp.sub: ckptrun, the C
/// counter and DMTCP's install tree, as docs/dmtcp.md says to lay them out.
pub fn dmtcp_dir(name: &str) -> Option<SubmitDir> {
    let pool = pool()?;
    let bin = crate::common::real_dmtcp("htcondor")?;
    let dir = pool.submit_dir(name);
    dir.copy_in(crate::common::CKPTRUN, "ckptrun")
        .copy_in(crate::common::dmtcp_counter(), "counter")
        .copy_tree_in(bin.parent().unwrap(), "dmtcp");
    Some(dir)
}

/// The store's slot files (whose generation numbers depend on timing),
/// and self mode's working copy of the job's state.
pub const STORE_FILES: [&str; 3] = ["ckptrun.store.0", "ckptrun.store.1", "state"];
