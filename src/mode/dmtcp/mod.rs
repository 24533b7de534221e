//! `--mode dmtcp`: an unmodified program, checkpointed by DMTCP, under
//! HTCondor (PROTOCOLS.md §3 and §5). ckptrun replaces the `shim_dmtcp`
//! script:
//!
//! - Plan: find the tools (and their libraries), open the store, start a
//!   private coordinator, and run the job as `dmtcp_launch ... PROGRAM
//!   ARG...`, or as `dmtcp_restart ... IMAGE...` when the store holds a
//!   committed checkpoint (generation 1 or later). Then make sure the job
//!   is really under DMTCP: the coordinator must see it (`--status`), or
//!   the whole restart, within a time limit.
//! - DMTCP writes images into the images directory, `DIR/ckptrun.ID`
//!   (`--images-dir DIR`, default /tmp; ID is the store's). It must be a
//!   real directory at a path that is the same on every node: DMTCP saves
//!   copies of some files (open but deleted ones; as root, glibc's
//!   gconv-modules.cache) beside the images and records them by absolute
//!   path, and a restarted process records its checkpoint directory with
//!   symlinks resolved. Before a restart, those copies are put back there.
//! - A checkpoint is complete when the coordinator has written its
//!   restart script (after every image) and no image is still a `.temp`;
//!   DMTCP 4.2.0's `dmtcp_command` returns before that, so ckptrun looks.
//! - Eviction (SIGTERM, SIGINT as in the shim's submit files, the job
//!   ad's KillSig and CheckpointSig) and `--interval`: `--kcheckpoint`
//!   (checkpoint, then kill the computation, so that nothing it writes
//!   after the checkpoint is written again after the restart), wait until
//!   it is complete (within the eviction budget, if there is one), commit
//!   the images as the next generation, exit 85. `--interval-continue`:
//!   `--bcheckpoint` every SECS, committed while the job runs on.
//! - The job's own end is passed on as condor mode does. Whatever is
//!   left of its process group, the coordinator and the helpers are
//!   ended before ckptrun exits.

pub mod coordinator;

use std::ffi::{CStr, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use self::coordinator::{Children, Coordinator, Tools};
use crate::config::Config;
use crate::mode::request::{PeriodicCommits, Policy};
use crate::os::decimal;
use crate::os::error::{COMMIT_FAILED, Error, LAUNCHER_FAILED, NO_ANSWER};
use crate::os::log::Log;
use crate::os::sys::{self, Pid, Sig};
use crate::os::tree;
use crate::run::protocol::{self, Action, Ended, Job, Protocol, Routes, Verdict};
use crate::run::signals::{Inherited, Name};
use crate::run::spawn;
use crate::run::supervise;
use crate::store::archive::{self, Bad};
use crate::store::{self, Holder, Store};

/// The last thing the coordinator writes for a checkpoint.
const RESTART_SCRIPT: &CStr = c"dmtcp_restart_script.sh";

/// dmtcp_restart's own failures, and a restart that did not complete.
pub const RESTART_FAILED: u8 = 99;

/// How often the images directory is looked at while a checkpoint is
/// under way.
const POLL: Duration = Duration::from_millis(10);
/// A request that shows no sign of taking effect (the job has not joined
/// the coordinator yet: a slow restart, say) is made again, first after
/// RETRY, then twice as long each time, at most RETRY_MAX. Asking again
/// is harmless: the coordinator refuses a checkpoint while one is under
/// way. Without a time limit, a request that never takes is given up
/// after GIVE_UP.
const RETRY: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);
const GIVE_UP: Duration = Duration::from_secs(30);
/// How long the coordinator and the helpers have to exit at the end
/// before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a coordinator has to exit by itself once the job has ended
/// (`--exit-on-last`) before it is told to `--quit`.
const EXIT_ON_LAST: Duration = Duration::from_millis(200);
/// How long a computation DMTCP was told to kill after its checkpoint
/// may take to go before ckptrun SIGKILLs it.
const QUIT_GRACE: Duration = Duration::from_secs(2);
/// How long after the coordinator's exit 0 the job may take to end too
/// before that is reported. A computation's last process closes its
/// connection before it becomes a zombie, and `--exit-on-last` may end
/// the coordinator first: ckptrun can reap the coordinator of a job
/// that is ending of its own accord.
const LOST_GRACE: Duration = Duration::from_secs(1);
/// How long a job may take to join the coordinator after dmtcp_launch,
/// and a restart to complete (every image restored, the computation
/// running), before ckptrun gives up on it.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);
const RESTART_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the coordinator is asked about the job meanwhile.
const PROBE: Duration = Duration::from_millis(50);

pub struct Dmtcp<'a> {
    inherited: &'a Inherited,
    log: &'a Log,
    place: Place,
    /// ckptrun's children, told apart from those it was started with.
    children: Children,
    /// The `dmtcp_command`s running.
    helpers: heapless::Vec<Pid, 8>,
    /// The coordinator's pid while it runs.
    coordinator: Option<Pid>,
    /// Its pid could not be told: only `--quit` ends it.
    coordinator_unknown: bool,
    requests: Requests,
    /// `dmtcp_command --quit`, built before the job starts.
    quit: spawn::Command,
    /// The `--quit` helper, once started (it is sent once).
    quitting: Option<Pid>,
    /// `--quit` was tried (whether or not it could be started).
    quit_tried: bool,
    routes: Routes,
    /// Evictions ("checkpoint, then exit"), time limits, `--interval`.
    policy: Policy,
    code: u8,
    by_signal: Option<Sig>,
    /// `--interval-continue`: periodic checkpoints keep the job running.
    keep_running: bool,
    phase: Phase,
    /// Periodic commits that failed (`--interval-continue`).
    periodic: PeriodicCommits,
    /// The job has ended: the coordinator is expected to go.
    job_ended: bool,
    /// The coordinator ended while the job ran, and when to say so if
    /// the job has not ended by then (LOST_GRACE).
    lost: Option<(Ended, Instant)>,
    /// The images directory holds a checkpoint that could not be
    /// committed: it is left for the user.
    keep_images: bool,
}

