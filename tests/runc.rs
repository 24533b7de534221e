//! ckptrun as PID 1 of a real OCI container, run by `runc` as a container
//! engine would: signals sent with `runc kill` reach the job, orphans are
//! reaped, the job's end is the container's exit status, `--mode self`
//! commits into a bind-mounted sandbox and resumes in a second container,
//! and condor mode meets a seccomp filter refusing its personality as
//! Docker's default profile does.
//!
//! Each test builds a bundle of its own: `rootfs/` holding the built
//! ckptrun (static, musl), a static busybox with the applets the jobs use
//! and the job (a busybox sh script, `/job.sh`), and `config.json`, made
//! by `runc spec` and edited as text. `work/` beside it is bind-mounted at
//! `/work`, where the jobs say what they saw. Needs root and runc (and
//! busybox-static): without them the tests say so and pass, except where
//! `CI` is set, where they fail (scripts/setup.sh installs both).

mod common;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// What the jobs' `/bin` holds besides busybox.
const APPLETS: [&str; 8] = ["sh", "sleep", "cat", "mv", "grep", "rm", "kill", "echo"];

/// How long a test waits for any one event in a container (the job being
/// ready, an orphan ending) before it fails: generous, for loaded CI.
const EVENT_WITHIN: Duration = Duration::from_secs(20);

/// runc and a static busybox, if the tests can run here; else None, having
/// said why (or failed, where `CI` is set: CI must run them).
fn tools(test: &str) -> Option<(PathBuf, PathBuf)> {
    let found = || -> Result<(PathBuf, PathBuf), String> {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root, which runc needs".into());
        }
        let runc = find_program("runc").ok_or("no runc (scripts/setup.sh installs it)")?;
        let busybox = find_program("busybox")
            .ok_or("no busybox (scripts/setup.sh installs busybox-static)")?;
        if !is_static(&busybox) {
            return Err(format!(
                "{} is linked dynamically (scripts/setup.sh installs busybox-static)",
                busybox.display()
            ));
        }
        Ok((runc, busybox))
    };
    match found() {
        Ok(tools) => Some(tools),
        Err(why) => {
            let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
            assert!(!ci, "{test}: CI is set but {why}");
            eprintln!("{test}: SKIPPED: {why}");
            None
        }
    }
}

/// `name` along PATH, or in the sbin directories a non-root PATH lacks.
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Whether the ELF file at `path` has no program interpreter (PT_INTERP),
/// so that it runs in a root holding nothing else.
fn is_static(path: &Path) -> bool {
    let elf = std::fs::read(path).unwrap();
    let word = |at: usize, len: usize| {
        elf[at..at + len]
            .iter()
            .rev()
            .fold(0usize, |n, &b| n << 8 | usize::from(b))
    };
    assert!(
        elf.starts_with(b"\x7fELF\x02\x01"),
        "{}: not a little-endian ELF64 file",
        path.display()
    );
    let (phoff, phentsize, phnum) = (word(0x20, 8), word(0x36, 2), word(0x38, 2));
    (0..phnum).all(|i| word(phoff + i * phentsize, 4) != 3)
}

/// A bundle: `rootfs/` with ckptrun, busybox and `/job.sh`, `config.json`
/// and `work/` (the container's `/work`), in a scratch directory.
struct Bundle {
    sandbox: Sandbox,
    runc: PathBuf,
    name: String,
}

impl Bundle {
    /// The bundle for `job` (a busybox sh script), or None where the tests
    /// cannot run (see `tools`).
    fn new(name: &str, job: &str) -> Option<Self> {
        let (runc, busybox) = tools(name)?;
        assert!(
            is_static(Path::new(CKPTRUN)),
            "{CKPTRUN} is not static: the container's root holds no libc"
        );
        let sandbox = Sandbox::new(&format!("runc-{name}"));
        let rootfs = sandbox.path("rootfs");
        for dir in ["bin", "proc", "dev", "sys", "work"] {
            std::fs::create_dir_all(rootfs.join(dir)).unwrap();
        }
        std::fs::create_dir_all(sandbox.path("work")).unwrap();
        copy_program(Path::new(CKPTRUN), &rootfs.join("ckptrun"));
        copy_program(&busybox, &rootfs.join("bin/busybox"));
        for applet in APPLETS {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
        }
        std::fs::write(rootfs.join("job.sh"), job).unwrap();
        Some(Self {
            sandbox,
            runc,
            name: name.to_string(),
        })
    }

