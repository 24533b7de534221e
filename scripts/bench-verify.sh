#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md: what verifying a generation costs a
# restore (`--mode self`, the job's files restored before each start, the
# generation checked against its XXH3 manifest first), against `cp` of
# the same bytes onto an existing copy and into a new file, and against
# `xxhsum -H3` of the archive alone (the checksum's cost), all measured
# in the same run with hyperfine (median, min-max).
# Usage: scripts/bench-verify.sh [RUNS] [DIR] [SIZES]
#   RUNS   timed runs per command (default 7; one warmup run each)
#   DIR    where the scratch directory is made (default /tmp)
#   SIZES  state sizes, as head -c takes them (default "256M 1G")
# Needs about 3 times the largest size free in DIR. Prints markdown on
# stdout, progress on stderr. Every run starts after `sync` with the
# files hot in the page cache: what is measured is copying and hashing.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
base=${2:-/tmp}
sizes=${3:-256M 1G}
command -v hyperfine >/dev/null || scripts/setup.sh --bench
command -v xxhsum >/dev/null || scripts/setup.sh
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
ckptrun=$PWD/target/x86_64-unknown-linux-musl/release/ckptrun
work=$(mktemp -d "$base/ckptrun-bench-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
fstype=$(findmnt -T "$work" -o FSTYPE -n | head -1)

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
echo "- work dir $base: $fstype; $(cp --version | head -1); $(xxhsum --version 2>&1 | head -1 | cut -d' ' -f1-2); hyperfine $(hyperfine --version | cut -d' ' -f2); ckptrun $(stat -c %s "$ckptrun") bytes"
echo
echo "| size | operation | command | median ms | min–max | ratio vs cp onto a copy |"
echo "|---|---|---|---|---|---|"
for size in $sizes; do
    echo "bench-verify: $size, $runs runs each" >&2
    rm -rf ./*
    mkdir ck && head -c "$size" /dev/urandom > ck/state && cd ck
    # Generation 1 holds `state`; every later start restores it.
    "$ckptrun" --mode self --ckpt state --job-ckpt-exit 17 --keep 0 -- sh -c 'touch state; exit 17' || [ $? = 85 ]
    "$ckptrun" --mode self --ckpt state --job-ckpt-exit 17 --keep 0 -- true
    cp state state.atomic && cp state copy && sync
    self="$ckptrun --mode self --ckpt state --job-ckpt-exit 17 --keep 0 -- true"
    hyperfine -N --style none --warmup 1 --runs "$runs" --export-json ../$size.json -p sync \
        "$ckptrun --mode init -- true" \
        "$self" \
        "cp state.atomic copy" \
        "sh -c 'rm -f new; cp state.atomic new'" \
        "xxhsum -H3 ckptrun.store.0" >/dev/null 2>&1
    cd ..
    python3 - "$size" "$size.json" "$ckptrun" <<'PY'
import json, statistics, sys
size, path, ckptrun = sys.argv[1:]
res = {r["command"]: [t * 1e3 for t in r["times"]] for r in json.load(open(path))["results"]}
med = statistics.median
cp = res["cp state.atomic copy"]
rows = [
    ("exec only", "`ckptrun --mode init -- true`", f"{ckptrun} --mode init -- true"),
    ("restore, verified, + exec", "`ckptrun --mode self --ckpt state ... -- true`",
     f"{ckptrun} --mode self --ckpt state --job-ckpt-exit 17 --keep 0 -- true"),
    ("cp onto an existing copy", "`cp state.atomic copy`", "cp state.atomic copy"),
    ("cp into a new file", "`rm -f new; cp state.atomic new`", "sh -c 'rm -f new; cp state.atomic new'"),
    ("the checksum alone", "`xxhsum -H3 ckptrun.store.0`", "xxhsum -H3 ckptrun.store.0"),
]
for op, shown, cmd in rows:
    t = res[cmd]
    print(f"| {size} | {op} | {shown} | {med(t):.0f} | {min(t):.0f}–{max(t):.0f} | {med(t) / med(cp):.2f} |")
PY
done
