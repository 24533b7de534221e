#!/usr/bin/env bash
# Eviction and restart in a real HTCondor pool, for BENCHMARKS.md: a job
# under ckptrun (examples/htcondor/MODE.sub) against the same job without
# ckptrun, both in the pool at once, vacated in turn RUNS times each.
#
# 1. vacate -> idle: from just before `condor_vacate_job` to the job log's
#    `004 Job was evicted` (written once the job has exited and its files
#    are uploaded; the job is idle from then on).
# 2. idle -> running: from that event to the job running again in a new
#    sandbox: its process exists and catches its checkpoint signal (it is
#    ready: condor's SIGTSTP, self_job's SIGUSR1, DMTCP's SIGUSR2 once it
#    is restored; the DMTCP job alone catches nothing, so there its
#    process existing is enough). This includes HTCondor's matching and
#    input transfer.
# The job log's own timestamps are whole seconds, so both ends are seen by
# polling (the job log and /proc, every 5 ms) and stamped with `date
# +%s%N`: each figure is good to about 10 ms.
#
# Usage (root): scripts/bench-htcondor.sh [MODE] [RUNS]   (condor, 7)
#   MODE: condor, self or dmtcp (which builds the real DMTCP 4.2.0 with
#   ../shared/tools/real-dmtcp.sh into $CKPTRUN_DMTCP if need be)
# It starts a pool of its own (../shared/tools/htcondor-pool.sh; another
# copy with HTCONDOR_POOL_SCRIPT) and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-condor}
runs=${2:-7}
repo=$PWD
pool_script=${HTCONDOR_POOL_SCRIPT:-$repo/../shared/tools/htcondor-pool.sh}
command -v pgrep >/dev/null || scripts/setup.sh --bench
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
bin=$repo/target/x86_64-unknown-linux-musl/release

# What a mode needs: the files beside its submit file, the job's process
# name, the signal it catches once ready, the arguments for a job that
# outlasts the benchmark, and the same job's submit file without ckptrun
# (its own lines; baseline_tail below ends every one).
case "$mode" in
condor)
    cargo build --release --locked --quiet --example condor_job
    files=("$bin/ckptrun" "$bin/examples/condor_job")
    job=condor_job
    ready_sig=20 # SIGTSTP: the checkpoint library's handler is in place
    baseline_ready_sig=20
    args='--log ckptrun.log --interval $(interval) ./condor_job 1000000 50'
    # Without ckptrun: HTCondor sends the job SIGTSTP itself on vacate (it
    # checkpoints and dies by SIGUSR2), and restarts it from the start.
    baseline='universe                = vanilla
executable              = condor_job
arguments               = 1000000 50
kill_sig                = SIGTSTP'
    ;;
self)
    cargo build --release --locked --quiet --example self_job
    files=("$bin/ckptrun" "$bin/examples/self_job")
    job=self_job
    ready_sig=10 # SIGUSR1: the job's checkpoint request handler
    baseline_ready_sig=10
    args='--log ckptrun.log --mode self --ckpt state --job-ckpt-exit 17 --ckpt-signal USR1 --interval $(interval) -- ./self_job state 100000000 result'
    # Without ckptrun: HTCondor sends SIGUSR1 itself on vacate; the job
    # checkpoints in place and exits 17, declared as its checkpoint code.
    baseline='universe                = vanilla
executable              = self_job
arguments               = state 100000000 result
environment             = "SELF_JOB_STEP_MS=10 SELF_JOB_QUIET=1"
kill_sig                = SIGUSR1
checkpoint_exit_code    = 17'
    ;;
dmtcp)
    prefix=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
    "$repo/../shared/tools/real-dmtcp.sh" "$prefix" >/dev/null
    cc -O1 -o "$bin/counter" tests/jobs/counter.c
    files=("$bin/ckptrun" "$bin/counter")
    tree=$prefix
    job=counter
    ready_sig=12 # SIGUSR2: DMTCP's checkpoint signal, once it is restored
    baseline_ready_sig=0
    args='--log ckptrun.log --mode dmtcp --dmtcp-dir dmtcp/bin --stdout counter.out --stderr counter.err --interval $(interval) -- ./counter 100000000 100'
    # Without ckptrun (and DMTCP): the program killed on vacate (SIGTERM)
    # and started again from the start.
    baseline='universe                = vanilla
executable              = counter
arguments               = 100000000 100'
    ;;
*)
    echo "bench-htcondor.sh: no mode $mode (condor, self, dmtcp)" >&2
    exit 2
    ;;
esac
baseline_tail='should_transfer_files   = YES
when_to_transfer_output = ON_EXIT_OR_EVICT
job_max_vacate_time     = 300
transfer_input_files    = baseline.marker
output                  = job.out
error                   = job.err
log                     = job.log
queue'