    /// A file in `work/`, the container's `/work`.
    fn work(&self, name: &str) -> PathBuf {
        self.sandbox.path("work").join(name)
    }

    fn runc(&self) -> Command {
        let mut cmd = Command::new(&self.runc);
        cmd.current_dir(&self.sandbox.dir);
        cmd
    }

    /// Writes `config.json`: `runc spec`'s, with `args` as the process,
    /// `/work` as its working directory, and `seccomp` (an OCI
    /// `linux.seccomp` object) if given.
    fn configure(&self, args: &[&str], seccomp: Option<&str>) {
        let _ = std::fs::remove_file(self.sandbox.path("config.json"));
        let mut runc_spec = self.runc();
        let out = output(runc_spec.arg("spec"));
        assert!(
            out.status.success(),
            "runc spec: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let spec = std::fs::read_to_string(self.sandbox.path("config.json")).unwrap();
        let work = self.sandbox.path("work");
        let spec = edit_spec(spec, args, &work.to_string_lossy(), seccomp);
        std::fs::write(self.sandbox.path("config.json"), spec).unwrap();
    }

    /// `runc run ID` in the foreground, its output captured: the
    /// container `name` of this bundle, deleted when dropped.
    fn run(&self, name: &str) -> Container {
        let id = format!("ckptrun-test-{}-{}-{name}", std::process::id(), self.name);
        let mut cmd = self.runc();
        cmd.args(["run", "--bundle"])
            .arg(&self.sandbox.dir)
            .arg(&id);
        default_signals(&mut cmd);
        Container {
            runc: self.runc.clone(),
            id,
            running: Some(start(cmd)),
        }
    }
}

/// A container `runc run` is running. Dropped, it is deleted (`runc
/// delete --force`) whatever state it is in, and `runc run` is ended: a
/// failed test leaves nothing running.
struct Container {
    runc: PathBuf,
    id: String,
    running: Option<Running>,
}

impl Container {
    /// `runc kill ID SIG`: the signal for the container's init, ckptrun.
    fn kill(&self, sig: &str) {
        let out = run(Command::new(&self.runc).args(["kill", &self.id, sig]));
        assert_eq!(
            out.code(),
            Some(0),
            "runc kill {} {sig}: {}",
            self.id,
            out.stderr
        );
    }

