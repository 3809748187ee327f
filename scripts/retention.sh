#!/usr/bin/env bash
# retention.sh - the persistent data retention evaluation (bench/retain.c,
# txn_layout.h): manual migration against lazily extendible structs on the
# hash table, the B-tree of order 8 and the 4-level skip list, Layout-Change
# and Layout-Add, inputs INS, DEL and RAND, then the working-set sweep
# (DEL of 0.1%, 1%, 10%, 100% of the keys, Layout-Change). Writes
# results/retention.md and results/retention.png (the sweep).
#
#   bash scripts/retention.sh          N = 20000 keys, median of 5 runs
#   bash scripts/retention.sh --full   N = 100000 (the paper's), median of 7
# Environment: BUILD_DIR (default build-release, configured and built if
# missing), RETAIN_ENGINE (default undo), TXN_PDOM (default 1), OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-release}
OUT=${OUT_DIR:-results}
ENGINE=${RETAIN_ENGINE:-undo}
n=20000 reps=5
case "${1:-}" in
"") ;;
--full) n=100000 reps=7 ;;
*) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$BUILD_DIR" -j2 --target "retain-$ENGINE" >/dev/null
bin="$BUILD_DIR/bin/retain-$ENGINE"
export PMEM_IS_PMEM_FORCE=1
mkdir -p "$OUT"
md="$OUT/retention.md"
{
    echo "# Persistent data retention: manual migration vs lazily extendible structs"
    echo
    echo "Engine $ENGINE, PDOM ${TXN_PDOM:-1}, N = $n keys, median of $reps runs of the"
    echo "thread's CPU time"
    echo "($(nproc) cores, $(uname -r)). Overheads as the paper defines them:"
    echo "Manual = T(P-Retain) / T(P-Manual); Auto = (T(P-Auto) - T(P-Manual)) / T(P-Manual)."
    echo "Bytes: everything stored to the pool (data, logs, allocator metadata);"
    echo "retention bytes: P-Retain's (Manual) against what P-Auto stores beyond"
    echo "P-Manual (Auto)."
    echo
    "$bin" --n "$n" --reps "$reps" | grep -v '^#'
    echo
    echo "## Working-set sweep (Layout-Change, DEL of a fraction of the keys)"
    echo
    echo "Manual cost: the whole migration (P-Retain); Auto cost: P-Auto - P-Manual."
    echo
    "$bin" --n "$n" --reps "$reps" --sweep | grep -v '^#'
} | tee "$md"

# the sweep's plot: cost against the fraction of keys touched
if command -v gnuplot >/dev/null; then
    awk -F'|' '/^\| (hash|btree|skip) \| [0-9.]+%/ {
        gsub(/ /, "", $2); split($3, f, "%"); gsub(/ /, "", f[1]);
        print $2, f[1], $7, ($8 > 0.0005 ? $8 : 0.0005) }' "$md" > "$OUT/retention.dat"
    gnuplot <<GP
set terminal pngcairo size 900,500
set output "$OUT/retention.png"
set logscale xy
set xlabel "keys deleted by the update program (%)"
set ylabel "retention cost (ms)"
set title "Working-set sweep, Layout-Change ($ENGINE, N = $n)"
set key top left
set label "an Auto cost of 0 or less (none measurable) is drawn at 0.0005 ms" at graph 0.02, graph 0.04 font ",9"
plot for [k in "hash btree skip"] "< grep '^".k." ' $OUT/retention.dat" using 2:3 with linespoints title k." Manual", \
     for [k in "hash btree skip"] "< grep '^".k." ' $OUT/retention.dat" using 2:4 with linespoints dashtype 2 title k." Auto"
GP
    rm -f "$OUT/retention.dat"
fi
