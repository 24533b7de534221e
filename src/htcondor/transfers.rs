//! Whether HTCondor will carry the checkpoints, by the job ad's transfer
//! settings (HTCondor 24.0, seen in a pool; PROTOCOLS.md §5): an
//! eviction uploads files only with `when_to_transfer_output =
//! ON_EXIT_OR_EVICT`, and then only the sandbox's top-level files, or
//! those `transfer_output_files` lists; an exit with the checkpoint code
//! while running uploads only what `transfer_checkpoint_files` lists (the
//! output files without it); without `checkpoint_exit_code`, that exit is
//! the job's end. A submit file that would lose checkpoints gets one
//! warning line at start naming what to add.
//!
//! Mode-agnostic: the caller names the files that must travel (relative
//! to the sandbox) and how ckptrun exits after a checkpoint it takes on
//! its own (`--interval`).

use core::fmt::{self, Display};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::htcondor::jobad::JobAd;
use crate::os::log::Log;
use crate::os::sys::Sig;
use crate::run::signals::Name;

/// How ckptrun tells HTCondor "checkpointed: upload and restart me".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CkptExit {
    Code(u8),
    Signal(Sig),
}

/// Warns, in one line, when the submit file behind `ad` would lose
/// checkpoints: `files` (relative to the sandbox) must travel, and
/// `own_exit` is how ckptrun exits after a checkpoint it takes on its own
/// (None: it takes none).
pub fn check(ad: &JobAd, files: &[&OsStr], own_exit: Option<CkptExit>, log: &Log) {
    let advice = Advice::of(ad, files, own_exit);
    if !advice.is_empty() {
        log.warn(format_args!("{advice}"));
    }
}

/// Whether the submit file's transfer lists (`transfer_output_files`,
/// `transfer_checkpoint_files`) name any of `files`: HTCondor then holds
/// the job if one is missing when it uploads, so they must all stay
/// where the list says.
pub fn lists_any(ad: &JobAd, files: &[&OsStr]) -> bool {
    [&ad.transfer_output, &ad.transfer_checkpoint]
        .into_iter()
        .flatten()
        .any(|list| files.iter().any(|f| lists(list, f)))
}

/// What the submit file lacks.
#[derive(Debug, Default, PartialEq, Eq)]
struct Advice<'a> {
    /// when_to_transfer_output is not ON_EXIT_OR_EVICT.
    on_evict: bool,
    /// A file that transfer_output_files does not list.
    output_lacks: Option<&'a OsStr>,
    /// A file in a subdirectory, which an eviction does not upload.
    not_top_level: Option<&'a OsStr>,
    /// ckptrun's own checkpoint exit, which the submit file does not declare.
    undeclared_exit: Option<CkptExit>,
    /// A file that transfer_checkpoint_files does not list.
    checkpoint_lacks: Option<&'a OsStr>,
}

impl<'a> Advice<'a> {
    fn of(ad: &JobAd, files: &[&'a OsStr], own_exit: Option<CkptExit>) -> Self {
        if ad.transfers_files == Some(false) {
            // No sandbox of its own: the checkpoints stay where they are.
            return Self::default();
        }
        let lacks = |list: &Option<crate::htcondor::jobad::FileList>| {
            let list = list.as_deref()?;
            files.iter().copied().find(|f| !lists(list, f))
        };
        let mut advice = Self {
            on_evict: ad.transfers_on_evict == Some(false),
            checkpoint_lacks: lacks(&ad.transfer_checkpoint),
            ..Self::default()
        };
        if ad.checkpoint_destination {
            // A restart takes the destination's newest checkpoint, never
            // an eviction's upload: what evictions upload does not matter.
            advice.on_evict = false;
        } else if !advice.on_evict {
            advice.output_lacks = lacks(&ad.transfer_output);
            if ad.transfer_output.is_none() {
                advice.not_top_level = files.iter().copied().find(|f| in_subdirectory(f));
            }
        }
        advice.undeclared_exit = own_exit.filter(|&exit| match exit {
            CkptExit::Code(code) => ad.exit_code != Some(code) || ad.exit_signal.is_some(),
            CkptExit::Signal(sig) => ad.exit_signal != Some(sig),
        });
        advice
    }

    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl Display for Advice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("this submit file loses checkpoints:")?;
        let mut items = Items { f, sep: " " };
        self.eviction_items(&mut items)?;
        self.checkpoint_exit_items(&mut items)
    }
}

/// The advice's items, written one after the other.
struct Items<'a, 'f> {
    f: &'a mut fmt::Formatter<'f>,
    sep: &'static str,
}

impl Items<'_, '_> {
    fn add(&mut self, args: fmt::Arguments<'_>) -> fmt::Result {
        let written = write!(self.f, "{}{args}", self.sep);
        self.sep = "; ";
        written
    }
}

