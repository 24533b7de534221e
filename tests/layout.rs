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

/// A source file's text before its tests, without `//` comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The source folders the size and circle checks read: ckptrun's own and
/// its codec crate's (a crate of its own, `crate::` there is the codec).
const CRATES: [&str; 2] = ["src", "codec/src"];

/// Every module in `src/`, by path (`""` is the crate root, main.rs),
/// with its file.
fn modules() -> std::collections::BTreeMap<String, std::path::PathBuf> {
    modules_in("src")
}

/// Every module of the crate whose sources are in `dir` (relative to the
/// repository), by path (`""` is the crate root, main.rs or lib.rs), with
/// its file.
fn modules_in(dir: &str) -> std::collections::BTreeMap<String, std::path::PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    sources(&src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_str().unwrap().to_string())
                .collect();
            if parts
                .last()
                .is_some_and(|p| p == "mod" || p == "main" || p == "lib")
            {
                parts.pop();
            }
            (parts.join("::"), file)
        })
        .collect()
}

/// The module `path` names: the longest known module it starts with.
fn module_of(
    path: &[&str],
    known: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> String {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| known.contains_key(m))
        .unwrap_or_default()
}

/// The modules `module`'s code names: through `crate::`, `super::` and
/// `self::` paths (brace groups one level deep), and its own child
/// modules by their bare names.
fn imports(
    module: &str,
    code: &str,
    known: &std::collections::BTreeMap<String, std::path::PathBuf>,
) -> std::collections::BTreeSet<String> {
    let own: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    let mut found = std::collections::BTreeSet::new();
    let bytes = code.as_bytes();
    let word_start = |i: usize| {
        i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':')
    };
    for base in ["crate", "super", "self"] {
        for (i, _) in code.match_indices(&format!("{base}::")) {
            if !word_start(i) {
                continue;
            }
            let mut prefix: Vec<&str> = match base {
                "crate" => Vec::new(),
                "super" => own[..own.len().saturating_sub(1)].to_vec(),
                _ => own.clone(),
            };
            let rest = &code[i + base.len() + 2..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(':');
            prefix.extend(path.split("::").filter(|p| !p.is_empty()));
            match rest[end..].starts_with('{') {
                true => {
                    let group =
                        &rest[end + 1..rest[end..].find('}').map_or(rest.len(), |e| end + e)];
                    for item in group.split(',') {
                        let item = item.split(" as ").next().unwrap_or("").trim();
                        let mut full = prefix.clone();
                        full.extend(item.split("::").filter(|p| !p.is_empty() && *p != "self"));
                        found.insert(module_of(&full, known));
                    }
                }
                false => {
                    found.insert(module_of(&prefix, known));
                }
            }
        }
    }
    for line in code.lines() {
        let line = line.trim();
        let Some(child) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .and_then(|rest| rest.strip_suffix(';'))
        else {
            continue;
        };
        let named = code
            .match_indices(&format!("{child}::"))
            .any(|(i, _)| word_start(i));
        if named {
            let mut full = own.clone();
            full.push(child);
            found.insert(module_of(&full, known));
        }
    }
    found.remove(module);
    found
}

/// The modules that import one another, directly or through others: the
/// strongly connected components of the import graph (Tarjan), of more
/// than one module.
fn circles(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        index: std::collections::HashMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) -> usize {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            let mut low = n;
            for w in &self.graph[v] {
                let w = w.as_str();
                low = match self.index.get(w) {
                    None => low.min(self.visit(w)),
                    Some(&(i, _)) if self.stack.contains(&w) => low.min(i),
                    Some(_) => low,
                };
            }
            self.index.insert(v, (n, low));
            if low == n {
                let at = self.stack.iter().position(|&s| s == v).unwrap();
                let component: Vec<String> = self.stack.drain(at..).map(String::from).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
            low
        }
    }
    let mut walk = Walk {
        graph,
        index: Default::default(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

fn import_graph(
    dir: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let known = modules_in(dir);
    known
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(file).unwrap();
            (module.clone(), imports(module, &code(&text), &known))
        })
        .collect()
}

#[test]
fn no_module_imports_in_a_circle() {
    let graph = import_graph("src");
    assert!(graph.len() > 40, "found only {} modules", graph.len());
    assert!(
        graph["store"].contains("store::slots"),
        "{:?}",
        graph["store"]
    );
    let found = circles(&graph);
    assert!(found.is_empty(), "modules importing one another: {found:?}");
    let codec = import_graph("codec/src");
    assert!(codec.len() > 3, "found only {} codec modules", codec.len());
    let found = circles(&codec);
    assert!(
        found.is_empty(),
        "codec modules importing one another: {found:?}"
    );
}

