//! The store as a user can trust it (`--mode self`, and the checks both
//! self and dmtcp mode share): every generation verified before a
//! restart, damage reported and never restored, options that change
//! between runs, and a disk that fills up. A shell script stands in for
//! the job: it counts its runs in `state`, checkpoints (exit 17) until
//! run N, then writes `result`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const STORE: &str = "ckptrun.store";

/// The job: `state` holds its run count, then what `fill` writes; runs 1
/// to N-1 checkpoint, run N writes `result`.
fn counting_job(fill: &str) -> String {
    format!(
        r#"n=$(head -n1 state 2>/dev/null || echo 0)
n=$((n + 1))
{{ echo "$n"; {fill}; }} > state || exit 9
[ "$n" -lt "${{N:-3}}" ] && exit 17
echo "done after $n runs" > result"#
    )
}

/// The job with PAD zero bytes after the count.
fn zero_job() -> String {
    counting_job(r#"head -c "${PAD:-0}" /dev/zero"#)
}

/// The job with an incompressible state: PAD random bytes.
fn random_job() -> String {
    counting_job(r#"head -c "${PAD:-0}" /dev/urandom"#)
}

/// The job with a text-like state of some 2 MB: lines a simulation might
/// write, which compress.
fn text_job() -> String {
    counting_job(r#"seq -f "step,%g,velocity,0.125,pressure,1013.25" 1 50000"#)
}

/// `ckptrun --mode self --ckpt state --job-ckpt-exit 17 EXTRA... -- sh -c` the zero job.
fn job(sandbox: &Sandbox, extra: &[&str]) -> Command {
    job_of(sandbox, extra, &zero_job())
}

/// `script` as the job, under ckptrun in `sandbox` with `extra` options.
fn job_of(sandbox: &Sandbox, extra: &[&str], script: &str) -> Command {
    let mut args = vec!["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut cmd = sandbox.ckptrun(&args);
    cmd.env_remove("_CONDOR_JOB_AD");
    cmd
}

/// Runs the job once; wants exit `code`; returns its stderr.
fn run_once(sandbox: &Sandbox, extra: &[&str], code: i32) -> String {
    let out = run(job(sandbox, extra));
    assert_eq!(out.code(), Some(code), "{}", out.stderr);
    out.stderr
}

/// Two checkpoints, as two evicted runs leave them: generations 1 and 2.
fn two_checkpoints(name: &str, extra: &[&str]) -> Sandbox {
    let sandbox = Sandbox::new(name);
    for _ in 0..2 {
        run_once(&sandbox, extra, 85);
    }
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2]);
    sandbox
}

/// The run count the generation in `slot` holds, as GNU tar reads it.
fn count_in(slot: &Path) -> String {
    let state = tar_member(slot, "state").expect("state in the generation");
    String::from_utf8_lossy(&state)
        .lines()
        .next()
        .unwrap()
        .to_string()
}

fn result(sandbox: &Sandbox) -> String {
    std::fs::read_to_string(sandbox.path("result")).unwrap_or_default()
}

/// stderr's lines that are not `-v` progress.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().collect()
}

#[test]
fn a_changed_byte_in_the_newest_generation_is_reported_and_the_one_before_restored() {
    let sandbox = two_checkpoints("damaged-newest", &[]);
    let newest = slot_of(&sandbox.dir, STORE, 2);
    flip_byte_of(&newest, "state");
    let stderr = run_once(&sandbox, &[], 85);
    // One line: what is damaged, what is restored instead, what is lost.
    assert_eq!(
        stderr,
        "ckptrun: ckptrun.store.0: generation 2 is damaged (member state does not match its \
         checksum): restarting from generation 1 (.ckptrun.store/older/ckptrun.store.1), the \
         job's work after it is lost\n"
    );
    // The job ran from generation 1 (count 1): its run 2 is generation 3,
    // which replaced the damaged one.
    assert_eq!(count_in(&slot_of(&sandbox.dir, STORE, 3)), "2");
    assert_eq!(generations(&sandbox.dir, STORE), [1, 3]);
    // And it finishes as an uninterrupted run does.
    run_once(&sandbox, &[], 0);
    assert_eq!(result(&sandbox), "done after 3 runs\n");
}

#[test]
fn a_damaged_description_or_manifest_is_caught_too() {
    for member in [".ckptrun", ".ckptrun.xxh3"] {
        let sandbox = two_checkpoints(&format!("damaged-{member}"), &[]);
        flip_byte_of(&slot_of(&sandbox.dir, STORE, 2), member);
        let stderr = run_once(&sandbox, &[], 85);
        assert!(
            stderr.contains("is damaged") && stderr.contains("restarting from generation 1"),
            "{member}: {stderr}"
        );
    }
}

/// The mode line of the newest generation's description changed to a
/// mode no ckptrun has: damage, the generation before restored (it was
/// refused as another mode's, with no fall-back). Made intact (its hash
/// listed anew), it is refused as a mode this ckptrun does not know.
#[test]
fn a_changed_mode_line_is_damage_and_an_unknown_mode_is_refused() {
    for hash_too in [false, true] {
        let sandbox = two_checkpoints(&format!("mode-line-{hash_too}"), &[]);
        let newest = slot_of(&sandbox.dir, STORE, 2);
        let description = tar_member(&newest, ".ckptrun").unwrap();
        let mut edited = std::fs::read(&newest).unwrap();
        replace_once(&mut edited, b"\nmode self\n", b"\nmode selg\n");
        if hash_too {
            let changed = String::from_utf8(description).unwrap();
            let changed = changed.replace("mode self", "mode selg");
            let (old, new) = (xxh3(changed.replace("selg", "self")), xxh3(changed));
            replace_once(&mut edited, old.as_bytes(), new.as_bytes());
        }
        std::fs::write(&newest, edited).unwrap();
        let out = run(job(&sandbox, &[]));
        if !hash_too {
            assert_eq!(out.code(), Some(85), "{}", out.stderr);
            assert!(
                out.stderr.contains(
                    "generation 2 is damaged (member .ckptrun does not match its checksum): \
                     restarting from generation 1"
                ),
                "{}",
                out.stderr
            );
            continue;
        }
        assert_eq!(out.code(), Some(125), "{}", out.stderr);
        assert_one_error_line(
            &out,
            "ckptrun.store.0 holds a checkpoint of --mode (unknown), not --mode self",
        );
        assert_eq!(generations(&sandbox.dir, STORE), [1, 2], "nothing changed");
        let top: Vec<_> = std::fs::read_dir(&sandbox.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains("ckptrun-new"))
            .collect();
        assert!(top.is_empty(), "left behind: {top:?}");
    }
}

/// `bytes` with the one occurrence of `old` replaced by `new`, as long.
fn replace_once(bytes: &mut [u8], old: &[u8], new: &[u8]) {
    assert_eq!(old.len(), new.len());
    let at: Vec<usize> = (0..=bytes.len() - old.len())
        .filter(|&i| &bytes[i..i + old.len()] == old)
        .collect();
    assert_eq!(
        at.len(),
        1,
        "{:?} found {} times",
        String::from_utf8_lossy(old),
        at.len()
    );
    bytes[at[0]..at[0] + old.len()].copy_from_slice(new);
}

/// The XXH3-64 of `text` in hex, as `xxhsum -H3` gives it.
fn xxh3(text: String) -> String {
    let mut sum = Command::new("xxhsum")
        .args(["-H3", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut sum.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = String::from_utf8(sum.wait_with_output().unwrap().stdout).unwrap();
    out.split_whitespace().last().unwrap().to_string()
}

#[test]
fn a_cut_off_generation_is_not_restored() {
    let sandbox = two_checkpoints("cut", &[]);
    let newest = slot_of(&sandbox.dir, STORE, 2);
    let len = std::fs::metadata(&newest).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap();
    f.set_len(len - 1024).unwrap();
    let stderr = run_once(&sandbox, &[], 85);
    assert!(stderr.contains("cut off (torn); ignored"), "{stderr}");
    // Restored from generation 1: the next, numbered after the whole
    // ones, holds run 2, in the cut one's slot.
    assert_eq!(count_in(&slot_of(&sandbox.dir, STORE, 2)), "2");
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2]);
}

#[test]
fn a_member_added_or_removed_is_caught() {
    // Added: GNU tar appends a member after the manifest.
    let sandbox = two_checkpoints("extra-member", &[]);
    let newest = slot_of(&sandbox.dir, STORE, 2);
    std::fs::write(sandbox.path("stray"), b"not checkpointed").unwrap();
    let tar = Command::new("tar")
        .arg("-rf")
        .arg(&newest)
        .arg("-C")
        .arg(&sandbox.dir)
        .arg("stray")
        .status()
        .unwrap();
    assert!(tar.success());
    let stderr = run_once(&sandbox, &[], 85);
    assert!(
        stderr.contains("generation 2 is damaged (its manifest is missing)"),
        "{stderr}"
    );

    // Removed: the state member dropped, the archive otherwise whole
    // (rewritten by Python's tarfile, as another tool would).
    let sandbox = two_checkpoints("missing-member", &[]);
    let newest = slot_of(&sandbox.dir, STORE, 2);
    let py = r#"
import sys, tarfile, io
src = tarfile.open(sys.argv[1])
members = [(m, src.extractfile(m).read() if m.isfile() else None) for m in src.getmembers()]
src.close()
out = tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT)
for m, data in members:
    if m.name != "state":
        out.addfile(m, io.BytesIO(data) if data is not None else None)
out.close()
"#;
    let status = Command::new("python3")
        .args(["-c", py])
        .arg(&newest)
        .status()
        .unwrap();
    assert!(status.success());
    let stderr = run_once(&sandbox, &[], 85);
    assert!(
        stderr.contains("generation 2 is damaged (members its manifest lists are missing)"),
        "{stderr}"
    );
}

