//! The fake DMTCP 4.2.0 tools (`examples/fake_dmtcp/`) and the job they
//! can checkpoint (`examples/dmtcp_job.rs`), on their own, driven as
//! processes: each quirk of the real tools they reproduce for the tests of
//! `ckptrun --mode dmtcp`, and the checkpoint/restart cycle itself.

mod common;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
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
        // A link, not a copy: no ETXTBSY from a copy still open for
        // writing in a process another test thread is forking.
        if std::fs::hard_link(dmtcp_job(), sandbox.path("job")).is_err() {
            std::fs::copy(dmtcp_job(), sandbox.path("job")).unwrap();
        }
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
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `TOOL ARGS...` to the end, output captured.
    fn run(&self, tool: &str, args: &[&str]) -> Output {
        self.tool(tool, args).output().unwrap()
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
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.children[child].try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "child {child} did not end within 10 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
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
    /// the job's stdout appended to `out` and its pid file `pid`.
    fn launch(&mut self, port: u16, env: &[(&str, &str)], args: &[&str]) -> usize {
        let port = port.to_string();
        let mut all = vec!["--coord-port", &port, "--join-coordinator", "./job"];
        all.extend_from_slice(args);
        let mut cmd = self.tool("dmtcp_launch", &all);
        cmd.stdout(append(&self.path("out")))
            .env("DMTCP_JOB_PIDFILE", self.path("pid"))
            .envs(env.iter().copied());
        let child = self.spawn(&mut cmd);
        wait_until("the job has joined", || self.path("pid").exists());
        child
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
                // SAFETY: kill has no memory arguments.
                unsafe { libc::kill(pid, libc::SIGKILL) };
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

/// The port in `file`, once it holds one (it is created empty first).
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

/// Processes whose command line contains `needle`.
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

/// Field `n` (1-based, as in proc(5)) of /proc/PID/stat.
fn stat_field(pid: i32, n: usize) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name
        .split_whitespace()
        .nth(n - 3)
        .unwrap()
        .parse()
        .unwrap()
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

/// The one complete image in `dir`.
fn image_in(dir: &Path) -> PathBuf {
    let images: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dmtcp"))
        .collect();
    assert_eq!(images.len(), 1, "{images:?}");
    images.into_iter().next().unwrap()
}

#[test]
fn the_coordinator_rejects_background_and_unknown_options() {
    let d = Dmtcp::new("options");
    for bad in ["--background", "--bogus"] {
        let out = d.run("dmtcp_coordinator", &["--port", "0", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert_eq!(
            stderr(&out),
            format!("dmtcp_coordinator: unrecognized option '{bad}'\n")
        );
    }
    // Asked to fail: exit 3 before binding, no port file.
    let out = d
        .tool(
            "dmtcp_coordinator",
            &["--port", "0", "--port-file", "pf", "--daemon"],
        )
        .env("FAKE_DMTCP_COORD_FAIL", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(!stderr(&out).is_empty());
    assert!(!d.path("pf").exists());
    // Under any other name the binary only says what it is.
    let out = Command::new(fake_dmtcp()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_daemon_coordinator_writes_its_port_file_after_the_launcher_has_exited() {
    let mut d = Dmtcp::new("daemon");
    let port_file = d.path("coord.port");
    let port_file_arg = port_file.to_str().unwrap().to_string();
    let started = Instant::now();
    let status = d
        .tool(
            "dmtcp_coordinator",
            &[
                "--coord-port=0",
                "--port-file",
                &port_file_arg,
                "--exit-on-last",
                "--daemon",
            ],
        )
        .env("FAKE_DMTCP_PORT_DELAY_MS", "300")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        !port_file.exists(),
        "the port file exists {:?} after the start, when the launcher exits",
        started.elapsed()
    );
    let daemon = pids_with_arg(&port_file_arg);
    assert_eq!(daemon.len(), 1, "{daemon:?}");
    let daemon = daemon[0];
    d.strays.push(daemon);
    wait_until("the daemon is in a session of its own", || {
        stat_field(daemon, 6) == i64::from(daemon)
    });

    let port = read_port(&port_file);
    let text = std::fs::read_to_string(&port_file).unwrap();
    assert_eq!(text, port.to_string(), "decimal, no newline");
    let out = d.command(port, "--status");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("NUM_PEERS=0"), "{}", stdout(&out));

    let out = d.command(port, "--quit");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    wait_until("the daemon has quit", || !alive(daemon));
}

#[test]
fn launch_rejects_a_double_dash_and_needs_a_coordinator() {
    let d = Dmtcp::new("launch-errors");
    let out = d.run(
        "dmtcp_launch",
        &["--coord-port", "7779", "--", "./job", "1", "1"],
    );
    assert_eq!(out.status.code(), Some(99));
    assert!(
        stderr(&out).starts_with("dmtcp_launch: Invalid Argument\n"),
        "{}",
        stderr(&out)
    );
    for args in [&["--bogus", "./job"][..], &["--coord-port", "1"][..], &[]] {
        let out = d.run("dmtcp_launch", args);
        assert_eq!(out.status.code(), Some(99), "{args:?}: {}", stderr(&out));
    }

    let port = free_port().to_string();
    let out = d.run(
        "dmtcp_launch",
        &[
            "--coord-host",
            "127.0.0.1",
            "--coord-port",
            &port,
            "--join-coordinator",
            "./job",
            "1",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(99));
    assert!(stderr(&out).contains("no coordinator"), "{}", stderr(&out));
    let out = d.run("dmtcp_command", &["--coord-port", &port, "--status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!stderr(&out).is_empty());
}

#[test]
fn launch_execs_the_program_with_its_arguments_untouched() {
    let mut d = Dmtcp::new("launch-exec");
    let (_, port) = d.coordinator(&[]);
    let coord = format!("--coord-port={port}");
    // PATH search for `sh`; options after PROGRAM are the program's.
    let script = r#"echo "$$ $FAKE_DMTCP_COORD $FAKE_DMTCP_CKPTDIR ${FAKE_DMTCP_RESTORE-unset}"
        for a; do printf '[%s]' "$a"; done"#;
    let mut cmd = d.tool(
        "dmtcp_launch",
        &[
            &coord,
            "-j",
            "--ckptdir",
            "images",
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
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{pid} 127.0.0.1:{port} {} unset\n[--][a  b][-j][--coord-port]",
            d.path("images").display()
        )
    );
}

#[test]
fn bcheckpoint_returns_before_the_checkpoint_is_complete() {
    let mut d = Dmtcp::new("bcheckpoint");
    std::fs::create_dir(d.path("scripts")).unwrap();
    std::fs::create_dir(d.path("images")).unwrap();
    let (coordinator, port) = d.coordinator(&["--ckptdir", "scripts"]);
    // A 4 MiB image written at 100 ms per MiB: about 0.4 s.
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
        stdout(&out).contains(&format!("job[{pid}]")),
        "{}",
        stdout(&out)
    );

    let out = d.command(port, "--bcheckpoint");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        d.path("scripts/dmtcp_restart_script.sh")
            .symlink_metadata()
            .is_err(),
        "--bcheckpoint returned after the checkpoint completed"
    );
    // The image is written as a .temp first; meanwhile the job is frozen.
    let temp = wait_for_temp(&d.path("images"));
    let frozen_at = d.lines("out");
    std::thread::sleep(Duration::from_millis(100));
    if temp.exists() {
        assert_eq!(
            d.lines("out"),
            frozen_at,
            "the job ran during the checkpoint"
        );
    }
    // A second request during the checkpoint is accepted and ignored.
    assert_eq!(d.command(port, "--checkpoint").status.code(), Some(0));

    let target = wait_for_symlink(&d.path("scripts"));
    let image = image_in(&d.path("images"));
    assert!(!temp.exists());
    let name = image.file_name().unwrap().to_str().unwrap();
    let id = name
        .strip_prefix("ckpt_job_")
        .and_then(|n| n.strip_suffix(".dmtcp"))
        .unwrap();
    assert_eq!(target, Path::new(&format!("dmtcp_restart_script_{id}.sh")));
    let script = d.path("scripts").join(&target);
    assert_eq!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.starts_with("#!/bin/sh\n"), "{text}");
    assert!(text.contains("dmtcp_restart --join-coordinator"), "{text}");
    assert!(text.contains(&format!("'{}'", image.display())), "{text}");
    let bytes = std::fs::read(&image).unwrap();
    assert_eq!(bytes.len(), 4096 * 1024);
    assert!(bytes.starts_with(b"FAKEDMTCP1\n"));
    // The job runs again after the checkpoint.
    let after = d.lines("out");
    wait_until("the job runs on", || d.lines("out") > after);

    // --quit ends the job (SIGKILL) and the coordinator.
    let out = d.command(port, "--quit");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(d.wait(job).signal(), Some(libc::SIGKILL));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert!(!alive(pid));
}

#[test]
fn restart_resumes_and_the_output_equals_an_uninterrupted_runs() {
    let mut d = Dmtcp::new("restart");
    let args = ["20", "25", "x  y", "z"];
    // Uninterrupted, without DMTCP: the job just runs.
    let mut plain = Command::new(d.path("job"));
    plain.args(args).stdout(append(&d.path("plain")));
    let plain = d.spawn(&mut plain);

    let (coordinator, port) = d.coordinator(&[]);
    let job = d.launch(port, &[], &args);
    wait_until("the job runs", || d.lines("out") >= 3);
    assert_eq!(d.command(port, "--bcheckpoint").status.code(), Some(0));
    wait_for_symlink(&d.sandbox.dir);
    // Lines written after the checkpoint, which the restart must cut off.
    let at_checkpoint = d.lines("out");
    wait_until("lines after the checkpoint", || {
        d.lines("out") >= at_checkpoint + 2
    });
    assert_eq!(d.command(port, "--quit").status.code(), Some(0));
    assert_eq!(d.wait(job).signal(), Some(libc::SIGKILL));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert!(d.lines("out") < 20);

    // Restart through the script, as a user would; --exit-on-last ends the
    // new coordinator with the job.
    std::fs::remove_file(d.path("pid")).unwrap();
    let (coordinator, port) = d.coordinator(&["--exit-on-last"]);
    let mut restart = d.program(
        &d.path("dmtcp_restart_script.sh"),
        &["--coord-port", &port.to_string()],
    );
    restart
        .stdout(append(&d.path("out")))
        .env("DMTCP_JOB_PIDFILE", d.path("pid"));
    let restarted = d.spawn(&mut restart);
    wait_until("the job is back", || d.path("pid").exists());
    assert_eq!(
        std::fs::read_to_string(d.path("pid")).unwrap(),
        d.pid(restarted).to_string(),
        "the restarted job has the pid dmtcp_restart had"
    );
    assert_eq!(d.wait(restarted).code(), Some(0));
    assert_eq!(d.wait(coordinator).code(), Some(0));
    assert_eq!(d.wait(plain).code(), Some(0));
    let plain = std::fs::read_to_string(d.path("plain")).unwrap();
    assert!(plain.ends_with("step 19\ndone args=x  y|z\n"), "{plain}");
    assert_eq!(std::fs::read_to_string(d.path("out")).unwrap(), plain);
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
fn a_checkpoint_that_never_completes_leaves_only_the_temp_image() {
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
    // --quit still ends the frozen job.
    assert_eq!(d.command(port, "--quit").status.code(), Some(0));
    assert_eq!(d.wait(job).signal(), Some(libc::SIGKILL));
    assert_eq!(d.wait(coordinator).code(), Some(0));
}

#[test]
fn a_checkpoint_needs_processes() {
    let mut d = Dmtcp::new("no-processes");
    let (_, port) = d.coordinator(&[]);
    for verb in ["--bcheckpoint", "-bc", "--checkpoint"] {
        let out = d.command(port, verb);
        assert_eq!(out.status.code(), Some(1), "{verb}");
        assert!(stderr(&out).contains("no processes"), "{}", stderr(&out));
    }
    assert_eq!(d.command(port, "--bogus").status.code(), Some(1));
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
    assert_eq!(d.wait(job).signal(), Some(libc::SIGKILL));
}

#[test]
fn restart_rejects_what_it_cannot_restart() {
    let d = Dmtcp::new("restart-errors");
    std::fs::write(d.path("bad.dmtcp"), "not an image\n").unwrap();
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let mut image = File::create(d.path("good.dmtcp")).unwrap();
    write!(
        image,
        "FAKEDMTCP1\nprogram={}\narg={}\nid=1-2-3\nname={}\nstate=\nckptdir={}\nend\n",
        hex("/bin/true"),
        hex("true"),
        hex("true"),
        hex("/tmp"),
    )
    .unwrap();
    let port = free_port().to_string();
    for args in [
        &["-p", &port, "-j"][..],
        &["-p", &port, "-j", "missing.dmtcp"],
        &["-p", &port, "-j", "bad.dmtcp"],
        &["-p", &port, "-j", "good.dmtcp", "good.dmtcp"],
        &["-p", &port, "--bogus", "good.dmtcp"],
        // A good image but no coordinator.
        &["-p", &port, "-j", "good.dmtcp"],
    ] {
        let out = d.run("dmtcp_restart", args);
        assert_eq!(out.status.code(), Some(99), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
}

#[test]
fn the_jobs_child_stays_in_its_group_without_joining() {
    let mut d = Dmtcp::new("child");
    let (_, port) = d.coordinator(&[]);
    let job = d.launch(port, &[("DMTCP_JOB_CHILD", "1")], &["1000", "10"]);
    let pid = d.pid(job);
    let child = first_child(pid);
    d.strays.push(child);
    assert_eq!(stat_field(child, 5), stat_field(pid, 5), "process group");
    let status = stdout(&d.command(port, "--status"));
    assert!(status.contains("NUM_PEERS=1"), "{status}");
    // Killing the computation kills the job only: the child is left
    // behind for the launcher to deal with.
    assert_eq!(d.command(port, "--kill").status.code(), Some(0));
    assert_eq!(d.wait(job).signal(), Some(libc::SIGKILL));
    assert!(alive(child));
}
