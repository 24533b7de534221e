//! A self-checkpointing job (PROTOCOLS.md §2) whose checkpoint is *not*
//! atomic, for the tests of `ckptrun --mode self`: it rewrites its state in
//! place, slowly, with no fsync and no rename, so a kill at the wrong time
//! leaves it torn. Protecting it is ckptrun's job.
//!
//! `self_job STATE STEPS RESULT [--resume PATH]` folds STEPS steps into an
//! accumulator; an uninterrupted run and any correctly resumed run write
//! the same RESULT (`steps=STEPS acc=HEX`) and exit 0.
//!
//! - STATE is the checkpoint: one file, or with `SELF_JOB_DIR=1` a
//!   directory holding `a` and `b`, each half of the state with its own
//!   checksum and the same step. On start a valid STATE is resumed, an
//!   absent one (or an empty directory) means step 0, and a torn one is
//!   `self_job: torn checkpoint STATE: WHY` and exit 3.
//! - `--resume PATH`: resume from PATH instead, which must hold a valid
//!   state (else exit 4); prints `resumed via --resume`.
//! - Prints `start step=N` once it knows where it starts (not with
//!   `SELF_JOB_QUIET=1`: the pool tests compare HTCondor's output file
//!   with an uninterrupted run's).
//! - Checkpoints when SIGUSR1 arrives (after the current step) and, with
//!   `SELF_JOB_CKPT_EVERY=N`, every N steps; then prints
//!   `checkpoint step=N` (unless quiet) and exits 17, or with
//!   `SELF_JOB_CKPT_SIGNAL_DEATH=SIG` dies by SIG. SIGTERM is left alone.
//!
//! State file: `SELFJOB1`, step and value (u64 LE), PAD bytes derived from
//! (step, value, part), then FNV-1a 64 of all that (u64 LE). Single file:
//! part 0, value = acc, PAD = `SELF_JOB_PAD` [262144]. Directory: `a` is
//! part 1 with the low 32 bits of acc, `b` part 2 with the high ones, each
//! with PAD/2. Any mix of two states fails the checksum, the pad or the
//! a/b step check. tests/harness.rs duplicates this format.
//!
//! With `SELF_JOB_PAD_TEXT=1` the PAD bytes are text-like instead (lines
//! of a simulation's log, as zstd -1 shrinks some 7x), derived the same
//! way: for the tests and benchmarks of compression.
//!
//! Other knobs: `SELF_JOB_STEP_MS` [5] per step, `SELF_JOB_WRITE_US` [200]
//! between 16 KiB chunks of a checkpoint, `SELF_JOB_EXIT=N` exits N right
//! after `start`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static CHECKPOINT_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    CHECKPOINT_REQUESTED.store(true, Ordering::SeqCst);
}

const MAGIC: &[u8; 8] = b"SELFJOB1";
const CHUNK: usize = 16 * 1024;
const CHECKPOINTED: i32 = 17;

struct Settings {
    dir: bool,
    pad: usize,
    step: Duration,
    between_chunks: Duration,
    every: u64,
    death_signal: Option<i32>,
    exit: Option<i32>,
}

fn main() {
    // First of all, so that an early request is served rather than fatal.
    install_usr1();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (state, steps, result, resume) = match &args[..] {
        [s, n, r] => (s, n, r, None),
        [s, n, r, flag, p] if flag == "--resume" => (s, n, r, Some(p)),
        _ => fail(2, "usage: self_job STATE STEPS RESULT [--resume PATH]"),
    };
    let steps: u64 = steps.parse().unwrap_or_else(|_| fail(2, "bad STEPS"));
    let state = PathBuf::from(state);
    let settings = Settings {
        dir: env_num("SELF_JOB_DIR", 0) == 1,
        pad: env_num("SELF_JOB_PAD", 262_144) as usize,
        step: Duration::from_millis(env_num("SELF_JOB_STEP_MS", 5)),
        between_chunks: Duration::from_micros(env_num("SELF_JOB_WRITE_US", 200)),
        every: env_num("SELF_JOB_CKPT_EVERY", 0),
        death_signal: env_opt("SELF_JOB_CKPT_SIGNAL_DEATH").map(|n| n as i32),
        exit: env_opt("SELF_JOB_EXIT").map(|n| n as i32),
    };

    let (mut step, mut acc) = match resume {
        Some(path) => match load(Path::new(path), settings.dir) {
            Ok(Some(found)) => {
                println!("resumed via --resume");
                found
            }
            Ok(None) => fail(4, &format!("--resume {path}: no checkpoint there")),
            Err(why) => fail(4, &format!("--resume {path}: {why}")),
        },
        None => match load(&state, settings.dir) {
            Ok(found) => found.unwrap_or((0, 0)),
            Err(why) => fail(3, &format!("torn checkpoint {}: {why}", state.display())),
        },
    };
    let quiet = env_num("SELF_JOB_QUIET", 0) == 1;
    if !quiet {
        println!("start step={step}");
    }
    if let Some(code) = settings.exit {
        std::process::exit(code);
    }

    while step < steps {
        if CHECKPOINT_REQUESTED.load(Ordering::SeqCst) {
            checkpoint_and_exit(&state, step, acc, &settings);
        }
        std::thread::sleep(settings.step);
        step += 1;
        acc = acc.wrapping_mul(6364136223846793005).wrapping_add(step);
        if settings.every > 0 && step % settings.every == 0 && step < steps {
            checkpoint_and_exit(&state, step, acc, &settings);
        }
    }
    let tmp = format!("{result}.tmp");
    std::fs::write(&tmp, format!("steps={steps} acc={acc:016x}\n"))
        .and_then(|()| std::fs::rename(&tmp, result))
        .unwrap_or_else(|e| fail(1, &format!("{result}: {e}")));
}