work=$(mktemp -d /tmp/ckptrun-bench-htcondor.XXXXXX)
chmod 755 "$work"
pool=$work/pool
cleanup() {
    "$pool_script" stop "$pool" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
eval "$(COLLECTOR_PORT=$port "$pool_script" start "$pool" 2>/dev/null)"

now() { date +%s%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) / 1e6 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f", m }'; }
range() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%d-%d", lo, hi }'; }
as_user() { local dir=$1; shift; su "$CONDOR_USER" -s /bin/sh -c 'cd "$0" && exec "$@"' -- "$dir" "$@"; }
events() { local n; n=$(grep -c "^$2 " "$1/job.log" 2>/dev/null) || true; echo "${n:-0}"; }

# The pid of the job's process in this pool once it catches its ready
# signal (0: once it exists).
ready_pid() {
    local p mask sig cwd
    sig=$ready_sig
    [ "$1" = baseline ] && sig=$baseline_ready_sig
    # A process DMTCP restored is named DMTCP:NAME.
    for p in $(pgrep -x "$job"; pgrep -x "DMTCP:$job"); do
        # Its working directory is its sandbox (a process DMTCP restored
        # runs mtcp_restart's executable).
        cwd=$(readlink "/proc/$p/cwd" 2>/dev/null) || continue
        [[ "$cwd" == "$pool"/local/execute/* ]] || continue
        if [ "$sig" != 0 ]; then
            mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || continue
            [ -n "$mask" ] && (( (0x$mask >> (sig - 1)) & 1 )) || continue
        fi
        # The job of this submit directory (its sandbox holds that file).
        [ -e "$cwd/$3" ] || continue
        [ "$p" != "$2" ] && { echo "$p"; return 0; }
    done
    return 1
}
# Polls every 5 ms, at most 60 s: until_ WHAT COMMAND...
until_() {
    local what=$1 t=0; shift
    until "$@"; do
        sleep 0.005
        t=$((t + 1)); [ $t -lt 12000 ] || { echo "bench-htcondor.sh: $what" >&2; exit 1; }
    done
}
has_events() { [ "$(events "$1" "$2")" -ge "$3" ]; }
# NAME OLD_PID: prints the new pid.
wait_ready() { until_ "no $1 job running" ready_pid "$1" "$2" "$1.marker"; }
# DIR CODE COUNT
wait_event() { until_ "no event $2 #$3 in $1/job.log" has_events "$@"; }

# Each submit directory gets a marker file that travels to its sandboxes,
# so that the two jobs' processes are told apart.
for name in ckptrun baseline; do
    mkdir "$work/$name"
    cp "${files[@]}" "$work/$name/"
    touch "$work/$name/$name.marker"
done
[ -n "${tree:-}" ] && cp -a "$tree" "$work/ckptrun/dmtcp"
cp "examples/htcondor/$mode.sub" "$work/ckptrun/job.sub"
sed -i 's/^transfer_input_files *= */&ckptrun.marker, /' "$work/ckptrun/job.sub"
printf '%s\n%s\n' "$baseline" "$baseline_tail" > "$work/baseline/job.sub"
chown -R "$CONDOR_USER": "$work/ckptrun" "$work/baseline"
declare -A pid id
id[ckptrun]=$(as_user "$work/ckptrun" condor_submit -terse -append "arguments = $args" job.sub | cut -d' ' -f1)
id[baseline]=$(as_user "$work/baseline" condor_submit -terse job.sub | cut -d' ' -f1)

for name in ckptrun baseline; do
    : > "$work/$name.evict"; : > "$work/$name.restart"
    pid[$name]=$(wait_ready "$name" 0)
done
for run in $(seq "$runs"); do
    for name in ckptrun baseline; do
        dir=$work/$name
        sleep 2 # running for a while
        t0=$(now)
        as_user "$dir" condor_vacate_job "${id[$name]}" >/dev/null
        wait_event "$dir" 004 "$run"
        t1=$(now)
        pid[$name]=$(wait_ready "$name" "${pid[$name]}")
        t2=$(now)
        echo "$(ms "$t0" "$t1")" >> "$work/$name.evict"
        echo "$(ms "$t1" "$t2")" >> "$work/$name.restart"
    done
done
# ckptrun's log so far, from the sandbox it runs in now.
log=$(readlink "/proc/${pid[ckptrun]}/cwd")/ckptrun.log
cp "$log" "$work/ckptrun.log"
as_user "$work/ckptrun" condor_rm "${id[ckptrun]}" "${id[baseline]}" >/dev/null || true

echo "## HTCondor $mode mode: eviction and restart ($runs runs each, ms)"
echo
echo "| | vacate -> idle, median (range) | idle -> running, median (range) |"
echo "|---|---|---|"
for name in ckptrun baseline; do
    label="ckptrun --mode $mode"
    [ "$name" = baseline ] && label="the job alone (no ckptrun)"
    printf '| %s | %s (%s) | %s (%s) |\n' "$label" \
        "$(median < "$work/$name.evict")" "$(range < "$work/$name.evict")" \
        "$(median < "$work/$name.restart")" "$(range < "$work/$name.restart")"
done
echo
# Each run's first line to its "started ... as pid" line.
echo "ckptrun's own start to the job started, per run (its --log), ms:" \
    "$(awk '{ split($1, t, "T"); split(t[2], h, ":"); s = h[1] * 3600 + h[2] * 60 + h[3]
              if (!($2 in first)) first[$2] = s }
            / started / { printf "%.0f ", (s - first[$2]) * 1000 }' "$work/ckptrun.log")"
