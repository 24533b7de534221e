//! Embeds what `ckptrun --version` prints, and refuses targets ckptrun
//! cannot work on: it drives Linux-only interfaces (personality(2),
//! PR_SET_CHILD_SUBREAPER, /proc).

use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        eprintln!(
            "error: ckptrun only builds for Linux (target {target} is {os}): \
             it needs personality(2), PR_SET_CHILD_SUBREAPER and /proc"
        );
        std::process::exit(1);
    }
    println!("cargo:rustc-env=CKPTRUN_TARGET={target}");

    // The commit is optional: a source tarball has no .git.
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    let commit = match (commit.is_empty(), dirty) {
        (true, _) => "unknown".to_string(),
        (false, true) => format!("{commit}-dirty"),
        (false, false) => commit,
    };
    println!("cargo:rustc-env=CKPTRUN_COMMIT={commit}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
    println!("cargo:rerun-if-changed=build.rs");
    place_code_apart();
    compress_help();
}

/// `--help`'s text as one frame of ckptrun's codec, and its length
/// (src/config/help.rs).
fn compress_help() {
    use ckptrun_codec::{BLOCK, bound, encode};
    const HELP: &str = "src/config/help.txt";
    println!("cargo:rerun-if-changed={HELP}");
    let text = std::fs::read(HELP).expect("read src/config/help.txt");
    let (mut table, mut lits, mut seqs) = (
        vec![0; encode::TABLE],
        vec![0; BLOCK],
        vec![0; encode::SEQS],
    );
    let mut encoder = encode::Encoder::new(encode::Work {
        table: &mut table,
        lits: &mut lits,
        seqs: &mut seqs,
    });
    let mut frame = vec![0; bound(text.len())];
    let size = encoder
        .frame(&text, &mut frame)
        .expect("bound() always fits");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let path = std::path::Path::new(&out).join("help.zst");
    std::fs::write(path, &frame[..size]).expect("write help.zst");
    let len = std::path::Path::new(&out).join("help.len");
    std::fs::write(len, text.len().to_string()).expect("write help.len");
}

/// Code that the process supervising the job never runs goes in load
/// segments of its own, so that the supervisor never maps it. The kernel
/// maps a file's pages 64 KiB at a time around each one a process
/// touches ("fault-around"), but never across a mapping's end: code in
/// the supervisor's segment is resident whether it runs or not, code in
/// another segment only if it runs (docs/how-it-works.md, "Memory";
/// tests/launcher.rs checks it). Two such segments:
/// - what only child processes run (`os::beside`): the codec
///   (`ckptrun-codec`, `store::pack`), the archive's writing, walking and
///   extraction, the manifest's checks and XXH3. The supervisor runs
///   them only where no child answers (none can be made, or it dies),
///   on a damaged generation (the check that says why), and in dmtcp
///   mode's restart (its copies);
/// - dmtcp mode, which the other modes never run.
///
/// dmtcp mode's goes first: a dmtcp mode supervisor maps all of it
/// (fault-around), so it should span as few pages as its size allows.
/// Right after the headers it starts near a page's start; after the
/// children's segment it started 3 KB into a page, and at 27 KB spanned
/// 8 pages instead of 7: 4 kB more of VmHWM (260 kB on x86_64).
///
/// Input sections are matched by the functions' mangled names, in which
/// a module path `store::writer` reads `5store6writer`: a function
/// inlined into one of them goes with it, a generic one instantiated for
/// one of their types too.
///
/// Where: first, right after the ELF headers in the file, each a page
/// (or two) on in memory from the one before; the rest of the code a page
/// past their end (gaps GNU ld does not bridge: separate mappings). GNU ld
/// (`-z separate-code`) starts the code on a page of its own in the file,
/// after the read-only headers: that page was 3.7 KB of padding, which
/// these segments now fill. The price: the headers' page (376 bytes of
/// headers on i686, 816 on x86_64) is mapped executable too, in the
/// first segment's mapping. GNU ld reads this script before its default
/// one; INSERT keeps the default layout for everything else (`anchor`).
fn place_code_apart() {
    const BESIDE: &[&str] = &[
        ".text.*ckptrun_codec*",
        ".rodata.*ckptrun_codec*",
        ".text.*5store6writer*",
        ".text.*5store7archive*",
        ".text.*5store8manifest*",
        ".text.*5store4hash*",
        ".text.*5store4pack*",
        ".text.*xxhash_rust*",
    ];
    const DMTCP: &[&str] = &[".text.*4mode5dmtcp*"];
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let script = std::path::Path::new(&out).join("segments.ld");
    let text = format!(
        "SECTIONS\n{{\n  .text.dmtcp (. + 0x1000) : {{ *({}) }}\n  \
         .text.beside (. + 0x2000) : {{ *({}) }}\n  . = . + 0x1000;\n}}\nINSERT AFTER {};\n",
        DMTCP.join(" "),
        BESIDE.join(" "),
        anchor()
    );
    std::fs::write(&script, text).expect("write the linker script");
    println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
}

/// The section the segments go after: the last before the code in GNU
/// ld's default layout, `.relr.dyn` from binutils 2.38 on; before, the
/// PLT's relocations (`.rela.plt`, `.rel.plt` on 32-bit x86). INSERT
/// fails on a section the default layout does not name.
fn anchor() -> &'static str {
    let layout = Command::new("ld").arg("--verbose").output();
    let has_relr = layout.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(".relr.dyn"));
    let width = std::env::var("CARGO_CFG_TARGET_POINTER_WIDTH").unwrap_or_default();
    match (has_relr, width.as_str()) {
        (true, _) => ".relr.dyn",
        (false, "32") => ".rel.plt",
        (false, _) => ".rela.plt",
    }
}
