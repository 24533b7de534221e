#!/usr/bin/env bash
# The test command: installs what the tests need, builds the shipped
# binaries (both arches, scripts/build-release.sh), then runs the tests:
# against the debug build (its allocator aborts on any allocation after
# the job started) and, for the tests that say so, against the shipped
# builds (tests/common: ckptrun_release); plus clippy and rustfmt.
# Needs root (or CAP_SYS_ADMIN) for the PID-namespace test, as CI has.
#
# The end-to-end tests (tests/htcondor.rs, and the fault storm of
# tests/fault_storm.rs) run in a real HTCondor pool that this script
# starts with ../shared/tools/htcondor-pool.sh (HTCONDOR_POOL_SCRIPT to
# use another copy) in a directory and on a port of its own, and stops
# whatever happens. Without a pool they are skipped, saying so; with CI
# set, a pool that cannot start is a failure.
#
# The Slurm tests (tests/slurm.rs) run in a real Slurm 22.05 cluster of one
# node that this script starts with ../shared/tools/slurm-cluster.sh
# (SLURM_CLUSTER_SCRIPT to use another copy) in a directory and on ports
# of its own, and stops whatever happens; their jobs run as the account
# ckptrun-test (created if missing). The same rule: skipped and said so
# without a cluster, a failure under CI.
#
# The tests of --mode dmtcp (tests/dmtcp_real.rs, tests/dmtcp_harness.rs,
# tests/htcondor.rs, tests/fault_storm.rs) run against the real DMTCP
# 4.2.0, which this script builds once with ../shared/tools/real-dmtcp.sh
# (DMTCP_BUILD_SCRIPT to use another copy) into $CKPTRUN_DMTCP
# [/tmp/ckptrun-dmtcp-4.2.0]; the same rule: skipped and said so without
# it, a failure under CI.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
CARGO_BUILD_OPTS=--locked scripts/build-release.sh
ls -l target/*/release/ckptrun

# A real system the tests could not have (WHAT: why): under CI a
# failure; otherwise the TESTS against it are skipped, said now and again
# at the end.
skipped=()
unavailable() { # WHAT TESTS WHY
    if [ -n "${CI:-}" ]; then
        echo "test.sh: CI is set and $1: $3" >&2
        exit 1
    fi
    skipped+=("test.sh: $2 SKIPPED: $1: $3")
    echo "${skipped[-1]}" >&2
}
# Stops the system SCRIPT started in DIR (WHAT, for the message), if any.
stop_system() { # SCRIPT DIR WHAT
    [ -d "$2" ] || return 0
    if "$1" stop "$2"; then
        rm -rf "$2"
    else
        echo "test.sh: could not stop the $3 in $2" >&2
    fi
}

dmtcp_script=${DMTCP_BUILD_SCRIPT:-$PWD/../shared/tools/real-dmtcp.sh}
export CKPTRUN_DMTCP=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
if [ -x "$dmtcp_script" ] && "$dmtcp_script" "$CKPTRUN_DMTCP" >"$CKPTRUN_DMTCP.log" 2>&1; then
    echo "test.sh: DMTCP 4.2.0 in $CKPTRUN_DMTCP"
    rm -f "$CKPTRUN_DMTCP.log"
else
    why="$dmtcp_script failed (see $CKPTRUN_DMTCP.log)"
    [ -x "$dmtcp_script" ] || why="no $dmtcp_script"
    unavailable "DMTCP could not be built" "the tests against the real DMTCP" "$why"
    unset CKPTRUN_DMTCP
fi

pool_script=${HTCONDOR_POOL_SCRIPT:-$PWD/../shared/tools/htcondor-pool.sh}
pool_dir=/tmp/ckptrun-test-pool.$$
stop_pool() { stop_system "$pool_script" "$pool_dir" pool; }
slurm_script=${SLURM_CLUSTER_SCRIPT:-$PWD/../shared/tools/slurm-cluster.sh}
slurm_dir=/tmp/ckptrun-test-slurm.$$
stop_slurm() { stop_system "$slurm_script" "$slurm_dir" "Slurm cluster"; }
slurm_tests=""
# The Slurm tests, if still running (they run in a session of their own).
stop_slurm_tests() { [ -z "$slurm_tests" ] || kill -- -"$slurm_tests" 2>/dev/null || true; }
trap 'stop_slurm_tests; stop_pool; stop_slurm' EXIT
trap 'exit 130' INT TERM HUP

# A collector port nobody listens on; another if one is taken meanwhile
# (the script refuses a port in use). Sets pool_env, or why not. The
# ports of both systems lie below Linux's ephemeral ports (32768 and up
# by default), which an outgoing connection could take between the check
# and the daemon's bind.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
start_pool() {
    local port tries=0 log=$pool_dir.log
    [ -x "$pool_script" ] || { why="no $pool_script"; return 1; }
    [ "$(id -u)" = 0 ] || { why="it needs root"; return 1; }
    port=$((20000 + $$ % 6000))
    while [ $tries -lt 5 ]; do
        while ! port_free "$port"; do port=$((port + 1)); done
        # 8 cpus: the jobs mostly sleep, and run side by side.
        if pool_env=$(COLLECTOR_PORT=$port NUM_CPUS=8 "$pool_script" start "$pool_dir" 2>"$log"); then
            rm -f "$log"
            echo "test.sh: HTCondor pool for tests/htcondor.rs and tests/fault_storm.rs in $pool_dir, collector 127.0.0.1:$port"
            return 0
        fi
        why=$(tail -1 "$log")
        [ -n "$why" ] || why="$pool_script start failed"
        rm -f "$log"
        case "$why" in *"is in use"*) ;; *) return 1;; esac
        port=$((port + 1)); tries=$((tries + 1))
    done
    return 1
}
# Two ports nobody listens on, for slurmctld and slurmd. Sets slurm_env,
# or why not.
start_slurm() {
    local port log=$slurm_dir.log
    [ -x "$slurm_script" ] || { why="no $slurm_script"; return 1; }
    [ "$(id -u)" = 0 ] || { why="it needs root"; return 1; }
    id ckptrun-test >/dev/null 2>&1 || useradd --create-home --shell /bin/bash ckptrun-test ||
        { why="useradd ckptrun-test failed"; return 1; }
    port=$((26000 + 2 * ($$ % 3000)))
    while ! port_free "$port" || ! port_free $((port + 1)); do port=$((port + 2)); done
    if slurm_env=$(SLURMCTLD_PORT=$port SLURMD_PORT=$((port + 1)) "$slurm_script" start "$slurm_dir" 2>"$log"); then
        rm -f "$log"
        echo "test.sh: Slurm cluster for tests/slurm.rs in $slurm_dir, slurmctld 127.0.0.1:$port"
        return 0
    fi
    why=$(tail -1 "$log")
    [ -n "$why" ] || why="$slurm_script start failed"
    rm -f "$log"
    return 1
}
if start_slurm; then
    eval "$slurm_env"
    export SLURM_TEST_CLUSTER=$slurm_dir
else
    unavailable "the Slurm cluster did not start" "Slurm tests (tests/slurm.rs)" "$why"
fi
if start_pool; then
    eval "$pool_env"
    export HTCONDOR_TEST_POOL=$pool_dir
else
    unavailable "the HTCondor pool did not start" \
        "HTCondor end-to-end tests (tests/htcondor.rs, tests/fault_storm.rs, tests/checkpoint_*.rs)" "$why"
fi

# The fault storm's lines (its seed, its plan, the faults it delivered)
# are shown whether it passes or fails: it runs on its own, uncaptured.
# The Slurm tests run beside it, after everything else: each in a real
# system of its own, their jobs mostly waiting; with threads enough for
# every Slurm test to wait its turn on the cluster at once. Their lines
# (the seed, each job, each preemption) follow the storm's.
storm=jobs_of_every_mode_survive_a_storm_of_vacates_crashes_and_holds
all_but_slurm=(--bins)
for t in tests/*.rs; do
    t=$(basename "$t" .rs)
    [ "$t" = slurm ] || all_but_slurm+=(--test "$t")
done
cargo test --locked "${all_but_slurm[@]}" -- --skip "$storm"
cargo test --locked -p ckptrun-codec
cargo test --locked --test slurm --no-run
slurm_log=$(mktemp /tmp/ckptrun-test-slurm-log.XXXXXX)
setsid cargo test --locked --test slurm -- --nocapture --test-threads 8 >"$slurm_log" 2>&1 &
slurm_tests=$!
storm_failed=0
cargo test --locked --test fault_storm -- --nocapture "$storm" || storm_failed=1
slurm_failed=0
wait "$slurm_tests" || slurm_failed=1
slurm_tests=""
cat "$slurm_log"
rm -f "$slurm_log"
if [ $storm_failed = 1 ] || [ $slurm_failed = 1 ]; then
    echo "test.sh: failed:$([ $storm_failed = 1 ] && echo " the fault storm")$([ $slurm_failed = 1 ] && echo " tests/slurm.rs")" >&2
    exit 1
fi
stop_pool
stop_slurm
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo fmt --all --check
for line in "${skipped[@]}"; do echo "$line" >&2; done
