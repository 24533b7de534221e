//! `--mode dmtcp`: an unmodified program, checkpointed by DMTCP, under
//! HTCondor (PROTOCOLS.md §3). ckptrun replaces the `shim_dmtcp` script:
//!
//! - Plan: find the tools, open the store, start a private coordinator,
//!   and run the job as `dmtcp_launch ... PROGRAM ARG...`, or as
//!   `dmtcp_restart ... IMAGE...` when the store holds a committed
//!   checkpoint (generation 1 or later).
//! - DMTCP writes its images into the store's scratch directory
//!   `.images`. A checkpoint is complete when the coordinator has written
//!   the restart script (`dmtcp_restart_script.sh`, which it writes after
//!   every image) and no image is still a `.temp`; DMTCP 4.2.0's
//!   `--bcheckpoint` returns before that, so ckptrun looks.
//! - Eviction (SIGTERM, SIGINT as in the shim's submit files, the job
//!   ad's KillSig and CheckpointSig): request a checkpoint, wait until it
//!   is complete (within the eviction budget, if there is one), end the
//!   computation (`dmtcp_command --quit`, SIGKILL to its process group if
//!   it lingers), commit `.images` as the next generation, exit 85.
//! - `--interval`: the same checkpoint, committed while the job runs on.
//! - The job's own end is passed on as condor mode does. Whatever is
//!   left of its process group, the coordinator and the helpers are
//!   ended before ckptrun exits.

use std::ffi::{CStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FileType, RawDir, SeekFrom};

use crate::cli::Config;
use crate::coordinator::{self, Children, Coordinator, Tools};
use crate::error::{COMMIT_FAILED, Error, NO_ANSWER};
use crate::log::Log;
use crate::protocol::{self, Action, Ended, Job, Protocol, Routes, Verdict};
use crate::signals::{Inherited, Name};
use crate::spawn;
use crate::store::Store;
use crate::supervise;
use crate::sys::{self, Pid, Sig};

/// Where DMTCP writes images: a scratch directory of the store.
const IMAGES: &CStr = c".images";
/// The last thing the coordinator writes for a checkpoint.
const RESTART_SCRIPT: &CStr = c"dmtcp_restart_script.sh";

/// How often `.images` is looked at while a checkpoint is under way.
const POLL: Duration = Duration::from_millis(10);
/// A request `dmtcp_command` could not make (the job has not joined the
/// coordinator yet, say) is made again this much later: until the
/// request's time limit, or without one MAX_TRIES times.
const RETRY: Duration = Duration::from_millis(100);
const MAX_TRIES: u32 = 50;
/// How long the coordinator and the helpers have to exit at the end
/// before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a coordinator has to exit by itself once the job has ended
/// (`--exit-on-last`) before it is told to `--quit`.
const EXIT_ON_LAST: Duration = Duration::from_millis(200);
/// How long `dmtcp_command --quit` has to end a checkpointed computation
/// before ckptrun SIGKILLs it.
const QUIT_GRACE: Duration = Duration::from_secs(1);

pub struct Dmtcp<'a> {
    inherited: &'a Inherited,
    log: &'a Log,
    store: Store,
    /// `.images`, open (made anew after each commit; `None` if that
    /// failed, until the next request makes it again).
    images: Option<OwnedFd>,
    /// ckptrun's children, told apart from those it was started with.
    children: Children,
    /// The `dmtcp_command`s running.
    helpers: heapless::Vec<Pid, 8>,
    /// The coordinator's pid while it runs.
    coordinator: Option<Pid>,
    /// Its pid could not be told: only `--quit` ends it.
    coordinator_unknown: bool,
    /// `dmtcp_command --bcheckpoint` and `--quit`, built before the job
    /// starts.
    request: spawn::Command,
    quit: spawn::Command,
    /// The `--quit` helper, once started (it is sent once).
    quitting: Option<Pid>,
    /// `--quit` was tried (whether or not it could be started).
    quit_tried: bool,
    routes: Routes,
    /// Signals that mean "checkpoint, then exit".
    evictions: Vec<Sig>,
    code: u8,
    by_signal: Option<Sig>,
    interval: Option<Duration>,
    next_tick: Option<Instant>,
    /// How long a checkpoint may take: --ckpt-timeout; for an eviction,
    /// else the job ad's JobMaxVacateTime less 10%.
    timeout: Option<Duration>,
    evict_timeout: Option<Duration>,
    pending: Option<Pending>,
    outcome: Outcome,
    /// When a computation told to quit is killed.
    kill_at: Option<Instant>,
    /// The job has ended: the coordinator is expected to go.
    job_ended: bool,
}

