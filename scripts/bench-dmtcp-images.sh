#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md: what `ckptrun --mode dmtcp` adds to DMTCP's
# own checkpoint and restart when the images are large, each figure
# against its peer measured in the same iteration (interleaved), medians
# (min-max) over RUNS, for each SIZE of the job's memory:
#   commit   from "checkpoint complete" (DMTCP's images written) to
#            "committed generation" (the archive written, checksummed,
#            fsync'd, renamed over its slot), by ckptrun's log clock.
#            Peer: `dd bs=1M conv=fsync` of the same number of bytes into
#            a new file.
#   restore  from exec'ing ckptrun in a new sandbox (only the slot files,
#            as HTCondor brings them) to its "restart from generation"
#            line, just before dmtcp_restart: the generation verified in
#            full, the images unpacked, the coordinator started. Peer:
#            `cp` of the images' bytes into a new file.
# The job keeps SIZE of random bytes in memory; DMTCP_GZIP=0 so that the
# images are about that size (gzip would dominate everything).
# Usage: scripts/bench-dmtcp-images.sh [RUNS] [SIZES_MB]  (default 7, "256 1024")
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
sizes=${2:-256 1024}
scripts/setup.sh
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
prefix=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
"$PWD/../shared/tools/real-dmtcp.sh" "$prefix" >/dev/null
dmtcp=$prefix/bin
ckptrun=$PWD/target/x86_64-unknown-linux-musl/release/ckptrun
work=$(mktemp -d /tmp/ckptrun-bench-dmtcp-images.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset _CONDOR_JOB_AD
export DMTCP_GZIP=0

cat > big.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    size_t size = (size_t)atol(argv[1]) << 20;
    unsigned char *mem = malloc(size);
    FILE *r = fopen("/dev/urandom", "r");
    if (!mem || !r || fread(mem, 1, size, r) != size) return 2;
    fclose(r);
    for (long i = 0;; i++) {
        printf("ready %ld %u\n", i, mem[(i * 4096) % size]);
        fflush(stdout);
        usleep(20000);
    }
}
C
cc -O1 -o big big.c

now() { date +%s%N; }
# The epoch ms of the first log line saying $2 in log $1.
at() { grep -m1 -- "$2" "$1" | cut -d' ' -f1 | sed 's/Z$//' | { read -r t; date -d "${t}Z" +%s%3N; }; }
# Waits (5 ms polls, at most 60 s) until `cond` holds.
until_() { for _ in $(seq 12000); do if "$@"; then return 0; fi; sleep 0.005; done; echo "timed out: $*" >&2; exit 1; }
has_ready() { grep -q "^ready" "$1" 2>/dev/null; }
stats() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f (%.0f-%.0f)", m, v[1], v[NR] }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r); /tmp: $(findmnt -T "$work" -o FSTYPE -n | head -1); DMTCP 4.2.0, DMTCP_GZIP=0; $runs runs each"
echo
echo "| size | figure | ckptrun, ms | peer | peer, ms | ratio |"
echo "|---|---|---|---|---|---|"
for size in $sizes; do
    : > commit.ms; : > dd.ms; : > restore.ms; : > cp.ms
    for run in $(seq "$runs"); do
        echo "bench-dmtcp-images: $size MiB, run $run" >&2
        rm -rf ck new copy && mkdir ck && cp big ck/
        (cd ck && exec "$ckptrun" --mode dmtcp --dmtcp-dir "$dmtcp" -v --log evict.log --stdout out -- ./big "$size") &
        pid=$!
        until_ has_ready ck/out
        kill -TERM "$pid"
        wait "$pid" || [ $? = 85 ]
        echo $(( $(at ck/evict.log "committed generation") - $(at ck/evict.log "checkpoint complete") )) >> commit.ms
        bytes=$(for f in ck/ckptrun.store.*; do [ -s "$f" ] && tar -tvf "$f"; done | awk '/ckpt_.*\.dmtcp$/ { s += $3 } END { print s }')
        head -c "$bytes" /dev/urandom > img && sync
        t=$(now); dd if=img of=copy bs=1M conv=fsync status=none; echo $(( ($(now) - t) / 1000000 )) >> dd.ms
        rm -f copy && sync
        t=$(now); cp img copy; echo $(( ($(now) - t) / 1000000 )) >> cp.ms
        rm -f copy img
        mkdir new && cp big new/ && for f in ck/ckptrun.store.*; do [ -s "$f" ] && cp "$f" new/; done
        # The old sandbox goes, as HTCondor removes it (ckptrun refuses a
        # restart elsewhere while the checkpointed directory still exists).
        rm -rf ck
        sync
        t=$(date +%s%3N)
        (cd new && exec "$ckptrun" --mode dmtcp --dmtcp-dir "$dmtcp" -v --log restart.log --stdout out -- ./big "$size") &
        pid=$!
        until_ grep -q "restart from generation" new/restart.log
        echo $(( $(at new/restart.log "restart from generation") - t )) >> restore.ms
        until_ has_ready new/out
        kill -TERM "$pid"
        wait "$pid" || true
    done
    ratio() { awk -v a="$(median < "$1")" -v b="$(median < "$2")" 'BEGIN { printf "%.2fx", a / b }'; }
    echo "| $size MiB | commit of the images (checkpoint complete -> committed) | $(stats < commit.ms) | \`dd bs=1M conv=fsync\` of as many bytes | $(stats < dd.ms) | $(ratio commit.ms dd.ms) |"
    echo "| $size MiB | restore in a new sandbox (exec -> dmtcp_restart) | $(stats < restore.ms) | \`cp\` of as many bytes into a new file | $(stats < cp.ms) | $(ratio restore.ms cp.ms) |"
done
