#!/usr/bin/env bash
# What a checkpoint costs the pool (issue 25), for BENCHMARKS.md: the bytes
# HTCondor moves for the same self-checkpointing job, run side by side in
# one real HTCondor 24 pool
#   recipe   HTCondor's own recipe, no ckptrun: self_job exits 17 after
#            each checkpoint (`checkpoint_exit_code = 17`,
#            `transfer_checkpoint_files = state`), as tests/checkpoint_cost.rs
#            runs it;
#   keep1    the guide's self.sub (ckptrun --mode self, --keep 1 by default);
#   keep2    the same with `--keep 2` put first in its arguments;
#   keep0    the same with `--keep 0`;
#   raw      the same with `--no-compress` (--keep 1);
#   dmtcp    the guide's dmtcp.sub (tests/jobs/counter.c under DMTCP,
#            `interval = 2`), if the real DMTCP 4.2.0 can be had: another
#            program, so its ratio to the recipe is for scale only.
# The self jobs hold a state of PAD bytes and checkpoint (exit 17) every
# EVERY of their STEPS steps of 5 ms: 13 checkpoint exits with the
# defaults, each an upload and an in-place restart. This is a benchmark,
# not a test: it prints figures and fails only if a job does.
#
# Figures, per job, from the pool's own XferStatsLog (the shadow's lines,
# which carry the job id):
#   uploads      "File Transfer Download" lines: sandbox -> access point,
#                one per checkpoint exit, one at the end
#   ckpt median  the median of those uploads but the last
#   ckpt most    the largest of them
#   end          the last upload (the job's successful end)
#   to AP        all of them, summed
#   to sandbox   "File Transfer Upload" lines summed: the input transfers
#   SPOOL slots  the most `ckptrun.store.*` files (non-empty) the job's
#                spool directory held at once, polled every 200 ms
#   SPOOL bytes  the most bytes of files that directory held at once
#   returned     `ckptrun.store.*` files in the submit directory at the end
#   ratio        ckpt median over the recipe's ckpt median, same round
#
# Usage (root): scripts/bench-cost.sh [ROUNDS]   (3: each round runs every
# job once, all at once; then the medians over the rounds)
# Environment (all optional):
#   CKPTRUN_BIN      the ckptrun to measure (an older one, say)
#                    [the shipped build, from scripts/build-release.sh]
#   CKPTRUN_EXAMPLES the guide submit files to run it with (that version's
#                    examples/htcondor) [this checkout's examples/htcondor]
#   CKPTRUN_DMTCP    DMTCP 4.2.0, built there by ../shared/tools/real-dmtcp.sh
#                    if need be, as scripts/test.sh does [/tmp/ckptrun-dmtcp-4.2.0];
#                    BENCH_COST_DMTCP=0 leaves the dmtcp job out
#   BENCH_COST_PAD, BENCH_COST_STEPS, BENCH_COST_EVERY  [4194304, 2000, 150]
#   BENCH_COST_TEXT=1  the self jobs' state text-like (SELF_JOB_PAD_TEXT=1:
#                    lines of a simulation's log) instead of random bytes
#   BENCH_COST_KEEP=1  keep the submit directories and the pool's logs
#                    (they are kept anyway if the script fails)
#   HTCONDOR_POOL_SCRIPT  [../shared/tools/htcondor-pool.sh]
# It starts a pool of its own, on a free port, and stops it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
repo=$PWD
pool_script=${HTCONDOR_POOL_SCRIPT:-$repo/../shared/tools/htcondor-pool.sh}
examples=$(realpath "${CKPTRUN_EXAMPLES:-$repo/examples/htcondor}")
pad=${BENCH_COST_PAD:-4194304}
steps=${BENCH_COST_STEPS:-2000}
every=${BENCH_COST_EVERY:-150}
self_env="SELF_JOB_STEP_MS=5 SELF_JOB_QUIET=1 SELF_JOB_PAD=$pad SELF_JOB_CKPT_EVERY=$every SELF_JOB_WRITE_US=0 SELF_JOB_PAD_TEXT=${BENCH_COST_TEXT:-0}"

