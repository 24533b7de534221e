//! The plan of a dmtcp mode start, before the job runs (it may allocate):
//! find the tools, open the store (its images extracted beside the
//! check, see `restart`), make the images directory, start a private
//! coordinator (DMTCP's temporary files in the store's scratch, see
//! `temporary`), and build every command the run will need: the job's
//! (`dmtcp_launch ... PROGRAM ARG...`, or `dmtcp_restart ... IMAGE...`
//! when the store holds a committed checkpoint), the requests, `--status`
//! and `--quit`. A start that fails from the images directory on leaves
//! no images directory, nor a coordinator, behind.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::mode::dmtcp::checkpoint::{Place, Requests, output_sizes};
use crate::mode::dmtcp::coordinator::{self, Children, Coordinator};
use crate::mode::dmtcp::images::ImagesDir;
use crate::mode::dmtcp::join::Status;
use crate::mode::dmtcp::processes::Processes;
use crate::mode::dmtcp::restart::{Images, Restart};
use crate::mode::dmtcp::tools::{Tools, find_tools};
use crate::mode::stores;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::{sys, tree};
use crate::run::signals::Inherited;
use crate::run::spawn;
use crate::store::scratch::RESTORE;
use crate::store::{Opened, Store};

/// What the plan made ready, for `Dmtcp::new`.
pub struct Parts {
    pub place: Place,
    pub procs: Processes,
    pub requests: Requests,
    pub status: Status,
    /// A restart of this many images (else a launch).
    pub restart: Option<usize>,
}

/// The commands the run needs, built once the coordinator runs.
struct Commands {
    job: spawn::Command,
    requests: Requests,
    status: Status,
}

/// Plans the start; returns its parts and the command that starts the
/// job (`path` is PROGRAM as found).
pub fn make(
    config: &Config,
    path: &Path,
    stdio: &spawn::Stdio,
    inherited: &Inherited,
    log: &Log,
) -> Result<(Parts, spawn::Command), Error> {
    let tools = find_tools(config, path)?;
    let children = Children::before_start(crate::os::procfs::is_ours());
    let outputs = stdio.outputs();
    let mut lines = [0; _];
    let (store, opened) = Store::open(
        (&config.store, &[]),
        config.store_options(),
        (stores::DMTCP, &[output_sizes(&outputs, &mut lines)]),
        Some(&mut Images),
        log,
    )?;
    let cwd = std::env::current_dir().map_err(|e| {
        let errno = rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO);
        Error::os("the working directory", errno)
    })?;
    let scratch_at = absolute(store.scratch_path(), &cwd);
    let start = Start::prepare(config, (&store, opened), (&cwd, &scratch_at), &outputs, log)?;
    temporary(&store, &scratch_at, log).inspect_err(|_| start.images.remove())?;
    let coordinator = Coordinator::start(
        &tools.coordinator,
        store.scratch(),
        &scratch_at,
        start.images.at(),
        &children,
        inherited,
        log,
    )
    .inspect_err(|_| start.images.remove())?;
    let quit = coordinator
        .command(&tools.command, &["--quit"], None)
        .inspect_err(|_| abandon(&coordinator, None, &start, inherited))?;
    let commands = commands(config, path, &tools, &coordinator, &start, log)
        .inspect_err(|_| abandon(&coordinator, Some(&quit), &start, inherited))?;
    let parts = Parts {
        restart: start.restart.as_ref().map(|_| start.paths.len()),
        place: Place {
            store,
            images: start.images,
            cwd,
            outputs,
            frozen: None,
            lines: [0; _],
            lapsed: false,
        },
        procs: Processes::new(children, coordinator.pid, quit),
        requests: commands.requests,
        status: commands.status,
    };
    Ok((parts, commands.job))
}

/// The coordinator of a start that will not happen is ended, and its
/// images directory removed.
fn abandon(
    coordinator: &Coordinator,
    quit: Option<&spawn::Command>,
    start: &Start,
    inherited: &Inherited,
) {
    coordinator.abandon(quit, inherited);
    start.images.remove();
}

/// The job's command and the requests' and `--status`'s.
fn commands(
    config: &Config,
    path: &Path,
    tools: &Tools,
    coordinator: &Coordinator,
    start: &Start,
    log: &Log,
) -> Result<Commands, Error> {
    Ok(Commands {
        job: job_command(config, path, tools, coordinator, start, log)?,
        requests: Requests::new(coordinator, &tools.command, log)?,
        status: Status::new(coordinator, &tools.command)?,
    })
}

/// How this start runs the job: a restart of the store's newest intact
/// checkpoint, or a launch; and the images directory either writes into.
struct Start {
    restart: Option<Restart>,
    images: ImagesDir,
    /// The images, for dmtcp_restart.
    paths: Vec<OsString>,
}

