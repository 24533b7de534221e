#!/usr/bin/env bash
# The test command: installs what the tests need, builds the shipped
# binaries (both arches, scripts/build-release.sh), then runs the tests:
# against the debug build (its allocator aborts on any allocation after
# the job started) and, for the tests that say so, against the shipped
# builds (tests/common: ckptrun_release); plus clippy and rustfmt.
# Needs root (or CAP_SYS_ADMIN) for the PID-namespace test, as CI has.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
CARGO_BUILD_OPTS=--locked scripts/build-release.sh
ls -l target/*/release/ckptrun
cargo test --locked
cargo clippy --locked --all-targets -- -D warnings
cargo fmt --check
