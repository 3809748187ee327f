#!/usr/bin/env bash
# quadra.sh DIR [--seconds T] [--sizes 1,4,16,64] [--cpu N]
# The peer of issue #45: Quadra (QuadraFC of durabletx, a checkout at DIR:
# https://github.com/pramalhe/durabletx) on its own SPS benchmark
# (graphs/psps-integer.cpp), one thread, 10M u64, each S for T seconds,
# built with real write-backs (-DPWB_IS_CLWB) as the issue asks. The
# benchmark's thread and size lists are set in a copy made here (its
# default runs 1 to 40 threads). Prints one JSON line per S in sps.c's
# shape (line "quadra"), for scripts/sps.sh --quadra.
set -euo pipefail
[ $# -ge 1 ] && [ -f "$1/graphs/psps-integer.cpp" ] || {
    echo "usage: $0 DURABLETX_DIR [--seconds T] [--sizes 1,4,16,64] [--cpu N]" >&2
    exit 2
}
src=$(cd "$1" && pwd)
shift
seconds=1
sizes=1,4,16,64
cpu=
while [ $# -gt 0 ]; do
    case $1 in
    --seconds) seconds=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    --cpu) cpu=$2; shift ;;
    *) echo "quadra.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case $seconds in *[!0-9]*|'') echo "quadra.sh: --seconds takes whole seconds" >&2; exit 2 ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work" /dev/shm/quadrafc_shared' EXIT
cp -r "$src/graphs" "$src/ptms" "$work/"
cd "$work/graphs"
sed -i "s/vector<int> threadList = {[^}]*}/vector<int> threadList = { 1 }/;
        s/vector<long> swapsPerTxList = {[^}]*}/vector<long> swapsPerTxList = { $sizes }/" psps-integer.cpp
grep -q "threadList = { 1 }" psps-integer.cpp || { echo "quadra.sh: thread list not found in psps-integer.cpp" >&2; exit 1; }
mkdir -p bin data
${CXX:-g++} -std=c++14 -O2 -DPWB_IS_CLWB -DUSE_QUADRA_FC -I.. psps-integer.cpp \
    -o bin/quadra -lpthread
run=(./bin/quadra "$seconds")
[ -z "$cpu" ] || run=(taskset -c "$cpu" "${run[@]}")
"${run[@]}" | awk '
    /swaps\/tx=/ { for (i = 1; i <= NF; i++) if ($i ~ /^swaps\/tx=/) { split($i, a, "="); s = a[2] } }
    /^Swaps\/sec = / && s {
        printf "{\"bench\":\"sps\",\"engine\":\"quadra\",\"line\":\"quadra\",\"layout\":\"array\",\"flush\":\"clwb\",\"keys\":10000000,\"swaps_per_tx\":%d,\"swaps_per_s\":%d}\n", s, $3
        s = ""
    }'