#[test]
fn with_no_intact_generation_it_refuses_or_starts_afresh_when_asked() {
    let sandbox = two_checkpoints("none-intact", &[]);
    for g in [1, 2] {
        flip_byte_of(&slot_of(&sandbox.dir, STORE, g), "state");
    }
    let out = run(job(&sandbox, &[]));
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    let lines = warnings(&out.stderr);
    assert_eq!(
        lines.len(),
        3,
        "one line per damaged generation, then why: {lines:?}"
    );
    assert!(lines[0].contains("is damaged") && lines[1].contains("is damaged"));
    assert!(
        lines[2].starts_with("ckptrun: ckptrun.store: no intact generation")
            && lines[2].contains("--fresh-if-damaged"),
        "{}",
        lines[2]
    );
    assert!(!sandbox.path("result").exists(), "the job did not run");
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2], "nothing removed");

    // Asked to, it keeps them aside and starts as a first start.
    let stderr = run_once(&sandbox, &["--fresh-if-damaged"], 85);
    assert!(stderr.contains("starting afresh"), "{stderr}");
    let kept = std::fs::read_dir(sandbox.path(".ckptrun.store"))
        .unwrap()
        .filter(|e| {
            let e = e.as_ref().unwrap();
            e.file_name().to_string_lossy().starts_with("damaged.")
        })
        .count();
    assert_eq!(kept, 2, "the damaged generations are kept");
    assert_eq!(count_in(&slot_of(&sandbox.dir, STORE, 1)), "1");
}

#[test]
fn a_generation_checks_by_hand_with_tar_and_xxhsum() {
    let sandbox = two_checkpoints("by-hand", &["--keep", "1"]);
    let slot = slot_of(&sandbox.dir, STORE, 2);
    let check = |slot: &Path| {
        let dir = sandbox.path("unpacked");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let tar = Command::new("tar")
            .arg("-xf")
            .arg(slot)
            .arg("-C")
            .arg(&dir)
            .status()
            .unwrap();
        assert!(tar.success());
        Command::new("xxhsum")
            .args(["-c", ".ckptrun.xxh3"])
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let good = check(&slot);
    let said = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{said}");
    assert!(
        said.contains("state: OK") && said.contains(".ckptrun: OK"),
        "{said}"
    );
    flip_byte_of(&slot, "state");
    let bad = check(&slot);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stdout).contains("state: FAILED"));
}

#[test]
fn keep_raised_or_lowered_between_runs_just_works() {
    // Written with --keep 0, run on with --keep 2 (the failure seen: "open
    // the generation: No such file or directory"), then --keep 1.
    let sandbox = Sandbox::new("keep-changes");
    let n = ["N", "6"];
    let with = |keep: &str, code: i32| {
        let out = run(job(&sandbox, &["--keep", keep]).env(n[0], n[1]));
        assert_eq!(out.code(), Some(code), "--keep {keep}: {}", out.stderr);
        assert!(out.stderr.is_empty(), "--keep {keep}: {}", out.stderr);
    };
    with("0", 85);
    with("0", 85);
    assert_eq!(generations(&sandbox.dir, STORE), [2]);
    with("2", 85);
    assert_eq!(generations(&sandbox.dir, STORE), [2, 3], "2 is kept");
    with("2", 85);
    assert_eq!(generations(&sandbox.dir, STORE), [2, 3, 4]);
    with("1", 85);
    assert!(generations(&sandbox.dir, STORE).ends_with(&[4, 5]));
    with("0", 0);
    assert_eq!(result(&sandbox), "done after 6 runs\n");
}

#[test]
fn a_ckpt_added_or_removed_between_runs_just_works() {
    let sandbox = two_checkpoints("ckpt-changes", &[]);
    // Added: the generation does not hold `extra`, which the job has not
    // written yet; nothing to restore, nothing said.
    let out = run(job(&sandbox, &["--ckpt", "extra"]));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    assert_eq!(result(&sandbox), "done after 3 runs\n");

    // Removed: the generation's other member is simply not restored.
    let sandbox = Sandbox::new("ckpt-removed");
    std::fs::write(sandbox.path("extra"), b"x").unwrap();
    run_once(&sandbox, &["--ckpt", "extra"], 85);
    let stderr = run_once(&sandbox, &[], 85);
    assert!(stderr.is_empty(), "{stderr}");
    run_once(&sandbox, &[], 0);
    assert_eq!(result(&sandbox), "done after 3 runs\n");
}

#[test]
fn an_interval_added_or_removed_between_runs_just_works() {
    let sandbox = Sandbox::new("interval-changes");
    run_once(&sandbox, &[], 85);
    run_once(
        &sandbox,
        &["--interval", "3600", "--ckpt-signal", "USR1"],
        85,
    );
    run_once(&sandbox, &[], 0);
    assert_eq!(result(&sandbox), "done after 3 runs\n");
}

/// A job that has ended well is done: its store goes with it, and a new
/// run in the same directory starts afresh. Before, the generations
/// stayed in `.ckptrun.store/older`, and the next run resumed the ended
/// job from them: its third run at once, with the old state, exit 0.
#[test]
fn a_job_that_ended_well_leaves_no_store_and_the_next_run_starts_afresh() {
    let sandbox = two_checkpoints("store-ended", &[]);
    run_once(&sandbox, &[], 0);
    assert_eq!(result(&sandbox), "done after 3 runs\n");
    let mut left = names_in(&sandbox.dir);
    left.sort();
    assert_eq!(left, ["result", "state"], "only the job's own files");
    // The user clears the outputs and runs the job again.
    std::fs::remove_file(sandbox.path("result")).unwrap();
    std::fs::remove_file(sandbox.path("state")).unwrap();
    run_once(&sandbox, &[], 85);
    assert_eq!(generations(&sandbox.dir, STORE), [0, 1]);
    assert_eq!(count_in(&slot_of(&sandbox.dir, STORE, 1)), "1");
}

/// `.NAME` may hold what is not a generation: a directory of the user's
/// own that `--store` names (`--store cache`, and the user's `.cache`),
/// generations set aside as damaged. A successful end removes the
/// generations and leaves the rest. (A first version of the removal took
/// `.NAME` with all it held: a review found it.)
#[test]
fn the_end_of_a_job_removes_its_generations_and_nothing_else() {
    let sandbox = Sandbox::new("store-ended-own-files");
    let own = sandbox.path(".cache/pip");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::write(own.join("wheel.txt"), "precious").unwrap();
    for code in [85, 85, 0] {
        run_once(&sandbox, &["--store", "cache"], code);
    }
    assert_eq!(
        std::fs::read_to_string(own.join("wheel.txt")).unwrap(),
        "precious"
    );
    assert_eq!(slots(&sandbox.dir, "cache"), Vec::<PathBuf>::new());
    let mut left = names_in(&sandbox.path(".cache"));
    left.sort();
    assert_eq!(left, ["pip"]);

    let sandbox = two_checkpoints("store-ended-damaged", &[]);
    for g in [1, 2] {
        flip_byte_of(&slot_of(&sandbox.dir, STORE, g), "state");
    }
    let mut afresh = job(&sandbox, &["--fresh-if-damaged"]);
    let out = run(afresh.env("N", "1"));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("damaged generations are kept in"),
        "{}",
        out.stderr
    );
    let mut left = names_in(&sandbox.path(".ckptrun.store"));
    left.sort();
    assert_eq!(left, ["damaged.00", "damaged.01"], "as the warning said");
    assert_eq!(slots(&sandbox.dir, STORE), Vec::<PathBuf>::new());
}