# The job (the same for every ckptrun measured), then the shipped ckptrun
# last, so that nothing built after it replaces it.
cargo build --release --locked --quiet --example self_job
bin=$repo/target/x86_64-unknown-linux-musl/release
if [ -z "${CKPTRUN_BIN:-}" ]; then
    CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
fi
ckptrun=$(realpath "${CKPTRUN_BIN:-$bin/ckptrun}")
jobs=(recipe keep1 keep2 keep0 raw)
dmtcp=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
if [ "${BENCH_COST_DMTCP:-1}" = 0 ]; then
    echo "bench-cost.sh: the dmtcp job left out (BENCH_COST_DMTCP=0)" >&2
elif "$repo/../shared/tools/real-dmtcp.sh" "$dmtcp" >/dev/null 2>&1; then
    cc -O1 -o "$bin/counter" tests/jobs/counter.c
    jobs+=(dmtcp)
else
    echo "bench-cost.sh: no DMTCP in $dmtcp (real-dmtcp.sh failed): the dmtcp job left out" >&2
fi

work=$(mktemp -d /tmp/ckptrun-bench-cost.XXXXXX)
chmod 755 "$work"
pool=$work/pool
cleanup() {
    local status=$?
    "$pool_script" stop "$pool" >/dev/null 2>&1 || true
    if [ "$status" = 0 ] && [ "${BENCH_COST_KEEP:-0}" = 0 ]; then
        rm -rf "$work"
    else
        find "$pool" -mindepth 1 -maxdepth 1 ! -name local -exec rm -rf {} + 2>/dev/null
        echo "bench-cost.sh: the submit directories and the pool's logs are in $work" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
port=$((20000 + $$ % 20000))
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
eval "$(COLLECTOR_PORT=$port "$pool_script" start "$pool" 2>/dev/null)"
spool=$(condor_config_val SPOOL)
xfer_log=$(condor_config_val LOG)/XferStatsLog

# shellcheck disable=SC2016 # $0 and $@ are for the inner sh
as_user() { local dir=$1; shift; su "$CONDOR_USER" -s /bin/sh -c 'cd "$0" && exec "$@"' -- "$dir" "$@"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else if (NR) printf "%.10g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
sum() { awk '{ s += $1 } END { print s + 0 }'; }
# The bytes of each of job ID's transfers of one DIRECTION (Download:
# sandbox -> access point; Upload: access point -> sandbox), in order: the
# shadow's lines, "(ID) (PID): File Transfer DIRECTION: JobId: ID ...",
# without the "(peer stats from starter)" line it adds at the end (the
# starter's side of the end's upload).
transfers() {
    grep -F "($1) (" "$xfer_log" | grep -F "File Transfer $2: JobId: $1 " | grep -vF "peer stats" |
        sed -n 's/.* bytes: \([0-9]*\) .*/\1/p'
}
# Job ID's spool directory (HTCondor's layout: SPOOL/CLUSTER%10000/PROC/...).
spool_dir() {
    local cluster=${1%.*} proc=${1#*.}
    echo "$spool/$((cluster % 10000))/$proc/cluster$cluster.proc$proc.subproc0"
}


# Makes round R's submit directory for JOB and submits it; prints the id.
submit() {
    local round=$1 job=$2 dir=$work/$1-$2
    mkdir "$dir"
    local append=()
    case "$job" in
    recipe)
        cp "$bin/examples/self_job" "$dir/"
        cp "$repo/tests/pool/recipe.sub" "$dir/job.sub"
        sed -i "s|^arguments = state 2000 result|arguments = state $steps result|" "$dir/job.sub"
        append=(-append "environment = \"$self_env\"")
        ;;
    keep1 | keep2 | keep0 | raw)
        cp "$ckptrun" "$dir/ckptrun"
        cp "$bin/examples/self_job" "$dir/"
        cp "$examples/self.sub" "$dir/job.sub"
        # The guide's job runs 2000 steps: ours as many as the recipe's.
        sed -i "s|self_job state 2000 result|self_job state $steps result|" "$dir/job.sub"
        case $job in
        keep2) sed -i 's/^arguments *= */&--keep 2 /' "$dir/job.sub" ;;
        keep0) sed -i 's/^arguments *= */&--keep 0 /' "$dir/job.sub" ;;
        raw) sed -i 's/^arguments *= */&--no-compress /' "$dir/job.sub" ;;
        esac
        append=(-append "environment = \"$self_env\"")
        ;;
    dmtcp)
        cp "$ckptrun" "$dir/ckptrun"
        cp "$bin/counter" "$dir/"
        cp -a "$dmtcp" "$dir/dmtcp"
        cp "$examples/dmtcp.sub" "$dir/job.sub"
        append=(-append "interval = 2")
        ;;
    esac
    chown -R "$CONDOR_USER": "$dir"
    as_user "$dir" condor_submit -terse "${append[@]}" job.sub | cut -d' ' -f1
}

