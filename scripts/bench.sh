#!/usr/bin/env bash
# Benchmarks for BENCHMARKS.md: binary size, peak memory while
# supervising, and whole-process launch cost against setarch, tini,
# tini-static, dumb-init, catatonit and plain `true`, all measured in the
# same run. ckptrun is the shipped build (scripts/build-release.sh).
# Usage: scripts/bench.sh [RUNS]   (hyperfine runs per command; default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --bench
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh
cargo build --release --locked --quiet --example bench_job
runs=${1:-2000}
x64=target/x86_64-unknown-linux-musl/release/ckptrun
i686=target/i686-unknown-linux-musl/release/ckptrun
ckptrun=$PWD/$x64
job=$PWD/target/x86_64-unknown-linux-musl/release/examples/bench_job
work=$(mktemp -d /tmp/ckptrun-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
echo "- $(rustc --version); hyperfine $(hyperfine --version | cut -d' ' -f2); tini $(tini --version | cut -d' ' -f3); dumb-init $(dumb-init --version 2>&1 | cut -d' ' -f2); catatonit $(catatonit --version | cut -d' ' -f3)"
echo
echo "## Size (stripped; ckptrun static musl, tini-static and catatonit static glibc, the others Debian's dynamic builds)"
echo "| binary | bytes | KiB |"
echo "|---|---|---|"
for f in "$OLDPWD/$x64" "$OLDPWD/$i686" "$(command -v tini)" /usr/bin/tini-static "$(command -v dumb-init)" "$(command -v catatonit)" "$(command -v setarch)"; do
    b=$(stat -c %s "$f")
    echo "| ${f#$OLDPWD/} | $b | $((b / 1024)) |"
done
echo
echo "## Peak memory while supervising the same sleeping job (median of 5 by VmHWM)"
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
        pkill -KILL -f '^sleep 5.123$' || true
    done
    # The median by VmHWM; leading zeros only sort it.
    printf '%s\n' "${samples[@]}" | sort -n | sed -n 3p | sed 's/^0*//'
}
# The same job under each: `sleep 5.123` (ckptrun in init mode, so no
# personality or arguments differ).
echo "| ckptrun --mode init | $(hwm "$ckptrun" --mode init -- sleep 5.123) |"
echo "| ckptrun --mode init (i686 build) | $(hwm "$OLDPWD/$i686" --mode init -- sleep 5.123) |"
echo "| tini -s | $(hwm tini -s -- sleep 5.123) |"
echo "| tini-static -s | $(hwm tini-static -s -- sleep 5.123) |"
echo "| dumb-init | $(hwm dumb-init sleep 5.123) |"
echo "| catatonit | $(hwm catatonit -- sleep 5.123) |"
echo
echo "## Launch cost (whole process, $runs runs each, hyperfine -N)"
# `true` ignores the -_condor_ckpt arguments ckptrun appends.
hyperfine -N --warmup 100 --runs "$runs" --export-json launch.json \
    "true" \
    "setarch x86_64 -L -B -R true" \
    "$ckptrun -- true" \
    "tini -s -- true" \
    "tini-static -s -- true" \
    "dumb-init true" \
    "catatonit -- true" >/dev/null 2>&1
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

echo
echo "## Signal forwarding round trip (SIGUSR1 to the supervisor, forwarded to the job alone, acknowledged by it; 10,000 signals, 5 rounds)"
python3 - "$ckptrun" "$job" <<'PY'
import os, signal, statistics, subprocess, sys, time
ckptrun, job = sys.argv[1], sys.argv[2]
def round_trips(cmd, n=10_000):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    out = p.stdout.fileno()
    assert os.read(out, 1) == b"r"
    start = time.perf_counter()
    for _ in range(n):
        os.kill(p.pid, signal.SIGUSR1)
        assert os.read(out, 1) == b"x"
    elapsed = time.perf_counter() - start
    p.terminate()
    p.wait()
    return elapsed / n * 1e6
cmds = {
    "ckptrun --mode init": [ckptrun, "--mode", "init", "--", job, "echo"],
    "tini -s": ["tini", "-s", "--", job, "echo"],
    "tini-static -s": ["tini-static", "-s", "--", job, "echo"],
    "dumb-init --single-child": ["dumb-init", "--single-child", job, "echo"],
    "catatonit": ["catatonit", "--", job, "echo"],
}
rounds = {name: [] for name in cmds}
for _ in range(5):
    for name, cmd in cmds.items():
        rounds[name].append(round_trips(cmd))
base = statistics.median(rounds["tini -s"])
print("| supervisor | median µs per round trip | vs tini |")
print("|---|---|---|")
for name, r in rounds.items():
    m = statistics.median(r)
    print(f"| {name} | {m:.1f} | {m / base:.2f} |")
PY

echo
echo "## Reaping 10,000 orphans as PID 1 (unshare; the job waits until all are reaped; hyperfine, 20 runs)"
pid1="unshare --fork --pid --mount-proc"
hyperfine -N --warmup 1 --runs 20 --export-json orphans.json \
    "$pid1 $ckptrun --mode init -- $job orphans 10000" \
    "$pid1 tini -s -- $job orphans 10000" \
    "$pid1 tini-static -s -- $job orphans 10000" \
    "$pid1 dumb-init $job orphans 10000" \
    "$pid1 catatonit -- $job orphans 10000" >/dev/null 2>&1
python3 - orphans.json "$ckptrun" "$job" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
name = lambda r: r["command"].replace(sys.argv[2], "ckptrun").replace(sys.argv[3], "bench_job")
base = next(r["median"] for r in results if " tini -s" in r["command"])
print("| command | median ms | σ ms | vs tini |")
print("|---|---|---|---|")
for r in results:
    print(f"| `{name(r)}` | {r['median']*1e3:.0f} | {r['stddev']*1e3:.0f} | {r['median']/base:.2f} |")
PY
