//! A real Slurm 22.05 cluster for tests/slurm.rs: the one
//! `scripts/test.sh` starts with ../shared/tools/slurm-cluster.sh and
//! names in `SLURM_TEST_CLUSTER` (its DIR), with the cluster's
//! `SLURM_CONF` exported. By hand:
//!
//! ```sh
//! eval "$(../shared/tools/slurm-cluster.sh start /tmp/ckptrun-slurm)"
//! SLURM_TEST_CLUSTER=/tmp/ckptrun-slurm cargo test --test slurm -- --test-threads 8
//! ../shared/tools/slurm-cluster.sh stop /tmp/ckptrun-slurm
//! ```
//!
//! Without `SLURM_TEST_CLUSTER` the tests say they were skipped and pass,
//! unless `CI` is set: then they fail.
//!
//! A test makes a job directory owned by the submit account
//! (`SLURM_TEST_USER`, default `ckptrun-test`; root submits for it with
//! `sbatch --uid`), copies in what the job needs and one of
//! `examples/slurm/*.sh` as it is, submits it (sbatch's own options, which
//! win over the script's `#SBATCH` lines, pick the partition and the
//! time limit), then waits on events: ckptrun's log, the job's state as
//! `scontrol show job` has it. Never on fixed times.
//!
//! The cluster is one node of the machine's CPUs (2 on CI's VMs): too
//! few to preempt one job while another of another test runs on. So the
//! tests take turns (`Turn`): a preemption test has the node to itself,
//! its jobs (one CPU each) preempted together by a `high` job asking for
//! every CPU; the others share it, in the `high` partition, never
//! preempted.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

pub struct Cluster {
    pub dir: PathBuf,
    /// The account the jobs run as.
    pub user: String,
    /// The node's CPUs.
    pub cpus: u32,
}

/// The cluster to test against, or None (after saying so) when there is
/// none and `CI` is not set. Under CI without one it panics.
pub fn cluster() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            let dir = crate::common::engine_dir(
                "SLURM_TEST_CLUSTER",
                "SLURM_CONF",
                "slurm-cluster.sh",
                "Slurm tests",
                "cluster",
            )?;
            let user = std::env::var("SLURM_TEST_USER").unwrap_or_else(|_| "ckptrun-test".into());
            let out = run("sinfo", &["-h", "-N", "-o", "%c"]);
            let cpus = out
                .trim()
                .lines()
                .next()
                .and_then(|c| c.trim().parse().ok());
            let cpus = cpus.unwrap_or_else(|| panic!("sinfo: no CPU count in {out:?}"));
            // So that a failure shows the signals slurmctld sent (Job::story).
            let _ = try_run("scontrol", &["setdebug", "debug"]);
            Some(Cluster { dir, user, cpus })
        })
        .as_ref()
}

/// `PROGRAM ARGS...` (a Slurm client), which must succeed; its stdout.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = try_run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `PROGRAM ARGS...`, which may fail.
pub fn try_run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

/// Whose turn it is on the node: a preemption test's alone (`alone`), or
/// the others' together (`shared`).
pub struct Turn;

static TURNS: RwLock<()> = RwLock::new(());

impl Turn {
    pub fn alone() -> RwLockWriteGuard<'static, ()> {
        TURNS.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn shared() -> RwLockReadGuard<'static, ()> {
        TURNS.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Cluster {
    /// A fresh, empty job directory under /tmp, owned by the submit
    /// account.
    pub fn job_dir(&'static self, name: &str) -> JobDir {
        let dir = crate::common::fresh_dir("slurm", name);
        let dir = JobDir { cluster: self, dir };
        dir.give_to_user();
        dir
    }

    /// Preempts every job of the `low` partition running now: a `high`
    /// job asking for every CPU of the node (run as the submit account,
    /// for a second), which Slurm starts within a second or two of the
    /// low jobs' end.
    pub fn preempt(&self) {
        let cpus = self.cpus.to_string();
        run(
            "sbatch",
            &[
                "--uid",
                &self.user,
                "--chdir",
                "/tmp",
                "--output",
                "/dev/null",
                "-p",
                "high",
                "-c",
                &cpus,
                "--wrap",
                "sleep 1",
            ],
        );
    }
}

/// A job directory, removed at the end unless the test failed.
pub struct JobDir {
    pub cluster: &'static Cluster,
    pub dir: PathBuf,
}

impl JobDir {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Copies `from` in as `name` (`cp`, see common::copy_program).
    pub fn copy_in(&self, from: impl AsRef<Path>, name: &str) -> &Self {
        crate::common::copy_program(from.as_ref(), &self.path(name));
        self
    }

    /// A symbolic link `name` to `to` (DMTCP's install tree).
    pub fn link_in(&self, to: impl AsRef<Path>, name: &str) -> &Self {
        std::os::unix::fs::symlink(to.as_ref(), self.path(name)).unwrap();
        self
    }

    /// `examples/slurm/NAME.sh` from the repository, as it is.
    pub fn example(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/slurm/{name}.sh"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Copies in `examples/slurm/NAME.sh` and submits it as the submit
    /// account, with sbatch's `options` besides.
    pub fn submit_example(&self, name: &str, options: &[&str]) -> Job<'_> {
        self.submit_script(name, &Self::example(name), options)
    }