impl Advice<'_> {
    /// What an eviction's upload lacks.
    fn eviction_items(&self, items: &mut Items) -> fmt::Result {
        if self.on_evict {
            items.add(format_args!(
                "add `when_to_transfer_output = ON_EXIT_OR_EVICT` (else the checkpoint taken at eviction is thrown away)"
            ))?;
        }
        if let Some(file) = self.output_lacks {
            items.add(format_args!(
                "add {} to `transfer_output_files`, or leave that command out (an eviction uploads only what it lists)",
                shown(file)
            ))?;
        }
        if let Some(file) = self.not_top_level {
            items.add(format_args!(
                "keep {} at the top of the sandbox (an eviction uploads only top-level files)",
                shown(file)
            ))?;
        }
        Ok(())
    }

    /// What a checkpoint exit (ckptrun's own, or its upload) lacks.
    fn checkpoint_exit_items(&self, items: &mut Items) -> fmt::Result {
        match self.undeclared_exit {
            Some(CkptExit::Code(code)) => items.add(format_args!(
                "add `checkpoint_exit_code = {code}` (else ckptrun's checkpoint and exit {code} for --interval ends the job)"
            ))?,
            Some(CkptExit::Signal(sig)) => items.add(format_args!(
                "add `+SuccessCheckpointExitBySignal = true` and `+SuccessCheckpointExitSignal = {}` (else ckptrun's checkpoint and death by {} for --interval ends the job)",
                sig,
                Name(sig)
            ))?,
            None => {}
        }
        if let Some(file) = self.checkpoint_lacks {
            items.add(format_args!(
                "add {} to `transfer_checkpoint_files` (a checkpoint exit uploads only what it lists)",
                shown(file)
            ))?;
        }
        Ok(())
    }
}

/// Whether `list` (names separated by commas and/or spaces) carries
/// `file`: names it, or a directory holding it.
fn lists(list: &[u8], file: &OsStr) -> bool {
    let file = normal(file.as_bytes());
    crate::htcondor::jobad::entries(list)
        .map(normal)
        .filter(|entry| !entry.is_empty())
        .any(|entry| {
            file == entry || (file.starts_with(entry) && file.get(entry.len()) == Some(&b'/'))
        })
}

/// A file as a submit file would name it (no leading `./`).
fn shown(file: &OsStr) -> std::ffi::os_str::Display<'_> {
    OsStr::from_bytes(normal(file.as_bytes())).display()
}

fn in_subdirectory(file: &OsStr) -> bool {
    normal(file.as_bytes()).contains(&b'/')
}

