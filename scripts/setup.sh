#!/usr/bin/env bash
# Installs what building, testing, the demo and the benchmarks need on a
# fresh Debian machine with rustup: the musl targets, rust-src (the release
# build rebuilds std from it: scripts/build-release.sh), util-linux (setarch,
# unshare), bsdutils (script), strace, runc and busybox-static (the
# container tests, tests/runc.rs), and for benchmarks hyperfine, tini
# (with tini-static), dumb-init, catatonit and procps (pgrep); xfsprogs and
# e2fsprogs (tests/reflink.rs: XFS in a file, filefrag).
# Usage: scripts/setup.sh [--bench]
set -euo pipefail

for target in x86_64-unknown-linux-musl i686-unknown-linux-musl; do
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
done
rustup component list --installed | grep -q '^rust-src' || rustup component add rust-src
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt

packages=()
command -v setarch >/dev/null || packages+=(util-linux)
command -v unshare >/dev/null || packages+=(util-linux)
command -v script >/dev/null || packages+=(bsdutils)
command -v strace >/dev/null || packages+=(strace)
# The tests' jobs under DMTCP: a Python program, and GNU tar to read the
# store's archives independently of ckptrun.
[ -x /usr/bin/python3 ] || packages+=(python3)
command -v tar >/dev/null || packages+=(tar)
# xxhsum: the tests check the store's manifests with it, as a user would;
# zstd: and read its compressed members.
command -v xxhsum >/dev/null || packages+=(xxhash)
command -v zstd >/dev/null || packages+=(zstd)
# tests/runc.rs: ckptrun as PID 1 of a real OCI container, a static
# busybox for the container's shell jobs.
# (runc is in /usr/sbin, which a non-root PATH may lack.)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || packages+=(runc)
# tests/reflink.rs: an XFS filesystem in a file (mkfs.xfs), its blocks
# seen shared or not (filefrag).
command -v mkfs.xfs >/dev/null || packages+=(xfsprogs)
command -v filefrag >/dev/null || packages+=(e2fsprogs)
dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' ||
    packages+=(busybox-static)
if [ "${1:-}" = "--bench" ]; then
    command -v hyperfine >/dev/null || packages+=(hyperfine)
    command -v tini >/dev/null || packages+=(tini)
    command -v dumb-init >/dev/null || packages+=(dumb-init)
    command -v catatonit >/dev/null || packages+=(catatonit)
    command -v pgrep >/dev/null || packages+=(procps)
    # scripts/bench-memory.sh: the kernel's kmem:rss_stat tracepoint.
    command -v perf >/dev/null || packages+=(linux-perf)
fi
if [ "${#packages[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi
