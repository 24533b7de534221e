#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md (issue 25): who should compress a DMTCP
# job's images, DMTCP (DMTCP_GZIP=1, DMTCP's own default: one `gzip -1`
# per image, as the image is written) or ckptrun (ckptrun's default:
# `dmtcp_launch --no-gzip`, raw images, compressed by ckptrun's codec as
# it commits them, where that pays)? For each
# SIZE of the job's memory and each KIND of what it holds, interleaved,
# medians (min-max) over RUNS:
#   evict    from SIGTERM to ckptrun's exit (85): DMTCP's checkpoint, the
#            commit, everything an eviction waits for;
#   bytes    the generation's slot file: what HTCondor uploads for it;
#   restart  from exec'ing ckptrun in a new sandbox (the slot file and
#            the job's output) to the job's first new line of output.
# KIND: text (the memory holds Rust's library sources over and over:
# text-like data) or random (/dev/urandom: incompressible).
# Usage: scripts/bench-dmtcp-gzip.sh [RUNS] [SIZES_MB] [KINDS]
#   (default 3, "256 1024", "text random")
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
sizes=${2:-256 1024}
kinds=${3:-text random}
scripts/setup.sh
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
prefix=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
"$PWD/../shared/tools/real-dmtcp.sh" "$prefix" >/dev/null
dmtcp=$prefix/bin
ckptrun=$PWD/target/x86_64-unknown-linux-musl/release/ckptrun
sources=$(rustc --print sysroot)/lib/rustlib/src/rust/library
repo=$PWD
work=$(mktemp -d /tmp/ckptrun-bench-dmtcp-gzip.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset _CONDOR_JOB_AD DMTCP_GZIP
find "$sources" -name '*.rs' | sort | xargs cat > text

cc -O1 -o big "$repo/scripts/big.c"

now() { date +%s%3N; }
until_() { for _ in $(seq 24000); do if "$@"; then return 0; fi; sleep 0.005; done; echo "timed out: $*" >&2; exit 1; }
ready_in() { grep -q "^ready" "$1" 2>/dev/null; }
stats() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f (%.0f-%.0f)", m, v[1], v[NR] }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# one WHO SIZE FILL: one eviction and one restart; appends to WHO.*
one() {
    local who=$1 size=$2 fill=$3 pid t
    local env=()
    [ "$who" = dmtcp ] && env=(DMTCP_GZIP=1)
    rm -rf ck new && mkdir ck && cp big ck/
    (cd ck && exec env "${env[@]}" "$ckptrun" --mode dmtcp --dmtcp-dir "$dmtcp" --log evict.log --stdout out -- ./big "$size" "$fill") &
    pid=$!
    until_ ready_in ck/out
    t=$(now)
    kill -TERM "$pid"
    wait "$pid" || [ $? = 85 ] || { cat ck/evict.log >&2; exit 1; }
    echo $(( $(now) - t )) >> "$who.evict"
    local slot
    slot=$(ls -S ck/ckptrun.store.* | head -1)
    stat -c %s "$slot" >> "$who.bytes"
    # The slot file and the job's output, as HTCondor brings them back.
    mkdir new && cp big ck/out new/ && cp "$slot" new/
    local next=$(( $(tail -n1 ck/out | cut -d' ' -f2) + 1 ))
    rm -rf ck
    sync
    t=$(now)
    (cd new && exec env "${env[@]}" "$ckptrun" --mode dmtcp --dmtcp-dir "$dmtcp" --log restart.log --stdout out -- ./big "$size" "$fill") &
    pid=$!
    until_ grep -q "^ready $next " new/out
    echo $(( $(now) - t )) >> "$who.restart"
    kill -TERM "$pid"
    wait "$pid" || true
    rm -rf new
}

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r); /tmp: $(findmnt -T "$work" -o FSTYPE -n | head -1); DMTCP 4.2.0; ckptrun $(stat -c %s "$ckptrun") bytes; $runs runs each, interleaved"
echo
echo "| memory | figure | DMTCP's gzip -1 (DMTCP_GZIP=1) | ckptrun's codec (its default) | ratio |"
echo "|---|---|---|---|---|"
for kind in $kinds; do
    fill=$PWD/text
    [ "$kind" = random ] && fill=/dev/urandom
    for size in $sizes; do
        rm -f dmtcp.* ckptrun.*
        for run in $(seq "$runs"); do
            echo "bench-dmtcp-gzip: $kind $size MiB, run $run" >&2
            one dmtcp "$size" "$fill"
            one ckptrun "$size" "$fill"
        done
        for fig in evict bytes restart; do
            unit=ms; [ $fig = bytes ] && unit=bytes
            r=$(awk -v a="$(median < ckptrun.$fig)" -v b="$(median < dmtcp.$fig)" 'BEGIN { printf "%.2fx", a / b }')
            echo "| $size MiB $kind | $fig, $unit | $(stats < dmtcp.$fig) | $(stats < ckptrun.$fig) | $r |"
        done
    done
done
