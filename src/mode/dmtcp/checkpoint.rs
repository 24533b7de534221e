//! Checkpoint requests, and the commit of what they make.
//!
//! An eviction or an `--interval` tick asks the coordinator for a
//! checkpoint (`Pending`): `--kcheckpoint` to checkpoint and then kill
//! the computation, so that nothing it writes after the checkpoint is
//! written again after the restart; `--bcheckpoint` to keep it running
//! (`--interval-continue`). Each poll of the images directory says
//! whether it is complete, out of time, or to be asked for again: a
//! request that shows no sign of taking effect (a slow restart, say) is
//! made again, first after RETRY, then twice as long each time, at most
//! RETRY_MAX; asking again is harmless, the coordinator refuses a
//! checkpoint while one is under way. A `--bcheckpoint` it accepted is
//! not made again (its refusal would land in HTCondor's error file).
//! Without a time limit, a request that never takes is given up after
//! GIVE_UP.
//!
//! A complete checkpoint's images are committed as the store's next
//! generation, with what a restart needs to know (`Place::commit`).

use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::mode::dmtcp::coordinator::Coordinator;
use crate::mode::dmtcp::images::{ImagesDir, Look};
use crate::mode::dmtcp::processes::Processes;
use crate::os::decimal;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::sys::Pid;
use crate::run::signals::Inherited;
use crate::run::spawn;
use crate::store::Store;
use crate::store::generation::{Failed, at};

/// How often the images directory is looked at while a checkpoint is
/// under way.
pub const POLL: Duration = Duration::from_millis(10);
const RETRY: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);
pub const GIVE_UP: Duration = Duration::from_secs(30);

/// The requests, built before the job starts.
pub struct Requests {
    kill: spawn::Command,
    keep: spawn::Command,
}

impl Requests {
    /// What `dmtcp_command` says goes to the log (`Log::sink`), not to
    /// standard error: HTCondor's error file. A request made again while
    /// its checkpoint is under way is refused, with a line that says so.
    pub fn new(coordinator: &Coordinator, tool: &Path, log: &Log) -> Result<Self, Error> {
        Ok(Self {
            kill: coordinator.command(tool, &["--kcheckpoint"], Some(log.sink()?))?,
            keep: coordinator.command(tool, &["--bcheckpoint"], Some(log.sink()?))?,
        })
    }
}

/// What a checkpoint asks of the computation.
#[derive(Clone, Copy)]
pub enum Asks {
    /// Run on after it (`--bcheckpoint`): a periodic checkpoint.
    RunOn,
    /// Run on after it, then take one that ends the computation: an
    /// eviction came while a `--bcheckpoint` was under way. `by`: the
    /// eviction's time limit, counted from the eviction.
    RunOnThenExit { by: Option<Instant> },
    /// End with it (`--kcheckpoint`): DMTCP kills the computation once
    /// it is checkpointed.
    Exit,
}

/// A checkpoint requested and not yet complete.
#[derive(Clone, Copy)]
pub struct Pending {
    pub asks: Asks,
    /// An eviction asked for it (else `--interval`).
    pub evicted: bool,
    pub deadline: Option<Instant>,
    asked: Instant,
    /// The `dmtcp_command` making the request, while it runs.
    requester: Option<Pid>,
    pub tries: u32,
    /// When to make the request again, until it shows in the images.
    again_at: Option<Instant>,
    next_poll: Instant,
}

/// What a poll of the images directory found.
pub enum Poll {
    Complete,
    /// Its time limit passed first.
    OutOfTime,
    /// No checkpoint could be taken: given up, or the coordinator is gone.
    GivenUp,
    /// It does not show yet: time to ask again.
    AskAgain,
    /// DMTCP is writing its images: the computation is frozen.
    Writing,
    Wait,
}

impl Pending {
    pub fn new(asks: Asks, evicted: bool, deadline: Option<Instant>, now: Instant) -> Self {
        Self {
            asks,
            evicted,
            deadline,
            asked: now,
            requester: None,
            tries: 0,
            again_at: None,
            next_poll: now + POLL,
        }
    }

    /// Its `dmtcp_command` still runs.
    pub fn asking(&self) -> bool {
        self.requester.is_some()
    }