/// The store of a job that ended well is retired in one step (`older`
/// renamed `ended`) before it is removed: a start that finds it so, the
/// removal interrupted, starts afresh and removes it.
#[test]
fn a_store_whose_removal_was_interrupted_is_not_restored() {
    let sandbox = two_checkpoints("store-ended-interrupted", &[]);
    let scratch = sandbox.path(".ckptrun.store");
    for slot in top_slots(&sandbox.dir, STORE) {
        std::fs::rename(&slot, scratch.join("older").join(slot.file_name().unwrap())).unwrap();
    }
    std::fs::rename(scratch.join("older"), scratch.join("ended")).unwrap();
    // (The job's state is kept in the scratch for an in-place restart.)
    let _ = std::fs::remove_file(sandbox.path("state"));
    let stderr = run_once(&sandbox, &["-v"], 85);
    assert!(
        stderr.contains("removed ./.ckptrun.store/ended: left by an interrupted run"),
        "{stderr}"
    );
    assert!(!scratch.join("ended").exists());
    assert_eq!(generations(&sandbox.dir, STORE), [0, 1]);
    assert_eq!(count_in(&slot_of(&sandbox.dir, STORE, 1)), "1");
}

#[test]
fn a_renamed_store_warns_that_the_old_one_is_ignored() {
    let sandbox = two_checkpoints("store-renamed", &[]);
    // The old store's newest generation in either slot: .0, then .1 (its
    // .0 then in .ckptrun.store/older).
    for (name, newest) in [("renamed", "0"), ("renamed-again", "1")] {
        assert!(sandbox.dir.join(format!("{STORE}.{newest}")).exists());
        let mut renamed = job(&sandbox, &["--store", name]);
        let out = run(renamed.env("N", "10"));
        assert_eq!(out.code(), Some(85), "{}", out.stderr);
        assert_eq!(
            out.stderr.trim_end(),
            format!(
                "ckptrun: {name}: a new store; the store ckptrun.store beside it \
                 (ckptrun.store.0 ..) is not used: if it is this job's, give --store \
                 ckptrun.store to restart from it"
            )
        );
        // Once it has generations of its own, it says nothing.
        let mut renamed = job(&sandbox, &["--store", name]);
        let out = run(renamed.env("N", "10"));
        assert!(out.stderr.is_empty(), "{}", out.stderr);
        // Gone, so that the next turn finds the old store alone; then
        // one more commit of the old store, to its other slot.
        std::fs::remove_dir_all(sandbox.dir.join(format!(".{name}"))).unwrap();
        for slot in slots(&sandbox.dir, name) {
            std::fs::remove_file(slot).unwrap();
        }
        let mut again = job(&sandbox, &[]);
        assert_eq!(run(again.env("N", "10")).code(), Some(85));
    }
}

#[test]
fn a_store_of_another_mode_is_refused_in_one_line() {
    let sandbox = two_checkpoints("mode-changed", &[]);
    let tools = install_fake_dmtcp(&sandbox.path("dmtcp"));
    let out = run(sandbox.ckptrun([
        "--mode",
        "dmtcp",
        "--dmtcp-dir",
        tools.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        "exit 0",
    ]));
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    assert_one_error_line(&out, "holds a checkpoint of --mode self, not --mode dmtcp");
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2], "nothing changed");
}

/// A `size` tmpfs mounted as a sandbox in `sandbox`, unmounted when
/// dropped. Without root (mount refused) the test is skipped, saying so,
/// unless CI is set: then it fails.
struct SmallDisk(std::mem::ManuallyDrop<Sandbox>);

impl SmallDisk {
    fn mount(sandbox: &Sandbox, size: &str, test: &str) -> Option<Self> {
        let dir = sandbox.path("disk");
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: needs root (mount), and CI is set"
            );
            eprintln!("SKIPPED {test}: needs root (mount)");
            return None;
        }
        Some(Self(std::mem::ManuallyDrop::new(Sandbox { dir })))
    }
}

impl std::ops::Deref for SmallDisk {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.0
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a process a failed test left in it cannot keep it
        // mounted. The sandbox beside it removes what is left.
        let _ = Command::new("umount").arg("-l").arg(&self.0.dir).status();
    }
}

#[test]
fn a_full_disk_fails_the_commit_cleanly_and_the_next_start_works() {
    let sandbox = Sandbox::new("disk-full");
    let Some(in_disk) = SmallDisk::mount(&sandbox, "3m", "a_full_disk_fails_the_commit_cleanly")
    else {
        return;
    };
    let with_pad = |pad: &str, code: i32| {
        // Random bytes: the store would compress zeros to nothing.
        let mut cmd = job_of(&in_disk, &["--keep", "0"], &random_job());
        let out = run(cmd.env("PAD", pad).env("N", "4"));
        assert_eq!(out.code(), Some(code), "PAD={pad}: {}", out.stderr);
        out.stderr
    };
    // A 1 MB checkpoint commits.
    with_pad("1000000", 85);
    assert_eq!(generations(&in_disk.dir, STORE), [1]);
    // A 1.4 MB one does not fit beside it: exit 123, one line, and what
    // it had written is gone at once.
    let stderr = with_pad("1400000", 123);
    assert!(
        stderr.contains("cannot commit the checkpoint")
            && stderr.contains("No space left on device"),
        "{stderr}"
    );
    assert_eq!(
        generations(&in_disk.dir, STORE),
        [1],
        "generation 1 is intact"
    );
    let scratch: Vec<_> = std::fs::read_dir(in_disk.path(".ckptrun.store"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "older")
        .collect();
    assert!(scratch.is_empty(), "{scratch:?}");
    // The next start on the same disk restores generation 1 (making room
    // from the working copy it replaces) and goes on.
    with_pad("800000", 85);
    assert_eq!(generations(&in_disk.dir, STORE), [2]);
    assert_eq!(count_in(&slot_of(&in_disk.dir, STORE, 2)), "2");
}

/// A restore that finds no room for the copy (a full disk) fails, exit
/// 125, and takes its partial copy away (it held the room, and sat at the
/// top of the sandbox for HTCondor to upload); with room again, the next
/// start restores.
#[test]
fn a_restore_without_room_leaves_no_partial_copy() {
    let sandbox = Sandbox::new("restore-full");
    let Some(in_disk) = SmallDisk::mount(&sandbox, "3m", "a_restore_without_room") else {
        return;
    };
    let mut commit = job_of(&in_disk, &["--keep", "0"], &random_job());
    assert_eq!(run(commit.env("PAD", "1000000")).code(), Some(85));
    let scratch = in_disk.path(".ckptrun.store");
    std::fs::remove_dir_all(scratch.join("kept")).unwrap();
    std::fs::remove_file(scratch.join("kept.record")).unwrap();
    // About 1.5 MB of the 3 MB taken: no room for a 1 MB copy.
    std::fs::write(in_disk.path("filler"), vec![1u8; 1_500_000]).unwrap();
    let out = run(job_of(&in_disk, &["--keep", "0"], &random_job()));
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    assert_one_error_line(&out, "No space left on device");
    let partial: Vec<_> = names_in(&in_disk.dir)
        .into_iter()
        .filter(|n| n.contains("ckptrun-new"))
        .collect();
    assert!(partial.is_empty(), "left at the top: {partial:?}");
    std::fs::remove_file(in_disk.path("filler")).unwrap();
    let mut again = job_of(&in_disk, &["--keep", "0"], &random_job());
    assert_eq!(run(again.env("PAD", "1000000")).code(), Some(85));
    assert_eq!(count_in(&slot_of(&in_disk.dir, STORE, 2)), "2");
}

#[test]
fn a_commit_without_room_for_two_compressing_processes_is_made_by_one() {
    // 12 MiB of text, then 12 of noise: compressed, some 12 MiB. One
    // process needs the state and that (36 MiB); two, on two CPUs, need
    // room for the second half's frames twice, for a moment (48). On a
    // 42 MiB disk the second's frames cannot be moved, and the first
    // compresses the rest itself: the commit is made, compressed, as
    // one process makes it, and restores. (On one CPU one process does it
    // all from the start; the build before this fallback exited 123.)
    let sandbox = Sandbox::new("two-compressors-no-room");
    let name = "a_commit_without_room_for_two_compressing_processes_is_made_by_one";
    let Some(in_disk) = SmallDisk::mount(&sandbox, "42m", name) else {
        return;
    };
    let mut state = Vec::new();
    for i in 0u32.. {
        if state.len() >= 12 << 20 {
            break;
        }
        state.extend_from_slice(format!("step,{i},velocity,0.125\n").as_bytes());
    }
    state.truncate(12 << 20);
    state.extend(random_bytes(12 << 20));
    std::fs::write(sandbox.path("ref"), &state).unwrap();
    let out = run(job_of(
        &in_disk,
        &["--keep", "0"],
        "cp ../ref state; exit 17",
    ));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&in_disk.dir, STORE, 1);
    let stored = tar_stored(&slot, "state").unwrap();
    assert!(
        stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) && stored.len() < state.len() * 3 / 5,
        "stored compressed: {} bytes",
        stored.len()
    );
    assert!(
        tar_member(&slot, "state").unwrap() == state,
        "zstd -d gives other bytes"
    );
    // Its manifest's hash is the state's: a restore elsewhere checks it.
    restores_elsewhere(&slot, &state, "two-compressors-no-room-2");
}

