#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md: a supervisor's memory, as the kernel's
# VmHWM says it and as it was. Each shipped build (scripts/build-release.sh)
# supervises `sleep`, started as the budget test starts it (env -i,
# setarch -R), in three ways:
#   init      ckptrun --mode init -- sleep
#   first     --mode self, a first start: generation 0 made of a 4 MiB
#             text state
#   restored  --mode self in a new sandbox holding the store the first
#             start left: the compressed generation verified and expanded
#   ad        a first start as HTCondor makes it: with a job ad
#             (_CONDOR_JOB_AD, a 0.8 KB ad naming the transfers)
#   damaged   --mode self in a new sandbox holding what the spool holds
#             after two checkpoints, generation 2 damaged (a byte of its
#             state changed): found so, and generation 1 restored
#   dmtcp     --mode dmtcp, a first start of sleep under the real DMTCP
#             4.2.0 (CKPTRUN_DMTCP, default /tmp/ckptrun-dmtcp-4.2.0, built
#             by ../shared/tools/real-dmtcp.sh if missing)
#   dmtcp-restart  --mode dmtcp restarting, in place, from the checkpoint
#             an eviction of such a first start committed
# Read once ckptrun waits in its supervision loop (in dmtcp mode, once
# its log says the job runs or was restarted), each run twice:
#   VmRSS, VmHWM  /proc/PID/status, as the budget test reads them;
#   traced peak   in a second run under perf record: the most the process
#                 ever held (file, anonymous and shared pages), from every
#                 change of its counters that the kernel's kmem:rss_stat
#                 tracepoint reports (with its VmHWM too).
# VmHWM is not that peak on kernels whose RSS counters are per CPU
# (6.2 on): it is taken from their approximate sum, which may lag by
# some 32 pages a CPU, when pages are dropped; pages touched and handed
# back (ckptrun's stack after a restore) can then never reach it.
# Needs root (the tracepoint), perf (Debian's linux-perf: setup.sh
# --bench installs it) and tracefs (mounted here if it is not).
# Usage: scripts/bench-memory.sh [RUNS]   (default 5; medians)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
scripts/setup.sh --bench
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh
dmtcp=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
"$PWD/../shared/tools/real-dmtcp.sh" "$dmtcp" >/dev/null
[ -d /sys/kernel/tracing/events/kmem ] || mount -t tracefs nodev /sys/kernel/tracing
work=$(mktemp -d "$PWD/target/bench-memory.XXXXXX")
trap 'pkill -KILL -f "$work/ckptrun" 2>/dev/null || true; rm -rf "$work"' EXIT
i=0
while [ "$i" -lt 40000 ]; do echo "step,$i,velocity,0.125"; i=$((i + 1)); done >"$work/state"

# A job ad as HTCondor writes one for a self job (the guide's submit file).
cat >"$work/job.ad" <<'AD'
Args = "--mode self --ckpt state -- ./job"
ClusterId = 42
Cmd = "/home/u/run/ckptrun"
GlobalJobId = "ap.example.org#42.0#1732290574"
In = "/dev/null"
Iwd = "/home/u/run"
JobMaxVacateTime = 600
JobUniverse = 5
KillSig = "SIGTERM"
MyType = "Job"
Owner = "u"
ProcId = 0
QDate = 1732290574
RequestMemory = ifthenelse(MemoryUsage =!= undefined,MemoryUsage,(ImageSize + 1023) / 1024)
Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.HasFileTransfer)
ShouldTransferFiles = "YES"
SuccessCheckpointExitCode = 85
TransferInput = "ckptrun,job,state"
WhenToTransferOutput = "ON_EXIT_OR_EVICT"
AD
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The peak kB of pid $1's address space after it exec'd ckptrun, from
# `perf script` on stdin (its forks are other address spaces).
traced_peak() {
    awk -v pid="$1" '
        $2 == pid && /sched:sched_process_exec:/ && /ckptrun/ { armed = 1; next }
        armed && !mm && $2 == pid && /curr=1/ { match($0, /mm_id=[0-9]+/); mm = substr($0, RSTART, RLENGTH) }
        mm && index($0, mm " ") {
            match($0, /type=[A-Z_]+/); t = substr($0, RSTART + 5, RLENGTH - 5)
            match($0, /size=[0-9]+/); v[t] = substr($0, RSTART + 5, RLENGTH - 5)
            s = v["MM_FILEPAGES"] + v["MM_ANONPAGES"] + v["MM_SHMEMPAGES"]
            if (s > peak) peak = s
        }
        END { print peak / 1024 }'
}

# ckptrun (build $1) started in directory $2, its arguments after those,
# supervising `sleep`, traced (perf record) if TRACE is set: once it
# waits in its loop, "VmRSS VmHWM" and, traced, the traced peak, in kB.
one() {
    local bin=$1 dir=$2 trace=()
    shift 2
    [ -z "${TRACE:-}" ] || trace=(perf record -q -o "$dir/perf.data" -e kmem:rss_stat
        -e sched:sched_process_exec -e sched:sched_process_fork --)
    local ad=()
    [ -z "${AD:-}" ] || ad=("_CONDOR_JOB_AD=$AD")
    (cd "$dir" && exec "${trace[@]}" env -i PATH=/usr/bin:/bin "${ad[@]}" setarch -R "$bin" "$@" -- sleep 3599) 2>/dev/null &
    local job=$!
    local pid="" n=0
    while :; do
        pid=$(pgrep -f "^$bin " | head -1 || true)
        [ -n "$pid" ] && grep -q do_sigtimedwait "/proc/$pid/wchan" 2>/dev/null && runs_job "$dir" && break
        n=$((n + 1))
        [ "$n" -lt 600 ] || { echo "bench-memory.sh: ckptrun did not reach its loop" >&3; exit 1; }
        sleep 0.05
    done
    local rss hwm
    rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
    hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
    end "$pid"
    wait "$job" 2>/dev/null || true
    if [ -n "${TRACE:-}" ]; then
        echo "$rss $hwm $(perf script -i "$dir/perf.data" -F comm,pid,event,trace 2>/dev/null | traced_peak "$pid")"
    else
        echo "$rss $hwm"
    fi
}

