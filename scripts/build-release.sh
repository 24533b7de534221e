#!/usr/bin/env bash
# Builds the binaries users ship: static (musl), std rebuilt from source
# for size, panics as one trap (see src/os/internal_error.rs).
#   target/x86_64-unknown-linux-musl/release/ckptrun
#   target/i686-unknown-linux-musl/release/ckptrun
# Usage: scripts/build-release.sh [TARGET...]   (default: both; extra
# cargo options through CARGO_BUILD_OPTS, e.g. "--quiet --locked")
#
# The stable toolchain builds it: rustup's rust-src component (installed
# by scripts/setup.sh) is the source of this very compiler's std, and
# RUSTC_BOOTSTRAP=1, set here for this one build only, lets stable cargo
# and rustc take the unstable flags that rebuilding std needs. Plain
# `cargo build` and `cargo test` stay on stable without them (and build
# the larger std-as-shipped binary). Tested with rustc 1.95.0.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$#" -gt 0 ] || set -- x86_64-unknown-linux-musl i686-unknown-linux-musl
sysroot=$(rustc --print sysroot)
if [ ! -d "$sysroot/lib/rustlib/src/rust/library/std" ]; then
    echo "build-release.sh: rust-src is missing: rustup component add rust-src (scripts/setup.sh does)" >&2
    exit 1
fi
# -Cpanic=immediate-abort: a panic is a trap instruction at its site,
#   which ckptrun's SIGILL handler turns into one line on stderr; std's
#   panic hook, message formatting and unwinder (~100 KB) are left out.
# -Cforce-unwind-tables=no: no .eh_frame; nothing unwinds.
# --no-eh-frame-hdr: no .eh_frame_hdr (68 bytes): its only reader is an
#   unwinder, and nothing unwinds (the two flags above).
# -z pack-relative-relocs: the static PIE's relocations as DT_RELR (80 bytes
#   instead of 5.6 KB of .rela.dyn, one page less mapped; musl's start-up
#   code applies them; GNU ld 2.38 or later). RELRO and PIE stay.
# x86_64 only, --build-id=none: no .note.gnu.build-id (36 bytes, and its
#   92-byte program header), which nothing ckptrun runs on reads. dmtcp
#   mode's segment follows the headers (build.rs) and must end within its
#   7th page: one page more is 4 kB more of a dmtcp supervisor's VmHWM,
#   past the 256 kB budget (tests/dmtcp_real.rs). On i686 the headers'
#   page would then hold no section and GNU ld moves its mapping.
# i686 only, -Crelocation-model=static: a fixed-address executable, not
#   a PIE. 32-bit x86 has no PC-relative data addressing, so position-
#   independent code there spends a register and a thunk call on every
#   function that touches a global: 12 KB more text, all of it resident
#   (VmHWM 244 against 232 kB supervising a sleep; BENCHMARKS.md). The
#   price is no address randomisation of ckptrun's own image on i686
#   (its stack and heap still are; the job is not affected).
# --cfg ckptrun_cold_size: the codec's cold parts (tables built once a
#   block) compiled for size, the rest of it for speed (codec/src/lib.rs).
# build-std-features optimize_for_size, without `backtrace`.
export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-C target-feature=+crt-static -Zunstable-options -Cpanic=immediate-abort -Cforce-unwind-tables=no -Clink-arg=-Wl,-z,pack-relative-relocs -Clink-arg=-Wl,--no-eh-frame-hdr --cfg ckptrun_cold_size"
unset CARGO_ENCODED_RUSTFLAGS
base_rustflags=$RUSTFLAGS
for target in "$@"; do
    case "$target" in
        i686-*) export RUSTFLAGS="$base_rustflags -Crelocation-model=static" ;;
        *) export RUSTFLAGS="$base_rustflags -Clink-arg=-Wl,--build-id=none" ;;
    esac
    # shellcheck disable=SC2086 # CARGO_BUILD_OPTS is a list of options
    "${CARGO:-cargo}" build --release --bin ckptrun --target "$target" \
        -Zbuild-std=std,panic_abort -Zbuild-std-features=optimize_for_size \
        ${CARGO_BUILD_OPTS:-}
done