/// The `dmtcp_command`s that ask the coordinator something, built before
/// the job starts (`--kcheckpoint`, `--bcheckpoint`, `--status`), and the
/// pipe `--status` prints into, read here.
struct Requests {
    kill: spawn::Command,
    keep: spawn::Command,
    status: spawn::Command,
    status_out: OwnedFd,
}

impl Requests {
    fn new(coordinator: &Coordinator, tool: &Path) -> Result<Self, Error> {
        let kill = coordinator.command(tool, &["--kcheckpoint"], None)?;
        let keep = coordinator.command(tool, &["--bcheckpoint"], None)?;
        let (out, into) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| Error::os("a pipe", e))?;
        rustix::fs::fcntl_setfl(&out, OFlags::NONBLOCK).map_err(|e| Error::os("a pipe", e))?;
        let status = coordinator.command(tool, &["--status"], Some(into))?;
        Ok(Self {
            kill,
            keep,
            status,
            status_out: out,
        })
    }
}

/// Where the computation's state lives.
struct Place {
    store: Store,
    /// Where DMTCP writes images, open, and its path.
    images: OwnedFd,
    images_at: PathBuf,
    /// ckptrun's working directory, recorded with each generation.
    cwd: PathBuf,
    /// `--stdout` and `--stderr`, whose sizes each generation records.
    outputs: [Option<OwnedFd>; 2],
}

/// What `Dmtcp::plan` made ready, for `Dmtcp::new`.
struct Parts {
    place: Place,
    children: Children,
    coordinator: Option<Pid>,
    requests: Requests,
    quit: spawn::Command,
    /// A restart of this many images (else a launch).
    restart: Option<usize>,
}

/// A checkpoint requested and not yet complete.
#[derive(Clone, Copy)]
struct Pending {
    /// "Checkpoint and exit": the computation ends with it.
    exit: bool,
    /// The request sent asks DMTCP to kill the computation once it is
    /// checkpointed (--kcheckpoint; else --bcheckpoint, and an eviction
    /// came while it was under way).
    kills: bool,
    /// An eviction asked for it (else `--interval`).
    evicted: bool,
    deadline: Option<Instant>,
    asked: Instant,
    /// The `dmtcp_command` making the request, while it runs.
    requester: Option<Pid>,
    tries: u32,
    /// When to make the request again, until it shows in the images.
    again_at: Option<Instant>,
    next_poll: Instant,
}

/// The job was started; the coordinator has not yet seen it through.
#[derive(Clone, Copy)]
struct Check {
    /// A restart of this many images (else a launch).
    restart: Option<usize>,
    limit: Duration,
    deadline: Instant,
    next_probe: Instant,
    /// The `--status` helper, while it runs.
    probe: Option<Pid>,
}

/// Where the computation is.
#[derive(Clone, Copy)]
enum Phase {
    /// It runs. `check`: the launch or restart, until the coordinator has
    /// seen it through; `pending`: a checkpoint requested and not yet
    /// complete (asked for only once `check` is done).
    Running {
        check: Option<Check>,
        pending: Option<Pending>,
    },
    /// The eviction's checkpoint is complete; the computation is ending:
    /// DMTCP kills it (--kcheckpoint), else ckptrun does at `kill_at`.
    Checkpointed { kill_at: Option<Instant> },
    /// The eviction's checkpoint was not complete in time, or could not
    /// be requested; the computation is being ended.
    NotCheckpointed,
    /// The job never came under DMTCP, its restart did not complete, or
    /// a second periodic commit failed: ended, and ckptrun exits with
    /// this code.
    Failed(u8),
}

impl<'a> Dmtcp<'a> {
    /// Finds the tools, opens the store, prepares the images directory,
    /// starts the coordinator; returns the protocol and the command that
    /// starts the job (`path` is PROGRAM as found).
    pub fn plan(
        config: &Config,
        path: &Path,
        stdio: &spawn::Stdio,
        inherited: &'a Inherited,
        log: &'a Log,
    ) -> Result<(Self, spawn::Command), Error> {
        let tools = find_tools(config, path)?;
        let children = Children::before_start(crate::os::procfs::is_ours());
        let (store, newest) = Store::open(
            &config.store,
            &[],
            config.keep,
            Holder::Dmtcp,
            config.on_damage,
            log,
        )?;
        let cwd = std::env::current_dir().map_err(|e| Error::usage("the working directory", e))?;
        let outputs = stdio.outputs();
        let images = Images::prepare(config, &store, newest, &cwd, &outputs, log)?;
        // A start that fails from here leaves no images directory behind.
        let forget_images = |e: Error| {
            remove_images(images.dir.as_fd(), &images.at);
            e
        };
        let coordinator = Coordinator::start(
            &tools.coordinator,
            store.scratch(),
            &absolute(&store.scratch_path(), &cwd),
            &images.at,
            &children,
            inherited,
            log,
        )
        .map_err(forget_images)?;
        let stop = |e: Error, quit: Option<&spawn::Command>| {
            coordinator.abandon(quit, inherited);
            forget_images(e)
        };
        let quit = coordinator
            .command(&tools.command, &["--quit"], None)
            .map_err(|e| stop(e, None))?;
        let ready = job_command(config, path, &tools, &coordinator, &images, log)
            .and_then(|job| Ok((job, Requests::new(&coordinator, &tools.command)?)));
        let (job, requests) = ready.map_err(|e| stop(e, Some(&quit)))?;
        let parts = Parts {
            restart: images.restart.as_ref().map(|_| images.paths.len()),
            place: Place {
                store,
                images: images.dir,
                images_at: images.at,
                cwd,
                outputs,
            },
            children,
            coordinator: coordinator.pid,
            requests,
            quit,
        };
        Ok((Self::new(config, parts, inherited, log), job))
    }