#[test]
fn a_commit_under_a_file_size_limit_two_processes_pass_is_made_by_one() {
    // RLIMIT_FSIZE of 6 MiB (as `ulimit -f` or Slurm passes a user's): an
    // 8 MiB state compresses to some 2 MiB, which fits; stored raw it
    // would not. Two processes on two CPUs write the second half's frames
    // further on than the limit (EFBIG: ckptrun's processes block
    // SIGXFSZ): the first then compresses the rest itself. The build
    // before this fallback stored the file raw, and the commit failed.
    use std::os::unix::process::CommandExt;
    let sandbox = Sandbox::new("two-compressors-fsize");
    let state = text_then_noise(5);
    std::fs::write(sandbox.path("state"), &state).unwrap();
    let mut cmd = job_of(&sandbox, &[], "touch state; exit 17");
    // SAFETY: setrlimit is async-signal-safe, and touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 6 << 20,
                rlim_max: 6 << 20,
            };
            match libc::setrlimit(libc::RLIMIT_FSIZE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let out = run(cmd);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&sandbox.dir, STORE, 1);
    assert!(std::fs::metadata(&slot).unwrap().len() < 6 << 20);
    restores_elsewhere(&slot, &state, "two-compressors-fsize-2");
}

/// `slot` alone in a new sandbox `name`, as an eviction brings it: the
/// start checks it and restores `state`, byte for byte.
fn restores_elsewhere(slot: &Path, state: &[u8], name: &str) {
    let elsewhere = Sandbox::new(name);
    std::fs::copy(slot, elsewhere.path(slot.file_name().unwrap())).unwrap();
    std::fs::write(elsewhere.path("ref"), state).unwrap();
    let out = run(job_of(
        &elsewhere,
        &[],
        "cmp -s state ref && echo same > result",
    ));
    assert_eq!(out.code(), Some(0), "{name}: {}", out.stderr);
    assert_eq!(result(&elsewhere), "same\n", "{name}");
}

/// `ckptrun --mode self ... EXTRA -- sh -c SCRIPT` in `sandbox` under
/// `strace -f -P PATH`: the calls on PATH that `inject` picks (`CALL:when=N`)
/// fail with EIO, as a failing disk returns it; `traced` (and the
/// injected call) are written to the file `trace`.
fn with_eio(
    sandbox: &Sandbox,
    (path, traced, inject): (&Path, &str, &str),
    trace: &Path,
    (extra, script): (&[&str], &str),
) -> Command {
    let (call, when) = inject.split_once(':').unwrap();
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o"])
        .arg(trace)
        .arg("-P")
        .arg(path)
        .args(["-e", &format!("trace={call},{traced}"), "-e"])
        .arg(format!("inject={call}:error=EIO:{when}"))
        .arg(CKPTRUN)
        .args(["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"])
        .args(extra)
        .args(["--", "sh", "-c", script])
        .current_dir(&sandbox.dir)
        .env_remove("_CONDOR_JOB_AD");
    cmd
}

#[test]
fn an_io_error_in_the_commit_keeps_the_last_generation() {
    // EIO injected into the archive's fsync (strace, as a failing disk
    // would return it).
    let sandbox = two_checkpoints("eio", &[]);
    let before = std::fs::read(slot_of(&sandbox.dir, STORE, 2)).unwrap();
    let archive = sandbox.dir.join(".ckptrun.store/building");
    let faults = (archive.as_path(), "fsync", "fsync:when=1");
    let mut cmd = with_eio(&sandbox, faults, "/dev/null".as_ref(), (&[], &zero_job()));
    let out = run(cmd.env("N", "4"));
    assert_eq!(out.code(), Some(123), "{}", out.stderr);
    assert!(
        out.stderr.contains("fsync the archive: I/O error"),
        "{}",
        out.stderr
    );
    // The commit removed the generation it was to replace (1) to make
    // room first; the newest is as it was.
    assert_eq!(generations(&sandbox.dir, STORE), [2]);
    assert_eq!(
        std::fs::read(slot_of(&sandbox.dir, STORE, 2)).unwrap(),
        before
    );
    // And the next start restores it.
    run_once(&sandbox, &[], 0);
    assert_eq!(result(&sandbox), "done after 3 runs\n");
}

/// An I/O error reading the newest generation (EIO injected by strace,
/// as a failing disk returns it), at its first read or only in the
/// check's reads of its data: the start stops (exit 125), saying which
/// file cannot be read; no generation is passed over, called damaged or
/// set aside, even with --fresh-if-damaged; and once the file reads, the
/// job goes on from it. Before, the first restored generation 1 (the
/// work after it lost), the second was an internal error.
#[test]
fn a_generation_that_cannot_be_read_stops_the_start_with_nothing_set_aside() {
    const PAD: &str = "4194304";
    for (when, extra) in [("1+", &[][..]), ("20+", &["--fresh-if-damaged"][..])] {
        let sandbox = Sandbox::new(&format!("unreadable-{}", &when[..when.len() - 1]));
        // 4 MiB of random bytes, stored raw: the check reads them 128 KiB
        // at a time, where a scan reads headers in fewer than 20 reads.
        for _ in 0..2 {
            let mut commit = job_of(&sandbox, &[], &random_job());
            assert_eq!(run(commit.env("PAD", PAD)).code(), Some(85));
        }
        // No in-place restart: the next start restores.
        let scratch = sandbox.dir.join(".ckptrun.store");
        std::fs::remove_dir_all(scratch.join("kept")).unwrap();
        std::fs::remove_file(scratch.join("kept.record")).unwrap();
        let newest = slot_of(&sandbox.dir, STORE, 2);
        let trace = sandbox.path("trace");
        let inject = format!("pread64:when={when}");
        let faults = (newest.as_path(), "pread64", inject.as_str());
        let mut cmd = with_eio(&sandbox, faults, &trace, (extra, &random_job()));
        let out = run(cmd.env("PAD", PAD));
        assert_eq!(out.code(), Some(125), "{when}: {}", out.stderr);
        assert_eq!(
            out.stderr,
            format!(
                "ckptrun: {}: cannot be read (I/O error): no generation is restored or set \
                 aside\nckptrun: ckptrun.store: read a slot: I/O error\n",
                newest.file_name().unwrap().to_str().unwrap()
            ),
            "{when}"
        );
        let trace = std::fs::read_to_string(&trace).unwrap();
        let struck = trace.lines().filter(|l| l.ends_with("(INJECTED)"));
        let data = struck.filter(|l| l.contains(", 131072, ")).count();
        assert_eq!(
            data > 0,
            when == "20+",
            "{when}: reads of the data struck:\n{trace}"
        );
        assert_eq!(generations(&sandbox.dir, STORE), [1, 2], "{when}");
        let left: Vec<_> = names_in(&sandbox.dir)
            .into_iter()
            .chain(names_in(&scratch))
            .filter(|n| n.contains("ckptrun-new") || n.starts_with("damaged"))
            .collect();
        assert!(left.is_empty(), "{when}: left behind: {left:?}");
        let mut again = job_of(&sandbox, &[], &random_job());
        assert_eq!(run(again.env("PAD", PAD)).code(), Some(0), "{when}");
        assert_eq!(result(&sandbox), "done after 3 runs\n", "{when}");
    }
}

