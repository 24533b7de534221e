#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md: one checkpoint cycle of `ckptrun --mode
# self` against its physical floor, each figure against its peer in the
# same run (hyperfine -N, medians, min-max), for each SIZE of state:
#   commit    a periodic checkpoint: the job touches `state` and exits 17,
#             ckptrun commits (archive written, checksummed, fsync'd,
#             renamed over its slot) and exits 85. The start before it is
#             in place (see 2). Peer: one durable copy of the same bytes,
#             `dd bs=1M conv=fsync` into a new file.
#   in place  the start right after that commit, in the same sandbox:
#             the working copy is the committed generation, so nothing is
#             copied. Peer: `ckptrun --mode init -- true` (the same exec,
#             no checkpoint): a ratio near 1 at every size is O(1).
#   restore   the start in a new sandbox (only the slot file, as HTCondor
#             brings it): verified in full and copied (or expanded). Peer:
#             `cp` of the state's raw bytes into a new file, in the same
#             new sandbox.
# Also, for scale: the same-sandbox start that must copy (its kept copy's
# record removed), and the checksum alone (`xxhsum -H3`, when installed).
# Usage: scripts/bench-commit.sh [RUNS] [DIR] [SIZES] [KIND]
#   RUNS   timed runs per command (default 11; one warmup each)
#   DIR    where the scratch directory is made (default /tmp); its
#          filesystem is what is measured (XFS or btrfs: reflinks)
#   SIZES  default "256M 1G"
#   KIND   what the state holds: random (default: /dev/urandom, stored
#          as it is), text (Rust's library sources over and over: stored
#          compressed), text-raw (the same, with --no-compress: stored as
#          it is) or zeros
# Needs about 6 x the largest size free in DIR. Prints markdown on stdout,
# progress on stderr. Every prepare ends with `sync`: each timed run
# starts with nothing dirty but what it is meant to find.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-11}
base=${2:-/tmp}
sizes=${3:-256M 1G}
kind=${4:-random}
command -v hyperfine >/dev/null || scripts/setup.sh --bench
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
ckptrun=$PWD/target/x86_64-unknown-linux-musl/release/ckptrun

