//! The command line, turned into one `Config`. Everything after `parse`
//! reads `Config` and never argv; all of ckptrun's allocation happens here
//! and in planning, before the job starts.
//!
//! `options.rs` has the table of options and sets each into `Config`,
//! `values.rs` turns their values into typed ones, `checks.rs` checks
//! the whole, `jobad.rs` takes what HTCondor's job ad says, `help.rs`
//! gives `--help`'s text (kept in `help.txt`).

mod checks;
mod help;
mod jobad;
mod options;
mod settings;
mod values;

use std::ffi::OsString;
use std::ops::ControlFlow;

use lexopt::prelude::*;

use crate::os::error::Error;
use crate::run::slurm::SlurmJob;
pub use help::text as help;
use options::{MODE, OPTIONS, Opt, Spec, set};
pub use settings::{Config, Mode, Request};
use values::Source;

/// `CKPTRUN_CKPT_EXIT_CODE` for `ckpt-exit-code`.
pub fn env_name(option: &str) -> String {
    format!("CKPTRUN_{}", option.to_ascii_uppercase().replace('-', "_"))
}

/// An option on the command line, and its value if it takes one.
type Given = (&'static Spec, Option<OsString>);

/// The options on the command line, in order, and what follows them.
struct CommandLine {
    given: Vec<Given>,
    program: Option<OsString>,
    args: Vec<OsString>,
}

/// Reads `args`, and the `CKPTRUN_*` variables through `env` for the
/// options `args` does not give: the command line wins. In init mode the
/// environment's checkpoint options are ignored, the command line's refused.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Request, Error> {
    let line = match read_command_line(args)? {
        ControlFlow::Continue(line) => line,
        ControlFlow::Break(request) => return Ok(request),
    };
    let mut config = Config {
        args: line.args,
        slurm: SlurmJob::from_env(&env),
        ..Config::default()
    };
    // The mode first: it decides which variables count.
    set_mode(&mut config, &line.given, &env)?;
    set_from_env(&mut config, &line.given, &env)?;
    for (spec, value) in line.given {
        if spec.modes & config.mode.bit() == 0 {
            return Err(checks::not_for_mode(spec.long, spec.modes, config.mode));
        }
        if spec.opt != Opt::Mode {
            set(&mut config, spec, value, &Source::Arg(spec.long))?;
        }
    }
    config.program = line
        .program
        .ok_or_else(|| Error::usage("PROGRAM", "missing (see ckptrun --help)"))?;
    checks::check(&config)?;
    Ok(Request::Run(Box::new(config)))
}

/// The options up to PROGRAM, unchecked, or what `--help` or `--version`
/// ask for.
fn read_command_line(
    args: impl IntoIterator<Item = OsString>,
) -> Result<ControlFlow<Request, CommandLine>, Error> {
    let mut line = CommandLine {
        given: Vec::new(),
        program: None,
        args: Vec::new(),
    };
    let mut parser = lexopt::Parser::from_args(args);
    while let Some(arg) = parser.next().map_err(lexopt_error)? {
        let spec = match arg {
            Long("help") | Short('h') => return Ok(ControlFlow::Break(Request::Help)),
            Long("version") | Short('V') => return Ok(ControlFlow::Break(Request::Version)),
            Long(long) => OPTIONS.iter().find(|o| o.long == long),
            Short(short) => OPTIONS.iter().find(|o| o.short == Some(short)),
            Value(value) => {
                // PROGRAM: everything after it belongs to the job, untouched.
                line.program = Some(value);
                line.args = parser.raw_args().map_err(lexopt_error)?.collect();
                break;
            }
        };
        let Some(spec) = spec else {
            return Err(lexopt_error(arg.unexpected()));
        };
        let value = if spec.takes_value {
            Some(parser.value().map_err(lexopt_error)?)
        } else {
            None
        };
        line.given.push((spec, value));
    }
    Ok(ControlFlow::Continue(line))
}

