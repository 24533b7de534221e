//! In-place restarts (`--mode self`): after the job checkpoints and exits,
//! the next start in the same sandbox takes the working copy back from
//! `.ckptrun.store/kept` without copying, but only when it is exactly the
//! newest generation as committed. Any change to it, to its slot file or
//! to the boot, and the start restores from the generation as before.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

use common::*;

const STORE: &str = "ckptrun.store";

/// The job: adds one to the count in `st/n` (a directory, so that trees
/// are covered) and exits 17; with `FINISH` set it writes what it was
/// given (`seen`) and the inode of `st/n` (`ino`) and exits 0.
const JOB: &str = r#"if [ -n "$FINISH" ]; then cat st/n > seen; stat -c %i st/n > ino; exit 0; fi
n=$(cat st/n); echo $((n + 1)) > st/n; exit 17"#;

fn job(sandbox: &Sandbox, finish: bool) -> Command {
    let mut cmd = shell(
        sandbox,
        &[
            "--mode",
            "self",
            "-v",
            "--ckpt",
            "st",
            "--job-ckpt-exit",
            "17",
        ],
        JOB,
    );
    cmd.env_remove("_CONDOR_JOB_AD");
    if finish {
        cmd.env("FINISH", "1");
    }
    cmd
}

/// A sandbox where the job has run once: generation 1 holds `st/n` = 1,
/// and the working copy is kept.
fn committed_once(name: &str) -> Sandbox {
    let sandbox = Sandbox::new(name);
    std::fs::create_dir(sandbox.path("st")).unwrap();
    std::fs::write(sandbox.path("st/n"), "0\n").unwrap();
    let out = run(job(&sandbox, false));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert_eq!(generations(&sandbox.dir, STORE), [0, 1]);
    assert!(
        out.stderr
            .contains("working copy kept for an in-place restart"),
        "{}",
        out.stderr
    );
    assert!(!sandbox.path("st").exists(), "moved into kept");
    sandbox
}

fn kept(sandbox: &Sandbox, rest: &str) -> PathBuf {
    sandbox.path(format!(".{STORE}/kept/{rest}"))
}

/// The kept file, held open so that its inode cannot be freed and
/// reused by a copy (opening it changes none of its times).
fn hold(path: &std::path::Path) -> (std::fs::File, u64) {
    let file = std::fs::File::open(path).unwrap();
    let ino = file.metadata().unwrap().ino();
    (file, ino)
}

/// Starts the job to finish; returns (stderr, what it saw in st/n, the
/// inode of st/n it was given).
fn restart(sandbox: &Sandbox) -> (String, String, u64) {
    let out = run(job(sandbox, true));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let seen = std::fs::read_to_string(sandbox.path("seen")).unwrap();
    let ino = std::fs::read_to_string(sandbox.path("ino")).unwrap();
    assert!(!kept(sandbox, "").exists(), "kept is gone after a start");
    (out.stderr, seen, ino.trim().parse().unwrap())
}

#[test]
fn the_start_after_the_jobs_own_commit_takes_the_working_copy_back_without_copying() {
    let sandbox = committed_once("kept-reused");
    let (_held, before) = hold(&kept(&sandbox, "st/n"));
    let (stderr, seen, ino) = restart(&sandbox);
    assert!(
        stderr.contains("kept working copy is the newest generation as committed: moved back"),
        "{stderr}"
    );
    assert_eq!(seen, "1\n");
    assert_eq!(ino, before, "the very file kept, not a copy");

    // And again: a second cycle is kept and taken back the same way.
    let sandbox = committed_once("kept-twice");
    let out = run(job(&sandbox, false));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    assert!(out.stderr.contains("not copied"), "{}", out.stderr);
    let (_held, before) = hold(&kept(&sandbox, "st/n"));
    let (_, seen, ino) = restart(&sandbox);
    assert_eq!((seen.as_str(), ino), ("2\n", before));
}