/// An in-place start (the working copy kept since the last commit) stops
/// too when a slot cannot be read: it ran the job, and the commit then
/// replaced that slot, saying nothing.
#[test]
fn an_in_place_start_stops_on_a_slot_that_cannot_be_read() {
    let sandbox = two_checkpoints("unreadable-in-place", &[]);
    let older = slot_of(&sandbox.dir, STORE, 1);
    let faults = (older.as_path(), "pread64", "pread64:when=1+");
    let out = run(with_eio(
        &sandbox,
        faults,
        "/dev/null".as_ref(),
        (&[], &zero_job()),
    ));
    assert_eq!(out.code(), Some(125), "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "ckptrun: .ckptrun.store/older/ckptrun.store.1: cannot be read (I/O error): no \
         generation is restored or set aside\nckptrun: ckptrun.store: read a slot: I/O error\n"
    );
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2]);
    // Once it reads, the in-place restart goes on.
    run_once(&sandbox, &[], 0);
    assert_eq!(result(&sandbox), "done after 3 runs\n");
}

/// A slot that stops reading while the job runs (EIO injected by an
/// strace attached after the start): the commit fails (exit 123) and
/// changes nothing, where it took the unreadable slot for a torn one and
/// replaced it (or, read as no generation at all, could reuse a number).
#[test]
fn a_slot_that_cannot_be_read_at_a_commit_fails_it_and_changes_nothing() {
    let sandbox = two_checkpoints("unreadable-commit", &[]);
    let older = slot_of(&sandbox.dir, STORE, 1);
    let before: Vec<Vec<u8>> = [1, 2]
        .map(|g| std::fs::read(slot_of(&sandbox.dir, STORE, g)).unwrap())
        .into();
    let ckptrun = job_of(
        &sandbox,
        &[],
        "touch ready; while [ ! -e go ]; do sleep 0.02; done; echo 9 > state; exit 17",
    )
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    wait_until("the job started", || sandbox.path("ready").exists());
    let pid = ckptrun.id().to_string();
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-p", &pid, "-P"])
        .arg(&older)
        .args([
            "-e",
            "trace=pread64",
            "-e",
            "inject=pread64:error=EIO:when=1+",
        ])
        .spawn()
        .unwrap();
    let status = format!("/proc/{pid}/status");
    wait_until("strace is attached", || {
        std::fs::read_to_string(&status).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("TracerPid:") && !l.ends_with("\t0"))
        })
    });
    std::fs::write(sandbox.path("go"), "").unwrap();
    let out = ckptrun.wait_with_output().unwrap();
    let _ = strace.kill();
    let _ = strace.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(123), "{stderr}");
    assert!(
        stderr.contains(".ckptrun.store/older/ckptrun.store.1: cannot be read (I/O error)")
            && stderr.contains("read a slot: I/O error"),
        "{stderr}"
    );
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2]);
    for (g, bytes) in [1, 2].into_iter().zip(before) {
        assert_eq!(
            std::fs::read(slot_of(&sandbox.dir, STORE, g)).unwrap(),
            bytes
        );
    }
}

/// A symbolic link in a slot's place (which ckptrun never follows) is
/// not a generation it wrote: ignored and said, as a torn file is; it
/// made every start fail ("open a slot: Symbolic link loop"), the newest
/// generation intact beside it.
#[test]
fn a_symbolic_link_in_a_slots_place_is_ignored() {
    let sandbox = two_checkpoints("slot-link", &[]);
    let older = slot_of(&sandbox.dir, STORE, 1);
    let moved = sandbox.path("generation-1");
    std::fs::rename(&older, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &older).unwrap();
    let scratch = sandbox.dir.join(".ckptrun.store");
    std::fs::remove_dir_all(scratch.join("kept")).unwrap();
    std::fs::remove_file(scratch.join("kept.record")).unwrap();
    let stderr = run_once(&sandbox, &[], 0);
    assert_eq!(
        stderr,
        "ckptrun: .ckptrun.store/older/ckptrun.store.1: not an archive ckptrun wrote; ignored\n"
    );
    assert_eq!(result(&sandbox), "done after 3 runs\n");
}

