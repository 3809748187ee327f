#!/usr/bin/env bash
# The README's main command: installs what it needs, builds (Release), runs
# the engine comparison (scripts/report.sh: Array and Array-RAW on every
# engine at PDOM 0, 1 and 2; results/ gets JSON, CSV, report.md and the
# PNG plots), incll's global flush per epoch (scripts/incll_flush.sh:
# results/incll_flush.md), the Masstree YCSB sweep and incll's recovery
# after a crash with 84K logged nodes (scripts/ycsb.sh: results/ycsb.md
# and .png), the key-value store against redis-server
# (scripts/kvbench.sh: results/kvstore.md and .png), the small-transaction
# demo table of every engine (results/demo.txt) and the data retention
# evaluation (scripts/retention.sh: results/retention.md and .png) and SPS
# on every engine at PDOM 0, 1, 2 and unpadded 1, with the raw lines
# (scripts/sps.sh: results/sps.md and .png), and TPC-C on SQLite through
# every engine's VFS beside stock SQLite (scripts/tpcc.sh: results/tpcc.md
# and .png), kvstore's memcached port beside memcached under memcaslap
# (scripts/mcbench.sh: results/memcached.md and .json) and memcached's
# clients after a SIGKILL, kvstore beside memcached's restartable cache
# (scripts/warmrestart.sh: results/warmrestart.md and .json), and the
# loads of a store kept full (results/load.md: MSET and DEL of up to 200K
# keys and APPEND/SETRANGE beside redis-server, big transactions on every
# engine, memcaslap's hit ratios beside memcached -m 64).
# Arguments go to report.sh (--full: the paper's sizes and durations; the
# sweeps take their --full too).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
export PMEM_IS_PMEM_FORCE=1
build build-release -DCMAKE_BUILD_TYPE=Release -DPMTX_TESTS=OFF # the benchmarks and programs

BUILD_DIR=build-release bash scripts/report.sh "$@"
echo
BUILD_DIR=build-release bash scripts/incll_flush.sh
echo
BUILD_DIR=build-release bash scripts/ycsb.sh --no-build $([[ " $* " == *" --full "* ]] && echo --full)
echo
BUILD_DIR=build-release bash scripts/kvbench.sh --no-build $([[ " $* " == *" --full "* ]] && echo --full)

echo
echo "== small transactions: N writes of 32 bytes each (apps/demo)"
mkdir -p results
{
    printf '%-6s %4s %10s %12s %10s\n' engine pdom writes/tx barriers/tx ns/tx
    for bin in build-release/bin/demo-*; do
        for pdom in 0 1 2; do
            TXN_PDOM=$pdom "$bin" | grep -v -e '^#' -e '^engine'
        done
    done
    echo "(median of 31 batches of 2000 transactions)"
} | tee results/demo.txt
BUILD_DIR=build-release bash scripts/retention.sh # persistent data retention
echo
BUILD_DIR=build-release bash scripts/sps.sh --no-build $([[ " $* " == *" --full "* ]] && echo --full)
echo
BUILD_DIR=build-release bash scripts/tpcc.sh --no-build $([[ " $* " == *" --full "* ]] && echo --full)
echo
BUILD_DIR=build-release bash scripts/warmrestart.sh --no-build $([[ " $* " == *" --full "* ]] && echo --full)
echo
BUILD_DIR=build-release bash scripts/mcbench.sh --no-build $([[ " $* " == *" --full "* ]] && echo --full)
echo
echo "== loads of a store kept full (results/load.md)"
{
    BUILD_DIR=build-release bash scripts/msetbench.sh --no-build
    echo
    BUILD_DIR=build-release bash scripts/appendbench.sh
    echo
    BUILD_DIR=build-release bash scripts/bigtx.sh --no-build
    echo
    BUILD_DIR=build-release bash scripts/mchit.sh --no-build
} | tee results/load.md