    fn new(config: &Config, parts: Parts, inherited: &'a Inherited, log: &'a Log) -> Self {
        let mut evictions = vec![libc::SIGTERM, libc::SIGINT];
        evictions.extend(&config.evict_signals);
        evictions.extend(&config.periodic_signals);
        let now = Instant::now();
        let mut policy = Policy::new(config, evictions);
        policy.start_ticks(now);
        let limit = match parts.restart {
            Some(_) => RESTART_TIMEOUT,
            None => JOIN_TIMEOUT,
        };
        Self {
            inherited,
            log,
            place: parts.place,
            children: parts.children,
            helpers: heapless::Vec::new(),
            coordinator: parts.coordinator,
            coordinator_unknown: parts.coordinator.is_none(),
            requests: parts.requests,
            quit: parts.quit,
            quitting: None,
            quit_tried: false,
            routes: Routes::new(&[], &config.maps),
            policy,
            code: config.ckpt_exit_code,
            by_signal: config.exit_by_signal,
            keep_running: config.interval_continue,
            phase: Phase::Running {
                check: Some(Check {
                    restart: parts.restart,
                    limit,
                    deadline: now + limit,
                    next_probe: now + PROBE,
                    probe: None,
                }),
                pending: None,
            },
            periodic: PeriodicCommits::default(),
            job_ended: false,
            lost: None,
            keep_images: false,
        }
    }

    /// Asks the coordinator for a checkpoint, or joins the one under way.
    /// `evicted`: an eviction asks (else `--interval`).
    fn ask(&mut self, exit: bool, evicted: bool) -> Action {
        let log = self.log;
        let now = Instant::now();
        let deadline = self.policy.answer_by(evicted);
        let Phase::Running { pending, .. } = &mut self.phase else {
            return Action::Drop;
        };
        if let Some(p) = pending {
            if exit && !p.exit {
                // A "keep running" checkpoint is under way: it is
                // committed, then one that ends the computation is taken
                // (so that nothing the job writes after it is written
                // again on restart).
                log.info(format_args!(
                    "a checkpoint is under way: it is committed, then the eviction's taken"
                ));
                p.exit = true;
                p.evicted |= evicted;
                p.deadline = deadline.or(p.deadline);
            }
            return Action::Drop;
        }
        *pending = Some(Pending {
            exit,
            deadline,
            asked: now,
            kills: exit,
            evicted,
            requester: None,
            tries: 0,
            again_at: None,
            next_poll: now + POLL,
        });
        self.policy.stop_ticks();
        self.send_request();
        Action::Drop
    }

    fn send_request(&mut self) {
        let log = self.log;
        let Phase::Running {
            check,
            pending: Some(p),
        } = &mut self.phase
        else {
            return;
        };
        if check.is_some() {
            // Not before the coordinator has seen the job through its
            // launch or restart: it forgets a --kcheckpoint's "kill
            // after" when the computation's first process joins.
            p.again_at = Some(Instant::now() + POLL);
            return;
        }
        p.tries += 1;
        let backoff = RETRY * 2u32.saturating_pow(p.tries.min(8) - 1);
        p.again_at = Some(Instant::now() + backoff.min(RETRY_MAX));
        if p.requester.is_some() {
            return;
        }
        let (request, verb) = match p.exit {
            true => (&self.requests.kill, "--kcheckpoint"),
            false => (&self.requests.keep, "--bcheckpoint"),
        };
        match spawn::spawn(request, self.inherited, false) {
            Ok(pid) => {
                p.requester = Some(pid);
                let _ = self.helpers.push(pid);
                if p.tries == 1 {
                    log.info(format_args!("checkpoint requested (dmtcp_command {verb})"));
                }
            }
            Err(e) => log.warn(format_args!("dmtcp_command: {e}")),
        }
    }

    /// The checkpoint to exit with is complete, or will not be: end the
    /// computation. A complete one DMTCP kills itself (--kcheckpoint),
    /// with SIGKILL as the fallback; one not complete is killed now.
    fn end_computation(&mut self, phase: Phase) -> Action {
        self.policy.stop_ticks();
        self.phase = phase;
        match phase {
            // Checkpointed only by a request that kills (on_pending).
            Phase::Checkpointed { .. } => {
                self.phase = Phase::Checkpointed {
                    kill_at: Some(Instant::now() + QUIT_GRACE),
                };
                Action::Drop
            }
            _ => Action::Kill,
        }
    }

    /// The checkpoint requested, while the computation runs.
    fn pending(&self) -> Option<Pending> {
        match self.phase {
            Phase::Running { pending, .. } => pending,
            _ => None,
        }
    }

    /// The launch or restart check, while it is under way.
    fn check(&self) -> Option<Check> {
        match self.phase {
            Phase::Running { check, .. } => check,
            _ => None,
        }
    }

    fn set_pending(&mut self, to: Option<Pending>) {
        if let Phase::Running { pending, .. } = &mut self.phase {
            *pending = to;
        }
    }

    fn set_check(&mut self, to: Option<Check>) {
        if let Phase::Running { check, .. } = &mut self.phase {
            *check = to;
        }
    }

    fn running(&self) -> bool {
        matches!(self.phase, Phase::Running { .. })
    }

    /// Whether the coordinator's end now is part of the computation's:
    /// else it takes the job with it (DMTCP's 99), and the user is told.
    fn coordinator_may_end(&self) -> bool {
        self.job_ended
            || self.quitting.is_some()
            || !self.running()
            // DMTCP ends the computation, then the coordinator.
            || self.pending().is_some_and(|p| p.kills)
    }

    /// A coordinator killed under the job, seen as the job ends. The job
    /// may be reaped before it: the job's socket closes as the coordinator
    /// exits, before it is a zombie. Looked at without reaping; `reaped`
    /// hears of it later, as an end then expected.
    fn coordinator_died_first(&self, log: &Log) {
        let Some(pid) = self.coordinator else { return };
        let Some(raw) = crate::os::procfs::ended_unreaped(pid) else {
            return;
        };
        let ended = Ended { raw, pid };
        if !self.coordinator_may_end() && ended.exit_code() != Some(0) {
            coordinator_lost(ended, log);
        }
    }

    /// The coordinator has exited (its pid known, and reaped).
    fn coordinator_gone(&self) -> bool {
        self.coordinator.is_none() && !self.coordinator_unknown
    }

