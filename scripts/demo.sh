#!/usr/bin/env bash
# The demo: a sample condor_compile'd-style job (examples/condor_job.rs)
# is started under ckptrun, evicted the way HTCondor evicts (SIGTERM),
# "transferred" to a fresh sandbox with only its checkpoint, restarted,
# and finishes with the same result as a run that was never interrupted.
# Then the same for a self-checkpointing job (examples/self_job.rs, which
# rewrites its state in place) under --mode self, with a torn working copy
# brought back by the transfer. Then an unmodified program under
# --mode dmtcp, with the real DMTCP 4.2.0 (built once, about 2 minutes,
# with ../shared/tools/real-dmtcp.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/setup.sh
CARGO_BUILD_OPTS="--locked --quiet" scripts/build-release.sh x86_64-unknown-linux-musl
cargo build --release --locked --quiet --example condor_job --example self_job
dmtcp_prefix=${CKPTRUN_DMTCP:-/tmp/ckptrun-dmtcp-4.2.0}
echo "Building DMTCP 4.2.0 in $dmtcp_prefix if it is not there (about 2 minutes the first time)..."
"$PWD/../shared/tools/real-dmtcp.sh" "$dmtcp_prefix" > /dev/null
bin="$PWD/target/x86_64-unknown-linux-musl/release"
# The condor stand-in says where it checkpointed and resumed.
export CONDOR_JOB_VERBOSE=1
work=$(mktemp -d /tmp/ckptrun-demo.XXXXXX)
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Reference: the job run to its end without interruption (40 steps)"
mkdir "$work/reference"; cp "$bin/ckptrun" "$bin/examples/condor_job" "$work/reference/"
(cd "$work/reference" && ./ckptrun ./condor_job 40 50) | tee "$work/reference.out"

step "2. Execute node A: ckptrun starts the job (no setarch, no shell needed)"
mkdir "$work/node-a"; cp "$bin/ckptrun" "$bin/examples/condor_job" "$work/node-a/"
cd "$work/node-a"
./ckptrun --verbose --log ckptrun.log ./condor_job 40 50 &
pid=$!
sleep 1
step "3. HTCondor vacates the job: SIGTERM to ckptrun"
kill -TERM "$pid"
set +e; wait "$pid"; code=$?; set -e
echo "ckptrun exited $code (85 = checkpointed: transfer the files and restart me)"
ls -l condor_job.ckpt

step "4. HTCondor transfers the checkpoint; node B starts the same command line"
mkdir "$work/node-b"; cp "$bin/ckptrun" "$bin/examples/condor_job" condor_job.ckpt ckptrun.log "$work/node-b/"
cd "$work/node-b"
./ckptrun --verbose --log ckptrun.log ./condor_job 40 50 | tee "$work/resumed.out"

step "5. The resumed run's result equals the uninterrupted one"
diff "$work/reference.out" "$work/resumed.out" && echo "identical: $(cat "$work/resumed.out")"

step "ckptrun.log (appended by both runs)"
cat ckptrun.log

export SELF_JOB_STEP_MS=20
self_args=(--mode self --ckpt state --job-ckpt-exit 17 --ckpt-signal USR1)
step "6. --mode self, reference: the self-checkpointing job run to its end (150 steps)"
mkdir "$work/self-ref"; cp "$bin/examples/self_job" "$work/self-ref/"
(cd "$work/self-ref" && ./self_job state 150 result && cat result)

step "7. Node C: ckptrun --mode self starts it; HTCondor vacates it after 1 s"
mkdir "$work/node-c"; cp "$bin/ckptrun" "$bin/examples/self_job" "$work/node-c/"
cd "$work/node-c"
./ckptrun --verbose "${self_args[@]}" -- ./self_job state 150 result &
pid=$!
sleep 1
kill -TERM "$pid"
set +e; wait "$pid"; code=$?; set -e
echo "ckptrun exited $code (85: the job checkpointed, ckptrun committed it)"
ls -l ckptrun.store.*
echo "the newest generation, as tar sees it:"; tar tvf ckptrun.store.1

step "8. The transfer brings the store back, and a torn working copy with it"
mkdir "$work/node-d"; cp "$bin/ckptrun" "$bin/examples/self_job" ckptrun.store.* "$work/node-d/"
cd "$work/node-d"
head -c 1000 /dev/urandom > state
./ckptrun --verbose "${self_args[@]}" -- ./self_job state 150 result
cat result

step "9. The resumed run's result equals the uninterrupted one"
diff "$work/self-ref/result" result && echo "identical: $(cat result)"

# --mode dmtcp with the real DMTCP: a C program that knows nothing of
# checkpoints (tests/jobs/counter.c), DMTCP's install tree beside it.
sandbox() {
    mkdir "$1"; cp "$bin/ckptrun" "$1/"; cc -O1 -o "$1/counter" "$root/tests/jobs/counter.c"
    cp -a "$dmtcp_prefix" "$1/dmtcp"
}
dmtcp_args=(--mode dmtcp --dmtcp-dir dmtcp/bin --stdout out --verbose -- ./counter 60 50 "an argument with spaces")
step "10. --mode dmtcp, reference: the program run to its end without DMTCP (60 steps)"
sandbox "$work/dmtcp-ref"
(cd "$work/dmtcp-ref" && ./counter 60 0 "an argument with spaces" > out && tail -2 out)

step "11. Node E: ckptrun --mode dmtcp starts a coordinator and dmtcp_launch; vacated after 1.5 s"
sandbox "$work/node-e"
cd "$work/node-e"
./ckptrun "${dmtcp_args[@]}" &
pid=$!
sleep 1.5
kill -TERM "$pid"
set +e; wait "$pid"; code=$?; set -e
echo "ckptrun exited $code (85: DMTCP checkpointed the program, ckptrun committed its images)"
ls -l ckptrun.store.*

step "12. Node F, another path: the sandbox's files come over; dmtcp_restart resumes the program"
cd "$work"
sandbox "$work/node-f"
# As HTCondor does: every top-level file of the old sandbox (the store,
# the output, and `data`, which the program keeps open: DMTCP reopens it).
find node-e -maxdepth 1 -type f ! -name ckptrun ! -name counter -exec cp {} node-f/ \;
rm -rf node-e
cd node-f
./ckptrun "${dmtcp_args[@]}"

step "13. The output equals the uninterrupted run's"
diff "$work/dmtcp-ref/out" out && diff "$work/dmtcp-ref/data" data &&
    echo "identical (out and data): $(wc -l < out) lines, ending: $(tail -1 out)"
rm -rf "$work"