/// `--mode` (the last one), else `CKPTRUN_MODE`.
fn set_mode(
    config: &mut Config,
    given: &[Given],
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<(), Error> {
    if let Some((spec, value)) = given.iter().rev().find(|(spec, _)| spec.opt == Opt::Mode) {
        return set(config, spec, value.clone(), &Source::Arg(spec.long));
    }
    let var = env_name(MODE.long);
    match env(&var).filter(|v| !v.is_empty()) {
        Some(value) => set(config, &MODE, Some(value), &Source::Env(&var)),
        None => Ok(()),
    }
}

/// The `CKPTRUN_*` variables of the options the mode takes and the command
/// line does not give (`--map`s add to the variable's).
fn set_from_env(
    config: &mut Config,
    given: &[Given],
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<(), Error> {
    for spec in &OPTIONS {
        let on_command_line = given.iter().any(|(g, _)| g.opt == spec.opt);
        let skip = spec.opt == Opt::Mode
            || (on_command_line && spec.opt != Opt::Map)
            || spec.modes & config.mode.bit() == 0;
        if skip {
            continue;
        }
        let var = env_name(spec.long);
        let Some(value) = env(&var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let value = match (spec.takes_value, value.to_str()) {
            (true, _) => Some(value),
            (false, Some("1" | "true" | "yes")) => None,
            (false, Some("0" | "false" | "no")) => continue,
            (false, _) => {
                return Err(Error::usage(
                    format!("{var}={}", value.display()),
                    "expected 1 or 0",
                ));
            }
        };
        set(config, spec, value, &Source::Env(&var))?;
    }
    Ok(())
}

fn lexopt_error(err: lexopt::Error) -> Error {
    match err {
        lexopt::Error::MissingValue { option: Some(o) } => Error::usage(o, "needs a value"),
        lexopt::Error::UnexpectedOption(o) => {
            Error::usage(o, "unknown option (see ckptrun --help)")
        }
        lexopt::Error::UnexpectedValue { option, .. } => Error::usage(option, "takes no value"),
        lexopt::Error::UnexpectedArgument(a) => {
            Error::usage("usage", format!("unexpected argument \"{}\"", a.display()))
        }
        lexopt::Error::NonUnicodeValue(a) => Error::usage(
            "usage",
            format!("argument is invalid unicode: {}", a.display()),
        ),
        // ckptrun asks lexopt for neither of these: no parse(), no Custom.
        lexopt::Error::MissingValue { option: None }
        | lexopt::Error::ParsingFailed { .. }
        | lexopt::Error::Custom(_) => Error::usage("usage", "cannot read the arguments"),
    }
}

#[cfg(test)]
mod tests {
    use super::values::seconds;
    use super::*;
    use crate::os::error;
    use std::time::Duration;

    fn run(args: &[&str]) -> Result<Config, Error> {
        match parse(args.iter().map(OsString::from), |_| None)? {
            Request::Run(c) => Ok(*c),
            _ => panic!("not a run"),
        }
    }

    #[test]
    fn job_arguments_are_not_parsed() {
        let c = run(&["-v", "./a.out", "-v", "--ckpt", "x", "--"]).unwrap();
        assert!(c.verbose);
        assert_eq!(c.program, "./a.out");
        assert_eq!(c.args, ["-v", "--ckpt", "x", "--"]);
        assert!(c.ckpt.is_empty());
    }

    #[test]
    fn double_dash_ends_options() {
        let c = run(&["--ckpt=f", "--", "--help", "x"]).unwrap();
        assert_eq!(c.program, "--help");
        assert_eq!(c.ckpt, ["f"]);
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        for args in [
            &["--bogus", "x"][..],
            &[],
            &["--ckpt-exit-code", "0", "x"],
            &["--ckpt-exit-code", "256", "x"],
            &["--ckpt-exit-code", "126", "x"],
            &["--ckpt-exit-code", "143", "x"],
            &["--map", "TERM", "x"],
            &["--map", "KILL:TERM", "x"],
            &["--map", "CHLD:TERM", "x"],
            &["--map", "TERM:NOPE", "x"],
            &["--interval", "0", "x"],
            &["--interval", "-3", "x"],
            &["--interval-continue", "x"],
            &["--arch", "arm", "x"],
            &["--ckpt", "", "x"],
        ] {
            let err = run(args).unwrap_err();
            assert_eq!(err.code, error::LAUNCHER_FAILED, "{args:?}");
        }
    }

    fn with_env(args: &[&str], vars: &[(&str, &str)]) -> Result<Config, Error> {
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        };
        match parse(args.iter().map(OsString::from), env)? {
            Request::Run(c) => Ok(*c),
            _ => panic!("not a run"),
        }
    }

    #[test]
    fn the_environment_configures_and_the_command_line_wins() {
        let vars = [
            ("CKPTRUN_CKPT_EXIT_CODE", "17"),
            ("CKPTRUN_CKPT", "from-env"),
            ("CKPTRUN_VERBOSE", "1"),
            ("CKPTRUN_PGROUP", "0"),
            ("CKPTRUN_MAP", "TERM:INT HUP:0"),
            ("CKPTRUN_INTERVAL", ""),
        ];
        let c = with_env(&["--ckpt", "from-args", "--map", "TERM:USR1", "p"], &vars).unwrap();
        assert_eq!(c.ckpt_exit_code, 17);
        assert_eq!(c.ckpt, ["from-args"]);
        assert!(c.verbose);
        assert!(!c.pgroup);
        assert_eq!(c.interval, None, "empty means unset");
        // The command line's map comes last, so it wins for SIGTERM.
        assert_eq!(
            c.maps,
            [
                (libc::SIGTERM, libc::SIGINT),
                (libc::SIGHUP, 0),
                (libc::SIGTERM, libc::SIGUSR1)
            ]
        );
    }

    #[test]
    fn a_bad_variable_is_named_in_the_error() {
        let err = with_env(&["p"], &[("CKPTRUN_KEEP_ASLR", "maybe")]).unwrap_err();
        assert_eq!(err.to_string(), "CKPTRUN_KEEP_ASLR=maybe: expected 1 or 0");
        let err = with_env(&["p"], &[("CKPTRUN_INTERVAL", "soon")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CKPTRUN_INTERVAL=soon: expected a positive number of seconds"
        );
        // In init mode the environment's checkpoint options are ignored.
        let c = with_env(&["--mode", "init", "p"], &[("CKPTRUN_INTERVAL", "5")]).unwrap();
        assert_eq!(c.interval, None);
    }

    #[test]
    fn the_command_line_wins_even_over_a_bad_variable() {
        let c = with_env(&["--interval", "5", "p"], &[("CKPTRUN_INTERVAL", "soon")]).unwrap();
        assert_eq!(c.interval, Some(Duration::from_secs(5)));
        let vars = [("CKPTRUN_VERBOSE", "maybe")];
        let env = |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        };
        assert!(matches!(
            parse(["--version"].map(OsString::from), env),
            Ok(Request::Version)
        ));
        let c = with_env(
            &["--mode", "condor", "p"],
            &[("CKPTRUN_MODE", "init"), ("CKPTRUN_CKPT", "f")],
        )
        .unwrap();
        assert_eq!(
            (c.mode, c.ckpt.first().map(|f| f.as_os_str())),
            (Mode::Condor, Some("f".as_ref()))
        );
    }

    #[test]
    fn only_the_environment_lists_several_maps_in_one() {
        assert!(run(&["--map", "TERM:INT,HUP:0", "p"]).is_err());
        assert!(run(&["--map", "", "p"]).is_err());
        let c = with_env(&["p"], &[("CKPTRUN_MAP", "TERM:INT,HUP:0")]).unwrap();
        assert_eq!(c.maps.len(), 2);
    }

    #[test]
    fn pdeathsig_refuses_what_cannot_be_forwarded() {
        for sig in ["KILL", "STOP", "CHLD"] {
            assert!(run(&["--pdeathsig", sig, "p"]).is_err(), "{sig}");
        }
        assert_eq!(
            run(&["--pdeathsig", "TERM", "p"]).unwrap().pdeathsig,
            Some(libc::SIGTERM)
        );
    }

    #[test]
    fn the_reference_documents_every_variable() {
        let reference = include_str!("../../docs/reference.md");
        for name in OPTIONS.iter().map(|o| o.long) {
            assert!(
                reference.contains(&format!("`{}`", env_name(name))),
                "docs/reference.md does not mention {}",
                env_name(name)
            );
        }
    }

    #[test]
    fn each_option_is_in_the_table_once() {
        for (i, a) in OPTIONS.iter().enumerate() {
            for b in &OPTIONS[i + 1..] {
                assert!(a.long != b.long && a.opt != b.opt, "--{}", a.long);
                assert!(a.short.is_none() || a.short != b.short, "--{}", a.long);
            }
        }
    }

    #[test]
    fn init_mode_refuses_checkpoint_options() {
        let c = run(&["--mode", "init", "--map", "TERM:INT", "--pgroup", "p"]).unwrap();
        assert_eq!(c.mode, Mode::Init);
        for option in [
            &["-c", "f"][..],
            &["--ckpt=f"],
            &["--interval", "1"],
            &["--keep-aslr"],
            &["--arch", "i386"],
        ] {
            let mut args = vec!["--mode", "init"];
            args.extend_from_slice(option);
            args.push("p");
            let err = run(&args).unwrap_err();
            assert!(
                err.why.contains("--mode init has none"),
                "{option:?}: {err}"
            );
        }
    }

    #[test]
    fn maps_and_interval() {
        let c = run(&[
            "--map",
            "term:0",
            "--map",
            "USR1:SIGHUP",
            "--interval",
            "0.5",
            "p",
        ])
        .unwrap();
        assert_eq!(c.maps, [(libc::SIGTERM, 0), (libc::SIGUSR1, libc::SIGHUP)]);
        assert_eq!(c.interval, Some(Duration::from_millis(500)));
    }

    #[test]
    fn seconds_are_decimal() {
        assert_eq!(seconds("30"), Some(Duration::from_secs(30)));
        assert_eq!(seconds("0.25"), Some(Duration::from_millis(250)));
        assert_eq!(seconds(".5"), Some(Duration::from_millis(500)));
        assert_eq!(seconds("2."), Some(Duration::from_secs(2)));
        for bad in [
            "",
            ".",
            "0",
            "0.0",
            "-1",
            "+1",
            "1e3",
            "1.2.3",
            "nan",
            "inf",
            "0.0000000001",
            "9999999999",
        ] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }
}
