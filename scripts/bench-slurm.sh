#!/usr/bin/env bash
# Slurm's SIGTERM to ckptrun's exit, per mode, for BENCHMARKS.md: a job of
# each mode (examples/slurm/MODE.sh, its job made long enough never to
# end) preempted RUNS times in a real Slurm 22.05 cluster, then cancelled
# once (plain scancel).
#
# When Slurm's SIGTERM comes: the batch script starts, before it execs
# ckptrun, a small process of the job (`stamp`, compiled here) that waits
# for SIGTERM and writes the time it got it (CLOCK_REALTIME, ns). Slurm
# signals every process of the job within 1-2 ms, so this is when ckptrun
# got it too. When ckptrun exits: its --log's last line of the run (`exit
# 85`, or `dying by SIG`), stamped to the millisecond. The figure is the
# difference; the part that was ckptrun asking slurmctld what the
# SIGTERM means is its `SIGTERM: Slurm job N ...` line less the stamp.
#
# Usage (root): scripts/bench-slurm.sh [RUNS] [MODES...]   (5; self condor dmtcp init)
# It starts a cluster of its own (../shared/tools/slurm-cluster.sh, another
# copy with SLURM_CLUSTER_SCRIPT; KILL_WAIT and the other knobs pass
# through) and stops it at the end; dmtcp mode builds the real DMTCP 4.2.0
# with ../shared/tools/real-dmtcp.sh into $CKPTRUN_DMTCP if need be.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shift || true
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(self condor dmtcp init)
repo=$PWD
slurm_script=${SLURM_CLUSTER_SCRIPT:-$repo/../shared/tools/slurm-cluster.sh}
export CKPTRUN_DMTCP=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
user=${SLURM_TEST_USER:-ckptrun-test}
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"

CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
cargo build --release --locked --quiet --example self_job --example condor_job
bin=$repo/target/x86_64-unknown-linux-musl/release
work=$(mktemp -d /tmp/ckptrun-bench-slurm.XXXXXX)
chmod 755 "$work"
cluster=$work/cluster
cleanup() {
    [ -d "$cluster" ] && "$slurm_script" stop "$cluster" >/dev/null 2>&1
    [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/stamp.c" <<'EOF'
#include <signal.h>
#include <stdio.h>
#include <time.h>
int main(int argc, char **argv) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    sigwaitinfo(&term, NULL);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    FILE *out = fopen(argv[1], "a");
    fprintf(out, "%lld%09ld\n", (long long)now.tv_sec, now.tv_nsec);
    return 0;
}
EOF
cc -O1 -o "$work/stamp" "$work/stamp.c"
cc -O1 -o "$work/counter" tests/jobs/counter.c

port=$((30000 + $$ % 20000))
eval "$(SLURMCTLD_PORT=$port SLURMD_PORT=$((port + 1)) "$slurm_script" start "$cluster")"
kill_wait=$(scontrol show config | awk '$1 == "KillWait" { print $3 }')
cpus=$(sinfo -h -N -o %c | head -1)

ms_of_log_line() { # a --log line: its time, ms since 1970
    date -d "$(cut -d' ' -f1 <<< "$1")" +%s%3N
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
range() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'; }

# The mode's job directory: the example, its job made endless, with the
# stamp started before ckptrun.
prepare() {
    local mode=$1 dir=$work/$1
    mkdir -p "$dir"
    cp "$bin/ckptrun" "$work/stamp" "$dir/"
    local script=examples/slurm/$mode.sh endless
    case "$mode" in
    self) cp "$bin/examples/self_job" "$dir/"; endless='s|self_job state 3000|self_job state 100000000|' ;;
    condor) cp "$bin/examples/condor_job" "$dir/"; endless='s|condor_job 300 50|condor_job 100000000 50|' ;;
    dmtcp)
        [ -x "$CKPTRUN_DMTCP/bin/dmtcp_launch" ] || ../shared/tools/real-dmtcp.sh "$CKPTRUN_DMTCP" >/dev/null
        cp "$work/counter" "$dir/"; ln -s "$CKPTRUN_DMTCP" "$dir/dmtcp"
        endless='s|counter 150 100|counter 100000000 100|' ;;
    # The job dies of Slurm's SIGTERM at once: ckptrun's part alone.
    init) endless='s|-- ./terms 150 100|-- sleep 100000000|' ;;
    esac
    sed -e "$endless" -e 's|^exec ./ckptrun|./stamp sigterm.times \&\nexec ./ckptrun|' "$script" > "$dir/job.sh"
    chown -R "$user:" "$dir"
}

