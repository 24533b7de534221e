//! The man page, docs/ckptrun.1, kept in step with `ckptrun --help` (of
//! the binary built for the tests): the OPTIONS entries are exactly the
//! options --help lists, the ENVIRONMENT entries exactly their `CKPTRUN_`
//! variables (all but --help's and --version's), and each exit code
//! --help names is an entry of EXIT STATUS.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

#[test]
fn the_man_page_lists_every_option_of_help_and_no_other() {
    let (help, page) = (help_options(), man_options());
    let missing: Vec<_> = help.difference(&page).collect();
    let extra: Vec<_> = page.difference(&help).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/ckptrun.1 OPTIONS lacks {missing:?} and has {extra:?}, which --help does not list"
    );
}

#[test]
fn the_man_page_lists_every_variable_and_no_other() {
    let want: BTreeSet<String> = help_options()
        .iter()
        .filter_map(|o| o.strip_prefix("--"))
        .filter(|o| !matches!(*o, "help" | "version"))
        .map(|o| format!("CKPTRUN_{}", o.to_ascii_uppercase().replace('-', "_")))
        .collect();
    let page: BTreeSet<String> = tags(&section(&man_page(), "ENVIRONMENT"))
        .into_iter()
        .filter(|t| t.starts_with("CKPTRUN_"))
        .collect();
    let missing: Vec<_> = want.difference(&page).collect();
    let extra: Vec<_> = page.difference(&want).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/ckptrun.1 ENVIRONMENT lacks {missing:?} and has {extra:?}, which no option of --help reads"
    );
}

#[test]
fn the_man_page_explains_every_exit_code_of_help() {
    let help = help();
    let codes = help
        .split_once("Exit status:")
        .expect("--help has an `Exit status:` part")
        .1;
    let named: BTreeSet<String> = codes
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "(),;:".contains(c)))
        .filter(|w| w.parse::<u16>().is_ok_and(|n| n >= 100) || *w == "128+N")
        .map(str::to_string)
        .collect();
    assert!(named.len() >= 9, "--help names only {named:?}");
    let page: BTreeSet<String> = tags(&section(&man_page(), "EXIT STATUS"))
        .into_iter()
        .map(|t| t.replace(' ', ""))
        .collect();
    let missing: Vec<_> = named.difference(&page).collect();
    assert!(
        missing.is_empty(),
        "docs/ckptrun.1 EXIT STATUS lacks {missing:?}"
    );
}

/// What the built ckptrun prints for --help.
fn help() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ckptrun"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "ckptrun --help: {}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The options --help lists (`--ckpt`, `-c`, ...): the leading words of
/// its option lines, indented 2 to 6 spaces (a description's continuation
/// lines are indented further).
fn help_options() -> BTreeSet<String> {
    let help = help();
    let options = help.split_once("Exit status:").unwrap().0;
    let mut found = BTreeSet::new();
    for line in options.lines() {
        let indent = line.len() - line.trim_start().len();
        if !(2..=6).contains(&indent) || !line.trim_start().starts_with('-') {
            continue;
        }
        for word in line.split_whitespace().take_while(|w| w.starts_with('-')) {
            found.insert(option_name(word.trim_end_matches(',')));
        }
    }
    assert!(found.len() > 30, "--help lists only {found:?}");
    found
}

/// The options the man page's OPTIONS entries name.
fn man_options() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for tag in tags(&section(&man_page(), "OPTIONS")) {
        for word in tag.split([' ', ',']).filter(|w| w.starts_with('-')) {
            found.insert(option_name(word));
        }
    }
    found
}

/// `--arch` of `--arch`, `-c` of `-c`: the name without what follows it.
fn option_name(word: &str) -> String {
    let dashes = word.len() - word.trim_start_matches('-').len();
    let name: String = word[dashes..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!("{}{name}", &word[..dashes])
}

fn man_page() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ckptrun.1");
    std::fs::read_to_string(path).unwrap()
}

/// The lines of the page's section `name` (`.SH name` to the next `.SH`).
fn section(page: &str, name: &str) -> Vec<String> {
    let mut lines = page
        .lines()
        .skip_while(|l| l.strip_prefix(".SH ").map(|h| h.trim_matches('"')) != Some(name));
    assert!(lines.next().is_some(), "docs/ckptrun.1 has no .SH {name}");
    lines
        .take_while(|l| !l.starts_with(".SH "))
        .map(str::to_string)
        .collect()
}

/// The tags of a section's `.TP` entries (the line after each `.TP`), as
/// text: without the macro that sets their font, font changes, or roff's
/// escapes for the minus sign, hyphenation and zero width.
fn tags(lines: &[String]) -> Vec<String> {
    lines
        .windows(2)
        .filter(|pair| pair[0] == ".TP")
        .map(|pair| {
            let mut tag = pair[1].as_str();
            if tag.starts_with('.') {
                tag = tag.split_once(' ').map_or("", |(_, rest)| rest);
            }
            let mut text = tag.replace("\\-", "-");
            for escape in ["\\fB", "\\fI", "\\fR", "\\fP", "\\%", "\\&", "\""] {
                text = text.replace(escape, "");
            }
            text.trim().to_string()
        })
        .collect()
}