/// A relative path without leading `./` and trailing `/`.
fn normal(mut path: &[u8]) -> &[u8] {
    while let Some(rest) = path.strip_prefix(b"./") {
        path = rest.trim_ascii_start();
    }
    while let Some(rest) = path.strip_suffix(b"/") {
        path = rest;
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::htcondor::jobad::FileList;

    /// The recommended submit file's ad: ON_EXIT_OR_EVICT, code 85.
    fn good() -> JobAd {
        JobAd {
            exit_code: Some(85),
            transfers_files: Some(true),
            transfers_on_evict: Some(true),
            ..JobAd::default()
        }
    }

    fn list(text: &str) -> Option<FileList> {
        Some(FileList::from_slice(text.as_bytes()).unwrap())
    }

    const CKPT: &str = "./a.out.ckpt";

    fn advice(ad: &JobAd, files: &[&str], own_exit: Option<CkptExit>) -> String {
        let files: Vec<&OsStr> = files.iter().map(OsStr::new).collect();
        let advice = Advice::of(ad, &files, own_exit);
        if advice.is_empty() {
            String::new()
        } else {
            advice.to_string()
        }
    }

    #[test]
    fn the_recommended_submit_file_is_fine() {
        assert_eq!(advice(&good(), &[CKPT], Some(CkptExit::Code(85))), "");
        assert_eq!(advice(&good(), &[CKPT], None), "");
        let ad = JobAd {
            transfer_checkpoint: list("a.out.ckpt, ckptrun.log"),
            transfer_output: list("out,a.out.ckpt"),
            ..good()
        };
        assert_eq!(advice(&ad, &[CKPT], Some(CkptExit::Code(85))), "");
    }

    #[test]
    fn on_exit_throws_the_eviction_checkpoint_away() {
        for ad in [
            JobAd {
                transfers_on_evict: Some(false),
                ..good()
            },
            // A list does not help then.
            JobAd {
                transfers_on_evict: Some(false),
                transfer_output: list("a.out.ckpt"),
                ..good()
            },
        ] {
            assert_eq!(
                advice(&ad, &[CKPT], None),
                "this submit file loses checkpoints: add `when_to_transfer_output = ON_EXIT_OR_EVICT` \
                 (else the checkpoint taken at eviction is thrown away)"
            );
        }
    }

    #[test]
    fn with_a_checkpoint_destination_on_exit_is_right() {
        // self-destination.sub (docs/self.md): the restart takes the
        // destination's newest checkpoint, never an eviction's upload.
        let ad = JobAd {
            transfers_on_evict: Some(false),
            checkpoint_destination: true,
            transfer_checkpoint: list("ckptrun.store.0, ckptrun.store.1, ckptrun.log"),
            transfer_output: list("result, ckptrun.log"),
            ..good()
        };
        let slots = ["ckptrun.store.0", "ckptrun.store.1"];
        assert_eq!(advice(&ad, &slots, Some(CkptExit::Code(85))), "");
    }

    #[test]
    fn an_output_list_must_carry_the_checkpoint() {
        let ad = JobAd {
            transfer_output: list("ckptrun.log,out"),
            ..good()
        };
        assert_eq!(
            advice(&ad, &[CKPT], None),
            "this submit file loses checkpoints: add a.out.ckpt to `transfer_output_files`, \
             or leave that command out (an eviction uploads only what it lists)"
        );
        let empty = JobAd {
            transfer_output: list(""),
            ..good()
        };
        assert!(advice(&empty, &[CKPT], None).contains("transfer_output_files"));
        // A listed directory carries what is in it.
        let dir = JobAd {
            transfer_output: list("out, ckpt/"),
            ..good()
        };
        assert_eq!(advice(&dir, &["ckpt/a.ckpt", "./ckpt/b"], None), "");
        assert!(advice(&dir, &["ckpt2/a.ckpt"], None).contains("ckpt2/a.ckpt"));
    }

    #[test]
    fn without_a_list_only_top_level_files_travel() {
        assert_eq!(
            advice(&good(), &["sub/a.ckpt"], None),
            "this submit file loses checkpoints: keep sub/a.ckpt at the top of the sandbox \
             (an eviction uploads only top-level files)"
        );
    }

    #[test]
    fn the_own_checkpoint_exit_must_be_declared() {
        let no_code = JobAd {
            exit_code: None,
            ..good()
        };
        assert_eq!(
            advice(&no_code, &[CKPT], Some(CkptExit::Code(85))),
            "this submit file loses checkpoints: add `checkpoint_exit_code = 85` \
             (else ckptrun's checkpoint and exit 85 for --interval ends the job)"
        );
        // Without --interval ckptrun exits with the code only when evicted.
        assert_eq!(advice(&no_code, &[CKPT], None), "");
        let other = JobAd {
            exit_code: Some(17),
            ..good()
        };
        assert!(advice(&other, &[CKPT], Some(CkptExit::Code(85))).contains("= 85"));
        let by_signal = JobAd {
            exit_signal: Some(libc::SIGUSR2),
            ..good()
        };
        assert_eq!(
            advice(&by_signal, &[CKPT], Some(CkptExit::Signal(libc::SIGUSR2))),
            ""
        );
        assert!(advice(&by_signal, &[CKPT], Some(CkptExit::Code(85))).contains("= 85"));
        assert_eq!(
            advice(&no_code, &[CKPT], Some(CkptExit::Signal(libc::SIGUSR1))),
            "this submit file loses checkpoints: add `+SuccessCheckpointExitBySignal = true` and \
             `+SuccessCheckpointExitSignal = 10` (else ckptrun's checkpoint and death by SIGUSR1 \
             for --interval ends the job)"
        );
    }

    #[test]
    fn a_checkpoint_list_must_carry_the_checkpoint() {
        let ad = JobAd {
            transfer_checkpoint: list("ckptrun.log"),
            ..good()
        };
        assert_eq!(
            advice(
                &ad,
                &["ckptrun.store.0", "ckptrun.store.1"],
                Some(CkptExit::Code(85))
            ),
            "this submit file loses checkpoints: add ckptrun.store.0 to `transfer_checkpoint_files` \
             (a checkpoint exit uploads only what it lists)"
        );
        let spaced = JobAd {
            transfer_checkpoint: list("x ,./ckptrun.store.0 ckptrun.store.1"),
            ..good()
        };
        assert_eq!(
            advice(&spaced, &["ckptrun.store.0", "ckptrun.store.1"], None),
            ""
        );
    }

    #[test]
    fn several_problems_make_one_line() {
        let ad = JobAd {
            exit_code: None,
            transfers_on_evict: Some(false),
            transfer_checkpoint: list("other"),
            ..good()
        };
        let line = advice(&ad, &[CKPT], Some(CkptExit::Code(85)));
        assert!(!line.contains('\n'));
        assert_eq!(line.matches("; add").count(), 2, "{line}");
    }

    #[test]
    fn without_file_transfer_nothing_travels_or_is_lost() {
        let ad = JobAd {
            transfers_files: Some(false),
            transfers_on_evict: Some(false),
            exit_code: None,
            ..good()
        };
        assert_eq!(advice(&ad, &[CKPT], Some(CkptExit::Code(85))), "");
    }

    #[test]
    fn an_ad_that_says_nothing_is_not_judged() {
        assert_eq!(advice(&JobAd::default(), &[CKPT], None), "");
    }
}
