#!/usr/bin/env bash
# tpccgrow.sh [--warehouses W] [--seconds S] [--terminals T] [--rounds R]
#             [ENGINE...]: TPC-C (apps/tpcc) on the pmtx VFS from a database
# that starts small and grows (the VFS's default) beside one made at once
# at what W warehouses need (--prealloc, as every run was before pools
# grew), same binary, alternating, R rounds each (default 1). Each run
# loads its own database, then runs S seconds (default 30) with T
# terminals (default 2). Prints the load's seconds, tpmC, the MiB the
# file holds at the end, and the ratios growing / preallocated. Default
# W = 4, engines redo undo. BUILD_DIR (default build-release, Release,
# tests off) is built unless NO_BUILD is set.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

w=4
seconds=30
terminals=2
rounds=1
while [ $# -gt 0 ]; do
    case $1 in
    --warehouses) w=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --terminals) terminals=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -*) echo "usage: $0 [--warehouses W] [--seconds S] [--terminals T] [--rounds R] [ENGINE...]" >&2
        exit 2 ;;
    *) break ;;
    esac
done
BUILD_DIR=${BUILD_DIR:-build-release}
[ -n "${NO_BUILD:-}" ] || build "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPMTX_TESTS=OFF
engines=${*:-redo undo}
export PMEM_IS_PMEM_FORCE=1
dir=$(mktemp -d /dev/shm/tpccgrow.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# one ENGINE [tpcc options...]: load, run; prints "load_s tpmC held"
one() {
    local bin=$BUILD_DIR/bin/tpcc-$1
    shift
    rm -f "$dir"/t.db*
    local t0 t1 out
    t0=$(date +%s.%N)
    "$bin" --warehouses "$w" --db "$dir/t.db" --load-only "$@" >/dev/null 2>"$dir/err" ||
        { echo "tpcc: load failed:" >&2; cat "$dir/err" >&2; return 1; }
    t1=$(date +%s.%N)
    out=$("$bin" --db "$dir/t.db" --seconds "$seconds" --terminals "$terminals" 2>"$dir/err") ||
        { echo "tpcc: run failed:" >&2; cat "$dir/err" >&2; return 1; }
    local tpmc held
    tpmc=$(grep '^{' <<<"$out" | sed -n 's/.*"tpmC":\([0-9.]*\).*/\1/p')
    held=$(($(stat -c %b "$dir/t.db") * $(stat -c %B "$dir/t.db") / 1048576))
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') $tpmc $held"
    rm -f "$dir"/t.db*
}

printf '%-6s %-9s %5s %9s %10s\n' engine pool load_s tpmC held_MiB
for e in $engines; do
    for ((r = 1; r <= rounds; r++)); do
        read -r gl gt gh < <(one "$e")
        printf '%-6s %-9s %5s %9s %10s\n' "$e" growing "$gl" "$gt" "$gh"
        read -r pl pt ph < <(one "$e" --prealloc)
        printf '%-6s %-9s %5s %9s %10s\n' "$e" prealloc "$pl" "$pt" "$ph"
        awk -v gl="$gl" -v pl="$pl" -v gt="$gt" -v pt="$pt" -v e="$e" \
            'BEGIN{printf "%-6s growing/prealloc: load time %.2f, tpmC %.2f\n", e, gl/pl, gt/pt}'
    done
done
