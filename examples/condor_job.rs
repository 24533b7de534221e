//! A stand-in for a condor_compile'd program, for ckptrun's tests and
//! demo. It speaks the checkpoint library's protocol (PROTOCOLS.md §1):
//!
//! - `-_condor_ckpt FILE`, `-_condor_restart FILE`, `-_condor_relocatable`
//!   (and the pass-through debugging switches) anywhere in argv, stripped
//!   before the program sees its arguments; an unknown `-_condor_*` is
//!   `Condor: Error: ...` and exit 255; the default FILE is argv[0].ckpt;
//! - SIGTSTP: write FILE.tmp, rename it to FILE, sleep 1 s, die by SIGUSR2;
//! - SIGUSR2: write a checkpoint and carry on;
//! - a restore that cannot read its image dies by SIGKILL.
//!
//! The program itself: `condor_job STEPS [MS_PER_STEP]` counts STEPS
//! steps, folding each into a checksum, and prints the result. Its state
//! (step, checksum) is its "process image".
//!
//! `CONDOR_JOB_VERBOSE=1` makes it say on stderr where it checkpointed
//! (`condor_job: checkpointed at step N`) and resumed (`condor_job:
//! resumed at step N`). Off by default, as the checkpoint library is
//! silent: under HTCondor the job's stderr is appended to across restarts,
//! and an evicted run's `error` file must equal an uninterrupted run's.
//!
//! `CONDOR_JOB_INIT_MS=N` delays installing the handlers by N ms, as a
//! slow-starting checkpoint library would.
//!
//! `CONDOR_JOB_REPORT=PATH` makes it write, once its handlers are in
//! place, its personality (from /proc/self/personality) and its raw argv,
//! NUL-separated: tests read it to know the job is running and how it was
//! started.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static CHECKPOINT_AND_EXIT: AtomicBool = AtomicBool::new(false);
static CHECKPOINT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_tstp(_: libc::c_int) {
    CHECKPOINT_AND_EXIT.store(true, Ordering::SeqCst);
}

extern "C" fn on_usr2(_: libc::c_int) {
    CHECKPOINT.store(true, Ordering::SeqCst);
}

/// Size of the image on disk: big enough that writing it is not instant.
const IMAGE_BYTES: usize = 256 * 1024;

struct Condor {
    ckpt: Option<OsString>,
    restart: Option<OsString>,
}