count() { # file, pattern: the lines of file that match (0 without the file)
    local n
    n=$(grep -cE "$2" "$1" 2>/dev/null) || true
    echo "${n:-0}"
}
ends() { count "$1/ckptrun.log" '\]: (exit |dying by )'; }
starts() { count "$1/ckptrun.log" 'started '; }
stamps() { count "$1/sigterm.times" '.'; }
at_least() { [ "$("$1" "$2")" -ge "$3" ]; } # what dir n: what(dir) >= n
wait_for() { # what, command...: polls every 20 ms, 120 s at most
    local what=$1 end=$((SECONDS + 120))
    shift
    until "$@"; do
        if [ $SECONDS -ge $end ]; then
            echo "bench-slurm.sh: timed out waiting until $what" >&2
            squeue >&2
            tail -n 5 "$work"/*/ckptrun.log "$work"/*/job.out >&2 || true
            exit 1
        fi
        sleep 0.02
    done
}

# One run's figures, from its ckptrun's log lines (the nth ckptrun to
# start) and the nth stamp: "TOTAL QUERY", QUERY `-` when ckptrun never
# looked its SIGTERM up (in init mode the job may die of Slurm's own
# SIGTERM, and ckptrun end with it, first).
figures() {
    local dir=$1 n=$2 stamp pid exit_line query_line
    stamp=$(sed -n "${n}p" "$dir/sigterm.times")
    pid=$(grep 'started ' "$dir/ckptrun.log" | sed -n "${n}s/.*ckptrun\[\([0-9]*\)\].*/\1/p")
    exit_line=$(grep -E "ckptrun\[$pid\]: (exit |dying by )" "$dir/ckptrun.log")
    query_line=$(grep "ckptrun\[$pid\]: SIGTERM: Slurm job " "$dir/ckptrun.log" | head -n 1)
    local stamp_ms=$((stamp / 1000000)) query=-
    [ -z "$query_line" ] || query=$(($(ms_of_log_line "$query_line") - stamp_ms))
    echo "$(($(ms_of_log_line "$exit_line") - stamp_ms)) $query"
}

echo "Slurm $(sinfo --version | cut -d' ' -f2), KillWait ${kill_wait}, $cpus CPUs; $(nproc) cores, $(uname -r)"
echo "| mode | preemption: SIGTERM -> exit, ms, median (range) of $runs | of which asking slurmctld, in the runs that asked | scancel: SIGTERM -> exit, ms |"
echo "|---|---|---|---|"
for mode in "${modes[@]}"; do
    prepare "$mode"
    dir=$work/$mode
    job=$(cd "$dir" && sbatch --parsable --uid "$user" -p low -c 1 job.sh)
    totals=() queries=()
    for n in $(seq 1 "$runs"); do
        wait_for "$mode run $n started" at_least starts "$dir" "$n"
        # Settled: running (DMTCP: under its coordinator), its handlers in place.
        sleep 2
        sbatch --uid "$user" --chdir /tmp -o /dev/null -p high -c "$cpus" --wrap 'sleep 1' >/dev/null
        wait_for "$mode run $n ended" at_least ends "$dir" "$n"
        wait_for "$mode run $n stamped" at_least stamps "$dir" "$n"
        read -r total query < <(figures "$dir" "$n")
        totals+=("$total") queries+=("$query")
    done
    n=$((runs + 1))
    wait_for "$mode run $n started" at_least starts "$dir" "$n"
    sleep 2
    scancel "$job"
    wait_for "$mode cancelled" at_least ends "$dir" "$n"
    wait_for "$mode cancel stamped" at_least stamps "$dir" "$n"
    read -r cancel _ < <(figures "$dir" "$n")
    t=$(printf '%s\n' "${totals[@]}")
    q=$(printf '%s\n' "${queries[@]}" | grep -v '^-$' || true)
    asked=$(grep -c . <<< "$q" || true)
    echo "| $mode | $(median <<< "$t") ($(range <<< "$t")) | $(median <<< "$q") ($(range <<< "$q")), $asked of $runs | $cancel |"
    grep -E 'SIGTERM: Slurm job|\]: (exit |dying)' "$dir/ckptrun.log" | sed 's/^/    /' >&2
done