/// The names in `dir`.
fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// EIO injected into the fsync of the store's directory that follows the
/// commit's rename: the generation is committed (the rename is the
/// commit, of an archive already fsync'd), said with a warning, and the
/// next start restores it. It was exit 123 saying the last generation was
/// kept, and the next start restored the new one all the same.
#[test]
fn a_failed_fsync_of_the_directory_after_the_rename_is_a_warning() {
    let sandbox = two_checkpoints("dir-fsync", &[]);
    let trace = sandbox.path("trace");
    let faults = (sandbox.dir.as_path(), "renameat", "fsync:when=2");
    let mut cmd = with_eio(&sandbox, faults, &trace, (&[], &zero_job()));
    let out = run(cmd.env("N", "4"));
    let trace = std::fs::read_to_string(&trace).unwrap();
    let calls: Vec<&str> = trace.lines().collect();
    let renamed = calls
        .iter()
        .position(|l| l.contains("\"building\""))
        .unwrap_or_else(|| panic!("no rename of the archive:\n{trace}"));
    assert!(
        calls
            .get(renamed + 1)
            .is_some_and(|l| l.contains("fsync(") && l.ends_with("(INJECTED)")),
        "the fsync after the rename was not the one struck:\n{trace}"
    );
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let newest = slot_of(&sandbox.dir, STORE, 3);
    assert!(
        out.stderr.contains(&format!(
            "ckptrun: {}: generation 3 committed, but the store's directory could not be \
             fsync'd (I/O error): a crash of the machine may lose it",
            newest.file_name().unwrap().to_str().unwrap()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(count_in(&newest), "3");
    let mut again = job(&sandbox, &[]);
    assert_eq!(run(again.env("N", "4")).code(), Some(0));
    assert_eq!(result(&sandbox), "done after 4 runs\n");
}

/// A FIFO under a --ckpt directory is not checkpoint data: the commit
/// fails (exit 123, the last generation kept) saying so, where it said
/// only "write the archive: Not supported".
#[test]
fn a_fifo_under_a_ckpt_path_fails_the_commit_saying_why() {
    let sandbox = Sandbox::new("fifo");
    std::fs::create_dir(sandbox.path("d")).unwrap();
    let out = run(sandbox.ckptrun([
        "--mode",
        "self",
        "--ckpt",
        "d",
        "--job-ckpt-exit",
        "17",
        "--",
        "sh",
        "-c",
        "echo a > d/a && mkfifo d/f && exit 17",
    ]));
    assert_eq!(out.code(), Some(123), "{}", out.stderr);
    assert_one_error_line(
        &out,
        "store a FIFO, socket or device under a --ckpt path: Not supported",
    );
    assert_eq!(generations(&sandbox.dir, STORE), [0]);
}

#[test]
fn periodic_commits_that_keep_failing_end_the_job_after_one_retry() {
    let sandbox = Sandbox::new("periodic-full");
    let Some(in_disk) = SmallDisk::mount(&sandbox, "4m", "periodic_commits_that_keep_failing")
    else {
        return;
    };
    // Each request: a 2.2 MB checkpoint replaces the last by rename; its
    // commit cannot fit beside it.
    let script =
        "trap 'rm -f state; head -c 2200000 /dev/urandom > state.new; mv state.new state' USR1
        while :; do sleep 0.05; done";
    let out = run(in_disk.ckptrun([
        "--mode",
        "self",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
        "--ckpt-signal",
        "USR1",
        "--ckpt-continue",
        "--interval",
        "0.3",
        "--",
        "sh",
        "-c",
        script,
    ]));
    assert_eq!(out.code(), Some(123), "{}", out.stderr);
    let lines: Vec<&str> = out.stderr.lines().collect();
    let said = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(said("No space left on device"), 2, "{}", out.stderr);
    assert_eq!(said("the job runs on; the next --interval tick"), 1);
    assert_eq!(said("a second periodic commit failed: ending the job"), 1);
    assert_eq!(
        generations(&in_disk.dir, STORE),
        [0],
        "nothing torn committed"
    );
}

#[test]
fn a_commit_needs_room_for_k_plus_2_copies_and_makes_more_from_the_oldest() {
    let sandbox = Sandbox::new("disk-k2");
    let Some(disk) = SmallDisk::mount(&sandbox, "24m", "a_commit_needs_room_for_k_plus_2") else {
        return;
    };
    let run_with = |keep: &str| {
        let mut cmd = job_of(&disk, &["--keep", keep], &random_job());
        cmd.env("PAD", (7 << 20).to_string()).env("N", "9");
        let out = run(cmd);
        assert_eq!(out.code(), Some(85), "--keep {keep}: {}", out.stderr);
        out.stderr
    };
    // A 7 MiB state, --keep 1, 24 MiB: the working copy, the newest
    // generation and the one committed fit; the generation it replaces
    // goes first (four copies would not fit).
    for _ in 0..4 {
        assert_eq!(run_with("1"), "");
    }
    assert_eq!(generations(&disk.dir, STORE), [3, 4]);
    // --keep 2 needs a fourth copy: the commit makes room from the oldest
    // generation, never the newest intact one, and says so.
    let stderr = run_with("2");
    assert_eq!(
        stderr,
        "ckptrun: ckptrun.store: the disk is full: generation 3 \
         (.ckptrun.store/older/ckptrun.store.1) removed to make room\n"
    );
    assert_eq!(generations(&disk.dir, STORE), [4, 5]);
}

#[test]
fn a_failed_commit_leaves_every_slot_a_transfer_list_names() {
    // HTCondor holds a job whose transfer_output_files names a file that
    // is missing when it uploads: a slot a commit removed to make room,
    // before it failed, comes back (empty).
    let sandbox = Sandbox::new("disk-listed");
    let Some(disk) = SmallDisk::mount(&sandbox, "12m", "a_failed_commit_leaves_every_slot") else {
        return;
    };
    let ad = sandbox.path("job.ad");
    std::fs::write(
        &ad,
        "TransferOutput = \"result, ckptrun.store.0, ckptrun.store.1\"\n",
    )
    .unwrap();
    let run_with = |pad: u64, code: i32| {
        let mut cmd = job_of(&disk, &[], &random_job());
        cmd.env("_CONDOR_JOB_AD", &ad)
            .env("PAD", pad.to_string())
            .env("N", "9");
        let out = run(cmd);
        assert_eq!(out.code(), Some(code), "PAD={pad}: {}", out.stderr);
    };
    for _ in 0..3 {
        run_with(1 << 20, 85);
    }
    assert_eq!(generations(&disk.dir, STORE), [2, 3]);
    // 7 MiB: the working copy, the newest generation and the new one do
    // not fit in 12 MiB, even without the generation it replaces.
    run_with(7 << 20, 123);
    for slot in ["ckptrun.store.0", "ckptrun.store.1"] {
        assert!(disk.path(slot).exists(), "{slot} is missing at the top");
    }
    assert_eq!(
        generations(&disk.dir, STORE),
        [3],
        "the newest intact one is kept"
    );
}

#[test]
fn a_compressible_state_is_stored_compressed_checked_by_hand_and_damage_is_caught() {
    let sandbox = Sandbox::new("compressed");
    let run_text = |code: i32| {
        let mut cmd = job_of(&sandbox, &[], &text_job());
        cmd.env("N", "4");
        let out = run(cmd);
        assert_eq!(out.code(), Some(code), "{}", out.stderr);
        out.stderr
    };
    run_text(85);
    run_text(85);
    let state = std::fs::metadata(sandbox.path("state"));
    let slot = slot_of(&sandbox.dir, STORE, 2);
    let stored = std::fs::metadata(&slot).unwrap().len();
    assert!(
        state.is_err(),
        "the working copy is kept out of HTCondor's way"
    );
    let raw = tar_member(&slot, "state").unwrap();
    assert!(
        raw.len() > 2_000_000 && stored * 5 < raw.len() as u64,
        "{stored} of {}",
        raw.len()
    );
    // By hand: GNU tar gives a zstd stream, zstd the state, and xxhsum the
    // manifest's line for it.
    let manifest = String::from_utf8(tar_member(&slot, ".ckptrun.xxh3").unwrap()).unwrap();
    let by_hand = Command::new("sh")
        .arg("-c")
        .arg("tar -xOf \"$0\" state | zstd -dc | xxhsum -H3")
        .arg(&slot)
        .output()
        .unwrap();
    let by_hand = String::from_utf8_lossy(&by_hand.stdout).into_owned();
    let hash = by_hand.split_whitespace().last().unwrap().to_string();
    assert!(
        manifest.contains(&format!("XXH3 (state) = {hash}")),
        "{manifest}\n{by_hand}"
    );
    // A changed byte in the compressed data: found, never restored.
    flip_byte_of(&slot, "state");
    let stderr = run_text(85);
    assert!(
        stderr.contains("generation 2 is damaged (member state does not match its checksum): restarting from generation 1"),
        "{stderr}"
    );
    // It resumed from run 1: runs 2 and 3 again, then 4.
    run_text(85);
    run_text(0);
    assert_eq!(result(&sandbox), "done after 4 runs\n");
}

/// `len` bytes from /dev/urandom.
fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").unwrap(),
        &mut bytes,
    )
    .unwrap();
    bytes
}

/// 1 MiB of random bytes, then text: a state that is stored compressed,
/// its first frame holding the random bytes as they are (a raw block).
fn noise_then_text(seed: u8) -> Vec<u8> {
    let mut state = random_bytes(1 << 20);
    for i in 0..100_000u32 {
        state.extend_from_slice(format!("step,{i},velocity,0.{seed}25\n").as_bytes());
    }
    state
}

#[test]
fn a_compressed_member_that_expands_to_other_bytes_is_found_and_never_restored() {
    // A changed byte in a raw block of a frame: the frames still expand,
    // to other bytes (GNU tar and zstd give them back without a word).
    // Only the checksum can tell; the restore expands the member once,
    // and its hash must be the manifest's.
    let sandbox = Sandbox::new("expands-wrong");
    let (a, b) = (noise_then_text(1), noise_then_text(2));
    std::fs::write(sandbox.path("a"), &a).unwrap();
    std::fs::write(sandbox.path("b"), &b).unwrap();
    for from in ["a", "b"] {
        let out = run(job_of(&sandbox, &[], &format!("cp {from} state; exit 17")));
        assert_eq!(out.code(), Some(85), "{}", out.stderr);
    }
    assert_eq!(generations(&sandbox.dir, STORE), [1, 2]);
    let slot = slot_of(&sandbox.dir, STORE, 2);
    let stored = tar_stored(&slot, "state").unwrap();
    assert!(stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) && stored.len() < b.len());
    flip_byte_at(&slot, "state", 1000);
    let expanded = tar_member(&slot, "state").expect("the damaged frames still expand");
    assert!(expanded.len() == b.len() && expanded != b);
    let out = run(job_of(
        &sandbox,
        &[],
        "cmp -s state a && echo a > result; exit 0",
    ));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "generation 2 is damaged (member state does not match its checksum): restarting from generation 1"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(result(&sandbox), "a\n");
}

/// Lines of text, then 2 MiB of random bytes: a state of 8 MiB or so,
/// stored compressed, the second half of its frames (which a restore
/// expands in a second process) ending in raw blocks.
fn text_then_noise(seed: u8) -> Vec<u8> {
    let mut state = Vec::new();
    for i in 0..250_000u32 {
        state.extend_from_slice(format!("step,{i},velocity,0.{seed}25\n").as_bytes());
    }
    state.extend(random_bytes(2 << 20));
    state
}

/// How many processes made the calls `strace -f` traced that `call` matches.
fn processes_that(trace: &str, call: impl Fn(&str) -> bool) -> usize {
    let mut pids: Vec<&str> = trace
        .lines()
        .filter(|l| call(l))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    pids.sort();
    pids.dedup();
    pids.len()
}