    fn send_quit(&mut self) {
        let log = self.log;
        if self.quit_tried || self.coordinator_gone() {
            return;
        }
        self.quit_tried = true;
        match spawn::spawn(&self.quit, self.inherited, false) {
            Ok(pid) => {
                self.quitting = Some(pid);
                let _ = self.helpers.push(pid);
            }
            Err(e) => log.warn(format_args!("dmtcp_command --quit: {e}")),
        }
    }

    /// Commits the images as the next generation, with what a restart
    /// needs to know; then empties the images directory.
    fn commit(&mut self) -> Result<u64, store::Failed> {
        // `images-dir PATH\ncwd PATH\nstdout-size N\nstderr-size N\n`,
        // on the stack.
        let mut meta = store::Description::new();
        meta.push(b"images-dir ")?;
        meta.push(self.place.images_at.as_os_str().as_bytes())?;
        meta.push(b"\ncwd ")?;
        meta.push(self.place.cwd.as_os_str().as_bytes())?;
        meta.push(b"\n")?;
        for (key, fd) in [&b"stdout-size "[..], b"stderr-size "]
            .iter()
            .zip(&self.place.outputs)
        {
            if let Some(size) = fd.as_ref().and_then(|f| rustix::fs::fstat(f).ok()) {
                let mut digits = [0u8; 20];
                meta.push(key)?;
                meta.push(decimal::write(&mut digits, size.st_size as u64))?;
                meta.push(b"\n")?;
            }
        }
        let done = self
            .place
            .store
            .commit_dir(self.place.images.as_fd(), &meta, self.log);
        if done.is_ok() {
            tree::empty(self.place.images.as_fd())
                .map_err(store::at("empty the images directory"))?;
        }
        done
    }

    /// A "keep running" checkpoint is complete: commit it while the job
    /// runs on. Whether it may (see `PeriodicCommits`).
    fn commit_periodic(&mut self) -> bool {
        let log = self.log;
        self.set_pending(None);
        self.policy.start_ticks(Instant::now());
        let done = self.commit();
        if let Err(f) = done {
            log.warn(format_args!(
                "{}: commit failed: {f}; the last commit is kept",
                self.place.store.shown.display()
            ));
            // The next checkpoint overwrites what this one left.
            let _ = tree::empty(self.place.images.as_fd());
        }
        self.periodic.run_on(done.is_ok(), log)
    }

    /// The coordinator is gone: its port file says nothing any more.
    fn forget_port_file(&self) {
        let _ = rustix::fs::unlinkat(
            self.place.store.scratch(),
            coordinator::PORT_FILE,
            AtFlags::empty(),
        );
    }

    /// The launch or restart check: ask the coordinator, or act on its
    /// answer.
    fn probe(&mut self, now: Instant) -> Action {
        let log = self.log;
        let Some(mut c) = self.check() else {
            return Action::Drop;
        };
        if now >= c.deadline {
            let (code, what) = match c.restart {
                Some(_) => (RESTART_FAILED, "the restart did not complete"),
                None => (
                    LAUNCHER_FAILED,
                    "the job did not join the DMTCP coordinator: it would run unprotected",
                ),
            };
            log.warn(format_args!(
                "{what} within {} s; ending it (exit {code})",
                c.limit.as_secs()
            ));
            return self.end_computation(Phase::Failed(code));
        }
        if c.probe.is_none() && now >= c.next_probe {
            match spawn::spawn(&self.requests.status, self.inherited, false) {
                Ok(pid) => {
                    c.probe = Some(pid);
                    let _ = self.helpers.push(pid);
                }
                Err(e) => log.warn(format_args!("dmtcp_command --status: {e}")),
            }
            c.next_probe = now + PROBE;
            self.set_check(Some(c));
        }
        Action::Drop
    }

    /// The `--status` helper exited: what did the coordinator say?
    fn probed(&mut self, ok: bool) {
        let log = self.log;
        let Some(mut c) = self.check() else { return };
        c.probe = None;
        self.set_check(Some(c));
        let mut buf = [0u8; 2048];
        let len = drain(self.requests.status_out.as_fd(), &mut buf);
        if !ok {
            return;
        }
        let (peers, running) = parse_status(&buf[..len]);
        if !running || peers == 0 {
            return;
        }
        match c.restart {
            // A restored process may well end at once (a short sleep).
            Some(images) if peers < images => log.info(format_args!(
                "restart complete, but {peers} of {images} processes are running: the others ended during or right after it"
            )),
            Some(images) => log.info(format_args!(
                "restart complete: {images} process(es) running under DMTCP"
            )),
            None => log.info(format_args!("the job runs under DMTCP")),
        }
        self.set_check(None);
    }
}

/// The images directory of this start: for a restart, the generation's
/// images unpacked into it where they were written.
struct Images {
    restart: Option<Restart>,
    dir: OwnedFd,
    at: PathBuf,
    /// The images, for dmtcp_restart.
    paths: Vec<OsString>,
}

impl Images {
    /// `newest`: the store's newest intact generation, if any. Leaves no
    /// images directory behind if it fails.
    fn prepare(
        config: &Config,
        store: &Store,
        newest: Option<u64>,
        cwd: &Path,
        outputs: &[Option<OwnedFd>; 2],
        log: &Log,
    ) -> Result<Self, Error> {
        // Generation 0 is the starting state: no images.
        let restart = match newest.filter(|&g| g >= 1) {
            Some(g) => Some(Restart::prepare(store, g, cwd, outputs, log)?),
            None => None,
        };
        let at = match &restart {
            Some(r) => r.images_at.clone(),
            None => absolute(Path::new(&config.images_dir), cwd).join(new_images_name()?),
        };
        let dir = prepare_images(&at)?;
        let restore_at =
            absolute(&store.scratch_path(), cwd).join(OsStr::from_bytes(store::RESTORE.to_bytes()));
        let paths = match &restart {
            Some(r) => r
                .unpack(store, dir.as_fd(), &restore_at)
                .inspect_err(|_| remove_images(dir.as_fd(), &at))?,
            None => Vec::new(),
        };
        Ok(Self {
            restart,
            dir,
            at,
            paths,
        })
    }
}

/// Empties and removes the images directory `dir`, at `at`.
fn remove_images(dir: BorrowedFd, at: &Path) {
    let _ = tree::empty(dir);
    let _ = rustix::fs::rmdir(at.as_os_str());
}