#[test]
fn the_check_sees_a_circle() {
    let known: std::collections::BTreeMap<String, std::path::PathBuf> = ["", "a", "a::b", "a::c"]
        .iter()
        .map(|m| (m.to_string(), "x".into()))
        .collect();
    let child = imports(
        "a::b",
        "use super::{c::X, Y};\nfn f() { self::g(); }",
        &known,
    );
    assert_eq!(child.into_iter().collect::<Vec<_>>(), ["a", "a::c"]);
    let parent = imports(
        "a",
        "mod b;\nmod c;\nfn f() { b::g(); crate::a::c::h() }",
        &known,
    );
    assert_eq!(parent.into_iter().collect::<Vec<_>>(), ["a::b", "a::c"]);
    let graph = [
        ("a", vec!["a::b"]),
        ("a::b", vec!["a"]),
        ("a::c", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_string(), to.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&graph), [vec!["a".to_string(), "a::b".to_string()]]);
}

#[test]
fn the_store_knows_no_mode() {
    let known = modules();
    let mut named = Vec::new();
    for (module, file) in known.iter().filter(|(m, _)| m.starts_with("store")) {
        let code = code(&std::fs::read_to_string(file).unwrap());
        for (n, line) in code.lines().enumerate() {
            if line.to_ascii_lowercase().contains("dmtcp") {
                named.push(format!("{module}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        named.is_empty(),
        "the store names DMTCP:\n{}",
        named.join("\n")
    );
}

/// The brace depth at the start of each line of `code` (and after the
/// last), braces in strings and character literals not counted.
fn depths(lines: &[&str]) -> Vec<i32> {
    let mut depth = 0;
    let mut in_string = false;
    let mut out = Vec::with_capacity(lines.len() + 1);
    for line in lines {
        out.push(depth);
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match (in_string, b[i]) {
                (true, b'\\') => i += 1,
                (true, b'"') | (false, b'"') => in_string = !in_string,
                (false, b'\'') if b.get(i + 2) == Some(&b'\'') => i += 2,
                (false, b'\'') if b.get(i + 1) == Some(&b'\\') => {
                    i += b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map_or(0, |p| p + 2);
                }
                (false, b'{') => depth += 1,
                (false, b'}') => depth -= 1,
                _ => {}
            }
            i += 1;
        }
    }
    out.push(depth);
    out
}

/// The line of `lines` (an item's, from its first) where the item's body
/// opens: its first `{` outside brackets; None if a `;` comes first
/// there (a trait's method). A `;` inside brackets, as in a parameter
/// `[u32; 3]`, ends nothing.
fn body_opens(lines: &[&str]) -> Option<usize> {
    let mut nested = 0;
    for (m, line) in lines.iter().enumerate() {
        for c in line.chars() {
            match c {
                '(' | '[' => nested += 1,
                ')' | ']' => nested -= 1,
                '{' if nested == 0 => return Some(m),
                ';' if nested == 0 => return None,
                _ => {}
            }
        }
    }
    None
}

/// Each `fn` and `impl` with a body in `code`: what it is, where it
/// starts (1-based) and how many lines it spans.
fn items(code: &str) -> Vec<(&'static str, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let depth = depths(&lines);
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let kind = match words
            .iter()
            .position(|w| *w == "fn" || w.starts_with("impl"))
        {
            Some(at)
                if words[..at].iter().all(|w| {
                    ["pub", "const", "unsafe", "async", "extern", "\"C\""].contains(w)
                        || w.starts_with("pub(")
                }) =>
            {
                match words[at] {
                    "fn" => "fn",
                    w if w == "impl" || w.starts_with("impl<") => "impl",
                    _ => continue,
                }
            }
            _ => continue,
        };
        let d = depth[n];
        let Some(open) = body_opens(&lines[n..]).map(|m| n + m) else {
            continue;
        };
        let end = (open..lines.len())
            .find(|&m| depth[m + 1] <= d)
            .unwrap_or(lines.len() - 1);
        found.push((kind, n + 1, end - n + 1));
    }
    found
}

#[test]
fn every_room_reads_at_a_glance() {
    let mut too_big = Vec::new();
    let all = CRATES.iter().flat_map(|dir| modules_in(dir).into_values());
    for file in all {
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let loc = code.lines().filter(|l| !l.trim().is_empty()).count();
        if loc > 600 {
            too_big.push(format!(
                "{}: {loc} lines of code (600 at most)",
                file.display()
            ));
        }
        for (kind, at, len) in items(&code) {
            let most = if kind == "fn" { 60 } else { 300 };
            if len > most {
                too_big.push(format!(
                    "{}:{at}: {kind} of {len} lines ({most} at most)",
                    file.display()
                ));
            }
        }
    }
    assert!(
        too_big.is_empty(),
        "too big to read at a glance:\n{}",
        too_big.join("\n")
    );
}

#[test]
fn the_size_check_measures_bodies() {
    let code = "impl X {\n    fn a(&self) {\n        let s = \"}\";\n        let c = '{';\n    }\n    fn b(&self);\n}\nfn c() {}\n";
    assert_eq!(items(code), [("impl", 1, 7), ("fn", 2, 4), ("fn", 8, 1)]);
    let code = "fn f(\n    a: [u8; 3],\n) {\n    g();\n}\n";
    assert_eq!(items(code), [("fn", 1, 5)]);
}
