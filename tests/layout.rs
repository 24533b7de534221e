//! The layout of `src/` is the architecture (docs/how-it-works.md,
//! "Layout"): each folder imports only from the folders below it, so a
//! change to a mode cannot reach the machinery the modes share, and
//! nothing in `os/` knows of jobs. This reads the sources and checks it.

use std::path::Path;

/// From the top down, as docs/how-it-works.md lists them.
const LAYERS: [&str; 7] = ["main", "mode", "config", "htcondor", "run", "store", "os"];

fn layer(name: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == name)
}

/// Every `crate::NAME` in `text`.
fn uses(text: &str) -> Vec<String> {
    text.match_indices("crate::")
        .map(|(i, m)| {
            let rest = &text[i + m.len()..];
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            rest[..end.unwrap_or(rest.len())].to_string()
        })
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn each_folder_imports_only_from_the_folders_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let top = top.strip_suffix(".rs").unwrap_or(top);
        let own = layer(top).unwrap_or_else(|| panic!("src/{}: in no layer", rel.display()));
        let text = std::fs::read_to_string(file).unwrap();
        for used in uses(&text) {
            match layer(&used) {
                Some(l) if l > own || used == top => {}
                _ => wrong.push(format!("src/{} uses crate::{used}", rel.display())),
            }
        }
    }
    assert!(files.len() > 20, "found only {} sources", files.len());
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_a_wrong_import() {
    assert_eq!(
        uses("use crate::mode::condor;\nx(crate::os::sys::kill)"),
        ["mode", "os"]
    );
    assert!(layer("os") > layer("mode"));
}