/// Finds DMTCP's tools and checks that PROGRAM can run under them:
/// dmtcp_launch execs it only once the coordinator runs, so this says now,
/// as an exec would, if it cannot.
fn find_tools(config: &Config, path: &Path) -> Result<Tools, Error> {
    let tools = Tools::find(config.dmtcp_dir.as_deref(), std::env::var_os("PATH"))?;
    tools.check_install()?;
    crate::os::program::check_executable(path)?;
    if crate::os::program::is_static_elf(path) == Some(true) {
        return Err(Error::usage(
            path.display(),
            "is linked statically: DMTCP cannot preload itself into it, so it would run \
             unprotected; link it dynamically",
        ));
    }
    Ok(tools)
}

/// The job's command: `dmtcp_restart` of a generation's images, or
/// `dmtcp_launch PROGRAM ARG...`; joining the coordinator, writing images
/// into `images_at`. It dies with ckptrun.
fn job_command(
    config: &Config,
    path: &Path,
    tools: &Tools,
    coordinator: &Coordinator,
    images: &Images,
    log: &Log,
) -> Result<spawn::Command, Error> {
    let mut args = coordinator.address().to_vec();
    args.extend([
        "--join-coordinator".into(),
        "--ckptdir".into(),
        images.at.clone().into(),
        // Notes and warnings would land in the job's stderr.
        "--quiet".into(),
        "--quiet".into(),
    ]);
    let image_paths = &images.paths;
    let job = match &images.restart {
        Some(r) => {
            log.info(format_args!(
                "restart from generation {} ({}): dmtcp_restart, {} image(s)",
                r.generation,
                r.slot,
                image_paths.len()
            ));
            args.extend(image_paths.iter().cloned());
            spawn::Command::new(&tools.restart, "dmtcp_restart".as_ref(), &args, &[])?
        }
        None => {
            log.info(format_args!(
                "fresh start: dmtcp_launch, images in {}",
                images.at.display()
            ));
            args.push(program_argument(&config.program, path));
            spawn::Command::new(&tools.launch, "dmtcp_launch".as_ref(), &args, &config.args)?
        }
    };
    Ok(job.dies_with_ckptrun())
}

/// The coordinator ended under the job, taking it with it: said on
/// stderr (HTCondor's error file), since the job's end follows from it.
#[inline(never)]
fn coordinator_lost(ended: Ended, log: &Log) {
    log.warn(format_args!(
        "the DMTCP coordinator {ended} while the job runs"
    ));
}

impl Protocol for Dmtcp<'_> {
    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action {
        if !self.policy.is_eviction(sig) {
            return self.routes.route(sig);
        }
        // Once the computation is being ended, there is nothing to ask.
        if self.running() {
            self.log
                .info(format_args!("{}: eviction, checkpoint and exit", Name(sig)));
            // A stopped computation cannot be checkpointed; it is being
            // evicted: let it run.
            let _ = sys::kill(-job.pid, libc::SIGCONT);
            return self.ask(true, true);
        }
        Action::Drop
    }

    /// A stopped job is its own business (job control, a debugger).
    fn on_stop(&mut self, _sig: Sig, _log: &Log) -> Action {
        Action::Drop
    }

    fn deadline(&self) -> Option<Instant> {
        let pending = self.pending().map(|p| {
            [Some(p.next_poll), p.again_at, p.deadline]
                .into_iter()
                .flatten()
                .min()
        });
        // While a probe runs, only the check's own deadline.
        let check = self.check().map(|c| match c.probe {
            None => c.deadline.min(c.next_probe),
            Some(_) => c.deadline,
        });
        let lost = self.lost.map(|(_, at)| at);
        let tick = self.policy.next_tick();
        let kill_at = match self.phase {
            Phase::Checkpointed { kill_at } => kill_at,
            _ => None,
        };
        [pending.flatten(), check, tick, kill_at, lost]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_deadline(&mut self, _job: &Job, log: &Log) -> Action {
        let now = Instant::now();
        if let Some((ended, at)) = self.lost
            && at <= now
        {
            self.lost = None;
            coordinator_lost(ended, log);
        }
        if let Phase::Checkpointed { kill_at: Some(t) } = self.phase
            && t <= now
        {
            self.phase = Phase::Checkpointed { kill_at: None };
            // Handled (SIGKILL): for the log, not HTCondor's error file.
            log.info(format_args!(
                "the computation is still there {} ms after its checkpoint",
                QUIT_GRACE.as_millis() as u64
            ));
            return Action::Kill;
        }
        if self.check().is_some() {
            let action = self.probe(now);
            if action != Action::Drop {
                return action;
            }
        }
        match self.pending() {
            Some(p) => self.on_pending(p, now, log),
            None => self.on_tick(now, log),
        }
    }

    fn reaped(&mut self, pid: Pid, raw: i32, log: &Log) {
        if !(libc::WIFEXITED(raw) || libc::WIFSIGNALED(raw)) {
            return;
        }
        let ended = Ended { raw, pid };
        self.helpers.retain(|&h| h != pid);
        if Some(pid) == self.coordinator {
            self.coordinator = None;
            if self.coordinator_may_end() {
                log.info(format_args!("the DMTCP coordinator {ended}"));
            } else if ended.exit_code() == Some(0) {
                // --exit-on-last: the computation may be ending.
                self.lost = Some((ended, Instant::now() + LOST_GRACE));
            } else {
                coordinator_lost(ended, log);
            }
        } else if self.check().is_some_and(|c| c.probe == Some(pid)) {
            self.probed(ended.exit_code() == Some(0));
        } else if let Some(mut p) = self.pending()
            && p.requester == Some(pid)
        {
            p.requester = None;
            self.set_pending(Some(p));
        }
    }

    fn job_ended(&mut self, log: &Log) {
        self.coordinator_died_first(log);
        self.job_ended = true;
    }

    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict {
        self.job_ended = true;
        if let Some((coordinator, _)) = self.lost.take() {
            log.info(format_args!(
                "the DMTCP coordinator {coordinator} as the job ended"
            ));
        }
        // With --kcheckpoint each process exits once its own image is
        // written: the job's first process may end while others still
        // write theirs.
        if self.running() && self.pending().is_some_and(|p| p.exit) && self.wait_complete(log) {
            log.info(format_args!("checkpoint complete"));
            self.phase = Phase::Checkpointed { kill_at: None };
        }
        // Nothing of the computation may run on (or write) after this.
        supervise::end_group(ended.pid, log);
        match self.phase {
            Phase::Checkpointed { .. } => match self.commit() {
                Ok(g) => protocol::checkpointed(
                    self.code,
                    self.by_signal,
                    format_args!("generation {g} ({})", self.place.store.slot_of(g)),
                    log,
                ),
                Err(f) => {
                    self.keep_images = true;
                    log.warn(format_args!(
                        "{}: commit failed: {f}; the last commit is kept, the images are left in {}",
                        self.place.store.shown.display(),
                        self.place.images_at.display()
                    ));
                    Verdict::Exit(COMMIT_FAILED)
                }
            },
            Phase::NotCheckpointed => Verdict::Exit(NO_ANSWER),
            Phase::Failed(code) => Verdict::Exit(code),
            Phase::Running { pending, .. } => {
                // An image begun means DMTCP had frozen the job for its
                // checkpoint: it did not end by itself. Otherwise it did
                // (as the eviction came), and its end is passed on.
                if pending.is_some_and(|p| p.exit) && under_way(self.place.images.as_fd()) {
                    log.warn(format_args!(
                        "the computation ended before its checkpoint was complete; nothing committed"
                    ));
                    return Verdict::Exit(NO_ANSWER);
                }
                protocol::guard_collision(ended, self.code, self.by_signal, log)
            }
        }
    }

    /// Waits, at most STOP_GRACE, until nothing ckptrun started is left:
    /// the coordinator exits by itself when its last client has gone
    /// (`--exit-on-last`), else it is told to `--quit` after a moment; the
    /// helpers exit by themselves. Then SIGKILLs what is left (the
    /// coordinator, the helpers, and where /proc shows our namespace every
    /// child ckptrun did not start with: the job's orphans too, ckptrun
    /// being their subreaper) and reaps it. Removes the images directory
    /// unless it holds a checkpoint that could not be committed. Does not
    /// allocate.
    fn end(&mut self, log: &Log) {
        self.stop_all(log);
        let _ = tree::remove(self.place.store.scratch(), store::RESTORE);
        if !self.keep_images {
            let _ = tree::empty(self.place.images.as_fd());
            let _ = rustix::fs::rmdir(self.place.images_at.as_os_str());
        }
    }
}