# Whether the job in $1 runs: in dmtcp mode (DM set), once ckptrun's log
# says so.
runs_job() {
    [ -z "${DM:-}" ] || grep -qE "the job runs under DMTCP|restart complete" "$1/ckptrun.log" 2>/dev/null
}

# Ends ckptrun $1: in dmtcp mode an eviction (SIGTERM, exit 85), which
# ends the coordinator too (at most a minute); else SIGKILL.
end() {
    if [ -n "${DM:-}" ]; then
        kill -TERM "$1"
        local n=0
        while kill -0 "$1" 2>/dev/null; do
            n=$((n + 1))
            [ "$n" -lt 1200 ] || { echo "bench-memory.sh: ckptrun did not end its eviction" >&3; exit 1; }
            sleep 0.05
        done
    else
        kill -KILL "$1"
        pkill -KILL -x -f "sleep 3599" || true
    fi
}

# A sandbox $2 for a run of build $1 in the way $3 (init, first,
# restored); the store it restores from is made in $4.
sandbox() {
    local bin=$1 d=$2 kind=$3 s=$4
    mkdir "$d"
    case $kind in
        first | ad) cp "$work/state" "$d/state" ;;
        restored)
            mkdir "$s" && cp "$work/state" "$s/state"
            (cd "$s" && env -i PATH=/usr/bin:/bin "$bin" "${self[@]}" -- sh -c 'touch state; exit 17') || [ $? = 85 ]
            cp "$s"/ckptrun.store.* "$d/"
            ;;
        damaged)
            mkdir "$s" && cp "$work/state" "$s/state"
            for _ in 1 2; do
                (cd "$s" && env -i PATH=/usr/bin:/bin "$bin" "${self[@]}" -- sh -c 'touch state; exit 17') || [ $? = 85 ]
                cp "$s"/ckptrun.store.* "$d/"
            done
            flip "$(grep -l "^generation 2$" "$d"/ckptrun.store.*)" state
            ;;
        dmtcp-restart) DM=1 one "$bin" "$d" "${dmtcp_args[@]}" >/dev/null 3>&2 ;;
    esac
}

# Changes a byte of member $2's data in the archive $1, where GNU tar
# says it is.
flip() {
    local block
    block=$(tar -tvRf "$1" 2>/dev/null | awk -v m=" $2" 'substr($0, length($0) - length(m) + 1) == m { sub(/^block /, ""); sub(/:.*/, ""); print; exit }')
    printf '\x5a' | dd of="$1" bs=1 seek=$(((block + 1) * 512 + 100)) conv=notrunc status=none
}

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), $(perf --version)"
echo
echo "| build | supervising | VmRSS kB | VmHWM kB | VmHWM kB, traced run | traced peak kB |"
echo "|---|---|---|---|---|---|"
self=(--mode self --ckpt state --job-ckpt-exit 17)
dmtcp_args=(--mode dmtcp --log ckptrun.log --dmtcp-dir "$dmtcp/bin")
for target in x86_64 i686; do
    cp "target/$target-unknown-linux-musl/release/ckptrun" "$work/ckptrun-$target"
    bin=$work/ckptrun-$target
    for kind in init first restored ad damaged dmtcp dmtcp-restart; do
        : >"$work/plain"
        : >"$work/traced"
        for r in $(seq "$runs"); do
            case $kind in
                init) args=(--mode init) ;;
                dmtcp*) args=("${dmtcp_args[@]}") ;;
                damaged) args=("${self[@]}" --log ckptrun.log) ;;
                *) args=("${self[@]}") ;;
            esac
            ad=
            [ "$kind" != ad ] || ad=$work/job.ad
            dm=
            [ "$kind" = "${kind#dmtcp}" ] || dm=1
            for how in plain traced; do
                d=$work/$target-$kind-$how-$r
                sandbox "$bin" "$d" "$kind" "$d.store"
                if [ "$how" = traced ]; then
                    TRACE=1 AD=${ad:-} DM=$dm one "$bin" "$d" "${args[@]}" >>"$work/traced" 3>&2 2>/dev/null
                else
                    AD=${ad:-} DM=$dm one "$bin" "$d" "${args[@]}" >>"$work/plain" 3>&2 2>/dev/null
                fi
                # A restore gave back the state as it was.
                case $kind in restored | damaged) cmp -s "$d/state" "$work/state" ;; esac
                [ "$kind" != damaged ] || grep -q "generation 2 is damaged" "$d/ckptrun.log"
                rm -rf "$d" "$d.store"
            done
        done
        col() { awk -v c="$2" '{ print $c }' "$work/$1" | median; }
        echo "| $target | $kind | $(col plain 1) | $(col plain 2) | $(col traced 2) | $(col traced 3) |"
    done
done
