#!/usr/bin/env bash
# Benchmarks for BENCHMARKS.md: binary size, peak memory while
# supervising, and whole-process launch cost against setarch, tini,
# dumb-init and plain `true`, all measured in the same run.
# Usage: scripts/bench.sh [RUNS]   (hyperfine runs per command; default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench
cargo build --release --locked --quiet
cargo build-i686 --locked --quiet
runs=${1:-2000}
x64=target/x86_64-unknown-linux-musl/release/ckptrun
i686=target/i686-unknown-linux-musl/release/ckptrun
ckptrun=$PWD/$x64
work=$(mktemp -d /tmp/ckptrun-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
echo "- $(rustc --version); hyperfine $(hyperfine --version | cut -d' ' -f2); tini $(tini --version | cut -d' ' -f3); dumb-init $(dumb-init --version 2>&1 | cut -d' ' -f2)"
echo
echo "## Size (stripped; ckptrun static, the others Debian's dynamic builds)"
echo "| binary | bytes | KiB |"
echo "|---|---|---|"
for f in "$OLDPWD/$x64" "$OLDPWD/$i686" "$(command -v tini)" "$(command -v dumb-init)" "$(command -v setarch)"; do
    b=$(stat -c %s "$f")
    echo "| ${f#$OLDPWD/} | $b | $((b / 1024)) |"
done
echo
echo "## Peak memory while supervising (the supervisor, sleeping job; median of 5 by VmHWM)"
echo "| supervisor | VmHWM kB | RssAnon kB |"
echo "|---|---|---|"
hwm() {
    local samples=()
    for _ in 1 2 3 4 5; do
        "$@" &
        local pid=$!
        sleep 0.3
        samples+=("$(awk '/VmHWM/{h=$2} /RssAnon/{a=$2} END{printf "%06d | %s", h, a}' "/proc/$pid/status")")
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    # The median by VmHWM; leading zeros only sort it.
    printf '%s\n' "${samples[@]}" | sort -n | sed -n 3p | sed 's/^0*//' 
}
echo "| ckptrun | $(hwm "$ckptrun" -- sh -c 'exec sleep 5' sh) |"
echo "| tini -s | $(hwm tini -s -- sleep 5) |"
echo "| dumb-init | $(hwm dumb-init sleep 5) |"
echo
echo "## Launch cost (whole process, $runs runs each, hyperfine -N)"
# `true` ignores the -_condor_ckpt arguments ckptrun appends.
hyperfine -N --warmup 100 --runs "$runs" --export-json launch.json \
    "true" \
    "setarch x86_64 -L -B -R true" \
    "$ckptrun -- true" \
    "tini -s -- true" \
    "dumb-init true" >/dev/null 2>&1
python3 - launch.json "$ckptrun" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
name = lambda r: r["command"].replace(sys.argv[2], "ckptrun")
med = {name(r): r["median"] * 1e6 for r in results}
print("| command | median µs | mean µs | σ µs | vs setarch |")
print("|---|---|---|---|---|")
for r in results:
    n = name(r)
    print(f"| `{n}` | {med[n]:.0f} | {r['mean']*1e6:.0f} | {r['stddev']*1e6:.0f} | {med[n]/med['setarch x86_64 -L -B -R true']:.2f} |")
PY