    /// The computation ends with it, or after it.
    pub fn exit(&self) -> bool {
        !matches!(self.asks, Asks::RunOn)
    }

    /// An eviction while this runs: it is committed, then one that ends
    /// the computation is taken (so that nothing the job writes after it
    /// is written again on restart). Without a time limit, it is given up
    /// GIVE_UP after the eviction, not after the request: the job may
    /// have been stopped since (HTCondor's suspend stops ckptrun too).
    pub fn then_exit(&mut self, evicted: bool, deadline: Option<Instant>, log: &Log) {
        if matches!(self.asks, Asks::RunOn) {
            self.asked = Instant::now();
            log.info(format_args!(
                "a checkpoint is under way: it is committed, then the eviction's taken"
            ));
            self.asks = Asks::RunOnThenExit { by: deadline };
            self.evicted |= evicted;
            self.deadline = deadline.or(self.deadline);
        }
    }

    /// When it next wants a look.
    pub fn wake_at(&self) -> Option<Instant> {
        crate::run::protocol::earliest(&[Some(self.next_poll), self.again_at, self.deadline])
    }

    /// Sends the request (`joined`: the coordinator has seen the job
    /// through), or before that only plans to.
    pub fn send(
        &mut self,
        joined: bool,
        (requests, procs, inherited): (&Requests, &mut Processes, &Inherited),
        log: &Log,
    ) {
        if !joined {
            self.again_at = Some(Instant::now() + POLL);
            return;
        }
        self.tries += 1;
        let backoff = RETRY * 2u32.saturating_pow(self.tries.min(8) - 1);
        self.again_at = Some(Instant::now() + backoff.min(RETRY_MAX));
        if self.requester.is_some() {
            return;
        }
        let (request, verb) = match self.asks {
            Asks::Exit => (&requests.kill, "--kcheckpoint"),
            // Once it is committed, one that ends the computation.
            Asks::RunOn | Asks::RunOnThenExit { .. } => (&requests.keep, "--bcheckpoint"),
        };
        match procs.helper(request, inherited) {
            Ok(pid) => {
                self.requester = Some(pid);
                if self.tries == 1 {
                    log.info(format_args!("checkpoint requested (dmtcp_command {verb})"));
                }
            }
            Err(e) => log.warn(format_args!("dmtcp_command: {e}")),
        }
    }

    /// The `dmtcp_command` `pid` has ended, `accepted` if it exited 0.
    /// DMTCP 4.2.0's `--bcheckpoint` returns at once, 0 once the
    /// checkpoint has begun, 2 (and a line on standard error: HTCondor's
    /// error file) for one asked for while a checkpoint is under way: so
    /// a run-on request accepted is not made again, only given up after
    /// GIVE_UP if it never shows. (`--kcheckpoint` exits 2 either way.)
    pub fn requester_ended(&mut self, pid: Pid, accepted: bool) {
        if self.requester == Some(pid) {
            self.requester = None;
            if accepted && !matches!(self.asks, Asks::Exit) {
                self.again_at = Some(self.asked + GIVE_UP);
            }
        }
    }

    /// Looks at the images directory now.
    pub fn poll(&mut self, images: &ImagesDir, procs: &Processes, now: Instant) -> Poll {
        let look = images.look();
        if look == Look::Complete {
            return Poll::Complete;
        }
        if self.deadline.is_some_and(|t| t <= now) {
            return Poll::OutOfTime;
        }
        self.next_poll = now + POLL;
        if self.again_at.is_some_and(|t| t <= now) && look == Look::Nothing {
            let given_up = self.deadline.is_none() && now - self.asked >= GIVE_UP;
            if given_up || procs.coordinator_gone() {
                return Poll::GivenUp;
            }
            return Poll::AskAgain;
        }
        if look == Look::Writing {
            return Poll::Writing;
        }
        Poll::Wait
    }
}

