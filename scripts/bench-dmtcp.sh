#!/usr/bin/env bash
# --mode dmtcp against the fake DMTCP 4.2.0 tools (examples/fake_dmtcp),
# for BENCHMARKS.md. The fakes append wall-clock times to a trace file
# (FAKE_DMTCP_TRACE): when the job joined the coordinator, when the
# checkpoint froze it, when the restart script was written.
# 1. Eviction: time from SIGTERM to ckptrun's exit (85), and that minus
#    the checkpoint's own duration (frozen -> restart script written):
#    what ckptrun adds (request, detection, --quit, commit, teardown).
# 2. Start-up: time from starting the launcher to the job running under
#    DMTCP (joined), fresh and restarting; the peer is the same steps in
#    a shell script with a 5 ms poll for the port file (the shim slept).
# Usage: scripts/bench-dmtcp.sh [RUNS] (default 30) [FREEZE_MS] (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked --quiet
cargo build --release --locked --quiet --example fake_dmtcp --example dmtcp_job
runs=${1:-30}
export FAKE_DMTCP_FREEZE_MS=${2:-20}
bin=$PWD/target/x86_64-unknown-linux-musl/release
work=$(mktemp -d /tmp/ckptrun-bench-dmtcp.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
for tool in dmtcp_launch dmtcp_coordinator dmtcp_command dmtcp_restart; do
    ln "$bin/examples/fake_dmtcp" "$tool"
done
cp "$bin/examples/dmtcp_job" job
cp "$bin/ckptrun" ckptrun
export FAKE_DMTCP_TRACE=$work/trace DMTCP_JOB_PIDFILE=job.pid
unset _CONDOR_JOB_AD

# The shell peer: what a wrapper script must do to start the job under a
# private coordinator, polling for the port file.
cat > startup.sh <<'SH'
#!/bin/sh
rm -f port
./dmtcp_coordinator --coord-port 0 --port-file "$PWD/port" --exit-on-last --daemon --ckptdir "$PWD/images"
while [ ! -s port ]; do sleep 0.005; done
exec ./dmtcp_launch --coord-host 127.0.0.1 --coord-port "$(cat port)" --join-coordinator --ckptdir "$PWD/images" ./job "$@"
SH
chmod +x startup.sh
mkdir -p images

ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
event() { awk -v e="$1" '$1 == e { print $2; exit }' trace; }
median() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f", m }'; }
wait_for() { for _ in $(seq 2000); do [ -e "$1" ] && return; sleep 0.005; done; echo "no $1" >&2; exit 1; }

: > evict.total; : > evict.ckpt; : > evict.overhead
: > start.fresh; : > start.restart; : > start.shell
for _ in $(seq "$runs"); do
    rm -rf ckptrun.store out trace job.pid
    t0=$(date +%s%N)
    ./ckptrun --mode dmtcp --stdout out -- ./job 1000000 10 &
    pid=$!
    wait_for job.pid
    echo "$(ms "$t0" "$(event joined)")" >> start.fresh
    sleep 0.2
    rm -f trace
    t0=$(date +%s%N)
    kill -TERM "$pid"
    rc=0; wait "$pid" || rc=$?
    t1=$(date +%s%N)
    [ "$rc" = 85 ] || { echo "ckptrun exited $rc, not 85" >&2; exit 1; }
    total=$(ms "$t0" "$t1")
    ckpt=$(ms "$(event ckpt-start)" "$(event ckpt-complete)")
    echo "$total" >> evict.total
    echo "$ckpt" >> evict.ckpt
    awk -v t="$total" -v c="$ckpt" 'BEGIN { printf "%.1f\n", t - c }' >> evict.overhead

    # The restart from that checkpoint, up to the job running again.
    rm -f trace job.pid
    t0=$(date +%s%N)
    ./ckptrun --mode dmtcp --stdout out -- ./job 1000000 10 &
    pid=$!
    wait_for job.pid
    echo "$(ms "$t0" "$(event joined)")" >> start.restart
    kill -TERM "$pid"
    rc=0; wait "$pid" || rc=$?
    [ "$rc" = 85 ] || { echo "ckptrun exited $rc after the restart, not 85" >&2; exit 1; }

    # The shell peer's start-up.
    rm -f trace job.pid
    t0=$(date +%s%N)
    ./startup.sh 0 0 > /dev/null
    echo "$(ms "$t0" "$(event joined)")" >> start.shell
done

echo "## --mode dmtcp against the fake tools ($runs runs, FAKE_DMTCP_FREEZE_MS=$FAKE_DMTCP_FREEZE_MS, 64 KiB image)"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(df -T "$work" | awk 'NR==2 {print $2}') under $work"
echo
echo "| measure | median ms | min | max |"
echo "|---|---|---|---|"
row() { echo "| $1 | $(median < "$2") | $(sort -n "$2" | head -1) | $(sort -n "$2" | tail -1) |"; }
row "eviction: SIGTERM to exit 85" evict.total
row "the checkpoint itself (frozen to restart script)" evict.ckpt
row "**eviction overhead** (the first less the second)" evict.overhead
row "start-up, fresh: ckptrun to the job running under DMTCP" start.fresh
row "start-up, restart: ckptrun to the job restored" start.restart
row "start-up, fresh: a shell script doing the same steps" start.shell