    /// Writes `script` as `NAME.sh` and submits it as `submit_example`
    /// does.
    pub fn submit_script(&self, name: &str, script: &str, options: &[&str]) -> Job<'_> {
        let file = format!("{name}.sh");
        std::fs::write(self.path(&file), script).unwrap();
        self.give_to_user();
        let dir = self.dir.to_str().unwrap();
        let mut args = vec!["--parsable", "--uid", &self.cluster.user, "--chdir", dir];
        args.extend_from_slice(options);
        let script = self.path(&file);
        args.push(script.to_str().unwrap());
        let out = run("sbatch", &args);
        let id = out
            .trim()
            .split(';')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| {
                panic!("sbatch printed no job id: {out:?}");
            });
        eprintln!("{}: job {id} ({name}.sh {options:?})", self.dir.display());
        Job {
            dir: self,
            id,
            ended: std::cell::Cell::new(false),
        }
    }

    pub fn read_text(&self, name: &str) -> String {
        let path = self.path(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// ckptrun's log (empty until it exists).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("ckptrun.log")).unwrap_or_default()
    }

    fn give_to_user(&self) {
        crate::common::give_to(&self.cluster.user, &self.dir);
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        crate::common::remove_unless_panicking(&self.dir);
    }
}

/// A job as `scontrol show job` has it.
#[derive(Clone, Debug, Default)]
pub struct Shown {
    pub state: String,
    pub reason: String,
    pub restarts: u32,
    /// `CODE:SIGNAL`.
    pub exit_code: String,
}

impl Shown {
    fn parse(text: &str) -> Option<Self> {
        let value = |key: &str| {
            text.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_string)
        };
        Some(Self {
            state: value("JobState=")?,
            reason: value("Reason=").unwrap_or_default(),
            restarts: value("Restarts=")?.parse().ok()?,
            exit_code: value("ExitCode=").unwrap_or_default(),
        })
    }

    /// Slurm is done with the job (it will not run again).
    pub fn ended(&self) -> bool {
        matches!(
            self.state.as_str(),
            "COMPLETED"
                | "CANCELLED"
                | "FAILED"
                | "TIMEOUT"
                | "NODE_FAIL"
                | "PREEMPTED"
                | "OUT_OF_MEMORY"
                | "BOOT_FAIL"
                | "DEADLINE"
        )
    }
}

/// A submitted job; cancelled when dropped unless it ended.
pub struct Job<'d> {
    pub dir: &'d JobDir,
    pub id: u64,
    ended: std::cell::Cell<bool>,
}

/// How long a job may take to start (a requeued one waits some 6 s), or
/// to end.
pub const START: Duration = Duration::from_secs(60);
pub const RUN: Duration = Duration::from_secs(150);

impl Job<'_> {
    pub fn show(&self) -> Option<Shown> {
        let out = try_run(
            "scontrol",
            &["--oneliner", "show", "job", &self.id.to_string()],
        );
        Shown::parse(&String::from_utf8_lossy(&out.stdout))
    }

    /// How many times ckptrun has started the job (its log's `started`).
    pub fn starts(&self) -> usize {
        crate::common::log_lines(&self.dir.log(), "started ").len()
    }

    /// Waits until ckptrun has started the job `runs` times and the job
    /// runs (as Slurm sees it).
    pub fn wait_started(&self, runs: usize) {
        wait_until(
            &format!("job {} is running its start #{runs}", self.id),
            START,
            || self.starts() >= runs && self.show().is_some_and(|s| s.state == "RUNNING"),
        );
    }

    /// Waits until the job has ended for good; how it ended.
    pub fn wait_end(&self) -> Shown {
        let mut last = Shown::default();
        let deadline = Instant::now() + RUN;
        loop {
            if let Some(shown) = self.show() {
                if shown.ended() {
                    self.ended.set(true);
                    return shown;
                }
                last = shown;
            }
            assert!(
                Instant::now() < deadline,
                "job {} has not ended after {RUN:?} ({last:?}); {}",
                self.id,
                self.story()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the job's end, which must be a success.
    pub fn succeeds(&self) -> Shown {
        let end = self.wait_end();
        assert!(
            end.state == "COMPLETED" && end.exit_code == "0:0",
            "job {} ended {} {}; {}",
            self.id,
            end.state,
            end.exit_code,
            self.story()
        );
        end
    }

    /// What a failure shows: ckptrun's log, the job's output, and what
    /// slurmctld's log says of the job.
    pub fn story(&self) -> String {
        let ctld = self.dir.cluster.dir.join("log/slurmctld.log");
        let ctld = std::fs::read_to_string(&ctld).unwrap_or_default();
        let id = format!("JobId={}", self.id);
        let about = |line: &&str| {
            line.split([' ', ',', ';'])
                .any(|word| word.trim_end_matches([':', '.']) == id)
        };
        let ctld: Vec<&str> = ctld.lines().filter(about).collect();
        let out = std::fs::read_to_string(self.dir.path("job.out")).unwrap_or_default();
        let out: Vec<&str> = out.lines().collect();
        format!(
            "ckptrun.log:\n{}\njob.out (its end):\n{}\nslurmctld.log on {id}:\n{}",
            self.dir.log(),
            out[out.len().saturating_sub(15)..].join("\n"),
            ctld.join("\n")
        )
    }

    /// `scancel OPTIONS... ID` (root may cancel and signal anyone's job).
    pub fn scancel(&self, options: &[&str]) {
        let id = self.id.to_string();
        let mut args = options.to_vec();
        args.push(&id);
        run("scancel", &args);
    }
}

impl Drop for Job<'_> {
    fn drop(&mut self) {
        if !self.ended.get() {
            let _ = try_run("scancel", &[&self.id.to_string()]);
        }
    }
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

/// Waits (at most 10 s) until no process runs a program from `dir`, or
/// in it, or names it: what the job and ckptrun started has ended.
pub fn nothing_left_in(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = crate::common::processes_under(dir);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the job are still running:\n{}",
            left.iter()
                .map(|(_, l)| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