fn main() {
    let raw: Vec<OsString> = std::env::args_os().collect();
    let (condor, args) = strip_condor_args(&raw);
    let ckpt_file = condor
        .ckpt
        .clone()
        .or_else(|| condor.restart.clone())
        .unwrap_or_else(|| {
            [raw[0].as_os_str(), OsStr::new(".ckpt")]
                .iter()
                .copied()
                .collect()
        });

    // A checkpoint library that takes a while to start (CONDOR_JOB_INIT_MS):
    // until it has, SIGTSTP stops the program and SIGUSR2 kills it.
    if let Some(ms) = std::env::var("CONDOR_JOB_INIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    install(libc::SIGTSTP, on_tstp);
    install(libc::SIGUSR2, on_usr2);
    // Like the checkpoint library, take these signals even if the parent
    // left them blocked: a request queued before we were ready is served now.
    unblock(&[libc::SIGTSTP, libc::SIGUSR2]);
    report(&raw);

    let steps: u64 = args
        .first()
        .and_then(|s| s.to_str()?.parse().ok())
        .unwrap_or(20);
    let pause = Duration::from_millis(
        args.get(1)
            .and_then(|s| s.to_str()?.parse().ok())
            .unwrap_or(50),
    );

    let (mut step, mut sum) = match &condor.restart {
        Some(file) => restore(file),
        None => (0, 0),
    };
    let verbose = std::env::var_os("CONDOR_JOB_VERBOSE").is_some_and(|v| v == "1");
    if condor.restart.is_some() && verbose {
        eprintln!("condor_job: resumed at step {step}");
    }
    while step < steps {
        std::thread::sleep(pause);
        step += 1;
        sum = sum.wrapping_mul(6364136223846793005).wrapping_add(step);
        if CHECKPOINT.swap(false, Ordering::SeqCst) {
            write_image(&ckpt_file, step, sum);
        }
        if CHECKPOINT_AND_EXIT.load(Ordering::SeqCst) {
            write_image(&ckpt_file, step, sum);
            if verbose {
                eprintln!("condor_job: checkpointed at step {step}");
            }
            std::thread::sleep(Duration::from_secs(1));
            die_by(libc::SIGUSR2);
        }
    }
    println!("condor_job: {steps} steps, checksum {sum:016x}");
}

fn strip_condor_args(raw: &[OsString]) -> (Condor, Vec<OsString>) {
    let mut condor = Condor {
        ckpt: None,
        restart: None,
    };
    let mut args = Vec::new();
    let mut it = raw.iter().skip(1);
    while let Some(arg) = it.next() {
        let bytes = arg.as_bytes();
        if !bytes.starts_with(b"-_condor_") {
            args.push(arg.clone());
            continue;
        }
        match &bytes[b"-_condor_".len()..] {
            b"ckpt" => condor.ckpt = it.next().cloned(),
            b"restart" => condor.restart = it.next().cloned(),
            b"relocatable" | b"nowarn" | b"aggravate_bugs" | b"debug_wait" => {}
            b"cmd_fd" => {
                it.next();
            }
            b"warning" => {
                it.next();
                it.next();
            }
            d if d.starts_with(b"D_") => {}
            _ => {
                eprintln!("Condor: Error: unknown option {}", arg.display());
                std::process::exit(255);
            }
        }
    }
    (condor, args)
}

fn restore(file: &OsStr) -> (u64, u64) {
    let parsed = std::fs::read(file).ok().and_then(|image| {
        let text = std::str::from_utf8(image.split(|&b| b == 0).next()?).ok()?;
        let mut words = text.strip_prefix("condor_job image\n")?.split_whitespace();
        Some((
            words.next()?.parse().ok()?,
            u64::from_str_radix(words.next()?, 16).ok()?,
        ))
    });
    parsed.unwrap_or_else(|| {
        eprintln!("condor_job: cannot restore from {}", file.display());
        die_by(libc::SIGKILL)
    })
}

/// Writes FILE.tmp, then renames it over FILE, as the library does.
fn write_image(file: &OsStr, step: u64, sum: u64) {
    let mut tmp = file.to_os_string().into_vec();
    tmp.extend_from_slice(b".tmp");
    let tmp = OsString::from_vec(tmp);
    let mut image = format!("condor_job image\n{step} {sum:016x}\n").into_bytes();
    image.resize(IMAGE_BYTES, 0);
    let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(&image));
    if written.and_then(|()| std::fs::rename(&tmp, file)).is_err() {
        die_by(libc::SIGKILL);
    }
}

fn report(raw: &[OsString]) {
    let Some(path) = std::env::var_os("CONDOR_JOB_REPORT") else {
        return;
    };
    let persona = std::fs::read_to_string("/proc/self/personality").unwrap_or_default();
    let mut out = persona.into_bytes();
    for arg in raw {
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    let tmp = [path.as_os_str(), OsStr::new(".part")]
        .iter()
        .copied()
        .collect::<OsString>();
    std::fs::write(&tmp, out)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .expect("report");
}

fn install(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the handlers only store to atomics, which is
    // async-signal-safe; the sigaction struct is fully initialised.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, std::ptr::null_mut());
    }
}

fn unblock(sigs: &[libc::c_int]) {
    // SAFETY: plain signal-mask calls on a set we own.
    unsafe {
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in sigs {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

fn die_by(sig: libc::c_int) -> ! {
    // SAFETY: resetting a disposition and signalling ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
    unblock(&[sig]);
    std::process::exit(128 + sig);
}
