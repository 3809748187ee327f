#!/usr/bin/env bash
# growbench.sh [--max 2G] [--requests N] [--rounds R] [ENGINE...]: the key-
# value store filled by redis-benchmark (SET of 1,000-byte values, -P 16,
# keys from a range of 10M) from an empty pool that starts at 4 MiB and
# grows to --max, beside a pool created at --max (--pool-start), in one
# run, alternating, R rounds each (default 2). Prints requests/s, the
# pool's size at the end (INFO pool_size), DBSIZE, and the ratio
# growing / created at its maximum. Default 1.6M requests (about 1.6 GB
# of values; the store takes about 1.9 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

max=2G
requests=1600000
rounds=2
while [ $# -gt 0 ]; do
    case $1 in
    --max) max=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -*) echo "usage: $0 [--max SIZE] [--requests N] [--rounds R] [ENGINE...]" >&2; exit 2 ;;
    *) break ;;
    esac
done
BUILD_DIR=${BUILD_DIR:-build}
[ -n "${NO_BUILD:-}" ] || build "$BUILD_DIR"
engines=${*:-undo redo1}
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
tmp=$(mktemp -d /tmp/growbench-XXXXXX)
pool=/dev/shm/growbench-$$.pool
pid=
cleanup() {
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
    rm -f "$pool"
}
trap cleanup EXIT
sock=$tmp/s.sock

run() { # ENGINE START
    rm -f "$pool"
    "$BUILD_DIR/bin/kvstore-$1" --pool "$pool" --unix "$sock" --port 0 --threads 2 \
        --pool-size "$max" ${2:+--pool-start "$2"} >"$tmp/kv.log" 2>&1 &
    pid=$!
    for _ in $(seq 400); do
        [ "$(redis-cli -s "$sock" ping 2>/dev/null)" = PONG ] && break
        sleep 0.05
    done
    local rps size keys
    rps=$(redis-benchmark -s "$sock" -t set -d 1000 -P 16 -c 4 -r 10000000 -n "$requests" -q \
          2>/dev/null | tr '\r' '\n' | awk '/SET:/ { print $2 }' | tail -1)
    size=$(redis-cli -s "$sock" info memory | tr -d '\r' | awk -F: '$1 == "pool_size" { print $2 }')
    keys=$(redis-cli -s "$sock" dbsize)
    if grep -q "ERR" "$tmp/kv.log"; then cat "$tmp/kv.log" >&2; fi
    kill "$pid"
    wait "$pid" || true
    pid=
    printf "%-8s %-14s %12s %14s %10s\n" "$1" "${2:-4M->$max}" "$rps" "$size" "$keys"
    echo "$1,${2:-grow},$rps" >>"$tmp/raw.csv"
}

echo "# kvstore SET -d 1000 -P 16 -c 4, $requests requests; $(date -u +%Y-%m-%d); $(nproc) cores"
printf "%-8s %-14s %12s %14s %10s\n" engine pool requests/s pool_bytes keys
for r in $(seq "$rounds"); do
    for e in $engines; do
        run "$e" ""
        run "$e" "$max"
    done
done
awk -F, -v m="$max" '{ s[$1 FS $2] += $3; n[$1 FS $2]++; e[$1] = 1 }
     END { for (x in e) printf "%s: growing / created at its maximum: %.2f\n", x,
                              (s[x FS "grow"] / n[x FS "grow"]) / (s[x FS m] / n[x FS m]) }' \
    "$tmp/raw.csv" 2>/dev/null || true
