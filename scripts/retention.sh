#!/usr/bin/env bash
# retention.sh - the persistent data retention evaluation (apps/retain/,
# txn_layout.h): manual migration against lazily extendible structs on the
# hash table, the B-tree of order 8 and the 4-level skip list, Layout-Change
# and Layout-Add, inputs INS, DEL and RAND, then the working-set sweep
# (DEL of 0.1%, 1%, 10%, 100% of the keys, Layout-Change). Writes
# results/retention.md and results/retention.png (the sweep).
#
#   bash scripts/retention.sh          hash and B-tree: N = 100000 keys (the
#                                      paper's), medians of 6 runs (Layout-Add:
#                                      15); skip list (each operation walks
#                                      O(N) nodes): N = 20000, of 6 (Layout-Add: 9)
#   bash scripts/retention.sh --full   the skip list at N = 100000 too (long),
#                                      medians of 8 (Layout-Add: 15, 9)
# In each run the update programs run one after the other, on the same
# file (the same memory), in an order that rotates from run to run (run
# counts are multiples of the programs compared: 2 on Layout-Change, 3 on
# Layout-Add, so that each program runs as often in each place); the
# Auto overheads are medians of each run's paired ratios, with their
# quartiles (the spread the measurement has).
# Every timed part starts from cold caches (retain writes over twice the
# last-level cache first: the migration leaves P-Manual's nodes cached).
# (retain --block OPS interleaves them finer, in processes of their own
# taking turns: not used here.)
# Environment: BUILD_DIR (default build-release, configured and built if
# missing), RETAIN_ENGINE (default undo), TXN_PDOM (default 1), OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-release}
OUT=${OUT_DIR:-results}
ENGINE=${RETAIN_ENGINE:-undo}
n=100000 n_skip=20000 reps=6 reps_add=15 reps_skip=6 reps_skip_add=9
case "${1:-}" in
"") ;;
--full) n_skip=100000 reps=8 reps_skip=8 reps_skip_add=9 ;;
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
    echo "Engine $ENGINE, PDOM ${TXN_PDOM:-1}; hash and B-tree: N = $n keys, medians of $reps runs"
    echo "($reps_add on Layout-Add); skip list: N = $n_skip, of $reps_skip ($reps_skip_add on Layout-Add)"
    echo "(runs: a column); of the thread's CPU time ($(nproc) cores, $(uname -r), load"
    echo "average at the start: $(cut -d' ' -f1-3 /proc/loadavg)). In each run the update"
    echo "programs run one after the other, each on the same file (the original copied"
    echo "over it in place, and migrated for P-Manual: the same memory under every"
    echo "program), in an order that rotates from run to run, each from cold caches (a"
    echo "write over twice the last-level cache first). Overheads as the paper defines"
    echo "them: Manual = T(P-Retain) / T(P-Manual); Auto = (T(P-Auto) - T(P-Manual)) /"
    echo "T(P-Manual), here the median of each run's paired ratio with its quartiles"
    echo "[25%, 75%], in CPU and in wall time. P-Original' (Layout-Add) is the original"
    echo "program running the update input on the same pool as P-Auto:"
    echo "Auto/P-Original' is what the extendible structs cost, without what the"
    echo "migration changes in the heap (P-Manual runs on copies of the nodes, made in"
    echo "heap order: the original's order, in the new layout's size class)."
    echo "Bytes: everything stored to the pool (data, logs, allocator metadata);"
    echo "retention bytes: P-Retain's (Manual) against what P-Auto stores beyond"
    echo "P-Manual (Auto)."
    echo
    # per kernel: keys, runs, runs on Layout-Add
    runs() {
        if [ "$1" = skip ]; then echo "$n_skip $reps_skip $reps_skip_add"; else echo "$n $reps $reps_add"; fi
    }
    for k in hash btree skip; do
        read -r kn r ra <<<"$(runs "$k")"
        "$bin" --n "$kn" --reps "$r" --reps-add "$ra" --kernel "$k" |
            grep -v '^#' | { [ "$k" = hash ] && cat || grep -v -e '^| kernel' -e '^|---'; }
    done
    echo
    echo "## Working-set sweep (Layout-Change, DEL of a fraction of the keys)"
    echo
    echo "Manual cost: the whole migration (P-Retain); Auto cost: P-Auto - P-Manual (the median"
    echo "of the runs' paired differences)."
    echo
    echo "Runs: $reps (hash, B-tree; N = $n), $reps_skip (skip list; N = $n_skip)."
    echo
    for k in hash btree skip; do
        read -r kn r ra <<<"$(runs "$k")"
        "$bin" --n "$kn" --reps "$r" --sweep --kernel "$k" |
            grep -v '^#' | { [ "$k" = hash ] && cat || grep -v -e '^| kernel' -e '^|---'; }
    done
    echo
    echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
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
set title "Working-set sweep, Layout-Change ($ENGINE, N = $n; skip list $n_skip)"
set key top left
set label "an Auto cost of 0 or less (none measurable) is drawn at 0.0005 ms" at graph 0.02, graph 0.04 font ",9"
plot for [k in "hash btree skip"] "< grep '^".k." ' $OUT/retention.dat" using 2:3 with linespoints title k." Manual", \
     for [k in "hash btree skip"] "< grep '^".k." ' $OUT/retention.dat" using 2:4 with linespoints dashtype 2 title k." Auto"
GP
    rm -f "$OUT/retention.dat"
fi
