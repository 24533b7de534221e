#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md: the restore and commit cost of a 1 GiB
# checkpoint under `ckptrun --mode self`, against what a shell wrapper
# does for the HTCondor HOWTO's workaround 4 (`cp state.atomic state`
# before the start, `mv state state.atomic` after exit 17), all measured
# in the same run with hyperfine (median, min-max).
# Usage: scripts/bench-commit.sh [RUNS] [DIR]
#   RUNS  timed runs per command (default 7; one warmup run each)
#   DIR   where the scratch directory is made (default /tmp; its
#         filesystem is what is measured, e.g. /dev/shm for tmpfs)
# Needs about 5 GiB free in DIR. Prints markdown on stdout, progress on
# stderr. The 1 GiB file stays hot in the page cache throughout (no
# cache dropping): what is measured is copying, writeback and fsync.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
base=${2:-/tmp}
command -v hyperfine >/dev/null || scripts/setup.sh --bench
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
ckptrun=$PWD/target/x86_64-unknown-linux-musl/release/ckptrun

need=$((5 * 1024 * 1024 * 1024))
avail=$(df -B1 --output=avail "$base" | tail -1 | tr -d ' ')
if [ "$avail" -lt "$need" ]; then
    echo "bench-commit: $base has $((avail >> 20)) MiB free, needs $((need >> 20)) MiB" >&2
    exit 1