/// A checkpoint requested and not yet complete.
#[derive(Clone, Copy)]
struct Pending {
    /// Evicted: end the computation once it is complete.
    exit: bool,
    deadline: Option<Instant>,
    /// The `dmtcp_command` making the request, while it runs.
    requester: Option<Pid>,
    tries: u32,
    /// When to make the request again (it failed).
    retry_at: Option<Instant>,
    next_poll: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    Running,
    /// The eviction's checkpoint is complete; the computation is being
    /// ended.
    Checkpointed,
    /// The eviction's checkpoint was not complete in time, or could not
    /// be requested; the computation is being ended.
    NotCheckpointed,
}

impl<'a> Dmtcp<'a> {
    /// Finds the tools, opens the store, starts the coordinator; returns
    /// the protocol and the command that starts the job (`path` is
    /// PROGRAM as found).
    pub fn plan(
        config: &Config,
        path: &Path,
        inherited: &'a Inherited,
        log: &'a Log,
    ) -> Result<(Self, spawn::Command), Error> {
        let tools = Tools::find(config.dmtcp_dir.as_deref(), std::env::var_os("PATH"))?;
        // dmtcp_launch execs PROGRAM only once the coordinator runs; say
        // now, as an exec would, if it cannot.
        crate::program::check_executable(path)?;
        let children = Children::before_start(crate::procfs::is_ours());
        let (store, newest) = Store::open(&config.store, &[], config.keep, log)?;
        let store_at = absolute(Path::new(&config.store))?;
        let images_at = store_at.join(std::ffi::OsStr::from_bytes(IMAGES.to_bytes()));
        let store_error = |f| Error::usage(store_at.display(), f);
        store.fresh_scratch(IMAGES).map_err(store_error)?;
        let images = crate::tree::open_dir(store.dir(), IMAGES)
            .map_err(|e| Error::os(images_at.display(), e))?;
        // Generation 0 is the starting state: no images.
        let restart = match newest.filter(|&g| g >= 1) {
            Some(g) => Some((g, images_of(&store_at.join(Store::generation_name(g)))?)),
            None => None,
        };

        let coordinator = Coordinator::start(
            &tools.coordinator,
            store.dir(),
            &store_at,
            &images_at,
            &children,
            inherited,
            log,
        )?;
        let stop = |e: Error, quit: Option<&spawn::Command>| {
            match (coordinator.pid, quit) {
                (Some(pid), _) => {
                    let _ = sys::kill(pid, libc::SIGKILL);
                }
                (None, Some(quit)) => {
                    let _ = spawn::spawn(quit, inherited, false);
                }
                (None, None) => {}
            }
            e
        };
        let quit = coordinator
            .command(&tools.command, "--quit")
            .map_err(|e| stop(e, None))?;
        let ready = (|| {
            let mut args = coordinator.address().to_vec();
            args.extend([
                "--join-coordinator".into(),
                "--ckptdir".into(),
                images_at.clone().into(),
            ]);
            let job = match &restart {
                Some((g, images)) => {
                    log.info(format_args!(
                        "restart from generation {g} of {}: dmtcp_restart",
                        config.store.display()
                    ));
                    args.extend(images.iter().cloned());
                    spawn::Command::new(&tools.restart, "dmtcp_restart".as_ref(), &args, &[])?
                }
                None => {
                    log.info(format_args!("fresh start: dmtcp_launch"));
                    args.push(program_argument(&config.program, path));
                    spawn::Command::new(
                        &tools.launch,
                        "dmtcp_launch".as_ref(),
                        &args,
                        &config.args,
                    )?
                }
            };
            let request = coordinator.command(&tools.command, "--bcheckpoint")?;
            Ok::<_, Error>((job.dies_with_ckptrun(), request))
        })();
        let (job, request) = ready.map_err(|e| stop(e, Some(&quit)))?;

        let mut evictions = vec![libc::SIGTERM, libc::SIGINT];
        evictions.extend(&config.evict_signals);
        evictions.extend(&config.periodic_signals);
        let protocol = Self {
            inherited,
            log,
            store,
            images: Some(images),
            children,
            helpers: heapless::Vec::new(),
            coordinator: coordinator.pid,
            coordinator_unknown: coordinator.pid.is_none(),
            request,
            quit,
            quitting: None,
            quit_tried: false,
            routes: Routes::new(&[], &config.maps),
            evictions,
            code: config.ckpt_exit_code,
            by_signal: config.exit_by_signal,
            interval: config.interval,
            next_tick: config.interval.map(|every| Instant::now() + every),
            timeout: config.ckpt_timeout,
            evict_timeout: config
                .ckpt_timeout
                .or(config.vacate_time.map(protocol::budget)),
            pending: None,
            outcome: Outcome::Running,
            kill_at: None,
            job_ended: false,
        };
        Ok((protocol, job))
    }