impl Start {
    /// Leaves no images directory behind if it fails.
    fn prepare(
        config: &Config,
        (store, opened): (&Store, Opened),
        (cwd, scratch_at): (&Path, &Path),
        outputs: &[Option<std::os::fd::OwnedFd>; 2],
        log: &Log,
    ) -> Result<Self, Error> {
        let restart = match opened {
            Opened::Restored(g) => {
                let slot = store.slot_of(g.number).to_string();
                Restart::prepare(g, slot, cwd, outputs, log)?
            }
            _ => None,
        };
        let at = match &restart {
            Some(r) => r.images_at.clone(),
            None => absolute(Path::new(&config.images_dir), cwd).join(ImagesDir::new_name()?),
        };
        let images = ImagesDir::make(at)?;
        let restore_at = in_scratch(scratch_at, RESTORE);
        let paths = match &restart {
            Some(r) => r
                .unpack(images.dir(), &restore_at)
                .inspect_err(|_| images.remove())?,
            None => Vec::new(),
        };
        Ok(Self {
            restart,
            images,
            paths,
        })
    }
}

/// The longest DMTCP_TMPDIR ckptrun sets: DMTCP 4.2.0 ends the job (exit
/// 99) when a file it maps has a path of 1024 bytes or more, and the name
/// of its shared area there adds some 60 bytes, the user's and the host's
/// names.
const TMP_PATH_MAX: usize = 512;

/// DMTCP's temporary directory, made empty in the store's scratch
/// (`scratch_at`) and named in ckptrun's environment (DMTCP_TMPDIR) for
/// every DMTCP program it starts, the job included: 4.2.0's coordinator
/// writes its log where that says, whatever its `--tmpdir`. Removed when
/// the computation has ended (`Dmtcp::end`). shim_dmtcp's submit files
/// keep these files in the sandbox too (DMTCP_TMPDIR=./); DMTCP's default,
/// $TMPDIR or /tmp, keeps every coordinator's log, and a 2.3 MB shared
/// area of some computations that did not end cleanly, on the node for
/// ever. A user who set DMTCP_TMPDIR chose; a path too long for DMTCP
/// (TMP_PATH_MAX) leaves DMTCP's default.
fn temporary(store: &Store, scratch_at: &Path, log: &Log) -> Result<(), Error> {
    if crate::os::sys::var_os("DMTCP_TMPDIR").is_some() {
        return Ok(());
    }
    let name = coordinator::TMP;
    let at = crate::os::dir::normalized(&in_scratch(scratch_at, name));
    if at.as_os_str().len() > TMP_PATH_MAX {
        log.info(format_args!(
            "DMTCP's temporary files in its default place: {} is longer than {TMP_PATH_MAX} bytes",
            at.display()
        ));
        return Ok(());
    }
    let failed = |e| Error::os(at.display(), e);
    tree::remove(store.scratch(), name).map_err(failed)?;
    rustix::fs::mkdirat(store.scratch(), name, rustix::fs::Mode::RWXU).map_err(failed)?;
    let entry = [b"DMTCP_TMPDIR=", at.as_os_str().as_bytes()].concat();
    sys::add_env(
        CString::new(entry).map_err(|_| Error::usage(at.display(), "contains a NUL byte"))?,
    );
    Ok(())
}

/// The job's command: `dmtcp_restart` of a generation's images, or
/// `dmtcp_launch PROGRAM ARG...`; joining the coordinator, writing images
/// into the images directory. It dies with ckptrun.
fn job_command(
    config: &Config,
    path: &Path,
    tools: &Tools,
    coordinator: &Coordinator,
    start: &Start,
    log: &Log,
) -> Result<spawn::Command, Error> {
    let mut args = coordinator.address().to_vec();
    args.extend([
        "--join-coordinator".into(),
        "--ckptdir".into(),
        start.images.at().into(),
        // Notes and warnings would land in the job's stderr.
        "--quiet".into(),
        "--quiet".into(),
    ]);
    let job = match &start.restart {
        Some(r) => {
            log.info(format_args!(
                "restart from generation {} ({}): dmtcp_restart, {} image(s)",
                r.generation,
                r.slot,
                start.paths.len()
            ));
            args.extend(start.paths.iter().cloned());
            spawn::Command::new(&tools.restart, "dmtcp_restart".as_ref(), &args, &[])?
        }
        None => {
            log.info(format_args!(
                "fresh start: dmtcp_launch, images in {}",
                start.images.at().display()
            ));
            if ckptrun_compresses() {
                args.push("--no-gzip".into());
            }
            args.push(program_argument(&config.program, path));
            spawn::Command::new(&tools.launch, "dmtcp_launch".as_ref(), &args, &config.args)?
        }
    };
    Ok(job.dies_with_ckptrun())
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

/// The path of `name` in the store's scratch, at `scratch_at`.
fn in_scratch(scratch_at: &Path, name: &std::ffi::CStr) -> PathBuf {
    scratch_at.join(std::ffi::OsStr::from_bytes(name.to_bytes()))
}

fn absolute(path: &Path, cwd: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// Whether DMTCP writes its images raw (`dmtcp_launch --no-gzip`), for
/// ckptrun to compress as it commits them: evictions and restarts take
/// half the time or less, for no more bytes (BENCHMARKS.md, "Who
/// compresses a DMTCP job's images"). A user who set DMTCP_GZIP chose.
/// The job's environment keeps the choice across restarts.
fn ckptrun_compresses() -> bool {
    crate::os::sys::var_os("DMTCP_GZIP").is_none()
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
}