# Polls every job of the round until all have ended, keeping the most
# slots and bytes each spool directory held; fails if one is held or
# removed, or all take longer than 15 minutes.
watch() {
    local round=$1 job dir id ended t=0 slots bytes
    while :; do
        ended=0
        for job in "${jobs[@]}"; do
            dir=$work/$round-$job
            id=$(cat "$dir.id")
            if grep -q '^005 ' "$dir/job.log" 2>/dev/null; then
                ended=$((ended + 1))
                continue
            fi
            if grep -q '^0\(09\|12\) ' "$dir/job.log" 2>/dev/null; then
                echo "bench-cost.sh: job $id ($job) was held or removed:" >&2
                grep -A2 '^0\(09\|12\) ' "$dir/job.log" >&2
                exit 1
            fi
            read -r slots bytes < <(find "$(spool_dir "$id")" -maxdepth 1 -type f -printf '%f %s\n' 2>/dev/null |
                awk '$1 ~ /^ckptrun\.store\./ && $2 > 0 { n++ } { b += $2 } END { print n + 0, b + 0 }')
            [ "$slots" -le "$(cat "$dir.slots")" ] || echo "$slots" > "$dir.slots"
            [ "$bytes" -le "$(cat "$dir.bytes")" ] || echo "$bytes" > "$dir.bytes"
        done
        [ "$ended" -lt "${#jobs[@]}" ] || return 0
        t=$((t + 1))
        [ "$t" -lt 4500 ] || { echo "bench-cost.sh: round $round did not end in 15 minutes" >&2; exit 1; }
        sleep 0.2
    done
}

# One line of figures for round R's JOB, tab-separated: uploads, ckpt
# median, ckpt most, end, to AP, to sandbox, SPOOL slots, SPOOL bytes,
# returned.
figures() {
    local dir=$work/$1-$2 id down
    id=$(cat "$dir.id")
    down=$(transfers "$id" Download)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$(grep -c . <<< "$down")" \
        "$(head -n -1 <<< "$down" | median)" \
        "$(head -n -1 <<< "$down" | sort -n | tail -1)" \
        "$(tail -n 1 <<< "$down")" \
        "$(sum <<< "$down")" \
        "$(transfers "$id" Upload | sum)" \
        "$(cat "$dir.slots")" \
        "$(cat "$dir.bytes")" \
        "$(find "$dir" -maxdepth 1 -name 'ckptrun.store.*' | grep -c .)"
}