work=$(mktemp -d "$base/ckptrun-bench-commit.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
fstype=$(findmnt -T "$work" -o FSTYPE -n | head -1)
: > probe
if cp --reflink=always probe probe.clone 2>/dev/null; then reflink=yes; else reflink=no; fi
rm -f probe probe.clone

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
echo "- state: $kind"
echo "- $base: $fstype, reflinks: $reflink; hyperfine $(hyperfine --version | cut -d' ' -f2); ckptrun $(stat -c %s "$ckptrun") bytes; $runs runs each, 1 warmup"
echo

self="$ckptrun --mode self --ckpt state --job-ckpt-exit 17 --keep 0"
[ "$kind" != text-raw ] || self="$self --no-compress"
# Before each timed run: the generation a commit replaced freed (a child
# of ckptrun's does it after ckptrun exits: on a filesystem mounted with
# `discard` it can take a while), then nothing dirty.
settle="while pgrep -x ckptrun >/dev/null; do sleep 0.01; done; sync"
hf() { hyperfine -N -i --style none --warmup 1 --runs "$runs" "$@" >/dev/null 2>&1; }
for size in $sizes; do
    echo "bench-commit: $size" >&2
    rm -rf s new && mkdir s
    case $kind in
        random) head -c "$size" /dev/urandom > ref ;;
        zeros) head -c "$size" /dev/zero > ref ;;
        text|text-raw) find "$(rustc --print sysroot)/lib/rustlib/src/rust/library" -name '*.rs' | sort | xargs cat > one
              n=$(( $(numfmt --from=iec "$size") / $(stat -c %s one) + 1 ))
              for _ in $(seq "$n"); do cat one; done > all; head -c "$size" all > ref; rm one all ;;
    esac
    cp ref s/state
    (cd s && $self -- true && $self -- sh -c 'touch state; exit 17' || [ $? = 85 ])
    cp s/ckptrun.store.0 slot
    sync
    hf --export-json "commit-$size.json" \
        -p "sh -c 'rm -f copy; $settle'" "dd if=ref of=copy bs=1M conv=fsync status=none" \
        -p "sh -c '$settle'" "sh -c 'cd s && exec $self -- sh -c \"touch state; exit 17\"'"
    hf --export-json "inplace-$size.json" \
        -p "sh -c '$settle'" "sh -c 'cd s && exec $ckptrun --mode init -- true'" \
        -p "sh -c 'cd s && $self -- sh -c \"touch state; exit 17\"; $settle'" "sh -c 'cd s && exec $self -- true'" \
        -p "sh -c 'cd s && $self -- sh -c \"touch state; exit 17\"; rm .ckptrun.store/kept.record; $settle'" "sh -c 'cd s && exec $self -v -- true'"
    # Both start right after the slot file arrived in a new sandbox (as
    # HTCondor's transfer leaves it: just written).
    new="rm -rf new; mkdir new; cp slot new/ckptrun.store.0; $settle"
    hf --export-json "restore-$size.json" \
        -p "sh -c '$new'" "cp ref new/copy" \
        -p "sh -c '$new'" "sh -c 'cd new && exec $self -- true'"
    if command -v xxhsum >/dev/null; then
        hf --export-json "sum-$size.json" -p sync "xxhsum -H3 slot" -p sync "cat slot"
    fi
    # The in-place start must have been in place, and the forced one not.
    (cd s && $self -- sh -c 'touch state; exit 17' || [ $? = 85 ])
    (cd s && $self -v -- true) 2>&1 | grep -q 'not copied' || { echo "bench-commit: the start after a commit was not in place" >&2; exit 1; }
done

python3 - "$sizes" <<'PY'
import json, statistics, sys
sizes = sys.argv[1].split()

def load(name):
    try:
        rs = json.load(open(name))["results"]
    except FileNotFoundError:
        return None
    out = []
    for r in rs:
        if set(r.get("exit_codes") or [0]) - {0, 85}:
            sys.exit(f"bench-commit: `{r['command']}` exited {sorted(set(r['exit_codes']))}")
        t = [x * 1e3 for x in r["times"]]
        out.append((statistics.median(t), min(t), max(t)))
    return out

def cell(m):
    return f"{m[0]:.0f} ({m[1]:.0f}-{m[2]:.0f})"

print("| size | figure | ckptrun, ms | peer | peer, ms | ratio |")
print("|---|---|---|---|---|---|")
ratios = []
for size in sizes:
    dd, commit = load(f"commit-{size}.json")
    init, inplace, copying = load(f"inplace-{size}.json")
    cp, restore = load(f"restore-{size}.json")
    rows = [
        ("commit (periodic: touch, exit 17, exit 85)", commit, "`dd bs=1M conv=fsync`", dd),
        ("start in place after it", inplace, "`ckptrun --mode init -- true`", init),
        ("restore in a new sandbox, verified", restore, "`cp` into a new file", cp),
        ("start in the same sandbox that copies (record removed)", copying, "`cp` into a new file", cp),
    ]
    for i, (what, m, peer, p) in enumerate(rows):
        ratio = m[0] / p[0]
        if i < 3:
            ratios.append((size, what, ratio))
        print(f"| {size} | {what} | {cell(m)} | {peer} | {cell(p)} | {ratio:.2f}x |")
    s = load(f"sum-{size}.json")
    if s:
        print(f"| {size} | the checksum alone: `xxhsum -H3` of the slot | {cell(s[0])} | `cat` of it | {cell(s[1])} | {s[0][0] / s[1][0]:.2f}x |")
print()
print("The three ratios (medians):")
for size, what, ratio in ratios:
    print(f"- {size}: {what}: {ratio:.2f}x")
PY
