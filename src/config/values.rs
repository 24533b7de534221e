//! An option's value turned into a typed one (a path, a signal, a
//! duration, an exit code), or a usage error that names where it came
//! from.

use std::ffi::OsString;
use std::time::Duration;

use crate::config::settings::Mode;
use crate::os::error::{Error, RESERVED_CODES};
use crate::os::personality::ArchChoice;
use crate::os::sys::Sig;
use crate::run::signals;

/// Where a setting came from, to name it in an error.
pub(super) enum Source<'a> {
    Arg(&'a str),
    Env(&'a str),
}

impl Source<'_> {
    /// `--interval soon` or `CKPTRUN_INTERVAL=soon`.
    fn with(&self, value: &str) -> String {
        match self {
            Source::Arg(name) => format!("--{name} {value}"),
            Source::Env(var) => format!("{var}={value}"),
        }
    }

    fn name(&self) -> String {
        match self {
            Source::Arg(name) => format!("--{name}"),
            Source::Env(var) => var.to_string(),
        }
    }
}

/// Which signals an option accepts: `Err` says why not.
pub(super) type Allowed = fn(Sig) -> Result<(), &'static str>;

/// One setting's value (none for a flag), and where it came from.
pub(super) struct Value<'a> {
    pub raw: Option<OsString>,
    pub from: &'a Source<'a>,
}

impl Value<'_> {
    /// The value as UTF-8 text.
    pub fn text(self) -> Result<String, Error> {
        let from = self.from;
        self.raw
            .unwrap_or_default()
            .into_string()
            .map_err(|v| Error::usage(from.with(&v.display().to_string()), "not valid UTF-8"))
    }

    /// A path, which cannot be empty.
    pub fn path(self) -> Result<OsString, Error> {
        let value = self.raw.unwrap_or_default();
        if value.is_empty() {
            return Err(Error::usage(self.from.name(), "needs a non-empty path"));
        }
        Ok(value)
    }

    /// A signal name or number, which `allowed` accepts.
    pub fn signal(self, allowed: Allowed) -> Result<Sig, Error> {
        let from = self.from;
        let text = self.text()?;
        let sig = signals::parse(&text).filter(|&s| s != 0);
        let sig = sig.ok_or_else(|| Error::usage(from.with(&text), "unknown signal"))?;
        allowed(sig).map_err(|why| Error::usage(from.with(&text), why))?;
        Ok(sig)
    }

    /// A positive number of seconds.
    pub fn duration(self) -> Result<Duration, Error> {
        let from = self.from;
        duration(&self.text()?, from)
    }

    /// `--ckpt-exit-code`.
    pub fn exit_code(self) -> Result<u8, Error> {
        let from = self.from;
        exit_code(&self.text()?, from)
    }

    /// `--mode`.
    pub fn mode(self) -> Result<Mode, Error> {
        let from = self.from;
        let text = self.text()?;
        Ok(match text.as_str() {
            "condor" => Mode::Condor,
            "self" => Mode::SelfCkpt,
            "init" => Mode::Init,
            "dmtcp" => Mode::Dmtcp,
            _ => {
                return Err(Error::usage(
                    from.with(&text),
                    "expected condor, self, init or dmtcp",
                ));
            }
        })
    }

    /// `--arch`.
    pub fn arch(self) -> Result<ArchChoice, Error> {
        let from = self.from;
        let text = self.text()?;
        Ok(match text.as_str() {
            "auto" => ArchChoice::Auto,
            "x86_64" => ArchChoice::X86_64,
            "i386" | "i686" => ArchChoice::I386,
            _ => {
                return Err(Error::usage(
                    from.with(&text),
                    "expected auto, x86_64 or i386",
                ));
            }
        })
    }

    /// `--keep`: 0 to the store's most.
    pub fn keep(self) -> Result<u32, Error> {
        let from = self.from;
        let text = self.text()?;
        text.parse()
            .ok()
            .filter(|&n| n <= crate::store::MAX_KEEP)
            .ok_or_else(|| {
                Error::usage(
                    from.with(&text),
                    format_args!("expected 0 to {}", crate::store::MAX_KEEP),
                )
            })
    }

    /// `--job-ckpt-exit`: any code but 0.
    pub fn job_exit_code(self) -> Result<u8, Error> {
        let from = self.from;
        let text = self.text()?;
        let code = text.parse::<u8>().ok().filter(|&c| c != 0);
        code.ok_or_else(|| Error::usage(from.with(&text), "expected an exit code from 1 to 255"))
    }

    /// `--map`, appended to `maps`. Several in one variable:
    /// CKPTRUN_MAP="TERM:INT HUP:0".
    pub fn maps(self, maps: &mut Vec<(Sig, Sig)>) -> Result<(), Error> {
        let from = self.from;
        let text = self.text()?;
        match from {
            Source::Env(_) => {
                for map in text.split([',', ' ']).filter(|m| !m.is_empty()) {
                    maps.push(signal_map(map, from)?);
                }
            }
            Source::Arg(_) => maps.push(signal_map(&text, from)?),
        }
        Ok(())
    }
}

fn exit_code(text: &str, from: &Source) -> Result<u8, Error> {
    let what = || from.with(text);
    let code: u8 = text
        .parse()
        .map_err(|_| Error::usage(what(), "expected a number from 1 to 255"))?;
    if code == 0 {
        return Err(Error::usage(
            what(),
            "0 means success; pick a code the job uses for nothing else",
        ));
    }
    if code > 128 {
        return Err(Error::usage(
            what(),
            "codes above 128 mean death by signal 128+N when ckptrun is PID 1",
        ));
    }
    if RESERVED_CODES.contains(&code) {
        return Err(Error::usage(
            what(),
            "ckptrun reports its own verdicts with 120-127",
        ));
    }
    Ok(code)
}

/// `FROM:TO`: FROM must be a signal ckptrun can receive and forward.
fn signal_map(text: &str, from: &Source) -> Result<(Sig, Sig), Error> {
    let what = || from.with(text);
    let (from_name, to) = text
        .split_once(':')
        .ok_or_else(|| Error::usage(what(), "expected FROM:TO"))?;
    let from_sig = signals::parse(from_name)
        .filter(|&s| s != 0)
        .ok_or_else(|| Error::usage(what(), format!("unknown signal \"{from_name}\"")))?;
    let to_sig = signals::parse(to)
        .ok_or_else(|| Error::usage(what(), format!("unknown signal \"{to}\"")))?;
    signals::catchable(from_sig)
        .map_err(|why| Error::usage(what(), format!("{} {why}", signals::Name(from_sig))))?;
    if from_sig == libc::SIGCHLD {
        return Err(Error::usage(
            what(),
            "SIGCHLD is how ckptrun learns that the job ended",
        ));
    }
    Ok((from_sig, to_sig))
}

/// `seconds`, or an error naming where the text came from.
fn duration(text: &str, from: &Source) -> Result<Duration, Error> {
    seconds(text)
        .ok_or_else(|| Error::usage(from.with(text), "expected a positive number of seconds"))
}

/// A positive number of seconds, `30` or `0.5` (at most nanosecond
/// precision), parsed without floating point: float parsing would add
/// some 25 KB to a binary whose size users weigh.
pub(super) fn seconds(text: &str) -> Option<Duration> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) || frac.len() > 9 {
        return None;
    }
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let nanos: u32 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    let total = Duration::new(secs, nanos);
    (!total.is_zero() && secs < 1_000_000_000).then_some(total)
}