fi
work=$(mktemp -d "$base/ckptrun-bench-commit.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
fstype=$(findmnt -T "$work" -o FSTYPE -n | head -1)

# Reflink support of this filesystem, by the same test cp makes.
: > probe
if cp --reflink=always probe probe.clone 2>/dev/null; then
    reflink="supported (cp --reflink=always succeeds)"
else
    reflink="not supported (cp --reflink=always fails: cp --reflink=auto and ckptrun's FICLONE fall back to copying)"
fi
rm -f probe probe.clone

echo "bench-commit: writing the 1 GiB state file in $work ($fstype)" >&2
if command -v openssl >/dev/null; then
    openssl rand -out ref 1073741824
else
    head -c 1G /dev/urandom > ref
fi
sync

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
echo "- work dir $base: $fstype ($(findmnt -T "$work" -o SOURCE -n | head -1)); reflink $reflink"
shm=$(findmnt -T /dev/shm -o FSTYPE -n 2>/dev/null | head -1 || true)
[ -n "$shm" ] && echo "- /dev/shm: $shm"
echo "- vm.dirty_background_ratio $(cat /proc/sys/vm/dirty_background_ratio), vm.dirty_ratio $(cat /proc/sys/vm/dirty_ratio), vm.dirty_expire_centisecs $(cat /proc/sys/vm/dirty_expire_centisecs)"
echo "- hyperfine $(hyperfine --version | cut -d' ' -f2); $(cp --version | head -1); ckptrun $(stat -c %s "$ckptrun") bytes"
echo

# Every prepare ends with `sync`, so each timed run starts with nothing
# dirty but what the operation itself is meant to find.
hf() { hyperfine -N -i --style none --warmup 1 --runs "$runs" "$@" >/dev/null 2>&1; }

# ckptrun. First run: generation 0 is made from `state`; one commit makes
# generation 1, so every later start restores from a committed copy (one
# slot, --keep 0: each commit replaces it).
mkdir ck && cp ref ck/state && cd ck
"$ckptrun" --mode self --ckpt state --job-ckpt-exit 17 --keep 0 -- sh -c 'touch state; exit 17' || [ $? = 85 ]
sync
self="$ckptrun --mode self --ckpt state --job-ckpt-exit 17 --keep 0"
clean="sh -c 'rm -f state; sync'"
echo "bench-commit: ckptrun, $runs runs each" >&2
hf --export-json ../ckptrun.json \
    -p "$clean" "$ckptrun --mode init -- true" \
    -p "$clean" "$self -v --log restore.log -- true" \
    -p "$clean" "$self -v --log touch.log -- sh -c 'touch state; exit 17'" \
    -p "$clean" "$self -v --log rewrite.log -- sh -c 'dd if=../ref of=state bs=16M conv=notrunc status=none; exit 17'"
cp restore.log touch.log rewrite.log ..
cd .. && rm -rf ck && sync

# The shell wrapper's way. Restores start with no `state`; commits start
# with `state` just written by the "job" (cp, so 1 GiB dirty in the page
# cache, as after a job that wrote its checkpoint) and state.atomic there.
mkdir sh && cp ref sh/state.atomic && rm ref && cd sh && sync
written="sh -c 'rm -f state state.new; sync; cp state.atomic state'"
echo "bench-commit: shell wrapper, $runs runs each" >&2
hf --export-json ../shell.json \
    -p "$clean" "cp state.atomic state" \
    -p "$clean" "cp --reflink=auto state.atomic state" \
    -p "$clean" "sh -c 'cp state.atomic state.tmp && sync state.tmp && mv state.tmp state && sync .'" \
    -p "$written" "mv state state.atomic" \
    -p "$written" "sh -c 'sync state && mv state state.atomic && sync .'" \
    -p "$written" "sh -c 'cp state state.new && mv state.new state.atomic'" \
    -p "$written" "sh -c 'cp state state.new && sync state.new && mv state.new state.atomic && sync .'"
cd ..

echo "## Results ($runs runs each, hyperfine -N, 1 warmup; $fstype)"
python3 - "$ckptrun" "$runs" <<'PY'
import json, re, statistics, sys
from datetime import datetime
ckptrun, runs = sys.argv[1], int(sys.argv[2])

def hyper(path):
    out = {}
    for r in json.load(open(path))["results"]:
        t = [x * 1e3 for x in r["times"]]
        codes = set(r.get("exit_codes") or [])
        out[r["command"]] = (t, codes)
    return out

ck, sh = hyper("ckptrun.json"), hyper("shell.json")
self = f"{ckptrun} --mode self --ckpt state --job-ckpt-exit 17 --keep 0"
init = ck[f"{ckptrun} --mode init -- true"][0]
restore = ck[f"{self} -v --log restore.log -- true"]
touch = ck[f"{self} -v --log touch.log -- sh -c 'touch state; exit 17'"]
rewrite = ck[f"{self} -v --log rewrite.log -- sh -c 'dd if=../ref of=state bs=16M conv=notrunc status=none; exit 17'"]
for name, (_, codes) in [("restore", restore), ("touch", touch), ("rewrite", rewrite)]:
    want = {0} if name == "restore" else {85}
    if codes and codes != want:
        sys.exit(f"bench-commit: ckptrun {name} runs exited {sorted(codes)}, expected {sorted(want)}")
for cmd, (_, codes) in sh.items():
    if codes and codes != {0}:
        sys.exit(f"bench-commit: `{cmd}` exited {sorted(codes)}")

# Per-run split from ckptrun's own log (ms timestamps): commit is
# "job exited 17" -> "committed" (the archive written, fsync'd, renamed
# over its slot; there is nothing to prune: the slot is replaced).
line = re.compile(r"^(\S+)Z ckptrun\[(\d+)\]: (.*)$")
def split(path):
    runs_ = {}
    for l in open(path):
        m = line.match(l.rstrip("\n"))
        if not m:
            continue
        t = datetime.fromisoformat(m[1]).timestamp() * 1e3
        runs_.setdefault(m[2], []).append((t, m[3]))
    commit = []
    for events in runs_.values():
        at = lambda p: next((t for t, msg in events if msg.startswith(p)), None)
        e, c = at("job exited 17"), at("committed generation ")
        if e is None or c is None:
            sys.exit(f"bench-commit: a run in {path} did not commit")
        commit.append(c - e)
    return commit[-runs:]
touch_commit = split("touch.log")
rewrite_commit = split("rewrite.log")

med = statistics.median
def row(op, tool, t, base):
    # No ratio against nothing, or against a median under the 1 ms
    # resolution of the log split.
    ratio = f"{med(t) / med(base):.2f}" if base and med(base) >= 1 else "—"
    print(f"| {op} | {tool} | {med(t):.0f} | {min(t):.0f}–{max(t):.0f} | {ratio} |")

r, c = restore[0], rewrite_commit
print("| operation | tool | median ms | min–max | ratio vs ckptrun |")
print("|---|---|---|---|---|")
row("exec only (no checkpoint)", "`ckptrun --mode init -- true`", init, None)
row("restore + exec (wall)", "`ckptrun --mode self --ckpt state --job-ckpt-exit 17 --keep 0 -- true`", r, r)
row("restore", "`cp state.atomic state`", sh["cp state.atomic state"][0], r)
row("restore", "`cp --reflink=auto state.atomic state`", sh["cp --reflink=auto state.atomic state"][0], r)
row("restore, durable", "`cp state.atomic state.tmp && sync state.tmp && mv state.tmp state && sync .`",
    sh["sh -c 'cp state.atomic state.tmp && sync state.tmp && mv state.tmp state && sync .'"][0], r)
row("commit, job rewrote 1 GiB (log split)", "ckptrun: archive written (copy_file_range), fsync'd, renamed over its slot", c, c)
row("commit, job only touched `state` (log split)", "ckptrun", touch_commit, c)
row("whole run: restore + `touch` + commit (wall)", "`ckptrun ... -- sh -c 'touch state; exit 17'`", touch[0], None)
row("whole run: restore + `dd` 1 GiB + commit (wall)", "`ckptrun ... -- sh -c 'dd ... of=state conv=notrunc; exit 17'`", rewrite[0], None)
row("commit (not durable)", "`mv state state.atomic`", sh["mv state state.atomic"][0], c)
row("commit, durable", "`sync state && mv state state.atomic && sync .`",
    sh["sh -c 'sync state && mv state state.atomic && sync .'"][0], c)
row("commit, job keeps running (not durable)", "`cp state state.new && mv state.new state.atomic`",
    sh["sh -c 'cp state state.new && mv state.new state.atomic'"][0], c)
row("commit, job keeps running, durable", "`cp state state.new && sync state.new && mv state.new state.atomic && sync .`",
    sh["sh -c 'cp state state.new && sync state.new && mv state.new state.atomic && sync .'"][0], c)
print()
print(f"ckptrun restore alone, wall less `--mode init -- true`: {med(r) - med(init):.0f} ms (medians). "
      "Restore ratios are against ckptrun's restore + exec; commit ratios against ckptrun's commit "
      "of a rewritten 1 GiB (job exited 17 -> committed, per run). "
      "Log splits have 1 ms resolution.")
PY