    /// The host's pid of the container's init, from `runc state ID`.
    fn init_pid(&self) -> i32 {
        let out = run(Command::new(&self.runc).args(["state", &self.id]));
        assert_eq!(out.code(), Some(0), "runc state: {}", out.stderr);
        let at = out.stdout.find("\"pid\":").expect("a pid in runc state") + 6;
        let digits: String = out.stdout[at..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().expect("runc state's pid")
    }

    /// Waits until `path` exists (the job's sign that it is ready).
    fn wait_for(&mut self, path: &Path) {
        self.running.as_mut().unwrap().wait_for(path);
    }

    /// Waits for `runc run` to end (at most 30 s): the container's exit
    /// status and what ckptrun and the job wrote.
    fn finish(mut self) -> Finished {
        self.running.take().unwrap().finish()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // `runc run` deletes a container that ended; one still there is
        // killed and deleted, then `runc run` has ended or is ended.
        let mut delete = Command::new(&self.runc);
        delete
            .args(["delete", "--force", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Ok(mut child) = delete.spawn() {
            if wait_at_most(&mut child, Duration::from_secs(10)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if let Some(mut running) = self.running.take() {
            if wait_at_most(&mut running.child, Duration::from_secs(5)).is_none() {
                eprintln!("{}: runc run still running after runc delete", self.id);
            }
        }
    }
}

/// `runc spec`'s config.json made the tests': no `process.rlimits` (the
/// container keeps the test's own limits; an engine raising them above
/// the hard limits of the machine running the tests, as podman does here,
/// fails with "error setting rlimits"), no terminal (the output is captured), `args`, `/work` bind-mounted from `work` and the
/// working directory, and `seccomp` as `linux.seccomp`. Edited as text,
/// each member found by its key, which must be there once: a runc whose
/// spec differs fails here, saying which key.
fn edit_spec(mut spec: String, args: &[&str], work: &str, seccomp: Option<&str>) -> String {
    remove_member(&mut spec, "rlimits");
    replace_value(&mut spec, "terminal", "false");
    let args: Vec<String> = args.iter().map(|a| json_string(a)).collect();
    replace_value(&mut spec, "args", &format!("[{}]", args.join(", ")));
    replace_value(&mut spec, "cwd", "\"/work\"");
    let mount = format!(
        "{{\"destination\": \"/work\", \"type\": \"bind\", \"source\": {}, \
         \"options\": [\"rbind\", \"rw\"]}},",
        json_string(work)
    );
    insert_first(&mut spec, "mounts", &mount);
    if let Some(seccomp) = seccomp {
        insert_first(&mut spec, "linux", &format!("\"seccomp\": {seccomp},"));
    }
    spec
}

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Where `"key":` is in `json` (the key's opening quote) and the span of
/// its value. The key must occur exactly once.
fn member(json: &str, key: &str) -> (usize, Range<usize>) {
    let quoted = format!("\"{key}\"");
    let found: Vec<(usize, usize)> = json
        .match_indices(&quoted)
        .filter_map(|(at, _)| {
            let rest = &json[at + quoted.len()..];
            let colon = rest.len() - rest.trim_start().len();
            rest.trim_start()
                .starts_with(':')
                .then_some((at, at + quoted.len() + colon + 1))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "config.json from runc spec: want one {quoted} member, found {}:\n{json}",
        found.len()
    );
    let (at, after_colon) = found[0];
    let rest = &json[after_colon..];
    let start = after_colon + (rest.len() - rest.trim_start().len());
    (at, start..value_end(json.as_bytes(), start))
}

/// The end of the JSON value starting at `start`.
fn value_end(json: &[u8], start: usize) -> usize {
    let mut depth = 0;
    let mut in_string = false;
    let mut i = start;
    while i < json.len() {
        let c = json[i];
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_string = true,
                b'[' | b'{' => depth += 1,
                b']' | b'}' if depth == 0 => return i,
                b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return i,
                _ => {}
            }
        }
        i += 1;
    }
    panic!("config.json: a value runs to the end");
}

fn replace_value(json: &mut String, key: &str, value: &str) {
    let (_, span) = member(json, key);
    json.replace_range(span, value);
}

/// Removes `"key": value` and the comma after it.
fn remove_member(json: &mut String, key: &str) {
    let (at, span) = member(json, key);
    let rest = &json[span.end..];
    let comma = rest.trim_start();
    assert!(
        comma.starts_with(','),
        "config.json: {key} is its object's last member"
    );
    let end = span.end + (rest.len() - comma.len()) + 1;
    json.replace_range(at..end, "");
}

/// Puts `text` first in the array or object that is `key`'s value.
fn insert_first(json: &mut String, key: &str, text: &str) {
    let (_, span) = member(json, key);
    assert!(
        json[span.clone()].starts_with(['[', '{']) && span.len() > 2,
        "config.json: {key} is not a non-empty array or object"
    );
    json.insert_str(span.start + 1, &format!("\n{text}"));
}

/// Waits until `cond` holds, at most `EVENT_WITHIN`.
fn wait_long(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + EVENT_WITHIN;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// ckptrun as a plain init, running the job.
const INIT_ARGS: [&str; 6] = ["/ckptrun", "--mode", "init", "--", "/bin/sh", "/job.sh"];

/// `runc run` ended with `code`, the container's exit status.
fn assert_exit(out: &Finished, code: i32) {
    assert_eq!(
        out.code(),
        Some(code),
        "runc run: {:?} {}",
        out.status,
        out.stderr
    );
}

#[test]
fn runc_kill_reaches_the_job_and_its_exit_is_the_containers() {
    let job = "trap 'echo USR1 >> /work/got' USR1
trap 'echo TERM >> /work/got; exit 42' TERM
echo ready > /work/ready
while :; do sleep 0.05; done
";
    let Some(bundle) = Bundle::new("signals", job) else {
        return;
    };
    bundle.configure(&INIT_ARGS, None);
    let mut container = bundle.run("a");
    container.wait_for(&bundle.work("ready"));
    container.kill("USR1");
    wait_long("the job got SIGUSR1", || {
        std::fs::read_to_string(bundle.work("got")).is_ok_and(|s| s == "USR1\n")
    });
    container.kill("TERM");
    let out = container.finish();
    assert_exit(&out, 42);
    assert_eq!(
        std::fs::read_to_string(bundle.work("got")).unwrap(),
        "USR1\nTERM\n"
    );
    assert_eq!(out.stderr, "");
}

#[test]
fn orphans_in_the_container_are_reaped() {
    // The job leaves 20 orphans (a `sleep 0.1` whose shell has exited:
    // PID 1, ckptrun, is their parent then), waits until each has ended,
    // and says so; it then waits for the test's go and exits 3.
    let job = "i=0; : > /work/orphans
while [ $i -lt 20 ]; do sh -c 'sleep 0.1 & echo $! >> /work/orphans'; i=$((i+1)); done
n=0
for p in $(cat /work/orphans); do
    while [ -e /proc/$p ] && ! grep -q '^State:.Z' /proc/$p/status 2>/dev/null; do
        n=$((n+1)); [ $n -lt 2000 ] || exit 1; sleep 0.01
    done
done
echo ended > /work/ended
n=0
while [ ! -e /work/go ]; do n=$((n+1)); [ $n -lt 3000 ] || exit 2; sleep 0.01; done
exit 3
";
    let Some(bundle) = Bundle::new("zombies", job) else {
        return;
    };
    bundle.configure(&INIT_ARGS, None);
    let mut container = bundle.run("a");
    container.wait_for(&bundle.work("ended"));
    let init = container.init_pid();
    let orphans = std::fs::read_to_string(bundle.work("orphans")).unwrap();
    assert_eq!(orphans.lines().count(), 20, "{orphans}");
    let zombies_of_init = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|&pid| parent_and_state(pid) == Some((init, 'Z')))
            .collect()
    };
    let deadline = Instant::now() + EVENT_WITHIN;
    let left = loop {
        let left = zombies_of_init();
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        left.is_empty(),
        "zombies whose parent is the container's init ({init}): {left:?}"
    );
    std::fs::write(bundle.work("go"), "").unwrap();
    let out = container.finish();
    assert_exit(&out, 3);
}

#[test]
fn the_jobs_exit_code_or_signal_is_the_containers_exit_status() {
    // As PID 1 ckptrun exits 128+N for a job killed by signal N
    // (docs/reference.md); --status-file keeps the raw wait status.
    let cases = [
        ("exit 7", 7, 7 << 8),
        ("kill -TERM $$", 128 + libc::SIGTERM, libc::SIGTERM),
        ("kill -KILL $$", 128 + libc::SIGKILL, libc::SIGKILL),
    ];
    let Some(bundle) = Bundle::new("exit-status", "") else {
        return;
    };
    let args = [
        "/ckptrun",
        "--mode",
        "init",
        "--status-file",
        "/work/status",
        "--",
        "/bin/sh",
        "/job.sh",
    ];
    bundle.configure(&args, None);
    for (i, (script, code, raw)) in cases.into_iter().enumerate() {
        std::fs::write(bundle.sandbox.path("rootfs/job.sh"), script).unwrap();
        let out = bundle.run(&i.to_string()).finish();
        assert_eq!(
            out.code(),
            Some(code),
            "{script}: runc run {:?} {}",
            out.status,
            out.stderr
        );
        let status = std::fs::read_to_string(bundle.work("status")).unwrap();
        let got: i32 = status
            .strip_prefix("Exited: ")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("{script}: status file {status:?}"));
        // A signal's core flag (0x80) may be set where core_pattern pipes.
        let got = if raw & 0x7f != 0 { got & 0x7f } else { got };
        assert_eq!(got, raw, "{script}: status file {status:?}");
    }
}

/// The self-checkpointing job: STEPS steps of a running hash (`n acc`),
/// its state in `state`, written and exit 17 on SIGUSR1; each start
/// appended to `starts`; the final state in `result`.
const SELF_JOB: &str = "n=0; acc=1
if [ -s state ]; then read n acc < state; fi
echo \"start $n\" >> starts
trap 'echo \"$n $acc\" > state.new; mv state.new state; exit 17' USR1
while [ $n -lt 40 ]; do
    acc=$(( (acc * 31 + n + 1) % 1000003 )) n=$((n + 1))
    [ $n -eq 5 ] && echo running > running
    sleep 0.05
done
echo \"$n $acc\" > result
";

const SELF_ARGS: [&str; 12] = [
    "/ckptrun",
    "--mode",
    "self",
    "--ckpt",
    "state",
    "--job-ckpt-exit",
    "17",
    "--ckpt-signal",
    "USR1",
    "--",
    "/bin/sh",
    "/job.sh",
];

#[test]
fn self_mode_commits_at_eviction_and_resumes_in_a_second_container() {
    let Some(bundle) = Bundle::new("self", SELF_JOB) else {
        return;
    };
    bundle.configure(&SELF_ARGS, None);

    // The container is stopped as an engine stops one: SIGTERM to its
    // init. The job checkpoints, ckptrun commits and exits 85.
    let mut first = bundle.run("first");
    first.wait_for(&bundle.work("running"));
    first.kill("TERM");
    let out = first.finish();
    assert_exit(&out, 85);
    let work = bundle.sandbox.path("work");
    assert_eq!(
        generations(&work, "ckptrun.store"),
        [0, 1],
        "{}",
        out.stderr
    );
    let committed = tar_member(&slot_of(&work, "ckptrun.store", 1), "state").unwrap();
    let committed = String::from_utf8(committed).unwrap();
    let at: u32 = committed.split(' ').next().unwrap().parse().unwrap();
    assert!((5..40).contains(&at), "committed at step {at}: {committed}");

    // A second container on the same sandbox resumes there and finishes.
    let out = bundle.run("second").finish();
    assert_exit(&out, 0);
    assert_eq!(
        std::fs::read_to_string(bundle.work("starts")).unwrap(),
        format!("start 0\nstart {at}\n")
    );

    // The same job uninterrupted, in a container of its own.
    let Some(reference) = Bundle::new("self-reference", SELF_JOB) else {
        return;
    };
    reference.configure(&SELF_ARGS, None);
    let out = reference.run("a").finish();
    assert_exit(&out, 0);
    assert_eq!(
        std::fs::read_to_string(bundle.work("result")).unwrap(),
        std::fs::read_to_string(reference.work("result")).unwrap()
    );
}

/// Like Docker's default profile for personality(2), which allows only 0,
/// 8, 0x20000, 0x20008 and 0xffffffff (the query), refused with EPERM. runc
/// ORs conditions on one argument, so "none of these" cannot be one rule:
/// instead each of the flags `setarch -L -B -R` sets (ADDR_NO_RANDOMIZE
/// 0x40000, ADDR_COMPAT_LAYOUT 0x200000, ADDR_LIMIT_32BIT 0x800000) is
/// refused when set with bit 31 clear, which all five have but 0xffffffff.
const DOCKER_LIKE_SECCOMP: &str = r#"{
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "syscalls": [
        {"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
         "args": [{"index": 0, "value": 2147745792, "valueTwo": 262144, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
         "args": [{"index": 0, "value": 2149580800, "valueTwo": 2097152, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
         "args": [{"index": 0, "value": 2155872256, "valueTwo": 8388608, "op": "SCMP_CMP_MASKED_EQ"}]}
    ]
}"#;

#[test]
fn condor_mode_under_dockers_seccomp_profile_fails_in_one_line_or_runs_with_personality_optional() {
    // The job shows the personality it runs with.
    let job = "cat /proc/self/personality > /work/personality; exit 0\n";
    let Some(bundle) = Bundle::new("seccomp", job) else {
        return;
    };
    let condor = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["/ckptrun", "--ckpt", "/work/job.ckpt"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "/bin/sh", "/job.sh"]);
        args.into_iter().map(String::from).collect()
    };
    let run_with = |name: &str, extra: &[&str], seccomp: Option<&str>| {
        let _ = std::fs::remove_file(bundle.work("personality"));
        let args = condor(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bundle.configure(&args, seccomp);
        let out = bundle.run(name).finish();
        let personality = std::fs::read_to_string(bundle.work("personality")).ok();
        (out, personality)
    };

    // Without a filter the job runs with setarch -L -B -R's personality.
    let (out, personality) = run_with("unconfined", &[], None);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(personality.as_deref(), Some("00a40000\n"));

    // The filter refuses it: exit 125, one line naming the call.
    let (out, personality) = run_with("refused", &[], Some(DOCKER_LIKE_SECCOMP));
    assert_eq!(out.code(), Some(125), "{:?} {}", out.status, out.stderr);
    assert_one_error_line(&out, "personality(0x00a40000)");
    assert_eq!(personality, None, "the job must not have started");

    // --personality-optional: a warning, and the job runs, randomized.
    let (out, personality) = run_with(
        "optional",
        &["--personality-optional"],
        Some(DOCKER_LIKE_SECCOMP),
    );
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(personality.as_deref(), Some("00000000\n"));
    assert!(
        out.stderr.contains("personality(0x00a40000)")
            && out.stderr.contains("--personality-optional"),
        "{}",
        out.stderr
    );

    // The filter lets through what Docker's does: with the three flags
    // off ckptrun sets personality(0) and reads it back with 0xffffffff.
    let no_flags = ["--keep-aslr", "--no-compat-layout", "--no-limit-32bit"];
    let (out, personality) = run_with("allowed", &no_flags, Some(DOCKER_LIKE_SECCOMP));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(personality.as_deref(), Some("00000000\n"));
}
