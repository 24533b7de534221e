#!/usr/bin/env bash
# --mode dmtcp against the real DMTCP 4.2.0, for BENCHMARKS.md. The job is
# tests/jobs/counter.c (a line every 20 ms). Every measure is taken in the
# same run as its peer, interleaved, and reported as median (min-max).
# 1. Eviction: from SIGTERM to ckptrun's exit 85 (the images committed).
#    Peer: a shell doing DMTCP's part alone: `dmtcp_command --kcheckpoint`,
#    then polling every 5 ms until the images are complete and the job
#    is gone. ckptrun's overhead, per run, by its log's clock: from
#    SIGTERM to the request sent, plus from the job's end (DMTCP kills it
#    once its images are written) to ckptrun's exit (the commit, fsync
#    and all); and, as a cross-check, the difference of the medians.
#    Also how long `dmtcp_command --bcheckpoint` itself takes to return
#    (it returns before the images are written).
# 2. Start-up: from starting ckptrun to the job's first line of output,
#    fresh (dmtcp_launch; peer: a shell doing the same steps, a private
#    coordinator and its port file polled every 5 ms) and from a
#    checkpoint (dmtcp_restart), with ckptrun's own part of it (from its
#    exec to dmtcp_restart's, by its log's clock: the store read, the
#    images unpacked, the coordinator started). The old shim_dmtcp slept
#    a fixed 3 s instead.
# Usage: scripts/bench-dmtcp.sh [RUNS] (default 9)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
runs=${1:-9}
prefix=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
"$PWD/../shared/tools/real-dmtcp.sh" "$prefix" >/dev/null
dmtcp=$prefix/bin
ckptrun=$PWD/target/x86_64-unknown-linux-musl/release/ckptrun
work=$(mktemp -d /tmp/ckptrun-bench-dmtcp.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/counter" tests/jobs/counter.c
cd "$work"
unset _CONDOR_JOB_AD

now() { date +%s%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", (b - a) / 1e6 }'; }
# Waits (5 ms polls, at most 30 s) until `cond` holds.
until_() { for _ in $(seq 6000); do if "$@"; then return 0; fi; sleep 0.005; done; echo "timed out: $*" >&2; exit 1; }
has_lines() { [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }
complete() { [ -e "$1/dmtcp_restart_script.sh" ] && ! ls "$1"/*.temp >/dev/null 2>&1; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# "median | min-max" of the numbers on stdin, one per line; median alone
# its first field.
stats() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f | %.1f-%.1f", m, v[1], v[NR] }'; }
median() { stats | cut -d' ' -f1; }

# The shell peer's start in a fresh DIR: a coordinator of its own, then
# the job under dmtcp_launch. Sets t0 once DIR is ready (the start
# proper), port and job.
shell_start() { # DIR
    local dir=$1
    rm -rf "$dir" && mkdir -p "$dir/images" && cp counter "$dir/"
    t0=$(now)
    "$dmtcp/dmtcp_coordinator" -q -q --coord-port 0 --port-file "$dir/port" --exit-on-last --daemon --ckptdir "$dir/images"
    until_ test -s "$dir/port"
    port=$(cat "$dir/port")
    (cd "$dir" && exec "$dmtcp/dmtcp_launch" -q -q --coord-host 127.0.0.1 --coord-port "$port" --join-coordinator --ckptdir "$dir/images" ./counter 100000 20 > out) &
    job=$!
}

: > evict.ckptrun; : > evict.shell; : > evict.own; : > bckpt
: > start.fresh; : > start.restart; : > start.own; : > start.shell.fresh
for i in $(seq "$runs"); do
    echo "bench-dmtcp: run $i of $runs" >&2
    # ckptrun: start, evict, restart, evict again.
    rm -rf ck && mkdir ck && cp counter ck/
    t0=$(now)
    (cd ck && exec "$ckptrun" --mode dmtcp --dmtcp-dir "$dmtcp" --log evict.log --stdout out -- ./counter 100000 20) &
    pid=$!
    until_ has_lines ck/out 1
    ms "$t0" "$(now)" >> start.fresh
    until_ has_lines ck/out 25
    t0=$(now); kill -TERM "$pid"; rc=0; wait "$pid" || rc=$?
    t1=$(now)
    ms "$t0" "$t1" >> evict.ckptrun
    at() { date -d "$(grep -m1 "$1" ck/evict.log | cut -d' ' -f1)" +%s%N; }
    awk -v a="$(ms "$t0" "$(at 'checkpoint requested')")" -v b="$(ms "$(at 'job exited')" "$t1")" \
        'BEGIN { printf "%.1f\n", a + b }' >> evict.own
    [ "$rc" = 85 ] || { echo "ckptrun exited $rc, not 85" >&2; exit 1; }
    lines=$(wc -l < ck/out)
    t0=$(now)
    (cd ck && exec "$ckptrun" --mode dmtcp --dmtcp-dir "$dmtcp" --log restart.log --stdout out -- ./counter 100000 20) &
    pid=$!
    until_ has_lines ck/out $((lines + 1))
    ms "$t0" "$(now)" >> start.restart
    started=$(grep -m1 ' started ' ck/restart.log | cut -d' ' -f1)
    ms "$t0" "$(date -d "$started" +%s%N)" >> start.own
    kill -TERM "$pid"; rc=0; wait "$pid" || rc=$?
    [ "$rc" = 85 ] || { echo "ckptrun exited $rc after the restart, not 85" >&2; exit 1; }

    # The shell peer: the same steps with DMTCP's tools alone.
    shell_start "$PWD/sh"
    until_ has_lines sh/out 1
    ms "$t0" "$(now)" >> start.shell.fresh
    until_ has_lines sh/out 25
    t0=$(now)
    "$dmtcp/dmtcp_command" --coord-host 127.0.0.1 --coord-port "$port" --kcheckpoint >/dev/null 2>&1 || true
    until_ complete sh/images
    until_ gone "$job"
    ms "$t0" "$(now)" >> evict.shell
    wait "$job" 2>/dev/null || true
    # How long --bcheckpoint takes to return (the images are not complete).
    shell_start "$PWD/sh"
    until_ has_lines sh/out 5
    t0=$(now)
    "$dmtcp/dmtcp_command" --coord-host 127.0.0.1 --coord-port "$port" --bcheckpoint >/dev/null 2>&1
    ms "$t0" "$(now)" >> bckpt
    until_ complete sh/images
    "$dmtcp/dmtcp_command" --coord-host 127.0.0.1 --coord-port "$port" --quit >/dev/null 2>&1 || true
    until_ gone "$job"
    wait "$job" 2>/dev/null || true
done

overhead=$(awk -v a="$(median < evict.ckptrun)" -v b="$(median < evict.shell)" 'BEGIN { printf "%.1f", a - b }')
echo "## --mode dmtcp against the real DMTCP 4.2.0 ($runs runs each, interleaved)"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(df -T "$work" | awk 'NR==2 {print $2}') under $work; images in /tmp"
echo "- job: tests/jobs/counter.c, a line every 20 ms; \`scripts/bench-dmtcp.sh $runs\`"
echo
echo "| measure | median ms | min-max |"
echo "|---|---|---|"
echo "| eviction, ckptrun: SIGTERM to exit 85, images committed | $(stats < evict.ckptrun) |"
echo "| eviction, DMTCP alone: \`--kcheckpoint\`, images complete, job gone (5 ms polls) | $(stats < evict.shell) |"
echo "| **ckptrun's eviction overhead**, per run: SIGTERM to request, job's end to exit | $(stats < evict.own) |"
echo "| ckptrun's eviction overhead, difference of the medians above | $overhead | |"
echo "| \`dmtcp_command --bcheckpoint\` returning (before the images are written) | $(stats < bckpt) |"
echo "| start-up, fresh: ckptrun to the job's first line | $(stats < start.fresh) |"
echo "| start-up, fresh: a shell doing the same steps | $(stats < start.shell.fresh) |"
echo "| start-up, restart: ckptrun to the job's next line | $(stats < start.restart) |"
echo "| start-up, restart: ckptrun's own part (exec to dmtcp_restart started) | $(stats < start.own) |"
echo "| the old shim_dmtcp's fixed sleep (PROTOCOLS.md §3, not measured) | 3000 | |"
