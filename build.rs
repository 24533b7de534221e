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
    place_the_codec_apart();
}

/// The codec (compression and expansion: `ckptrun-codec`, and
/// `store::pack`'s children) runs only in children, never in the process
/// that supervises the job. The kernel maps a file's pages 64 KiB at a
/// time around each one a process touches ("fault-around"), but never
/// across a mapping's end: so the codec goes in a load segment of its own,
/// and the supervisor, which never runs it, never maps it
/// (docs/how-it-works.md, "Memory").
///
/// Where: first, right after the ELF headers in the file, a page on in
/// memory; the rest of the code a page past its end (a gap GNU ld does
/// not bridge: the two stay apart, two mappings). GNU ld
/// (`-z separate-code`) starts the code on a page of its own in the file,
/// after the read-only headers: that page was 3.7 KB of padding, and the
/// codec now fills it, so the file's padding sits after the rest of the
/// code, room for it to grow (a page more of it would cost the budget
/// 4 KiB). The price: the headers' first page (344 bytes of headers on
/// i686, 760 on x86_64) is mapped executable too, in the codec's
/// mapping. GNU ld reads this script before its default one; INSERT
/// keeps the default layout for everything else.
fn place_the_codec_apart() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let script = std::path::Path::new(&out).join("codec.ld");
    let text = "SECTIONS\n{\n  .text.codec (. + 0x1000) : { *(.text.codec .text.*ckptrun_codec* .rodata.*ckptrun_codec*) }\n  . = . + 0x1000;\n}\nINSERT AFTER .relr.dyn;\n";
    std::fs::write(&script, text).expect("write the codec's linker script");
    println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
}