impl Dmtcp<'_> {
    /// The job's first process has ended with a "checkpoint and exit"
    /// request pending: waits until the checkpoint is complete, or will
    /// not be: no image begun, the coordinator gone (every process has
    /// reported its image by then), or the request's time limit (else
    /// GIVE_UP) reached. Reaps what ends meanwhile. Does not allocate.
    fn wait_complete(&mut self, log: &Log) -> bool {
        let limit = self
            .pending()
            .and_then(|p| p.deadline)
            .unwrap_or_else(|| Instant::now() + GIVE_UP);
        loop {
            let images = self.place.images.as_fd();
            if complete(images) {
                return true;
            }
            if !under_way(images) || self.coordinator_gone() || Instant::now() >= limit {
                return complete(images);
            }
            let _ = sys::wait_signal(&coordinator::sigchld(), Some(POLL));
            supervise::reap_all(self, log);
        }
    }

    fn stop_all(&mut self, log: &Log) {
        let start = Instant::now();
        let (quit_at, kill_at) = (start + EXIT_ON_LAST, start + STOP_GRACE);
        let give_up = kill_at + STOP_GRACE;
        let mut said = false;
        loop {
            let none_left = supervise::reap_all(self, log);
            let mut left = 0;
            self.children.each_new(|_| left += 1);
            let known_left = self.coordinator.is_some() || !self.helpers.is_empty();
            let done = none_left
                || (!known_left
                    && match self.children.listable() {
                        true => left == 0,
                        // Only what ckptrun knows of can be waited for.
                        false => !self.coordinator_unknown || self.quit_tried,
                    });
            if done {
                self.forget_port_file();
                return;
            }
            let now = Instant::now();
            if now >= quit_at {
                self.send_quit();
            }
            if now >= give_up {
                log.warn(format_args!(
                    "processes DMTCP or the job started are still there after SIGKILL; leaving them"
                ));
                return;
            }
            if now >= kill_at {
                if !said {
                    log.info(format_args!(
                        "ending what is left of the computation (SIGKILL): the coordinator, helpers, processes the job left"
                    ));
                    said = true;
                }
                for pid in self.coordinator.iter().chain(&self.helpers) {
                    let _ = sys::kill(*pid, libc::SIGKILL);
                }
                self.children.each_new(|pid| {
                    let _ = sys::kill(pid, libc::SIGKILL);
                });
            }
            let _ = sys::wait_signal(&coordinator::sigchld(), Some(Duration::from_millis(10)));
        }
    }
}

