#!/usr/bin/env bash
# Benchmark for BENCHMARKS.md (issue 25): ckptrun's codec against
# `zstd -1` (Debian's zstd CLI), on the same files, each figure against
# its peer in the same run (medians of RUNS, interleaved):
#   bytes    the codec's frames (1 MiB of the file each, as the store
#            writes them) against `zstd -1`'s output;
#   encode   MB/s of raw bytes: the codec in memory (codec/tests/ratio.rs,
#            one core), `zstd -1 -T1` from the page cache to /dev/null;
#   decode   the same, `zstd -d -T1`.
# Files (SIZE MiB each): text (Rust's library sources over and over),
# log (examples/self_job's text-like state: SELF_JOB_PAD_TEXT=1), random
# (/dev/urandom), zeros.
# Usage: scripts/bench-codec.sh [RUNS] [SIZE_MB]   (default 5, 256)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
size=${2:-256}
scripts/setup.sh
command -v zstd >/dev/null
cargo build --release --locked --quiet --example self_job
cargo test --release --locked --quiet -p ckptrun-codec --test ratio --no-run 2>/dev/null
work=$(mktemp -d /tmp/ckptrun-bench-codec.XXXXXX)
trap 'rm -rf "$work"' EXIT
bytes=$((size << 20))
find "$(rustc --print sysroot)/lib/rustlib/src/rust/library" -name '*.rs' | sort | xargs cat > "$work/one"
for _ in $(seq $((bytes / $(stat -c %s "$work/one") + 1))); do cat "$work/one"; done > "$work/all"
head -c "$bytes" "$work/all" > "$work/text" && rm "$work/one" "$work/all"
(cd "$work" && SELF_JOB_PAD_TEXT=1 SELF_JOB_PAD=$bytes SELF_JOB_CKPT_EVERY=1 SELF_JOB_QUIET=1 \
    "$OLDPWD/target/x86_64-unknown-linux-musl/release/examples/self_job" log 5 result || [ $? = 17 ])
[ -s "$work/log" ]
head -c "$bytes" /dev/urandom > "$work/random"
head -c "$bytes" /dev/zero > "$work/zeros"

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
secs() { local t; t=$(date +%s%N); "$@" >/dev/null; echo "scale=4; ($(date +%s%N) - $t) / 1000000000" | bc; }

echo "## Machine"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r); $(zstd --version | head -1); $size MiB per file; $runs runs, medians"
echo
echo "| file | bytes: codec | bytes: zstd -1 | ratio | encode MB/s: codec | zstd -1 | decode MB/s: codec | zstd -d |"
echo "|---|---|---|---|---|---|---|---|"
for f in text log random zeros; do
    file=$work/$f
    : > "$work/ce" ; : > "$work/cd"; : > "$work/ze"; : > "$work/zd"
    zstd -1 -q -c "$file" > "$work/$f.zst"
    for _ in $(seq "$runs"); do
        line=$(CODEC_FILE=$file cargo test --release --locked --quiet -p ckptrun-codec --test ratio -- --ignored --nocapture 2>/dev/null | grep -- ' -> ')
        ours=$(echo "$line" | sed 's/.* -> \([0-9]*\) bytes.*/\1/')
        echo "$line" | sed 's/.*encode \([0-9]*\) MB.*/\1/' >> "$work/ce"
        echo "$line" | sed 's/.*decode \([0-9]*\) MB.*/\1/' >> "$work/cd"
        echo "scale=0; $bytes / 1000000 / $(secs zstd -1 -T1 -q -c "$file")" | bc >> "$work/ze"
        echo "scale=0; $bytes / 1000000 / $(secs zstd -d -T1 -q -c "$work/$f.zst")" | bc >> "$work/zd"
    done
    theirs=$(stat -c %s "$work/$f.zst")
    ratio=$(echo "scale=3; $ours / $theirs" | bc)
    echo "| $f | $ours | $theirs | ${ratio}x | $(median < "$work/ce") | $(median < "$work/ze") | $(median < "$work/cd") | $(median < "$work/zd") |"
done
