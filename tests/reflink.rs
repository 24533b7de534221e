//! On a filesystem that shares blocks (XFS, loop-mounted here as users
//! have it on execute nodes): the commit shares the job's blocks instead
//! of copying them, so does the restore, and a generation is still
//! verified in full before it is restored. Needs root (mount) and
//! mkfs.xfs; skipped without them, saying so, unless CI is set: then it
//! fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const STORE: &str = "ckptrun.store";

/// An XFS filesystem in a file, loop-mounted at `disk` in a sandbox;
/// unmounted when dropped.
struct Xfs {
    sandbox: Sandbox,
    disk: PathBuf,
}

impl Xfs {
    fn mount(name: &str, test: &str) -> Option<Self> {
        let sandbox = Sandbox::new(name);
        let image = sandbox.path("xfs.img");
        let disk = sandbox.path("disk");
        std::fs::create_dir(&disk).unwrap();
        let made = std::fs::File::create(&image).and_then(|f| f.set_len(400 << 20));
        let ok = made.is_ok()
            && sh(&format!("mkfs.xfs -q -m reflink=1 {}", image.display()))
            && sh(&format!(
                "mount -o loop {} {}",
                image.display(),
                disk.display()
            ));
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: needs root (mount -o loop) and mkfs.xfs (xfsprogs), and CI is set"
            );
            eprintln!("SKIPPED {test}: needs root (mount -o loop) and mkfs.xfs (xfsprogs)");
            return None;
        }
        Some(Self { sandbox, disk })
    }

    fn dir(&self, name: &str) -> Sandbox {
        let dir = self.disk.join(name);
        std::fs::create_dir(&dir).unwrap();
        Sandbox { dir }
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        // Lazily: a process a failed test left in it cannot keep it mounted.
        let _ = Command::new("umount").arg("-l").arg(&self.disk).status();
        let _ = &self.sandbox;
    }
}

fn sh(script: &str) -> bool {
    Command::new("sh")
        .args(["-c", script])
        .status()
        .is_ok_and(|s| s.success())
}

/// How many bytes of `file` are in extents shared with another file, as
/// filefrag sees them (4 KiB blocks).
fn shared_bytes(file: &Path) -> u64 {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "filefrag: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    // "   3:        4..    8193:         26..      8215:   8190:   shared"
    let blocks: u64 = text
        .lines()
        .filter(|l| l.contains("shared"))
        .filter_map(|l| l.split(':').nth(3)?.trim().parse::<u64>().ok())
        .sum();
    blocks * 4096
}

/// Whether all but a block or two of `file`'s `len` bytes of data are
/// shared (the archive's headers and manifest are its own).
fn shares_blocks(file: &Path, len: u64) -> bool {
    shared_bytes(file) >= len - 8192
}

/// Flips the bits of byte `at` of `file` where it lies, so that only
/// that block stops being shared. Flipped, not overwritten: a byte
/// written over random data is the one already there once in 256 runs,
/// and the damage would then be none.
fn flip_in_place(file: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    byte[0] ^= 0xff;
    file.write_all_at(&byte, at).unwrap();
    file.sync_all().unwrap();
}

fn self_mode(sandbox: &Sandbox, script: &str) -> Finished {
    let args = [
        "--mode",
        "self",
        "-v",
        "--ckpt",
        "state",
        "--job-ckpt-exit",
        "17",
    ];
    run(shell(sandbox, &args, script))
}

#[test]
fn on_xfs_commits_and_restores_share_blocks_and_are_still_verified() {
    let test = "on_xfs_commits_and_restores_share_blocks_and_are_still_verified";
    let Some(xfs) = Xfs::mount("reflink", test) else {
        return;
    };
    let job = xfs.dir("job");
    assert!(sh(&format!(
        "head -c 33554432 /dev/urandom > {0}/state && cp {0}/state {0}/../ref",
        job.dir.display()
    )));

    // The first start commits generation 0; the job then rewrites a
    // byte and checkpoints: generation 1.
    let script = "printf x | dd of=state bs=1 seek=4096 conv=notrunc status=none; exit 17";
    let out = self_mode(&job, script);
    assert_eq!(out.code(), Some(85), "{}", out.stderr);
    let slot = |s: &Sandbox, n: u32| s.path(format!("{STORE}.{n}"));
    assert_eq!(generations(&job.dir, STORE), [0, 1]);
    assert!(
        shares_blocks(&slot(&job, 0), 32 << 20),
        "generation 0 shares the job's blocks"
    );
    assert!(sh(&format!(
        "printf x | dd of={}/ref bs=1 seek=4096 conv=notrunc status=none",
        xfs.disk.display()
    )));
    assert_eq!(
        tar_member(&slot(&job, 1), "state").unwrap(),
        std::fs::read(xfs.disk.join("ref")).unwrap(),
        "generation 1 holds the rewritten state"
    );

    // A new sandbox, with only the slot files (as HTCondor brings them):
    // restored, sharing the slot's blocks, and what the job gets is
    // generation 1. The job then fails (exit 5), so that the store, and
    // the sharing, stay: a successful end removes the generations.
    let new = xfs.dir("new");
    for n in [0, 1] {
        assert!(sh(&format!(
            "cp --reflink=never {} {}",
            slot(&job, n).display(),
            slot(&new, n).display()
        )));
    }
    let out = self_mode(&new, "cmp -s state ../ref && exit 5");
    assert_eq!(out.code(), Some(5), "{}", out.stderr);
    assert!(
        out.stderr.contains("restored from generation 1"),
        "{}",
        out.stderr
    );
    assert!(
        shares_blocks(&new.path("state"), 32 << 20),
        "the restored copy shares blocks"
    );

    // Damage in a shared generation is still found, and never restored.
    let damaged = xfs.dir("damaged");
    for n in [0, 1] {
        assert!(sh(&format!(
            "cp --reflink=always {} {}",
            slot(&job, n).display(),
            slot(&damaged, n).display()
        )));
    }
    flip_in_place(&slot(&damaged, 1), 20000);
    let out = self_mode(&damaged, "true");
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("generation 1 is damaged"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("restored from generation 0"),
        "{}",
        out.stderr
    );
}
