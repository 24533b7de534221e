//! The fake DMTCP 4.2.0 tools (`examples/fake_dmtcp/`) and the job they
//! can checkpoint (`examples/dmtcp_job.rs`), on their own, driven as
//! processes: each behaviour of the real tools they reproduce (as seen of
//! DMTCP 4.2.0, or read in its source), the checkpoint/restart cycle, and
//! the faults they inject for tests/dmtcp.rs.

mod common;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A sandbox with the fake tools in `bin/` and the job as `job`; kills
/// what it started when dropped, also when a test fails.
struct Dmtcp {
    sandbox: Sandbox,
    bin: PathBuf,
    children: Vec<Child>,
    /// Processes that are not our children (the daemon, the job's child).
    strays: Vec<i32>,
}

impl Dmtcp {
    fn new(name: &str) -> Self {
        let sandbox = Sandbox::new(&format!("fake-dmtcp-{name}"));
        let bin = sandbox.path("bin");
        install_dmtcp_tools(&bin);
        link_or_copy(&dmtcp_job(), &sandbox.path("job"));
        Self {
            sandbox,
            bin,
            children: Vec::new(),
            strays: Vec::new(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.sandbox.path(name)
    }

    /// `TOOL ARGS...` in the sandbox, with the tools first in PATH.
    fn tool(&self, tool: &str, args: &[&str]) -> Command {
        self.program(&self.bin.join(tool), args)
    }

    /// `PROGRAM ARGS...` in the sandbox, with the tools first in PATH.
    fn program(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.args(args)
            .current_dir(&self.sandbox.dir)
            .env("PATH", format!("{}:{path}", self.bin.display()))
            .env_remove("DMTCP_COORD_HOST")
            .env_remove("DMTCP_COORD_PORT")
            .env_remove("DMTCP_QUIET")
            .env_remove("DMTCP_CHECKPOINT_DIR")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `TOOL ARGS...` to the end, output captured.
    fn run(&self, tool: &str, args: &[&str]) -> Output {
        output(self.tool(tool, args))
    }

    /// Keeps `cmd` running as ours (killed at the end); its index.
    fn spawn(&mut self, cmd: &mut Command) -> usize {
        self.children.push(cmd.spawn().unwrap());
        self.children.len() - 1
    }

    fn pid(&self, child: usize) -> i32 {
        self.children[child].id() as i32
    }

    /// Waits (at most 10 s) for child `child` to end.
    fn wait(&mut self, child: usize) -> ExitStatus {
        wait_at_most(&mut self.children[child], Duration::from_secs(10))
            .unwrap_or_else(|| panic!("child {child} did not end within 10 s"))
    }

    fn running(&mut self, child: usize) -> bool {
        self.children[child].try_wait().unwrap().is_none()
    }

    /// A coordinator in the foreground on a free port (`--port 0`, the port
    /// file read as ckptrun would); (its index, its port).
    fn coordinator(&mut self, extra: &[&str]) -> (usize, u16) {
        let port_file = self.path(&format!("port.{}", self.children.len()));
        let mut args = vec!["--port", "0", "--port-file", port_file.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut cmd = self.tool("dmtcp_coordinator", &args);
        cmd.stderr(Stdio::null());
        let child = self.spawn(&mut cmd);
        (child, read_port(&port_file))
    }

    /// `dmtcp_launch --coord-port PORT --join-coordinator ./job ARGS...`,
    /// the job's stdout appended to `out` and its pid file `pid`; waits
    /// until it has joined.
    fn launch(&mut self, port: u16, env: &[(&str, &str)], args: &[&str]) -> usize {
        let _ = std::fs::remove_file(self.path("pid"));
        let mut cmd = self.launch_command(port, args);
        cmd.envs(env.iter().copied());
        let child = self.spawn(&mut cmd);
        wait_until("the job has joined", || self.path("pid").exists());
        child
    }

    fn launch_command(&self, port: u16, args: &[&str]) -> Command {
        let port = port.to_string();
        let mut all = vec!["--coord-port", &port, "--join-coordinator", "./job"];
        all.extend_from_slice(args);
        let mut cmd = self.tool("dmtcp_launch", &all);
        cmd.stdout(append(&self.path("out")))
            .env("DMTCP_JOB_PIDFILE", self.path("pid"));
        cmd
    }

    /// `dmtcp_command --coord-port PORT VERB`.
    fn command(&self, port: u16, verb: &str) -> Output {
        self.run("dmtcp_command", &["--coord-port", &port.to_string(), verb])
    }

    fn lines(&self, name: &str) -> usize {
        std::fs::read(self.path(name)).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
    }
}

impl Drop for Dmtcp {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for &pid in &self.strays {
            if alive(pid) {
                signal(pid, libc::SIGKILL);
            }
        }
    }
}

/// `path` opened for appending, as HTCondor opens a job's stdout.
fn append(path: &Path) -> File {
    File::options()
        .append(true)
        .create(true)
        .open(path)
        .unwrap()
}

/// The port in `file`, once it holds one.
fn read_port(file: &Path) -> u16 {
    let mut port = None;
    wait_until("the port file holds a port", || {
        port = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.parse().ok());
        port.is_some()
    });
    port.unwrap()
}

/// A port nothing listens on (just freed).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Processes whose command line contains `needle` as one argument.
fn pids_with_arg(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline
            .split(|&b| b == 0)
            .any(|arg| arg == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// The restart script symlink and where it points, once it exists.
fn wait_for_symlink(dir: &Path) -> PathBuf {
    let link = dir.join("dmtcp_restart_script.sh");
    wait_until("dmtcp_restart_script.sh appears", || {
        link.symlink_metadata().is_ok()
    });
    std::fs::read_link(&link).unwrap()
}

/// The image being written in `dir`, once it is there.
fn wait_for_temp(dir: &Path) -> PathBuf {
    let mut temp = None;
    wait_until("a .temp image", || {
        temp = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(".dmtcp.temp"));
        temp.is_some()
    });
    temp.unwrap()
}

/// The complete images in `dir`.
fn images_in(dir: &Path) -> Vec<PathBuf> {
    let mut images: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dmtcp"))
        .collect();
    images.sort();
    images
}

/// The one complete image in `dir`.
fn image_in(dir: &Path) -> PathBuf {
    let images = images_in(dir);
    assert_eq!(images.len(), 1, "{images:?}");
    images.into_iter().next().unwrap()
}

/// What the job writes to stdout, run to its end with `args` without
/// DMTCP.
fn reference(d: &Dmtcp, args: &[&str]) -> String {
    let out = output(
        Command::new(d.path("job"))
            .args(args)
            .env_remove("FAKE_DMTCP_COORD")
            .env_remove("DMTCP_JOB_END"),
    );
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The first `n` lines of `text`.
fn first_lines(text: &str, n: usize) -> String {
    text.split_inclusive('\n').take(n).collect()
}

/// The step an image says the job resumes at.
fn step_in(image: &Path) -> usize {
    let bytes = std::fs::read(image).unwrap();
    let header = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 16)]);
    let hex = header
        .lines()
        .find_map(|l| l.strip_prefix("state="))
        .unwrap();
    let state: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    String::from_utf8(state).unwrap().parse().unwrap()
}

#[test]
fn the_coordinator_refuses_what_4_2_0_refuses() {
    let d = Dmtcp::new("options");
    // No --background in DMTCP 4 (the old shim passed it); no --opt=value.
    for bad in [
        &["--background"][..],
        &["--bogus"],
        &["--coord-port=0"],
        &["-x"],
    ] {
        let out = d.run("dmtcp_coordinator", bad);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(
            stderr(&out).starts_with("Usage: dmtcp_coordinator [OPTIONS] [port]\n"),
            "{bad:?}: {}",
            stderr(&out)
        );
    }
    // What this fake does not model is refused, not ignored.
    let out = d.run("dmtcp_coordinator", &["--timeout", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not implemented"), "{}", stderr(&out));
    // Asked to fail: exit 3 before binding, no port file.
    let out = output(
        d.tool(
            "dmtcp_coordinator",
            &["--port", "0", "--port-file", "pf", "--daemon"],
        )
        .env("FAKE_DMTCP_COORD_FAIL", "1"),
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!stderr(&out).is_empty());
    assert!(!d.path("pf").exists());
    // Under any other name the binary only says what it is.
    let out = output(Command::new(fake_dmtcp()));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_daemon_coordinator_is_as_4_2_0s() {
    let mut d = Dmtcp::new("daemon");
    let port_file = d.path("coord.port");
    let port_file_arg = port_file.to_str().unwrap().to_string();
    // As ckptrun starts it: quiet twice, argv[0] its bare name.
    let out = output(
        d.tool(
            "dmtcp_coordinator",
            &[
                "--quiet",
                "--quiet",
                "--coord-port",
                "0",
                "--port-file",
                &port_file_arg,
                "--exit-on-last",
                "--daemon",
            ],
        )
        .arg0("dmtcp_coordinator"),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "");
    // The port is written before the process started exits.
    let text = std::fs::read_to_string(&port_file).expect("the port file when the launcher exits");
    let port: u16 = text.parse().expect("decimal, no newline");
    assert_eq!(
        std::fs::metadata(&port_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let daemon = pids_with_arg(&port_file_arg);
    assert_eq!(daemon.len(), 1, "{daemon:?}");
    let daemon = daemon[0];
    d.strays.push(daemon);
    // Not a session of its own: 4.2.0 does not call setsid.
    assert_eq!(
        stat_field(daemon, 6).unwrap(),
        stat_field(std::process::id() as i32, 6).unwrap()
    );
    // Its names, as 4.2.0 rewrites them; its exe and other arguments stay.
    let comm = std::fs::read_to_string(format!("/proc/{daemon}/comm")).unwrap();
    assert_eq!(comm, "dmtcp_coor:7779\n");
    let cmdline = std::fs::read(format!("/proc/{daemon}/cmdline")).unwrap();
    let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    assert!(
        argv[0].starts_with(b" -p7779"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    assert!(
        argv.windows(2)
            .any(|w| w == [&b"--port-file"[..], port_file_arg.as_bytes()]),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    let exe = std::fs::read_link(format!("/proc/{daemon}/exe")).unwrap();
    assert_eq!(exe.file_name().unwrap(), "dmtcp_coordinator");
    // --exit-on-last --daemon: every signal but SIGALRM blocked.
    signal(daemon, libc::SIGTERM);
    signal(daemon, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    assert!(alive(daemon), "SIGTERM ended the coordinator");

    let out = d.command(port, "--status");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("NUM_PEERS=0"), "{}", stdout(&out));
    let out = d.command(port, "--quit");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_until("the daemon has quit", || !alive(daemon));
    assert!(!port_file.exists(), "the port file is left");

    // Not quiet: its banner on stderr. With a long argv[0], ` --port 7779`.
    let mut cmd = d.tool(
        "dmtcp_coordinator",
        &["-p0", "--port-file", &port_file_arg, "--daemon"],
    );
    let out = output(&mut cmd);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).starts_with("dmtcp_coordinator starting...")
            && stderr(&out).contains("Backgrounding..."),
        "{}",
        stderr(&out)
    );
    read_port(&port_file);
    let daemon = pids_with_arg(&port_file_arg)[0];
    d.strays.push(daemon);
    let cmdline = std::fs::read(format!("/proc/{daemon}/cmdline")).unwrap();
    assert!(
        cmdline.starts_with(b" --port 7779\0"),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    // Without --exit-on-last, SIGTERM ends it.
    signal(daemon, libc::SIGTERM);
    wait_until("SIGTERM ended it", || !alive(daemon));
}

#[test]
fn fault_a_port_file_written_late() {
    let mut d = Dmtcp::new("late-port");
    let port_file = d.path("coord.port");
    let port_file_arg = port_file.to_str().unwrap().to_string();
    let status = d
        .tool(
            "dmtcp_coordinator",
            &["-q", "-p", "0", "--port-file", &port_file_arg, "--daemon"],
        )
        .env("FAKE_DMTCP_PORT_DELAY_MS", "300")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!port_file.exists(), "written before the launcher exited");
    d.strays.extend(pids_with_arg(&port_file_arg));
    let port = read_port(&port_file);
    assert_eq!(d.command(port, "--quit").status.code(), Some(0));
}

#[test]
fn dmtcp_command_reads_its_command_line_as_4_2_0() {
    let mut d = Dmtcp::new("command");
    let (coordinator, port) = d.coordinator(&[]);
    let p = port.to_string();
    let out = d.run(
        "dmtcp_command",
        &["--coord-host", "127.0.0.1", "-p", &p, "--status"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "Coordinator:\n  Host: 127.0.0.1\n  Port: {port}\nStatus...\n  NUM_PEERS=0\n  \
             RUNNING=no\n  CKPT_INTERVAL=0 (checkpoint manually)\n"
        )
    );
    // The last command given wins; -pN.
    let out = d.run("dmtcp_command", &[&format!("-p{port}"), "-q", "-s"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("  Host: localhost\n"),
        "{}",
        stdout(&out)
    );
    assert!(d.running(coordinator));
    // Nothing to checkpoint: --kcheckpoint says it was done anyway.
    let out = d.command(port, "--kcheckpoint");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout(&out), "Computation was checkpointed and killed.\n");
    for verb in ["--bcheckpoint", "-bc", "--checkpoint", "-c"] {
        let out = d.command(port, verb);
        assert_eq!(out.status.code(), Some(2), "{verb}");
        assert!(
            stderr(&out).starts_with("Error, computation not in running state."),
            "{verb}: {}",
            stderr(&out)
        );
    }
    for bad in ["--bogus", "--xyz", "-b", "--kill-me-now"] {
        let out = d.command(port, bad);
        let code = if bad == "--kill-me-now" { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(code), "{bad}: {}", stderr(&out));
    }
    let out = d.run("dmtcp_command", &["--help"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).starts_with("Usage:  dmtcp_command"));
    let out = d.command(port, "-i5");
    assert_eq!(stdout(&out), "Interval changed to 5\n");
    assert!(stdout(&d.command(port, "-s")).contains("  CKPT_INTERVAL=5\n"));
    // --quiet is not an option of dmtcp_command: `q`, quit.
    let out = d.command(port, "--quiet");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    let out = d.command(port, "--status");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "Coordinator not found. Please check port and host.\n"
    );
}

#[test]
fn launch_reads_its_command_line_as_4_2_0() {
    let mut d = Dmtcp::new("launch-errors");
    let (_, port) = d.coordinator(&[]);
    let p = port.to_string();
    // `--` and unknown options: `Invalid Argument` and the usage on stdout.
    let eq = format!("--coord-port={port}");
    for args in [
        &["-p", &p, "--", "./job", "1", "1"][..],
        &["-p", &p, "--bogus", "./job"],
        &[&eq, "-j", "./job", "1", "1"],
    ] {
        let out = d.run("dmtcp_launch", args);
        assert_eq!(out.status.code(), Some(99), "{args:?}");
        assert!(
            stdout(&out).starts_with("Invalid Argument\nUsage: dmtcp_launch"),
            "{args:?}: {}",
            stdout(&out)
        );
    }
    let out = d.run("dmtcp_launch", &["-p", &p, "-j", "--pathvirt", "./job"]);
    assert_eq!(out.status.code(), Some(99));
    assert!(stderr(&out).contains("not implemented"), "{}", stderr(&out));
    for args in [
        &["-p", &p][..],
        &[],
        &["-p", &p, "-j", "-q", "-q", "./nonesuch"],
    ] {
        let out = d.run("dmtcp_launch", args);
        assert_eq!(out.status.code(), Some(99), "{args:?}: {}", stderr(&out));
    }
    let free = free_port().to_string();
    let out = d.run(
        "dmtcp_launch",
        &["-h", "127.0.0.1", "-p", &free, "-j", "./job", "1", "1"],
    );
    assert_eq!(out.status.code(), Some(99));
    assert_eq!(
        stderr(&out),
        "dmtcp_launch: Coordinator not found, but --join was specified. Exiting.\n"
    );
}

#[test]
fn launch_execs_the_program_with_its_arguments_untouched() {
    let mut d = Dmtcp::new("launch-exec");
    let (_, port) = d.coordinator(&[]);
    let coord = format!("-p{port}");
    // PATH search for `sh`; options after PROGRAM are the program's.
    let script = r#"echo "$$ $FAKE_DMTCP_COORD $FAKE_DMTCP_CKPTDIR ${FAKE_DMTCP_RESTORE-unset} $DMTCP_QUIET"
        for a; do printf '[%s]' "$a"; done"#;
    let mut cmd = d.tool(
        "dmtcp_launch",
        &[
            &coord,
            "-j",
            "--ckptdir",
            "images",
            "-q",
            "--quiet",
            "sh",
            "-c",
            script,
            "sh",
            "--",
            "a  b",
            "-j",
            "--coord-port",
        ],
    );
    cmd.env("FAKE_DMTCP_RESTORE", "stale")
        .stdout(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let out = Running::new(child).finish_output();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{pid} 127.0.0.1:{port} {} unset 2\n[--][a  b][-j][--coord-port]",
            d.path("images").display()
        )
    );
}

#[test]
fn kcheckpoint_returns_early_then_the_computation_exits_0_with_its_checkpoint() {
    let mut d = Dmtcp::new("kcheckpoint");
    std::fs::create_dir(d.path("images")).unwrap();
    let args = ["200", "10", "x  y"];
    let expected = reference(&d, &args);
    let port_file = d.path("port.0");
    let (coordinator, port) = d.coordinator(&["--exit-on-last", "--ckptdir", "images"]);
    let mut all = vec!["--ckptdir", "images", "-p"];
    let p = port.to_string();
    all.push(&p);
    all.extend(["-j", "./job"]);
    all.extend(args);
    let mut cmd = d.tool("dmtcp_launch", &all);
    cmd.stdout(append(&d.path("out")))
        .env("DMTCP_JOB_PIDFILE", d.path("pid"))
        // A 4 MiB image at 100 ms per MiB: about 0.4 s.
        .env("FAKE_DMTCP_IMAGE_KB", "4096")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", "100");
    let job = d.spawn(&mut cmd);
    wait_until("the job runs", || d.lines("out") >= 3);

    let out = d.command(port, "--kcheckpoint");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Computation was checkpointed and killed.\n");
    // It returned as soon as the checkpoint began.
    assert!(
        d.path("images/dmtcp_restart_script.sh")
            .symlink_metadata()
            .is_err(),
        "--kcheckpoint returned after the checkpoint completed"
    );
    assert!(d.running(job));
    let status = d.wait(job);
    assert_eq!(status.code(), Some(0), "{status:?}");
    wait_for_symlink(&d.path("images"));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert!(!port_file.exists(), "the port file is left");
    let image = image_in(&d.path("images"));
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 4096 * 1024);
    // Killed with its checkpoint: nothing written after it.
    let out = std::fs::read_to_string(d.path("out")).unwrap();
    assert_eq!(out, first_lines(&expected, step_in(&image)));

    // The restart resumes to the uninterrupted output.
    let (coordinator, port) = d.coordinator(&["--exit-on-last"]);
    let mut restart = d.tool(
        "dmtcp_restart",
        &[
            "-p",
            &port.to_string(),
            "-j",
            "-q",
            "-q",
            image.to_str().unwrap(),
        ],
    );
    restart.stdout(append(&d.path("out")));
    let restarted = d.spawn(&mut restart);
    assert_eq!(d.wait(restarted).code(), Some(0));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert_eq!(std::fs::read_to_string(d.path("out")).unwrap(), expected);
}

#[test]
fn bcheckpoint_does_not_block_and_the_job_runs_on() {
    let mut d = Dmtcp::new("bcheckpoint");
    std::fs::create_dir(d.path("scripts")).unwrap();
    std::fs::create_dir(d.path("images")).unwrap();
    // What 4.2.0's coordinator unlinks: the name in its working directory.
    std::fs::write(d.path("dmtcp_restart_script.sh"), "mine\n").unwrap();
    let (coordinator, port) = d.coordinator(&["--ckptdir", "scripts"]);
    let port_arg = port.to_string();
    let mut cmd = d.tool(
        "dmtcp_launch",
        &[
            "-p",
            &port_arg,
            "-j",
            "--ckptdir",
            "images",
            "./job",
            "1000",
            "10",
        ],
    );
    cmd.stdout(append(&d.path("out")))
        .env("DMTCP_JOB_PIDFILE", d.path("pid"))
        .env("FAKE_DMTCP_IMAGE_KB", "4096")
        .env("FAKE_DMTCP_WRITE_MS_PER_MB", "100");
    let job = d.spawn(&mut cmd);
    wait_until("the job has joined", || d.path("pid").exists());
    let pid = d.pid(job);
    assert_eq!(
        std::fs::read_to_string(d.path("pid")).unwrap(),
        pid.to_string()
    );
    wait_until("the job runs", || d.lines("out") >= 3);
    let out = d.command(port, "--list");
    assert!(
        stdout(&out).contains(&format!("job[{pid}:{pid}]")),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&d.command(port, "-s")).contains("RUNNING=yes"));

    let out = d.command(port, "--bcheckpoint");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        d.path("scripts/dmtcp_restart_script.sh")
            .symlink_metadata()
            .is_err(),
        "--bcheckpoint returned after the checkpoint completed"
    );
    // The image is written as a .temp first; meanwhile the job is frozen,
    // not running, and no second checkpoint can begin.
    let temp = wait_for_temp(&d.path("images"));
    let frozen_at = d.lines("out");
    assert!(stdout(&d.command(port, "-s")).contains("RUNNING=no"));
    let second = d.command(port, "--checkpoint");
    std::thread::sleep(Duration::from_millis(100));
    if temp.exists() {
        assert_eq!(
            d.lines("out"),
            frozen_at,
            "the job ran during the checkpoint"
        );
        assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    }

    let target = wait_for_symlink(&d.path("scripts"));
    let image = image_in(&d.path("images"));
    assert!(!temp.exists());
    let name = image.file_name().unwrap().to_str().unwrap();
    let id = name
        .strip_prefix("ckpt_job_")
        .and_then(|n| n.strip_suffix(".dmtcp"))
        .unwrap();
    assert_eq!(target, Path::new(&format!("dmtcp_restart_script_{id}.sh")));
    assert!(
        !d.path("dmtcp_restart_script.sh").exists(),
        "the coordinator left the name in its working directory"
    );
    let script = d.path("scripts").join(&target);
    assert_ne!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o100,
        0
    );
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.starts_with("#!/bin/sh\n"), "{text}");
    assert!(text.contains("dmtcp_restart --join-coordinator"), "{text}");
    assert!(text.contains(&format!("'{}'", image.display())), "{text}");
    let bytes = std::fs::read(&image).unwrap();
    assert_eq!(bytes.len(), 4096 * 1024);
    assert!(bytes.starts_with(b"FAKEDMTCP2\n"));
    // The job runs again after the checkpoint.
    let after = d.lines("out");
    wait_until("the job runs on", || d.lines("out") > after);
    assert!(stdout(&d.command(port, "-s")).contains("RUNNING=yes"));

