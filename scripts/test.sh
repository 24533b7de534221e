#!/usr/bin/env bash
# The test command: installs what the tests need, then runs them against
# the built binary (debug build: its allocator aborts on any allocation
# after the job started), plus clippy and rustfmt.
# Needs root (or CAP_SYS_ADMIN) for the PID-namespace test, as CI has.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked
cargo build-i686 --locked
cargo test --locked
cargo clippy --locked --all-targets -- -D warnings
cargo fmt --check
