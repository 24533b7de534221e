#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md: an eviction of a DMTCP job (the real DMTCP
# 4.2.0) with little time to spare, as HTCondor gives it: a job ad with
# JobMaxVacateTime = VACATE, SIGTERM to ckptrun, SIGKILL to its process
# group VACATE seconds later (HTCondor's hard kill). The job holds SIZE_MB
# of text (Rust's library sources over and over). For each ckptrun
# binary given, interleaved (the order turned each run), RUNS evictions;
# per binary:
#   outcome   how many ended 85 (committed), 124 (DMTCP's images not
#             complete within --ckpt-timeout) or killed (SIGKILL at VACATE:
#             the commit did not end in time; nothing committed);
#   write     ms from the request to DMTCP's images complete (its log);
#   commit    ms from the images complete to the commit done (its log),
#             for the runs that committed; and how each was stored.
# Also, as the peer, the same eviction by the last build given with a
# JobMaxVacateTime of 60, with --no-compress and without: the commit's
# time raw and compressed.
# Usage: scripts/bench-evict-budget.sh [RUNS] [SIZE_MB] [VACATE] [CKPTRUN...]
#   (default 5, 1024, 4, and this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
size=${2:-1024}
vacate=${3:-4}
shift $(( $# < 3 ? $# : 3 ))
scripts/setup.sh
if [ "$#" -eq 0 ]; then
    CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
    set -- "$PWD/target/x86_64-unknown-linux-musl/release/ckptrun"
fi
# The peers' commits, raw and compressed, by the last build given.
peer=${!#}
prefix=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
"$PWD/../shared/tools/real-dmtcp.sh" "$prefix" >/dev/null
dmtcp=$prefix/bin
sources=$(rustc --print sysroot)/lib/rustlib/src/rust/library
repo=$PWD
work=$(mktemp -d /tmp/ckptrun-bench-evict.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
find "$sources" -name '*.rs' | sort | xargs cat > text
cc -O1 -o big "$repo/scripts/big.c"
mkdir images

# ms since the epoch of a log line's time stamp (2026-11-28T08:50:10.255Z).
stamp() { date -d "$(cut -d' ' -f1 <<<"$1")" +%s%3N; }

# one CKPTRUN VACATE [ARGS...]: one eviction; prints "OUTCOME WRITE COMMIT STORED".
one() {
    local ck=$1 vac=$2 pid killer rc asked done committed how=compressed
    shift 2
    printf 'JobMaxVacateTime = %s\n' "$vac" > ad
    rm -rf ck && mkdir ck && cp big ck/
    # What the run before left dirty is written out first: DMTCP's write
    # of the images was some 3 s after one run and 1 s after another.
    sync
    (cd ck && exec setsid env _CONDOR_JOB_AD="$work/ad" "$ck" --mode dmtcp --dmtcp-dir "$dmtcp" \
        --images-dir "$work/images" --log log --stdout out "$@" -- ./big "$size" "$work/text") &
    pid=$!
    for _ in $(seq 1200); do grep -q '^ready' ck/out 2>/dev/null && break; sleep 0.05; done
    grep -q '^ready' ck/out || { cat ck/log >&2; echo "bench-evict-budget: the job did not start" >&2; exit 1; }
    sleep 0.5
    kill -TERM "$pid"
    (sleep "$vac"; kill -KILL -- "-$pid" 2>/dev/null) &
    killer=$!
    rc=0; wait "$pid" || rc=$?
    kill "$killer" 2>/dev/null || true
    wait "$killer" 2>/dev/null || true
    pkill -KILL -f "coord-port 0 --port-file $work/ck/" 2>/dev/null || true
    asked=$(grep -m1 'checkpoint requested' ck/log || true)
    done=$(grep -m1 'checkpoint complete' ck/log || true)
    committed=$(grep -m1 'committed generation' ck/log || true)
    # Only 3d0f12f's build stores raw of itself (BENCHMARKS.md, "An
    # eviction short of time"), and says so.
    grep -q 'stored uncompressed' ck/log && how=raw
    grep -q -- '--no-compress' <<<"$*" && how=raw
    local out=$rc w=- c=-
    [ "$rc" = 137 ] && out=killed
    [ -n "$asked" ] && [ -n "$done" ] && w=$(( $(stamp "$done") - $(stamp "$asked") ))
    [ -n "$done" ] && [ -n "$committed" ] && c=$(( $(stamp "$committed") - $(stamp "$done") ))
    echo "$out $w $c $how"
    rm -rf ck images/* 2>/dev/null || true
}

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r); /tmp: $(findmnt -T "$work" -o FSTYPE -n | head -1); DMTCP 4.2.0; $size MiB of text; $runs runs each, interleaved"
echo
# Each eviction's time depends on the one before it (DMTCP's write of the
# images took 3 s after some, 1 s after others, sync or not): each run
# starts one further along the list, so each follows each in turn.
jobs=()
i=0
for ck in "$@"; do
    i=$((i + 1))
    jobs+=("b$i $ck $vacate")
done
jobs+=("raw $peer 60 --no-compress" "compressed $peer 60")
for run in $(seq "$runs"); do
    echo "bench-evict-budget: run $run" >&2
    for k in $(seq 0 $(( ${#jobs[@]} - 1 ))); do
        read -r key ck vac args <<<"${jobs[$(( (k + run) % ${#jobs[@]} ))]}"
        # shellcheck disable=SC2086 # args: one option or none
        echo "$key $(one "$ck" "$vac" $args)" >> results
    done
done
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| ckptrun | JobMaxVacateTime | 85 | 124 | killed | write, median ms | commit, median ms | stored raw |"
echo "|---|---|---|---|---|---|---|---|"
i=0
for ck in "$@" peer-raw peer-compressed; do
    i=$((i + 1))
    key=b$i vac=$vacate name=$ck
    case $ck in
        peer-raw) key=raw vac=60 name="$peer --no-compress" ;;
        peer-compressed) key=compressed vac=60 name="$peer" ;;
    esac
    rows=$(grep "^$key " results | cut -d' ' -f2-)
    n() { grep -c "^$1 " <<<"$rows" || true; }
    echo "| $name | $vac | $(n 85) | $(n 124) | $(n killed) | $(awk '$2 != "-" { print $2 }' <<<"$rows" | median) | $(awk '$3 != "-" { print $3 }' <<<"$rows" | median) | $(grep -c ' raw$' <<<"$rows" || true) |"
done