/// The state at `path`: None if there is none, Err(why) if it is torn.
fn load(path: &Path, dir: bool) -> Result<Option<(u64, u64)>, String> {
    if !dir {
        return match std::fs::read(path) {
            Ok(bytes) => parse(&bytes, 0).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        };
    }
    if !path.exists() {
        return Ok(None);
    }
    let read = |name: &str| match std::fs::read(path.join(name)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    };
    let (a, b) = match (read("a")?, read("b")?) {
        (None, None) => return Ok(None),
        (Some(a), Some(b)) => (a, b),
        (a, _) => {
            return Err(format!(
                "{} is missing",
                if a.is_none() { "a" } else { "b" }
            ));
        }
    };
    let (step_a, low) = parse(&a, 1).map_err(|why| format!("a: {why}"))?;
    let (step_b, high) = parse(&b, 2).map_err(|why| format!("b: {why}"))?;
    if step_a != step_b {
        return Err(format!("a is at step {step_a}, b at step {step_b}"));
    }
    if low >> 32 != 0 || high >> 32 != 0 {
        return Err("a half holds more than 32 bits".into());
    }
    Ok(Some((step_a, low | high << 32)))
}

/// (step, value) of one state file of `part`, or why it is not valid.
fn parse(bytes: &[u8], part: u64) -> Result<(u64, u64), String> {
    if bytes.len() < 32 {
        return Err(format!("{} bytes, too short", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return Err("bad magic".into());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().unwrap()) {
        return Err("bad checksum".into());
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (step, value) = (word(8), word(16));
    if body[24..] != pad(step, value, part, body.len() - 24) {
        return Err("padding from another state".into());
    }
    Ok((step, value))
}

fn encode(step: u64, value: u64, part: u64, pad_len: usize) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(step.to_le_bytes());
    out.extend(value.to_le_bytes());
    out.extend(pad(step, value, part, pad_len));
    let sum = fnv1a(&out);
    out.extend(sum.to_le_bytes());
    out
}

/// splitmix64 bytes seeded by the state, so that each state has its own;
/// or, with SELF_JOB_PAD_TEXT=1, text lines made from them.
fn pad(step: u64, value: u64, part: u64, len: usize) -> Vec<u8> {
    let mut x = step ^ value.rotate_left(29) ^ part.wrapping_mul(0xd1b5_4a32_d192_ed03);
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let text = env_num("SELF_JOB_PAD_TEXT", 0) == 1;
    let mut out = Vec::with_capacity(len + 128);
    let mut line = 0u64;
    while out.len() < len {
        let z = next();
        if text {
            const WORDS: [&str; 4] = ["stable", "rising", "falling", "stable"];
            line += 1;
            let word = WORDS[(z >> 62) as usize];
            let _ = writeln!(
                out,
                "cell {:4}, pressure 1013.{:02}, velocity 0.{:03}, state {word}",
                line % 4096,
                z % 100,
                (z >> 8) % 1000
            );
        } else {
            out.extend(z.to_le_bytes());
        }
    }
    out.truncate(len);
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn checkpoint_and_exit(state: &Path, step: u64, acc: u64, settings: &Settings) -> ! {
    let written = if settings.dir {
        let half = settings.pad / 2;
        std::fs::create_dir_all(state)
            .and_then(|()| {
                write_slowly(
                    &state.join("a"),
                    &encode(step, acc & 0xffff_ffff, 1, half),
                    settings,
                )
            })
            .and_then(|()| {
                write_slowly(
                    &state.join("b"),
                    &encode(step, acc >> 32, 2, half),
                    settings,
                )
            })
    } else {
        write_slowly(state, &encode(step, acc, 0, settings.pad), settings)
    };
    if let Err(e) = written {
        fail(1, &format!("checkpoint {}: {e}", state.display()));
    }
    if env_num("SELF_JOB_QUIET", 0) != 1 {
        println!("checkpoint step={step}");
    }
    if let Some(sig) = settings.death_signal {
        die_by(sig);
    }
    std::process::exit(CHECKPOINTED);
}

/// In place, no O_TRUNC, chunk by chunk, no fsync: torn on purpose.
fn write_slowly(path: &Path, bytes: &[u8], settings: &Settings) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    for chunk in bytes.chunks(CHUNK) {
        file.write_all(chunk)?;
        std::thread::sleep(settings.between_chunks);
    }
    file.set_len(bytes.len() as u64)
}

fn env_num(name: &str, default: u64) -> u64 {
    env_opt(name).unwrap_or(default)
}

fn env_opt(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn fail(code: i32, why: &str) -> ! {
    eprintln!("self_job: {why}");
    std::process::exit(code);
}

fn install_usr1() {
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe; the sigaction struct is fully initialised.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_usr1 as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
}

fn die_by(sig: i32) -> ! {
    // SAFETY: resetting a disposition, unblocking and signalling ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig);
}