impl Dmtcp<'_> {
    /// No checkpoint is pending: is an `--interval` tick due?
    fn on_tick(&mut self, now: Instant, log: &Log) -> Action {
        if !self.policy.tick_due(now) || !self.running() {
            return Action::Drop;
        }
        self.policy.stop_ticks();
        log.info(format_args!(
            "--interval: periodic checkpoint{}",
            if self.keep_running {
                ", the job running on"
            } else {
                " and exit"
            }
        ));
        self.ask(!self.keep_running, false)
    }

    /// A checkpoint is pending: is it complete, out of time, or to be
    /// asked for again?
    fn on_pending(&mut self, p: Pending, now: Instant, log: &Log) -> Action {
        if complete(self.place.images.as_fd()) {
            if p.exit && p.kills {
                log.info(format_args!("checkpoint complete"));
                return self.end_computation(Phase::Checkpointed { kill_at: None });
            }
            if !self.commit_periodic() {
                return self.end_computation(Phase::Failed(COMMIT_FAILED));
            }
            if p.exit {
                // An eviction came during it: now the one that ends the
                // computation.
                return self.ask(true, p.evicted);
            }
            return Action::Drop;
        }
        if p.deadline.is_some_and(|t| t <= now) {
            // DMTCP froze the computation for it: it cannot go on either.
            log.warn(format_args!(
                "the {} checkpoint was not complete in time: ending the computation",
                if p.evicted { "eviction's" } else { "periodic" }
            ));
            return self.end_computation(Phase::NotCheckpointed);
        }
        if p.again_at.is_some_and(|t| t <= now) && !under_way(self.place.images.as_fd()) {
            let given_up = p.deadline.is_none() && now - p.asked >= GIVE_UP;
            if given_up || self.coordinator_gone() {
                log.warn(format_args!(
                    "no checkpoint could be taken ({} requests{})",
                    p.tries,
                    if self.coordinator_gone() {
                        ", the coordinator is gone"
                    } else {
                        ""
                    }
                ));
                if p.exit {
                    return self.end_computation(Phase::NotCheckpointed);
                }
                self.set_pending(None);
                self.policy.start_ticks(now);
                return Action::Drop;
            }
            self.send_request();
        }
        if let Some(mut p) = self.pending() {
            p.next_poll = now + POLL;
            self.set_pending(Some(p));
        }
        Action::Drop
    }
}

/// A committed generation to restart from, as its description says.
struct Restart {
    generation: u64,
    /// The generation's archive, and its slot's name for messages.
    file: OwnedFd,
    slot: String,
    images_at: PathBuf,
}

impl Restart {
    /// Reads generation `g`'s description; checks that the restart will
    /// find the job's files where they were; cuts `--stdout`/`--stderr`
    /// back to their size at the checkpoint.
    fn prepare(
        store: &Store,
        g: u64,
        cwd: &Path,
        outputs: &[Option<OwnedFd>; 2],
        log: &Log,
    ) -> Result<Self, Error> {
        let slot = store.slot_of(g).to_string();
        let (file, meta) = store.generation(g).map_err(|f| Error::usage(&slot, f))?;
        let path = |key: &[u8]| {
            meta.get(key)
                .filter(|v| v.starts_with(b"/"))
                .map(|v| PathBuf::from(OsStr::from_bytes(v)))
        };
        let images_at = path(b"images-dir").ok_or_else(|| {
            Error::usage(
                &slot,
                "generation has no images-dir: not a --mode dmtcp store",
            )
        })?;
        if let Some(then) = path(b"cwd")
            && then != cwd
            && then.is_dir()
        {
            // DMTCP reopens the job's files by their absolute paths, and
            // only where one is gone by its path under the working
            // directory: it would write into the old directory.
            return Err(Error::usage(
                &slot,
                format_args!(
                    "generation {g} was checkpointed in {}, which still exists: DMTCP would \
                     reopen the job's files there, not in {}; restart there, or move it away",
                    then.display(),
                    cwd.display()
                ),
            ));
        }
        let keys = [
            (&b"stdout-size"[..], "--stdout"),
            (b"stderr-size", "--stderr"),
        ];
        for ((key, which), fd) in keys.into_iter().zip(outputs) {
            let size = meta
                .get(key)
                .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok());
            if let (Some(size), Some(fd)) = (size, fd) {
                cut_back(fd.as_fd(), size, which, log);
            }
        }
        Ok(Self {
            generation: g,
            file,
            slot,
            images_at,
        })
    }

    /// Puts the generation's saved file copies back in the images
    /// directory (where DMTCP recorded them) and its images in
    /// `restore_at` (the store's scratch); returns the images' paths.
    fn unpack(
        &self,
        store: &Store,
        images: BorrowedFd,
        restore_at: &Path,
    ) -> Result<Vec<OsString>, Error> {
        let fail = |f: &dyn std::fmt::Display| Error::usage(&self.slot, f);
        let file = &self.file;
        // The images were extracted while the generation was verified
        // (Store::open); else they are extracted now.
        let extracted = store.restore_holds() == Some(self.generation);
        if !extracted {
            tree::remove(store.scratch(), store::RESTORE).map_err(|e| fail(&sys::strerror(e)))?;
            rustix::fs::mkdirat(store.scratch(), store::RESTORE, Mode::from_raw_mode(0o700))
                .map_err(|e| fail(&sys::strerror(e)))?;
        }
        let restore =
            tree::open_dir(store.scratch(), store::RESTORE).map_err(|e| fail(&sys::strerror(e)))?;
        let mut found = Vec::new();
        let done = archive::each_member(file.as_fd(), |m| {
            let path = m.path.as_bytes();
            let top = path.split(|&b| b == b'/').next().unwrap_or(b"");
            if store::is_image(path) {
                if !extracted {
                    archive::extract(file.as_fd(), m, restore.as_fd(), m.path.c())?;
                }
                found.push(restore_at.join(OsStr::from_bytes(path)).into_os_string());
            } else if top.starts_with(b"ckpt_") && top.ends_with(b"_files") {
                archive::extract(file.as_fd(), m, images, m.path.c())?;
            }
            Ok(true)
        });
        match done {
            Ok(()) => {}
            Err(Bad::Io(e)) => {
                return Err(fail(&format_args!("restore: {}", sys::strerror(e))));
            }
            Err(bad) => return Err(fail(&bad)),
        }
        if found.is_empty() {
            return Err(fail(&"holds no ckpt_*.dmtcp image"));
        }
        found.sort();
        Ok(found)
    }
}

/// `--stdout` or `--stderr` back to `size`, its size when the checkpoint
/// was committed: what the job wrote after it will be written again.
fn cut_back(fd: BorrowedFd, size: u64, which: &str, log: &Log) {
    let Ok(st) = rustix::fs::fstat(fd) else {
        return;
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return;
    }
    let now = st.st_size as u64;
    if now < size {
        log.warn(format_args!(
            "{which} holds {now} bytes, less than the {size} it held at the checkpoint"
        ));
        return;
    }
    if now == size {
        return;
    }
    match rustix::fs::ftruncate(fd, size) {
        Ok(()) => log.info(format_args!(
            "{which} cut back from {now} to {size} bytes, its size at the checkpoint"
        )),
        Err(e) => log.warn(format_args!(
            "{which}: cannot cut it back to its size at the checkpoint: {}",
            sys::strerror(e)
        )),
    }
}