label() {
    case "$1" in
    recipe) echo "HTCondor's recipe (no ckptrun)" ;;
    keep1) echo "ckptrun self.sub (--keep 1)" ;;
    keep2) echo "ckptrun self.sub, --keep 2" ;;
    keep0) echo "ckptrun self.sub, --keep 0" ;;
    raw) echo "ckptrun self.sub, --no-compress" ;;
    dmtcp) echo "ckptrun dmtcp.sub (counter.c, --keep 1)" ;;
    esac
}
header='| job | uploads | ckpt upload, median B | ckpt upload, most B | end B | to AP, total B | to sandboxes, total B | SPOOL slots, most | SPOOL bytes, most | slots returned | ratio vs recipe |'
rule='|---|---|---|---|---|---|---|---|---|---|---|'

echo "ckptrun: $ckptrun ($(stat -c %s "$ckptrun") bytes, sha256 $(sha256sum "$ckptrun" | cut -c1-12))"
echo "submit files: $examples"
echo "machine: $(nproc) cpus, $(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1), $(free -m | awk '/^Mem:/ { print $2 }') MiB, kernel $(uname -r)"
echo "state: $pad bytes, $steps steps, a checkpoint every $every; $rounds rounds; $(condor_version | head -1)"
for round in $(seq "$rounds"); do
    for job in "${jobs[@]}"; do
        id=$(submit "$round" "$job")
        echo "$id" > "$work/$round-$job.id"
        echo 0 > "$work/$round-$job.slots"
        echo 0 > "$work/$round-$job.bytes"
    done
    watch "$round"
    sleep 2 # the shadows' last XferStatsLog lines
    for job in "${jobs[@]}"; do
        dir=$work/$round-$job
        code=$(sed -n 's/.*(return value \([0-9]*\)).*/\1/p' "$dir/job.log" | tail -1)
        [ "$code" = 0 ] || { echo "bench-cost.sh: job $(cat "$dir.id") ($job) exited ${code:-by a signal}" >&2; exit 1; }
        case "$job" in keep*)
            cmp -s "$dir/result" "$work/$round-recipe/result" ||
                echo "bench-cost.sh: round $round: $job's result differs from the recipe's" >&2
        esac
        figures "$round" "$job" > "$dir.figures"
    done
    reference=$(cut -f2 "$work/$round-recipe.figures")
    echo
    ids=$(for j in "${jobs[@]}"; do printf '%s=%s\n' "$j" "$(cat "$work/$round-$j.id")"; done)
    echo "### Round $round (job ids: $(paste -sd' ' <<< "$ids"))"
    echo
    echo "$header"
    echo "$rule"
    for job in "${jobs[@]}"; do
        IFS=$'\t' read -r n med most end ap sb slots bytes back < "$work/$round-$job.figures"
        [ "$job" != recipe ] || slots=-
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(label "$job")" \
            "$n" "$med" "$most" "$end" "$ap" "$sb" "$slots" "$bytes" "$back" \
            "$(awk -v a="$med" -v b="$reference" 'BEGIN { printf "%.3fx", a / b }')"
        # Kept for the summary, the ratio as a 10th field.
        printf '%s\t%s\n' "$(cat "$work/$round-$job.figures")" \
            "$(awk -v a="$med" -v b="$reference" 'BEGIN { printf "%.4f", a / b }')" >> "$work/$job.all"
    done
done

# Each figure's median over the rounds, and its range if it varied.
echo
echo "### Medians over $rounds rounds (min-max where the rounds differ)"
echo
echo "$header"
echo "$rule"
for job in "${jobs[@]}"; do
    row="| $(label "$job") |"
    for field in 1 2 3 4 5 6 7 8 9 10; do
        values=$(cut -f"$field" "$work/$job.all")
        m=$(median <<< "$values")
        lo=$(sort -n <<< "$values" | head -1)
        hi=$(sort -n <<< "$values" | tail -1)
        cell=$m
        [ "$lo" = "$hi" ] || cell="$m ($lo-$hi)"
        [ "$job" != recipe ] || [ "$field" != 7 ] || cell=-
        row="$row $cell |"
    done
    echo "$row"
done