    /// Asks the coordinator for a checkpoint, or joins the one under way.
    /// With no `.images` to see it in, none is asked for: an eviction then
    /// ends the computation (124).
    fn ask(&mut self, exit: bool) -> Action {
        let log = self.log;
        let timeout = if exit {
            self.evict_timeout
        } else {
            self.timeout
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        if let Some(p) = &mut self.pending {
            if exit && !p.exit {
                log.info(format_args!(
                    "a checkpoint is under way: it will be the eviction's"
                ));
                p.exit = true;
                p.deadline = deadline.or(p.deadline);
            }
            return Action::Drop;
        }
        if self.images.is_none() {
            self.images = self.fresh_images();
        }
        if self.images.is_none() {
            if exit {
                return self.end_computation(Outcome::NotCheckpointed);
            }
            self.next_tick = self.interval.map(|every| Instant::now() + every);
            return Action::Drop;
        }
        self.pending = Some(Pending {
            exit,
            deadline,
            requester: None,
            tries: 0,
            retry_at: None,
            next_poll: Instant::now() + POLL,
        });
        self.send_request();
        Action::Drop
    }

    fn send_request(&mut self) {
        let log = self.log;
        let Some(p) = &mut self.pending else { return };
        p.tries += 1;
        p.retry_at = None;
        match spawn::spawn(&self.request, self.inherited, false) {
            Ok(pid) => {
                p.requester = Some(pid);
                let _ = self.helpers.push(pid);
                if p.tries == 1 {
                    log.info(format_args!(
                        "checkpoint requested (dmtcp_command --bcheckpoint)"
                    ));
                }
            }
            Err(e) => {
                log.warn(format_args!("dmtcp_command: {e}"));
                p.retry_at = Some(Instant::now() + RETRY);
            }
        }
    }

    /// The eviction's checkpoint is complete, or will not be: end the
    /// computation. A complete one is DMTCP's to end (`--quit`), with
    /// SIGKILL as the fallback; one stuck in a checkpoint is killed now.
    fn end_computation(&mut self, outcome: Outcome) -> Action {
        self.outcome = outcome;
        self.pending = None;
        self.next_tick = None;
        self.send_quit();
        if outcome == Outcome::Checkpointed && self.quitting.is_some() {
            self.kill_at = Some(Instant::now() + QUIT_GRACE);
            return Action::Drop;
        }
        Action::Kill
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

    /// Commits `.images` as the next generation. The restart script's
    /// symlink is left out: DMTCP may make it absolute, into `.images`,
    /// and it would dangle (the script it names is kept).
    fn commit(&self) -> Result<u64, crate::store::Failed> {
        if let Some(images) = &self.images {
            let _ = rustix::fs::unlinkat(images, RESTART_SCRIPT, AtFlags::empty());
        }
        self.store.adopt(IMAGES, self.log)
    }

    /// A periodic checkpoint is complete: commit it while the job runs on.
    fn commit_periodic(&mut self) {
        let log = self.log;
        self.pending = None;
        self.next_tick = self.interval.map(|every| Instant::now() + every);
        if let Err(f) = self.commit() {
            log.warn(format_args!(
                "{}: commit failed: {f}; the last commit is kept",
                self.store.shown.display()
            ));
        }
        self.images = self.fresh_images();
    }

    /// The coordinator is gone: its port file says nothing any more.
    fn forget_port_file(&self) {
        let _ = rustix::fs::unlinkat(self.store.dir(), coordinator::PORT_FILE, AtFlags::empty());
    }

    /// `.images` made anew and opened; `None` (logged) if that failed.
    fn fresh_images(&self) -> Option<OwnedFd> {
        let made = self.store.fresh_scratch(IMAGES).and_then(|()| {
            crate::tree::open_dir(self.store.dir(), IMAGES).map_err(|errno| crate::store::Failed {
                step: "open scratch",
                errno,
            })
        });
        made.map_err(|f| {
            self.log.warn(format_args!(
                "{}/.images: {f}; no checkpoint can be taken until it can be made",
                self.store.shown.display()
            ))
        })
        .ok()
    }
}

impl Protocol for Dmtcp<'_> {
    fn on_signal(&mut self, sig: Sig, job: &Job) -> Action {
        if !self.evictions.contains(&sig) {
            return self.routes.route(sig);
        }
        // Once the computation is being ended, there is nothing to ask.
        if self.outcome == Outcome::Running {
            self.log
                .info(format_args!("{}: eviction, checkpoint and exit", Name(sig)));
            // A stopped computation cannot be checkpointed; it is being
            // evicted: let it run.
            let _ = sys::kill(-job.pid, libc::SIGCONT);
            return self.ask(true);
        }
        Action::Drop
    }

    /// A stopped job is its own business (job control, a debugger).
    fn on_stop(&mut self, _sig: Sig, _log: &Log) -> Action {
        Action::Drop
    }

    fn deadline(&self) -> Option<Instant> {
        let pending = self.pending.map(|p| {
            [Some(p.next_poll), p.retry_at, p.deadline]
                .into_iter()
                .flatten()
                .min()
        });
        [pending.flatten(), self.next_tick, self.kill_at]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_deadline(&mut self, _job: &Job, log: &Log) -> Action {
        let now = Instant::now();
        if self.kill_at.is_some_and(|t| t <= now) {
            self.kill_at = None;
            log.warn(format_args!(
                "the computation is still there {} ms after --quit",
                QUIT_GRACE.as_millis()
            ));
            return Action::Kill;
        }
        let Some(p) = self.pending else {
            if self.next_tick.is_some_and(|t| t <= now) && self.outcome == Outcome::Running {
                self.next_tick = None;
                log.info(format_args!("--interval: periodic checkpoint"));
                return self.ask(false);
            }
            return Action::Drop;
        };
        if self.images.as_ref().is_some_and(|d| complete(d.as_fd())) {
            if p.exit {
                log.info(format_args!("checkpoint complete: ending the computation"));
                return self.end_computation(Outcome::Checkpointed);
            }
            self.commit_periodic();
            return Action::Drop;
        }
        if p.deadline.is_some_and(|t| t <= now) {
            // DMTCP froze the computation for it: it cannot go on either.
            log.warn(format_args!(
                "the {} checkpoint was not complete in time: ending the computation",
                if p.exit { "eviction's" } else { "periodic" }
            ));
            return self.end_computation(Outcome::NotCheckpointed);
        }
        if p.retry_at.is_some_and(|t| t <= now) {
            // With a time limit, try until it; without, MAX_TRIES times.
            let tried_enough = p.deadline.is_none() && p.tries >= MAX_TRIES;
            if tried_enough || self.coordinator_gone() {
                log.warn(format_args!(
                    "no checkpoint could be requested ({} tries{})",
                    p.tries,
                    if self.coordinator_gone() {
                        ", the coordinator is gone"
                    } else {
                        ""
                    }
                ));
                if p.exit {
                    return self.end_computation(Outcome::NotCheckpointed);
                }
                self.pending = None;
                self.next_tick = self.interval.map(|every| now + every);
                return Action::Drop;
            }
            self.send_request();
        }
        if let Some(p) = &mut self.pending {
            p.next_poll = now + POLL;
        }
        Action::Drop
    }

    fn reaped(&mut self, pid: Pid, raw: i32, log: &Log) {
        if !(libc::WIFEXITED(raw) || libc::WIFSIGNALED(raw)) {
            return;
        }
        let ended = Ended { raw, pid };
        self.helpers.retain(|&h| h != pid);
        if Some(pid) == self.coordinator {
            self.coordinator = None;
            if self.job_ended || self.quitting.is_some() {
                log.info(format_args!("the DMTCP coordinator {ended}"));
            } else {
                log.warn(format_args!(
                    "the DMTCP coordinator {ended} while the job runs"
                ));
            }
        } else if let Some(p) = &mut self.pending
            && p.requester == Some(pid)
        {
            p.requester = None;
            if ended.exit_code() != Some(0) {
                let again = format_args!(
                    "dmtcp_command --bcheckpoint {ended}; trying again every {} ms",
                    RETRY.as_millis()
                );
                match p.tries {
                    1 => log.warn(again),
                    _ => log.info(again),
                }
                p.retry_at = Some(Instant::now() + RETRY);
            }
        }
    }

    fn judge(&mut self, ended: Ended, log: &Log) -> Verdict {
        self.job_ended = true;
        // Nothing of the computation may run on (or write) after this.
        supervise::end_group(ended.pid, log);
        match self.outcome {
            Outcome::Checkpointed => match self.commit() {
                Ok(g) => protocol::checkpointed(
                    self.code,
                    self.by_signal,
                    format_args!("{}/gen.{g:010}", self.store.shown.display()),
                    log,
                ),
                Err(f) => {
                    log.warn(format_args!(
                        "{}: commit failed: {f}; the last commit is kept",
                        self.store.shown.display()
                    ));
                    Verdict::Exit(COMMIT_FAILED)
                }
            },
            Outcome::NotCheckpointed => Verdict::Exit(NO_ANSWER),
            Outcome::Running => protocol::guard_collision(ended, self.code, self.by_signal, log),
        }
    }

    /// Waits, at most STOP_GRACE, until nothing ckptrun started is left:
    /// the coordinator exits by itself when its last client has gone
    /// (`--exit-on-last`), else it is told to `--quit` after a moment; the
    /// helpers exit by themselves. Then SIGKILLs what is left (the
    /// coordinator, the helpers, and where /proc shows our namespace every
    /// child ckptrun did not start with: the job's orphans too, ckptrun
    /// being their subreaper) and reaps it. Does not allocate.
    fn end(&mut self, log: &Log) {
        let start = Instant::now();
        let (quit_at, kill_at) = (start + EXIT_ON_LAST, start + STOP_GRACE);
        let give_up = kill_at + STOP_GRACE;
        let mut said = false;
        loop {
            // Reap what has ended; ECHILD: no child is left at all.
            let mut none_left = false;
            loop {
                match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
                    Ok(Some((pid, status))) => {
                        self.reaped(pid.as_raw_nonzero().get(), status.as_raw(), log);
                    }
                    Err(rustix::io::Errno::CHILD) => {
                        none_left = true;
                        break;
                    }
                    _ => break,
                }
            }
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
                    log.warn(format_args!(
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

/// Whether `.images` holds a complete checkpoint: the restart script the
/// coordinator writes last, at least one non-empty `ckpt_*.dmtcp`, and no
/// image still being written (`*.temp`). Does not allocate.
fn complete(images: std::os::fd::BorrowedFd) -> bool {
    // Follows the symlink: its target must be there too.
    if rustix::fs::statat(images, RESTART_SCRIPT, AtFlags::empty()).is_err() {
        return false;
    }
    if rustix::fs::seek(images, SeekFrom::Start(0)).is_err() {
        return false;
    }
    let mut buf = [MaybeUninit::uninit(); 4096];
    let mut entries = RawDir::new(images, &mut buf);
    let mut found = 0;
    while let Some(entry) = entries.next() {
        let Ok(entry) = entry else { return false };
        let name = entry.file_name().to_bytes();
        if name.ends_with(b".temp") {
            return false;
        }
        if is_image(name)
            && rustix::fs::statat(images, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(
                |st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_size > 0,
            )
        {
            found += 1;
        }
    }
    found > 0
}

fn is_image(name: &[u8]) -> bool {
    name.starts_with(b"ckpt_") && name.ends_with(b".dmtcp")
}

/// The images of a committed generation, sorted, as absolute paths.
fn images_of(dir: &Path) -> Result<Vec<OsString>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::usage(dir.display(), e))?;
    let mut images = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::usage(dir.display(), e))?;
        if is_image(entry.file_name().as_bytes()) {
            images.push(entry.path().into_os_string());
        }
    }
    if images.is_empty() {
        return Err(Error::usage(dir.display(), "holds no ckpt_*.dmtcp image"));
    }
    images.sort();
    Ok(images)
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

fn absolute(path: &Path) -> Result<PathBuf, Error> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| Error::usage("the working directory", e))?;
    Ok(cwd.join(path))
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
        assert!(is_image(b"ckpt_foo_4a1b-40000-5f2a.dmtcp"));
        assert!(!is_image(b"ckpt_foo_4a1b.dmtcp.temp"));
        assert!(!is_image(b"dmtcp_restart_script.sh"));
    }
}
