#!/usr/bin/env bash
# incll_flush.sh - the incll engine's global flush per epoch against the
# data dirtied in it (the paper: 1.4 ms per 64 ms epoch, 2.2%): Array slot
# 4 with W = 1, 5, 20 read-write slots per transaction (more W, more dirty
# lines per epoch), global flush `tracked` and `whole` at PDOM 1, and
# `none` at PDOM 2 (eADR: nothing to flush). Each row is one run of
# build/bin/array-incll with TXN_INCLL_STATS=2 (a line per epoch): medians
# over the last half of its epochs (the first ones build the array), and
# the flush share of the whole run. Writes results/incll_flush.md.
#   BUILD_DIR (default build), OUT_DIR (default results),
#   FLUSH_SLOTS (default 1000000), FLUSH_MIN_TIME (default 1 s)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT_DIR:-results}
SLOTS=${FLUSH_SLOTS:-1000000}
MIN_TIME=${FLUSH_MIN_TIME:-1}
bin=$BUILD_DIR/bin/array-incll
if [ ! -x "$bin" ]; then
    echo "incll_flush: $bin is missing (build the array-incll target)" >&2
    exit 1
fi
export PMEM_IS_PMEM_FORCE=1 ARRAY_SLOTS=$SLOTS
# a pool with room for a 64 ms epoch's log (a log beyond 1/16 of the heap
# would end epochs early)
export ARRAY_POOL_MB=${ARRAY_POOL_MB:-1024}
mkdir -p "$OUT"
{
    echo "# incll: global flush per epoch"
    echo
    echo "Array slot 4, $SLOTS slots, TXN_EPOCH_MS=${TXN_EPOCH_MS:-64}; one run per row (at least $MIN_TIME s of benchmark, plus building the array)."
    echo
    echo "| flush | PDOM | W | ns/tx | barriers/tx | epochs | epoch ms | flush us | flush us max | lines/epoch | MiB/epoch | flush share (whole run) |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for mode in tracked whole none; do
        pdom=1
        [ "$mode" = none ] && pdom=2
        for w in 1 5 20; do
            log=$(TXN_INCLL_STATS=2 TXN_PDOM=$pdom TXN_INCLL_FLUSH=${mode/none/tracked} "$bin" --array_sizes=4 \
                --array_wslots=$w --benchmark_filter='^Array/' --benchmark_min_time="$MIN_TIME" 2>&1)
            awk -v mode=$mode -v pdom=$pdom -v w=$w "$awk_median"'
                /^Array\// { ns = $2; for (i = 1; i <= NF; i++) if ($i ~ /^barriers_per_tx=/) { b = $i; sub(/.*=/, "", b) } }
                /^incll-epoch: / { n++; len[n] = $2; fl[n] = $5; ln[n] = $7 }
                /^incll: / { match($0, /flush [0-9.]+% /); sh = substr($0, RSTART + 6, RLENGTH - 8) }
                END {
                    if (ns == "" || n < 2) { print "incll_flush: no result for " mode " W=" w > "/dev/stderr"; exit 1 }
                    # the last half of the epochs: the timed part (the array is built first)
                    k = 0; for (i = int(n / 2) + 1; i <= n; i++) { k++; L[k] = len[i]; F[k] = fl[i]; N[k] = ln[i]; if (fl[i] > mx) mx = fl[i] }
                    ml = median(L, k); mf = median(F, k); mn = median(N, k)
                    if (mode == "none")
                        printf "| %s | %s | %s | %s | %.2f | %d | %.1f | - | - | - | - | - |\n", mode, pdom, w, ns, b, k, ml
                    else
                        printf "| %s | %s | %s | %s | %.2f | %d | %.1f | %.0f | %.0f | %.0f | %.1f | %.1f%% (%s%%) |\n", mode, pdom, w, ns, b, k,
                               ml, mf, mx, mn, mn * 64 / 1048576, 100 * mf / 1000 / ml, sh
                }' <<<"$log"
        done
    done
    echo
    echo "Medians over the last half of each run's epochs (the array is built in the first ones); flush share: flush time over epoch length (in parentheses: over the whole run, building included); tracked writes back the lines dirtied in the epoch (per object, once), whole the whole used heap (the worst case of a cache-wide flush)."
} | tee "$OUT/incll_flush.md"
