#!/usr/bin/env bash
# ycsb.sh [--full] [--keys N] [--ops M] [--threads T] [--reps R] [--engines "a b"]
#         [--no-build]
# Throughput of the Masstree on every engine (ycsb-<engine>, TXN_PDOM=1) on
# YCSB workloads a, b, c, e x uniform, zipf; each configuration loads its
# own tree. Defaults sized for 2 cores: 1M keys, 2 threads, 500K operations
# per thread (--full: 20M keys, 1M operations per thread, as the paper);
# with --reps R every run is repeated R times (the whole sweep again, so
# the repetitions are spread in time) and the tables give the medians.
# Writes results/ycsb.json (one JSON line per run) and results/ycsb.md
# (Mops/s, and each engine's throughput relative to the transient tree,
# ycsb-none, measured in the same sweep). $BUILD_DIR (default build) holds
# the binaries; --no-build uses them as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

keys=1000000
ops=500000
threads=2
reps=1
engines="none undo redo cow pmdk incll"
nobuild=
while [ $# -gt 0 ]; do
    case $1 in
    --full) keys=20000000; ops=1000000 ;;
    --keys) keys=$2; shift ;;
    --ops) ops=$2; shift ;;
    --threads) threads=$2; shift ;;
    --reps) reps=$2; shift ;;
    --engines) engines=$2; shift ;;
    --no-build) nobuild=1 ;;
    *) echo "usage: $0 [--full] [--keys N] [--ops M] [--threads T] [--reps R] [--engines \"a b\"] [--no-build]" >&2
       exit 2 ;;
    esac
    shift
done

export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=${TXN_PDOM:-1}
BUILD_DIR=${BUILD_DIR:-build}
if [ -z "$nobuild" ]; then
    ensure_deps
    BUILD_TARGET= build "$BUILD_DIR"
fi
mkdir -p results
json=results/ycsb.json
: >"$json"
configs="a-uniform a-zipf b-uniform b-zipf c-uniform c-zipf e-uniform e-zipf"

echo "== ycsb: $keys keys, $threads threads x $ops operations, PDOM $TXN_PDOM, $reps rep(s)"
# configurations inside repetitions, engines innermost: the engines of
# one column run close together in time, so machine noise hits them alike
for rep in $(seq "$reps"); do
    for cfg in $configs; do
        wl=${cfg%-*} dist=${cfg#*-}
        for e in $engines; do
            bin=$BUILD_DIR/bin/ycsb-$e
            [ -x "$bin" ] || { echo "ycsb: no $bin" >&2; exit 1; }
            out=$("$bin" --workload "$wl" --dist "$dist" --keys "$keys" --threads "$threads" \
                  --ops "$ops" --seed "$rep")
            echo "$out" | grep -v '^[#{]'
            echo "$out" | grep '^{' >>"$json"
        done
    done
done

# the tables: a row per engine, a column per configuration
mops() { # engine cfg: the median of its runs
    grep "\"engine\":\"$1\"" "$json" |
        grep "\"workload\":\"${2%-*}\",\"dist\":\"${2#*-}\"" |
        sed 's/.*"mops":\([0-9.]*\).*/\1/' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
ratio() { # engine cfg: throughput over that of none
    awk -v a="$(mops "$1" "$2")" -v b="$(mops none "$2")" \
        'BEGIN { if (b > 0 && a != "") printf "%.2f", a / b; else printf "-" }'
}
table() { # cell function
    printf '| engine |'; for c in $configs; do printf ' %s |' "$c"; done; echo
    printf '| --- |'; for c in $configs; do printf ' ---: |'; done; echo
    for e in $engines; do
        printf '| %s |' "$e"
        for c in $configs; do printf ' %s |' "$("$1" "$e" "$c")"; done
        echo
    done
}
{
    echo "# Masstree YCSB throughput (Mops/s)"
    echo
    echo "$keys keys, $threads threads x $ops operations, PDOM $TXN_PDOM;"
    echo "median of $reps run(s) each, all in one sweep."
    echo "none = the transient tree (MT+: mmap'd node pool, epochs);"
    echo "the others = every node change a txn_write, one transaction per put."
    echo
    table mops
    echo
    echo "Relative to none (1.00 = as fast as the transient tree):"
    echo
    table ratio
} >results/ycsb.md
cat results/ycsb.md
