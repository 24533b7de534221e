#!/usr/bin/env bash
# The demo: a sample condor_compile'd-style job (examples/condor_job.rs)
# is started under ckptrun, evicted the way HTCondor evicts (SIGTERM),
# "transferred" to a fresh sandbox with only its checkpoint, restarted,
# and finishes with the same result as a run that was never interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked --quiet
cargo build --release --locked --quiet --example condor_job
bin="$PWD/target/x86_64-unknown-linux-musl/release"
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
rm -rf "$work"