    // --quit ends the job (it exits 0) and the coordinator.
    let out = d.command(port, "--quit");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(d.wait(job).code(), Some(0));
    assert_eq!(d.wait(coordinator).code(), Some(0));
}

#[test]
fn a_restart_cuts_back_files_above_descriptor_2_but_not_stdout() {
    let mut d = Dmtcp::new("restart");
    let args = ["40", "25", "x  y", "z"];
    let expected = reference(&d, &args);
    let data = d.path("data");
    let data_arg = data.to_str().unwrap().to_string();
    let (coordinator, port) = d.coordinator(&[]);
    let job = d.launch(port, &[("DMTCP_JOB_DATA", &data_arg)], &args);
    wait_until("the job runs", || d.lines("out") >= 3);
    assert_eq!(d.command(port, "--bcheckpoint").status.code(), Some(0));
    wait_for_symlink(&d.sandbox.dir);
    let at_checkpoint = step_in(&image_in(&d.sandbox.dir));
    // Lines written after the checkpoint: the restart cuts `data` back,
    // not stdout.
    wait_until("lines after the checkpoint", || {
        d.lines("data") >= at_checkpoint + 2
    });
    assert_eq!(d.command(port, "--quit").status.code(), Some(0));
    assert_eq!(d.wait(job).code(), Some(0));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    let stopped_at = d.lines("out");
    assert!(stopped_at < 40);

    // Restart through the script, as a user would, not quiet: as root it
    // warns; --exit-on-last ends the new coordinator with the job.
    std::fs::remove_file(d.path("pid")).unwrap();
    let (coordinator, port) = d.coordinator(&["--exit-on-last"]);
    let mut restart = d.program(
        &d.path("dmtcp_restart_script.sh"),
        &["--coord-port", &port.to_string()],
    );
    restart
        .stdout(append(&d.path("out")))
        .stderr(Stdio::piped())
        .env("DMTCP_JOB_PIDFILE", d.path("pid"))
        .env("DMTCP_JOB_DATA", &data_arg);
    let restarted = d.spawn(&mut restart);
    wait_until("the job is back", || d.path("pid").exists());
    assert_eq!(
        std::fs::read_to_string(d.path("pid")).unwrap(),
        d.pid(restarted).to_string(),
        "the restarted job has the pid dmtcp_restart had"
    );
    let out = Running::new(d.children.remove(restarted)).finish_output();
    assert_eq!(out.status.code(), Some(0));
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    assert_eq!(
        stderr(&out).starts_with("WARNING:  Running dmtcp_restart as root"),
        root,
        "{}",
        stderr(&out)
    );
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert!(
        expected.ends_with("step 39\ndone args=x  y|z\n"),
        "{expected}"
    );
    let steps = first_lines(&expected, 40);
    assert_eq!(std::fs::read_to_string(&data).unwrap(), steps);
    let out = std::fs::read_to_string(d.path("out")).unwrap();
    assert_eq!(
        out,
        first_lines(&expected, stopped_at)
            + &expected
                .split_inclusive('\n')
                .skip(at_checkpoint)
                .collect::<String>(),
        "stdout: what was written after the checkpoint, twice"
    );
}