/// Each way the kept copy, its slot or its record can change after the
/// commit; each start must restore generation 1 from its slot instead.
#[test]
fn a_kept_copy_that_is_not_exactly_the_generation_is_never_used() {
    let touch_back = |path: PathBuf, f: &dyn Fn(&PathBuf)| {
        let m = std::fs::metadata(&path).unwrap();
        let when = format!("@{}.{:09}", m.mtime(), m.mtime_nsec());
        f(&path);
        let ok = Command::new("touch")
            .args(["-m", "-d", &when])
            .arg(&path)
            .status();
        assert!(ok.unwrap().success());
    };
    type Change = Box<dyn Fn(&Sandbox)>;
    let changes: Vec<(&str, Change)> = vec![
        (
            "rewritten in place, same size, mtime set back",
            Box::new(move |s: &Sandbox| {
                touch_back(kept(s, "st/n"), &|p| std::fs::write(p, "9\n").unwrap())
            }),
        ),
        (
            "its mode changed",
            Box::new(|s: &Sandbox| {
                let ok = Command::new("chmod")
                    .arg("600")
                    .arg(kept(s, "st/n"))
                    .status();
                assert!(ok.unwrap().success());
            }),
        ),
        (
            "a file added beside it",
            Box::new(|s: &Sandbox| std::fs::write(kept(s, "st/extra"), "x").unwrap()),
        ),
        (
            "replaced by another file",
            Box::new(|s: &Sandbox| {
                std::fs::write(kept(s, "st/n.new"), "1\n").unwrap();
                std::fs::rename(kept(s, "st/n.new"), kept(s, "st/n")).unwrap();
            }),
        ),
        (
            "the slot file replaced by a copy of itself",
            Box::new(|s: &Sandbox| {
                let slot = s.path(format!("{STORE}.1"));
                let copy = s.path("slot.copy");
                let ok = Command::new("cp").arg("-p").arg(&slot).arg(&copy).status();
                assert!(ok.unwrap().success());
                std::fs::rename(copy, slot).unwrap();
            }),
        ),
        (
            "its record from another boot",
            Box::new(|s: &Sandbox| {
                let record = s.path(format!(".{STORE}/kept.record"));
                let mut bytes = std::fs::read(&record).unwrap();
                let boot = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap();
                let id = &boot[..36];
                let at = bytes
                    .windows(36)
                    .position(|w| w == id)
                    .expect("the boot in the record");
                bytes[at..at + 36].copy_from_slice(&[b'0'; 36]);
                std::fs::write(&record, bytes).unwrap();
            }),
        ),
        (
            "its record gone",
            Box::new(|s: &Sandbox| {
                std::fs::remove_file(s.path(format!(".{STORE}/kept.record"))).unwrap()
            }),
        ),
    ];
    for (i, (what, change)) in changes.iter().enumerate() {
        let sandbox = committed_once(&format!("kept-changed-{i}"));
        let (_held, before) = hold(&kept(&sandbox, "st/n"));
        change(&sandbox);
        let (stderr, seen, ino) = restart(&sandbox);
        assert_eq!(seen, "1\n", "{what}: {stderr}");
        assert_ne!(ino, before, "{what}: a copy, not the kept file");
        assert!(
            stderr.contains("working copy restored from generation 1"),
            "{what}: {stderr}"
        );
        assert!(!stderr.contains("not copied"), "{what}: {stderr}");
    }
}

/// With --ckpt-continue the job runs on after each commit and may write
/// its files again: nothing is kept, and a crash restarts it from the
/// committed generation, never from what it wrote after.
#[test]
fn a_job_that_wrote_after_a_commit_and_crashed_gets_the_committed_generation() {
    let sandbox = Sandbox::new("kept-continue-crash");
    let script = "echo $$ > pid; trap 'echo committed > s.tmp; mv s.tmp state' USR1
        while :; do sleep 0.05; [ -e go ] && echo torn > state && touch wrote; done";
    let running = start(sandbox.ckptrun([
        "--mode",
        "self",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
        "--ckpt-signal",
        "USR1",
        "--interval",
        "0.2",
        "--ckpt-continue",
        "--",
        "sh",
        "-c",
        script,
    ]));
    wait_until("a commit while the job runs", || {
        generations(&sandbox.dir, STORE).len() >= 2
    });
    std::fs::write(sandbox.path("go"), "").unwrap();
    wait_until("the job wrote after the commit", || {
        sandbox.path("wrote").exists()
    });
    // The job crashes.
    let pid: i32 = std::fs::read_to_string(sandbox.path("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) with plain integers.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let out = running.finish();
    assert_eq!(out.signal(), Some(libc::SIGKILL), "{}", out.stderr);
    assert!(!sandbox.path(format!(".{STORE}/kept")).exists());
    let args = [
        "--mode",
        "self",
        "-v",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
    ];
    let out = run(shell(&sandbox, &args, "cat state > seen"));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sandbox.path("seen")).unwrap(),
        "committed\n",
        "{}",
        out.stderr
    );
}

/// A commit interrupted after the working paths were moved into
/// `.ckptrun.store/kept` but before its generation was written leaves
/// them there with no record: the next start puts them back and treats
/// them as any working copy: replaced by the generation where it holds
/// them, kept as `PATH.uncommitted` where it does not. Nothing is lost.
#[test]
fn working_paths_a_killed_commit_left_in_kept_are_not_lost() {
    let sandbox = committed_once("kept-interrupted");
    std::fs::remove_file(sandbox.path(format!(".{STORE}/kept.record"))).unwrap();
    std::fs::write(kept(&sandbox, "new"), "written before the kill\n").unwrap();
    let mut cmd = shell(
        &sandbox,
        &[
            "--mode",
            "self",
            "-v",
            "--ckpt",
            "st",
            "--ckpt",
            "new",
            "--job-ckpt-exit",
            "17",
        ],
        "cat st/n > seen; stat -c %i st/n > ino; [ ! -e new ]",
    );
    cmd.env_remove("_CONDOR_JOB_AD");
    let out = run(cmd);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sandbox.path("seen")).unwrap(),
        "1\n"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.path("new.uncommitted")).unwrap(),
        "written before the kill\n",
        "{}",
        out.stderr
    );
    assert!(!kept(&sandbox, "").exists());
}