/// Where the computation's state lives.
pub struct Place {
    pub store: Store,
    /// Where DMTCP writes images.
    pub images: ImagesDir,
    /// ckptrun's working directory, recorded with each generation.
    pub cwd: PathBuf,
    /// `--stdout` and `--stderr`, whose sizes each generation records.
    pub outputs: [Option<OwnedFd>; 2],
    /// The lines of the outputs' sizes while DMTCP wrote the images of
    /// the run-on checkpoint under way, if seen (see `note_frozen`): the
    /// first `frozen` bytes of `lines`.
    pub frozen: Option<usize>,
    pub lines: Lines,
    /// A run-on checkpoint was given up while DMTCP may still take it: if
    /// it does, later, the outputs' sizes at its freeze are known only if
    /// its images are seen being written (see `Dmtcp::given_up`).
    pub lapsed: bool,
}

impl Place {
    /// A run-on checkpoint notes the outputs' sizes the first time DMTCP
    /// is seen writing its images: the computation is frozen then, its
    /// output as at the checkpoint. A process resumes as soon as its own
    /// image is written, well before the checkpoint shows complete (the
    /// coordinator's restart script came some 48 ms later here), so sizes
    /// read at the commit would hold output a restart writes again; and
    /// the sizes count only if no image was written by the time they
    /// were read (each process resumes on its own).
    pub fn note_frozen(&mut self) {
        if self.frozen.is_none() {
            let len = output_sizes(&self.outputs, &mut self.lines).len();
            if self.images.look() == Look::Writing {
                self.frozen = Some(len);
            }
        }
    }

    /// What shows of a lapsed checkpoint (see `lapsed`), if there is
    /// one: one DMTCP has completed since is discarded, before a request
    /// could have DMTCP write over it (then none). One under way is not
    /// asked for again: a request would be taken once it is complete, and
    /// DMTCP would write the next checkpoint where this one's are emptied.
    #[inline(never)]
    pub fn late(&mut self, log: &Log) -> Option<Look> {
        if !self.lapsed {
            return None;
        }
        let look = self.images.look();
        if look == Look::Complete {
            self.discard(log);
            return None;
        }
        Some(look)
    }

    /// The images of a lapsed checkpoint, not seen being written, are
    /// removed: committed, a restart from them would cut the outputs back
    /// to sizes later than theirs, and write again what was written since.
    pub fn discard(&mut self, log: &Log) {
        log.warn(format_args!(
            "a checkpoint given up on was completed late, not seen being written: discarded (the outputs' sizes at it are not known)"
        ));
        self.lapsed = false;
        let _ = self.images.empty();
    }

    /// Commits the images as the next generation, with what a restart
    /// needs to know (`images-dir PATH\ncwd PATH\n`, and `stdout-size
    /// N\n`, `stderr-size N\n` for each output open: as they were when
    /// frozen, else now); then empties the images directory. The lines go as
    /// parts, put together only in the child that writes the archive: no
    /// description on this stack.
    pub fn commit(&mut self, log: &Log) -> Result<u64, Failed> {
        let sizes = match self.frozen.take() {
            Some(len) => len,
            None => output_sizes(&self.outputs, &mut self.lines).len(),
        };
        let extra = [
            b"images-dir ",
            self.images.at().as_os_str().as_bytes(),
            b"\ncwd ",
            self.cwd.as_os_str().as_bytes(),
            b"\n",
            &self.lines[..sizes],
        ];
        let done = self.store.commit_dir(self.images.dir(), &extra, log);
        if done.is_ok() {
            self.images
                .empty()
                .map_err(at("empty the images directory"))?;
        }
        done
    }
}

/// `stdout-size N\nstderr-size N\n` for `--stdout` and `--stderr` (N
/// their sizes now; no line for one not given), written into `lines`; a
/// restart from the generation they describe cuts them back (see
/// `restart`).
pub fn output_sizes<'a>(outputs: &[Option<OwnedFd>; 2], lines: &'a mut Lines) -> &'a [u8] {
    let mut len = 0;
    let keys = [&b"stdout-size "[..], b"stderr-size "];
    for (key, output) in keys.into_iter().zip(outputs) {
        if let Some(st) = output.as_ref().and_then(|f| rustix::fs::fstat(f).ok()) {
            let mut digits = [0u8; 20];
            for part in [key, decimal::write(&mut digits, st.st_size as u64), b"\n"] {
                lines[len..len + part.len()].copy_from_slice(part);
                len += part.len();
            }
        }
    }
    &lines[..len]
}

/// Room for `output_sizes`' two lines.
pub type Lines = [u8; 2 * (12 + 20 + 1)];