#[test]
fn restart_refuses_what_4_2_0_refuses() {
    let d = Dmtcp::new("restart-errors");
    std::fs::write(d.path("bad.dmtcp"), "not an image\n").unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let mut image = File::create(d.path("good.dmtcp")).unwrap();
    write!(
        image,
        "FAKEDMTCP2\nprogram={}\narg={}\nid=1-2-3\nname={}\nstate=\nckptdir={}\nend\n",
        hex("/bin/true"),
        hex("true"),
        hex("true"),
        hex("/tmp"),
    )
    .unwrap();
    std::fs::copy(d.path("good.dmtcp"), d.path("good.txt")).unwrap();
    let out = d.run("dmtcp_restart", &[]);
    assert_eq!(out.status.code(), Some(99));
    assert!(
        stdout(&out).starts_with("dmtcp_restart (DMTCP) 4.2.0"),
        "{}",
        stdout(&out)
    );
    let port = free_port().to_string();
    for (args, says) in [
        (&["-p", &port, "-j", "-q", "-q"][..], "Usage:"),
        (
            &["-p", &port, "-j", "-q", "-q", "missing.dmtcp"],
            "missing.dmtcp",
        ),
        (&["-p", &port, "-j", "-q", "-q", "good.txt"], "Usage:"),
        (
            &["-p", &port, "-j", "-q", "-q", "bad.dmtcp"],
            "not a checkpoint image",
        ),
        (
            &["-p", &port, "-j", "-q", "-q", "good.dmtcp", "good.dmtcp"],
            "one process only",
        ),
        // The `_files` directory beside an image is passed over; no
        // coordinator then.
        (
            &["-p", &port, "-j", "-q", "-q", "good.dmtcp", "x_files"],
            "Coordinator not found",
        ),
    ] {
        std::fs::create_dir_all(d.path("x_files")).unwrap();
        let out = d.run("dmtcp_restart", args);
        assert_eq!(out.status.code(), Some(99), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    for args in [
        &["-p", &port, "--", "good.dmtcp"][..],
        &["--bogus", "good.dmtcp"],
    ] {
        let out = d.run("dmtcp_restart", args);
        assert_eq!(out.status.code(), Some(99), "{args:?}");
        assert!(
            stdout(&out).starts_with("Invalid Argument\n"),
            "{args:?}: {}",
            stdout(&out)
        );
    }
    // Another user's image, unless --no-strict-checking.
    if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
        std::os::unix::fs::chown(d.path("good.dmtcp"), Some(65534), Some(65534)).unwrap();
        let out = d.run(
            "dmtcp_restart",
            &["-p", &port, "-j", "-q", "-q", "good.dmtcp"],
        );
        assert_eq!(out.status.code(), Some(99));
        assert!(stderr(&out).contains("uid"), "{}", stderr(&out));
        let out = d.run(
            "dmtcp_restart",
            &["-p", &port, "-j", "--no-strict-checking", "good.dmtcp"],
        );
        assert_eq!(out.status.code(), Some(99));
        assert!(
            stderr(&out).contains("Coordinator not found"),
            "{}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains("WARNING"), "{}", stderr(&out));
    }
}

#[test]
fn the_job_ends_as_asked_and_exit_on_last_follows_it() {
    let mut d = Dmtcp::new("job-end");
    let (coordinator, port) = d.coordinator(&["--exit-on-last"]);
    let job = d.launch(port, &[("DMTCP_JOB_END", "signal:SEGV")], &["2", "5"]);
    let status = d.wait(job);
    assert_eq!(status.signal(), Some(libc::SIGSEGV));
    assert!(!status.core_dumped());
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert!(!d.path("port.0").exists());
    assert_eq!(
        std::fs::read_to_string(d.path("out")).unwrap(),
        "step 0\nstep 1\ndone args=\n"
    );

    for (end, code) in [("exit:7", Some(7)), ("0", Some(0))] {
        let status = Command::new(d.path("job"))
            .args(["1", "1"])
            .env("DMTCP_JOB_END", end)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), code, "{end}");
    }
    let status = Command::new(d.path("job"))
        .args(["1", "1"])
        .env("DMTCP_JOB_END", "signal:TERM")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[test]
fn a_job_whose_coordinator_dies_exits_99() {
    let mut d = Dmtcp::new("coordinator-dies");
    let (coordinator, port) = d.coordinator(&[]);
    let mut cmd = d.launch_command(port, &["1000", "10"]);
    cmd.stderr(Stdio::piped());
    let job = d.spawn(&mut cmd);
    wait_until("the job runs", || d.lines("out") >= 2);
    d.children[coordinator].kill().unwrap();
    let out = Running::new(d.children.remove(job)).finish_output();
    assert_eq!(out.status.code(), Some(99));
    assert!(
        stderr(&out).contains("Did DMTCP coordinator die uncleanly?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fault_a_checkpoint_that_never_completes_leaves_only_the_temp_image() {
    let mut d = Dmtcp::new("never");
    let (coordinator, port) = d.coordinator(&[]);
    let job = d.launch(port, &[("FAKE_DMTCP_NEVER_COMPLETE", "1")], &["1000", "10"]);
    wait_until("the job runs", || d.lines("out") >= 2);
    assert_eq!(d.command(port, "--bcheckpoint").status.code(), Some(0));
    let temp = wait_for_temp(&d.sandbox.dir);
    let frozen_at = d.lines("out");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.lines("out"), frozen_at, "the job ran on");
    assert!(
        d.path("dmtcp_restart_script.sh")
            .symlink_metadata()
            .is_err()
    );
    assert!(temp.exists());
    let status = stdout(&d.command(port, "--status"));
    assert!(status.contains("RUNNING=no"), "{status}");
    // A process that joins meanwhile takes part in the checkpoint: its
    // image is written (and it stays frozen), the checkpoint still is not
    // complete.
    let mut cmd = d.launch_command(port, &["1000", "10"]);
    cmd.env("DMTCP_JOB_PIDFILE", d.path("pid2"));
    let second = d.spawn(&mut cmd);
    wait_until("the second job's image", || {
        images_in(&d.sandbox.dir).len() == 1
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        d.path("dmtcp_restart_script.sh")
            .symlink_metadata()
            .is_err()
    );
    assert!(stdout(&d.command(port, "-s")).contains("NUM_PEERS=2"));
    // --quit still ends the frozen jobs.
    assert_eq!(d.command(port, "--quit").status.code(), Some(0));
    assert_eq!(d.wait(job).code(), Some(0));
    assert_eq!(d.wait(second).code(), Some(0));
    assert_eq!(d.wait(coordinator).code(), Some(0));
}

#[test]
fn a_kcheckpoint_before_the_job_joined_does_not_end_a_later_checkpoints_computation() {
    // Seen of 4.2.0: `K` with nothing to checkpoint is remembered, but the
    // first process to join clears it; the `c` that follows is a plain
    // checkpoint.
    let mut d = Dmtcp::new("k-before-join");
    let (_, port) = d.coordinator(&[]);
    let out = d.command(port, "--kcheckpoint");
    assert_eq!(out.status.code(), Some(2));
    // Images that take 125 ms: the `c` after a `K` finds it under way.
    let job = d.launch(
        port,
        &[("FAKE_DMTCP_WRITE_MS_PER_MB", "2000")],
        &["1000", "10"],
    );
    wait_until("the job runs", || d.lines("out") >= 2);
    assert_eq!(d.command(port, "--checkpoint").status.code(), Some(0));
    wait_for_symlink(&d.sandbox.dir);
    let after = d.lines("out");
    wait_until("the job runs on", || d.lines("out") > after);
    assert!(d.running(job));
    // With the job there, `K` ends it with its checkpoint.
    let out = d.command(port, "--kcheckpoint");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(d.wait(job).code(), Some(0));

    // FAKE_DMTCP_COMMAND_GAP_MS: the job joins between `K` and `c`.
    let mut d = Dmtcp::new("k-straddles-join");
    let (_, port) = d.coordinator(&[]);
    let mut kc = d.tool("dmtcp_command", &["-p", &port.to_string(), "--kcheckpoint"]);
    kc.env("FAKE_DMTCP_COMMAND_GAP_MS", "2000")
        .stdout(Stdio::null());
    let kc = d.spawn(&mut kc);
    // Once `K` is sent: dmtcp_command sleeps out its gap.
    let kc_pid = d.pid(kc);
    wait_until("dmtcp_command has sent K", || {
        let syscall = std::fs::read_to_string(format!("/proc/{kc_pid}/syscall"));
        let nr = syscall
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        matches!(nr, Some(libc::SYS_nanosleep | libc::SYS_clock_nanosleep))
    });
    let job = d.launch(port, &[], &["1000", "10"]);
    assert_eq!(d.wait(kc).code(), Some(0), "the `c` found the job");
    wait_for_symlink(&d.sandbox.dir);
    let after = d.lines("out");
    wait_until("the job runs on", || d.lines("out") > after);
    assert!(d.running(job));
}

#[test]
fn faults_a_computation_that_stays_and_a_late_restart_script() {
    let mut d = Dmtcp::new("stays");
    let (_, port) = d.coordinator(&[]);
    // Images that take 125 ms: the `c` after the `K` finds it under way.
    let job = d.launch(
        port,
        &[
            ("FAKE_DMTCP_NO_EXIT_AFTER_CKPT", "1"),
            ("FAKE_DMTCP_WRITE_MS_PER_MB", "2000"),
        ],
        &["1000", "10"],
    );
    wait_until("the job runs", || d.lines("out") >= 2);
    assert_eq!(d.command(port, "--kcheckpoint").status.code(), Some(2));
    wait_for_symlink(&d.sandbox.dir);
    let after = d.lines("out");
    wait_until("the job runs on", || d.lines("out") > after);
    assert!(d.running(job));
    assert_eq!(d.command(port, "--kill").status.code(), Some(0));
    assert_eq!(d.wait(job).code(), Some(0));

    // The script comes 500 ms after the image: the computation, told to
    // exit with its checkpoint, is gone before.
    let mut d = Dmtcp::new("late-script");
    let port_file = d.path("late.port");
    let mut cmd = d.tool(
        "dmtcp_coordinator",
        &[
            "-p",
            "0",
            "--port-file",
            port_file.to_str().unwrap(),
            "--kill-after-ckpt",
        ],
    );
    cmd.stderr(Stdio::null())
        .env("FAKE_DMTCP_SCRIPT_DELAY_MS", "500");
    let coordinator = d.spawn(&mut cmd);
    let port = read_port(&port_file);
    let job = d.launch(port, &[], &["1000", "10"]);
    wait_until("the job runs", || d.lines("out") >= 2);
    // --kill-after-ckpt: a plain checkpoint ends the computation too.
    assert_eq!(d.command(port, "--checkpoint").status.code(), Some(0));
    assert_eq!(d.wait(job).code(), Some(0));
    let ended = Instant::now();
    assert!(
        d.path("dmtcp_restart_script.sh")
            .symlink_metadata()
            .is_err()
    );
    image_in(&d.sandbox.dir);
    wait_for_symlink(&d.sandbox.dir);
    assert!(
        ended.elapsed() >= Duration::from_millis(300),
        "{:?}",
        ended.elapsed()
    );
    assert!(d.running(coordinator));
}

#[test]
fn the_coordinator_checkpoints_every_interval() {
    let mut d = Dmtcp::new("interval");
    let started = Instant::now();
    let (_, port) = d.coordinator(&["--interval", "1"]);
    let job = d.launch(port, &[], &["1000", "10"]);
    wait_for_symlink(&d.sandbox.dir);
    assert!(started.elapsed() >= Duration::from_secs(1));
    image_in(&d.sandbox.dir);
    assert_eq!(d.command(port, "--kill").status.code(), Some(0));
    assert_eq!(d.wait(job).code(), Some(0));
}

#[test]
fn the_jobs_child_stays_in_its_group_without_joining() {
    let mut d = Dmtcp::new("child");
    let (_, port) = d.coordinator(&[]);
    let job = d.launch(port, &[("DMTCP_JOB_CHILD", "1")], &["1000", "10"]);
    let pid = d.pid(job);
    let child = first_child(pid);
    d.strays.push(child);
    assert_eq!(
        stat_field(child, 5).unwrap(),
        stat_field(pid, 5).unwrap(),
        "process group"
    );
    let status = stdout(&d.command(port, "--status"));
    assert!(status.contains("NUM_PEERS=1"), "{status}");
    // Killing the computation ends the job only: the child is left
    // behind for the launcher to deal with.
    assert_eq!(d.command(port, "--kill").status.code(), Some(0));
    assert_eq!(d.wait(job).code(), Some(0));
    assert!(alive(child));
}
