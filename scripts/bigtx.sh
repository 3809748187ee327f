#!/usr/bin/env bash
# bigtx.sh [--no-build] [bigtx options...]
# bench/bigtx.c on every engine of the build: one line per engine, kind
# and transaction size with the time per operation and its ratio to that
# at the smallest size (about 1: linear; growing with n: quadratic).
# Options after --no-build go to every bigtx-<engine> (default: --writes
# 10000,100000,1000000 --allocs 10000,100000,1000000 --tails 4096,65536,
# 1048576,8388608 --reps 3). $BUILD_DIR
# (default build) holds the binaries; --no-build uses them as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

nobuild=
if [ "${1:-}" = --no-build ]; then
    nobuild=1
    shift
fi
[ $# -gt 0 ] || set -- --writes 10000,100000,1000000 --allocs 10000,100000,1000000 \
    --tails 4096,65536,1048576,8388608 --reps 3
export PMEM_IS_PMEM_FORCE=1
BUILD_DIR=${BUILD_DIR:-build}
[ -n "$nobuild" ] || BUILD_TARGET= build "$BUILD_DIR"
echo "# $(date -u +%Y-%m-%d), $(nproc) cores; bigtx $*"
for e in $(built_engines "$BUILD_DIR" undo redo redo1 cow incll); do
    "$BUILD_DIR/bin/bigtx-$e" "$@" | { [ "$e" = undo ] && cat || grep -v '^#'; }
done