/// Where each zstd frame of `stored` starts: from the frames' and blocks'
/// headers (RFC 8878), read here apart from ckptrun's codec.
fn frame_starts(stored: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < stored.len() {
        starts.push(at);
        let mut p = at + [6, 7, 9, 13][stored[at + 4] as usize >> 6];
        loop {
            let h = u32::from_le_bytes([stored[p], stored[p + 1], stored[p + 2], 0]);
            p += 3 + if (h >> 1) & 3 == 1 {
                1
            } else {
                h as usize >> 3
            };
            if h & 1 == 1 {
                break;
            }
        }
        at = p;
    }
    starts
}

#[test]
fn a_large_compressed_state_is_expanded_by_two_processes_in_the_shipped_builds() {
    // Restored in a new sandbox by each shipped build (the codec's cold
    // parts compiled for size there), on two CPUs: two processes write
    // the state's frames (strace), which comes back byte for byte. On
    // one CPU, one process.
    let state = text_then_noise(3);
    let first = Sandbox::new("two-expanders-1");
    std::fs::write(first.path("ref"), &state).unwrap();
    let out = run(job_of(&first, &[], "cp ref state; exit 17"));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&first.dir, STORE, 1);
    let cpus = affinity_cpus();
    for target in ["x86_64-unknown-linux-musl", "i686-unknown-linux-musl"] {
        let second = Sandbox::new(&format!("two-expanders-2-{}", &target[..4]));
        std::fs::copy(&slot, second.path(slot.file_name().unwrap())).unwrap();
        let trace = second.path("trace");
        let job = format!(
            "cmp -s state {} && echo same > result",
            first.path("ref").display()
        );
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-e", "trace=pwrite64", "-o"])
            .arg(&trace)
            .arg(ckptrun_release(target))
            .args(["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"])
            .args(["--", "sh", "-c", &job])
            .current_dir(&second.dir)
            .env_remove("_CONDOR_JOB_AD");
        let out = run(cmd);
        assert_eq!(out.code(), Some(0), "{target}: {}", out.stderr);
        assert_eq!(result(&second), "same\n", "{target}");
        let trace = std::fs::read_to_string(trace).unwrap();
        // A frame's write into the state: 1 MiB.
        let writers = processes_that(&trace, |l| l.rsplit(" = ").next() == Some("1048576"));
        let want = if cpus > 1 { 2 } else { 1 };
        assert_eq!(
            writers, want,
            "{target}: processes that wrote frames:\n{trace}"
        );
    }
}

#[test]
fn a_large_state_is_compressed_by_two_processes_in_the_shipped_builds() {
    // Committed by each shipped build on two CPUs: two processes write the
    // state's frames into the archive (strace), the second's moved down
    // behind the first's. The member is byte for byte what one process
    // makes (`taskset`, one CPU), the slot file as long, `zstd -d` gives
    // the state back and so does a restore in a new sandbox. (On a machine
    // with one CPU both commits are one process's: only the last three
    // checks then mean anything.)
    let state = text_then_noise(4);
    let cpus = affinity_cpus();
    for target in ["x86_64-unknown-linux-musl", "i686-unknown-linux-musl"] {
        let commit = |name: &str, one_cpu: bool| {
            let sandbox = Sandbox::new(&format!("two-compressors-{name}-{}", &target[..4]));
            std::fs::write(sandbox.path("ref"), &state).unwrap();
            let trace = sandbox.path("trace");
            let mut cmd = Command::new(if one_cpu { "taskset" } else { "strace" });
            if one_cpu {
                cmd.args(["-c", "0"]);
            } else {
                cmd.args(["-f", "-qq", "-e", "trace=pwrite64,copy_file_range", "-o"])
                    .arg(&trace);
            }
            cmd.arg(ckptrun_release(target))
                .args(["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"])
                .args(["--", "sh", "-c", "cp ref state; exit 17"])
                .current_dir(&sandbox.dir)
                .env_remove("_CONDOR_JOB_AD");
            let out = run(cmd);
            assert_eq!(out.code(), Some(85), "{target} {name}: {}", out.stderr);
            let trace = std::fs::read_to_string(trace).unwrap_or_default();
            (sandbox, trace)
        };
        let (two, trace) = commit("two", false);
        let (one, _) = commit("one", true);
        // A frame's write: its bytes start with zstd's magic number.
        let writers = processes_that(&trace, |l| {
            l.contains(r#"pwrite64("#) && l.contains(r#", "(\265/\375"#)
        });
        let want = if cpus > 1 { 2 } else { 1 };
        assert_eq!(
            writers, want,
            "{target}: processes that wrote frames:\n{trace}"
        );
        // The second's frames moved within the archive (the same file in
        // and out), not made again by the first.
        let moved = trace.lines().any(|l| {
            let Some((_, call)) = l.split_once("copy_file_range(") else {
                return false;
            };
            let args: Vec<&str> = call.split(", ").collect();
            let copied = call
                .rsplit(" = ")
                .next()
                .and_then(|n| n.parse::<u64>().ok());
            args.len() > 2 && args[0] == args[2] && copied.is_some_and(|n| n > 0)
        });
        assert_eq!(moved, cpus > 1, "{target}: the frames moved:\n{trace}");
        let (slot_two, slot_one) = (slot_of(&two.dir, STORE, 1), slot_of(&one.dir, STORE, 1));
        let stored = tar_stored(&slot_two, "state").unwrap();
        assert!(
            stored.len() < state.len() / 2,
            "{target}: stored {}",
            stored.len()
        );
        assert!(
            stored == tar_stored(&slot_one, "state").unwrap(),
            "{target}: the member differs from one process's"
        );
        let len = |slot: &Path| std::fs::metadata(slot).unwrap().len();
        assert_eq!(
            len(&slot_two),
            len(&slot_one),
            "{target}: the slot files' lengths"
        );
        assert!(
            tar_member(&slot_two, "state").unwrap() == state,
            "{target}: GNU tar and zstd -d give other bytes"
        );
        restores_elsewhere(
            &slot_two,
            &state,
            &format!("two-compressors-new-{}", &target[..4]),
        );
    }
}

#[test]
fn damage_in_the_half_a_second_process_expands_is_found_and_never_restored() {
    // A restore expands a large member in two processes at once (on two
    // CPUs or more): the second half by a child, straight into the file,
    // which the first then hashes as written. A byte changed in that half,
    // in a raw block (the frames still expand, to other bytes) or in a
    // compressed one: found, and generation 1 restored instead.
    // The second half: the frames from the one that reaches half the
    // raw bytes on (1 MiB each). "raw": the last frame's last raw block;
    // "compressed": the first frame of the second half (text).
    let stored_at = |stored: &[u8], raw: usize, place: &str| match place {
        "raw" => stored.len() - 1000,
        _ => frame_starts(stored)[(raw / 2).div_ceil(1 << 20)] + 100,
    };
    for place in ["raw", "compressed"] {
        let sandbox = Sandbox::new(&format!("second-half-{place}"));
        let (a, b) = (text_then_noise(1), text_then_noise(2));
        std::fs::write(sandbox.path("a"), &a).unwrap();
        std::fs::write(sandbox.path("b"), &b).unwrap();
        for from in ["a", "b"] {
            let out = run(job_of(&sandbox, &[], &format!("cp {from} state; exit 17")));
            assert_eq!(out.code(), Some(85), "{}", out.stderr);
        }
        // A new sandbox: the slot files alone, as an eviction brings them.
        let elsewhere = Sandbox::new(&format!("second-half-{place}-2"));
        for n in [1, 2] {
            let slot = slot_of(&sandbox.dir, STORE, n);
            std::fs::copy(&slot, elsewhere.path(slot.file_name().unwrap())).unwrap();
        }
        std::fs::write(elsewhere.path("a"), &a).unwrap();
        let slot = slot_of(&elsewhere.dir, STORE, 2);
        let stored = tar_stored(&slot, "state").unwrap();
        assert!(stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) && stored.len() < b.len());
        flip_byte_at(&slot, "state", stored_at(&stored, b.len(), place));
        let sandbox = elsewhere;
        let out = run(job_of(
            &sandbox,
            &[],
            "cmp -s state a && echo a > result; exit 0",
        ));
        assert_eq!(out.code(), Some(0), "{place}: {}", out.stderr);
        assert!(
            out.stderr.contains("generation 2 is damaged")
                && out.stderr.contains("restarting from generation 1"),
            "{place}: {}",
            out.stderr
        );
        assert_eq!(result(&sandbox), "a\n", "{place}");
    }
}

#[test]
fn a_restore_expands_each_compressed_member_once() {
    // The check beside the copy takes the hashes of the compressed
    // members the copy expands from that expansion: one process reads
    // their frames, not two (strace: large reads of the slot, by pid).
    // The state is under 4 MiB: a larger one is shared between two
    // processes, each expanding half of the frames.
    let first = Sandbox::new("expand-once-1");
    std::fs::write(first.path("ref"), noise_then_text(3)).unwrap();
    let out = run(job_of(&first, &[], "cp ref state; exit 17"));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&first.dir, STORE, 1);
    let second = Sandbox::new("expand-once-2");
    let name = slot.file_name().unwrap();
    std::fs::copy(&slot, second.path(name)).unwrap();
    let trace = second.path("trace");
    let job = format!(
        "cmp -s state {} && echo same > result",
        first.path("ref").display()
    );
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=pread64", "-o"])
        .arg(&trace)
        .arg("-P")
        .arg(second.path(name))
        .arg(CKPTRUN)
        .args(["--mode", "self", "--ckpt", "state", "--job-ckpt-exit", "17"])
        .args(["--", "sh", "-c", &job])
        .current_dir(&second.dir)
        .env_remove("_CONDOR_JOB_AD");
    let out = run(cmd);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(result(&second), "same\n");
    let trace = std::fs::read_to_string(trace).unwrap();
    let mut readers: Vec<&str> = trace
        .lines()
        .filter(|l| {
            let ret = l.rsplit(" = ").next().unwrap_or("");
            ret.parse::<u64>().is_ok_and(|n| n >= 64 << 10)
        })
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    readers.sort();
    readers.dedup();
    assert_eq!(readers.len(), 1, "processes that read the frames:\n{trace}");
}

/// A job whose first run checkpoints `ref` as its state, and whose next
/// run checks that the state it got back is `ref`, byte for byte.
const REF_JOB: &str = r#"if [ -e state ]; then cmp -s state ref || exit 9; echo same > result; exit 0; fi
cp ref state || exit 9
exit 17"#;

/// Commits `bytes` as the state in one sandbox, then restores it in a new
/// one, as an eviction does: the slot files alone brought over. Returns
/// the slot's size and the state as GNU tar (and zstd) give it back.
fn committed_and_restored_elsewhere(name: &str, bytes: &[u8]) -> (u64, Vec<u8>) {
    committed_and_restored_with(name, bytes, &[])
}

/// `committed_and_restored_elsewhere`, with `extra` options for ckptrun.
fn committed_and_restored_with(name: &str, bytes: &[u8], extra: &[&str]) -> (u64, Vec<u8>) {
    let first = Sandbox::new(&format!("{name}-1"));
    std::fs::write(first.path("ref"), bytes).unwrap();
    let out = run(job_of(&first, extra, REF_JOB));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&first.dir, STORE, 1);
    let (size, member) = (
        std::fs::metadata(&slot).unwrap().len(),
        tar_member(&slot, "state").unwrap(),
    );
    let second = Sandbox::new(&format!("{name}-2"));
    std::fs::write(second.path("ref"), bytes).unwrap();
    std::fs::copy(&slot, second.path(slot.file_name().unwrap())).unwrap();
    let out = run(job_of(&second, extra, REF_JOB));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(result(&second), "same\n");
    (size, member)
}

#[test]
fn random_and_zero_filled_states_are_stored_as_each_pays_and_come_back_whole() {
    // Random bytes do not compress: stored as they are (GNU tar gives
    // them back as they were written).
    let random = random_bytes(1 << 20);
    let (size, member) = committed_and_restored_elsewhere("random", &random);
    assert!(member == random, "the random state is stored as it is");
    assert!(size > 1 << 20, "{size}");
    // 8 MiB of zeros: eight small frames.
    let zeros = vec![0u8; 8 << 20];
    let (size, member) = committed_and_restored_elsewhere("zeros", &zeros);
    assert!(size < 64 << 10, "{size}");
    assert!(member == zeros, "zstd expands the member to the state");
}

#[test]
fn a_compressed_copy_made_again_for_lack_of_room_is_checked_too() {
    // A start that finds an uncommitted 8 MiB state in the way, on a
    // 16 MiB disk: the generation's copy (8 MiB, stored compressed) does
    // not fit beside it. The generation is checked, the leftover removed,
    // the copy made again, and what it expanded to checked against the
    // hashes the manifest lists before it is put in place.
    let first = Sandbox::new("remake-1");
    let mut state = noise_then_text(5);
    state.extend(noise_then_text(6));
    std::fs::write(first.path("ref"), &state).unwrap();
    let out = run(job_of(&first, &[], "cp ref state; exit 17"));
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&first.dir, STORE, 1);
    let stored = tar_stored(&slot, "state").unwrap();
    assert!(
        stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
        "stored compressed"
    );
    let sandbox = Sandbox::new("remake-2");
    let Some(disk) = SmallDisk::mount(&sandbox, "16m", "a_compressed_copy_made_again") else {
        return;
    };
    std::fs::copy(&slot, disk.path(slot.file_name().unwrap())).unwrap();
    std::fs::write(disk.path("state"), vec![7u8; 8 << 20]).unwrap();
    let job = format!(
        "cmp -s state {} && echo same > result",
        first.path("ref").display()
    );
    let out = run(job_of(&disk, &[], &job));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(result(&disk), "same\n");
}

#[test]
fn a_compressed_state_of_many_full_frames_comes_back_whole() {
    // 12 MiB of noise, then text: compressed (the text pays), its frames
    // of noise as long as a frame can be (raw blocks), more of them than
    // the other tests' states have.
    let mut state = random_bytes(12 << 20);
    state.extend(noise_then_text(4).split_off(1 << 20));
    let (size, member) = committed_and_restored_elsewhere("full-frames", &state);
    assert!(member == state, "zstd expands the member to the state");
    assert!(size > 12 << 20 && size < state.len() as u64, "{size}");
}

#[test]
fn with_no_compress_a_state_that_compresses_is_stored_as_it_is() {
    // 8 MiB of zeros, which compress to some kilobytes by default (see
    // above): with --no-compress the member is the state's bytes as they
    // are, with nothing for zstd to expand.
    const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
    let zeros = vec![0u8; 8 << 20];
    let (size, member) = committed_and_restored_with("raw", &zeros, &["--no-compress"]);
    assert!(size > 8 << 20, "{size}");
    assert!(member == zeros, "the state is stored as it is");
    // From the environment, as a submit file's `environment` gives it.
    let sandbox = Sandbox::new("raw-env");
    std::fs::write(sandbox.path("ref"), &zeros).unwrap();
    let mut cmd = job_of(&sandbox, &[], REF_JOB);
    cmd.env("CKPTRUN_NO_COMPRESS", "1");
    let out = run(cmd);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = slot_of(&sandbox.dir, STORE, 1);
    assert!(std::fs::metadata(&slot).unwrap().len() > 8 << 20);
    let stored = tar_stored(&slot, "state").unwrap();
    assert!(stored == zeros, "stored raw, begins {:x?}", &stored[..4]);
    assert_ne!(&stored[..4], ZSTD);
    // A run without the flag restores it all the same, in a new sandbox.
    let next = Sandbox::new("raw-env-next");
    std::fs::write(next.path("ref"), &zeros).unwrap();
    std::fs::copy(&slot, next.path(slot.file_name().unwrap())).unwrap();
    let out = run(job_of(&next, &[], REF_JOB));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(result(&next), "same\n");
}

#[test]
fn generations_of_older_formats_still_restore() {
    // Generation 1 of `--mode self --ckpt state`, whose state is `seq -f
    // ... 1 2000` (82,893 bytes of text), as two older ckptruns wrote it:
    // - store2-fa2ab4c.1: at commit fa2ab4c (store 2, no codec);
    // - store3-0ad3e1f.1: at commit 0ad3e1f (store 3, the state
    //   compressed with the predefined sequence tables only).
    for fixture in ["store2-fa2ab4c.1", "store3-0ad3e1f.1"] {
        let sandbox = Sandbox::new(&format!("old-{fixture}"));
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/stores")
            .join(fixture);
        std::fs::copy(fixture, sandbox.path("ckptrun.store.1")).unwrap();
        let check = r#"seq -f "step,%g,velocity,0.125,pressure,1013.25" 1 2000 | cmp -s - state || exit 9
echo same > result"#;
        let out = run(job_of(&sandbox, &[], check));
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert_eq!(result(&sandbox), "same\n");
    }
}