/// The images directory, ready: a real directory of our own, empty, made
/// (mode 0700) in `--images-dir`, which must exist; one that exists must
/// be ours and not a symlink (/tmp is shared).
fn prepare_images(at: &Path) -> Result<OwnedFd, Error> {
    let fail = |e: rustix::io::Errno| Error::os(at.display(), e);
    match rustix::fs::mkdir(at.as_os_str(), Mode::from_raw_mode(0o700)) {
        Ok(()) => {}
        Err(rustix::io::Errno::NOENT) => {
            let dir = at.parent().unwrap_or(at);
            return Err(Error::usage(
                format_args!("--images-dir {}", dir.display()),
                "no such directory (DMTCP's images go there; it must exist on every node)",
            ));
        }
        Err(rustix::io::Errno::EXIST) => {
            let st = rustix::fs::lstat(at.as_os_str()).map_err(fail)?;
            let ours = st.st_uid == rustix::process::geteuid().as_raw();
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory || !ours {
                return Err(Error::usage(
                    at.display(),
                    "exists and is not a directory of ckptrun's (this user's)",
                ));
            }
        }
        Err(e) => return Err(fail(e)),
    }
    let dir = rustix::fs::open(
        at.as_os_str(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(fail)?;
    tree::empty(dir.as_fd()).map_err(fail)?;
    Ok(dir)
}

/// `ckptrun.` and 16 random hex digits: a new images directory's name.
fn new_images_name() -> Result<OsString, Error> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::usage("/dev/urandom", e))?;
    Ok(format!("ckptrun.{:016x}", u64::from_be_bytes(bytes)).into())
}

/// Whether the images directory holds a complete checkpoint: the restart
/// script the coordinator writes last, at least one non-empty
/// `ckpt_*.dmtcp`, and no image still being written (`*.temp`). Does not
/// allocate.
fn complete(images: BorrowedFd) -> bool {
    // Follows the symlink: its target must be there too.
    if rustix::fs::statat(images, RESTART_SCRIPT, AtFlags::empty()).is_err() {
        return false;
    }
    let mut found = 0;
    let mut temp = false;
    let listed = each_name(images, |name| {
        if name.to_bytes().ends_with(b".temp") {
            temp = true;
        }
        if store::is_image(name.to_bytes())
            && rustix::fs::statat(images, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_size > 0
            })
        {
            found += 1;
        }
    });
    listed && !temp && found > 0
}

/// Whether a checkpoint shows in the images directory: an image, whole
/// or being written.
fn under_way(images: BorrowedFd) -> bool {
    let mut any = false;
    each_name(images, |name| {
        let name = name.to_bytes();
        any |= name.starts_with(b"ckpt_")
            && (name.ends_with(b".dmtcp") || name.ends_with(b".dmtcp.temp"));
    });
    any
}

/// Calls `f` with each name in `dir`; whether it could list it all.
fn each_name(dir: BorrowedFd, mut f: impl FnMut(&CStr)) -> bool {
    tree::each_name(dir, |name| {
        f(name);
        Ok(())
    })
    .is_ok()
}

/// `NUM_PEERS=N` and `RUNNING=yes` from `dmtcp_command --status`.
fn parse_status(out: &[u8]) -> (usize, bool) {
    let mut peers = 0;
    let mut running = false;
    for line in out.split(|&b| b == b'\n') {
        let line = line.trim_ascii();
        if let Some(n) = line.strip_prefix(b"NUM_PEERS=") {
            peers = std::str::from_utf8(n)
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
        } else if line == b"RUNNING=yes" {
            running = true;
        }
    }
    (peers, running)
}

/// Reads what is in the pipe now (non-blocking) into `buf`, keeping the
/// first `buf.len()` bytes; returns how many it kept.
fn drain(pipe: BorrowedFd, buf: &mut [u8]) -> usize {
    let mut len = 0;
    let mut spill = [0u8; 512];
    loop {
        let into: &mut [u8] = if len < buf.len() {
            &mut buf[len..]
        } else {
            &mut spill
        };
        match rustix::io::read(pipe, into) {
            Ok(0) | Err(_) => return len,
            Ok(n) if len < buf.len() => len += n,
            Ok(_) => {}
        }
    }
}

/// PROGRAM as dmtcp_launch gets it: as given, unless it starts with `-`
/// (dmtcp_launch would take it for an option): then the path found.
fn program_argument(program: &OsString, found: &Path) -> OsString {
    if !program.as_bytes().starts_with(b"-") {
        return program.clone();
    }
    match found.as_os_str().as_bytes().starts_with(b"-") {
        true => Path::new(".").join(found).into_os_string(),
        false => found.as_os_str().to_os_string(),
    }
}

fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_looks_like_an_option_is_given_as_a_path() {
        assert_eq!(
            program_argument(&"./foo".into(), Path::new("./foo")),
            "./foo"
        );
        assert_eq!(
            program_argument(&"foo".into(), Path::new("/usr/bin/foo")),
            "foo"
        );
        assert_eq!(program_argument(&"-x".into(), Path::new("-x")), "./-x");
        assert_eq!(
            program_argument(&"-x".into(), Path::new("/opt/bin/-x")),
            "/opt/bin/-x"
        );
    }

    #[test]
    fn image_names() {
        assert!(store::is_image(b"ckpt_foo_4a1b-40000-5f2a.dmtcp"));
        assert!(!store::is_image(b"ckpt_foo_4a1b.dmtcp.temp"));
        assert!(!store::is_image(b"dmtcp_restart_script.sh"));
    }

    #[test]
    fn status_as_dmtcp_command_prints_it() {
        let out = b"Coordinator:\n  Host: 127.0.0.1\n  Port: 4444\nStatus...\n  NUM_PEERS=2\n  RUNNING=yes\n  CKPT_INTERVAL=0 (checkpoint manually)\n";
        assert_eq!(parse_status(out), (2, true));
        assert_eq!(parse_status(b"  NUM_PEERS=0\n  RUNNING=no\n"), (0, false));
    }
}
