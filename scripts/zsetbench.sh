#!/usr/bin/env bash
# zsetbench.sh [KVSTORE] [--rounds R] [--requests N] [--sizes LIST]
# Sorted set throughput of KVSTORE (default build/bin/kvstore-undo, a
# Release build) side by side with redis-server 7.0 without persistence
# and with appendfsync always, over UNIX sockets: redis-benchmark -t
# zadd,zpopmin -c 50 at -P 1 (-n N, default 100000) and -P 16 (-n 10N),
# once per size in LIST (default 0,10,1000,100000, the issue's sizes): 0
# is redis-benchmark's default, every ZADD naming the one
# member "element:__rand_int__" (a set of one member), S adds -r S, members
# drawn from S names (a set that grows to about S members, which the
# ZPOPMIN test then empties). The server is pinned to CPU 1 with --threads
# 1, the client to CPU 0, TXN_PDOM=1. Each round runs the three servers
# in turn (a fresh pool or directory each); every figure is the median of
# R rounds (default 3).
# Prints thousands of requests/s, kvstore's ratios, and each server's
# CPU time per request (utime + stime over the test, /proc), which other
# jobs on a shared machine move less than the throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

usage="usage: $0 [KVSTORE] [--rounds R] [--requests N] [--sizes LIST]"
kv=build/bin/kvstore-undo
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    kv=$1
    shift
fi
kv=$(realpath "$kv")
rounds=3
n=100000
sizes=0,10,1000,100000
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift ;;
    --requests) n=$2; shift ;;
    --sizes) sizes=$2; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
hz=$(getconf CLK_TCK)

tmp=$(mktemp -d /tmp/zsetbench-XXXXXX)
pool=/dev/shm/zsetbench-$$.pool
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
    rm -f "$pool"
}
trap cleanup EXIT

wait_sock() {
    for _ in $(seq 400); do
        [ "$(redis-cli -s "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "zsetbench: no server on $1" >&2
    exit 1
}

# CPU time the server ($pid) has used, in clock ticks
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

# run NAME: every size and depth against $tmp/s.sock, ZADD then ZPOPMIN
# (which pops what ZADD added); a CSV line per test: NAME, size, depth,
# test, requests/s, the server's CPU time per request in ns
run() {
    wait_sock "$tmp/s.sock"
    local s p t c0 c1 rps reqs r
    for s in ${sizes//,/ }; do
        for p in 1 16; do
            reqs=$n
            [ "$p" = 1 ] || reqs=$((n * 10))
            r=
            [ "$s" = 0 ] || r="-r $s"
            for t in zadd zpopmin; do
                c0=$(cpu)
                # shellcheck disable=SC2086
                rps=$(taskset -c 0 redis-benchmark -s "$tmp/s.sock" -c 50 -P "$p" -n "$reqs" \
                    $r -t "$t" --csv | tr -d '"' | awk -F, 'NR == 2 { print $2 }')
                c1=$(cpu)
                echo "$1,$s,$p,${t^^},$rps,$(((c1 - c0) * 1000000000 / hz / reqs))" \
                    >>"$tmp/raw.csv"
            done
            redis-cli -s "$tmp/s.sock" del myzset >/dev/null
        done
    done
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

for round in $(seq "$rounds"); do
    rm -f "$pool"
    taskset -c 1 "$kv" --pool "$pool" --unix "$tmp/s.sock" --port 0 --threads 1 \
        >"$tmp/kv.log" 2>&1 &
    pid=$!
    run kv
    taskset -c 1 redis-server --port 0 --unixsocket "$tmp/s.sock" --save "" --appendonly no \
        --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" &
    pid=$!
    run redis
    rm -f "$tmp"/*.aof "$tmp"/appendonlydir/* 2>/dev/null || true
    taskset -c 1 redis-server --port 0 --unixsocket "$tmp/s.sock" --save "" --appendonly yes \
        --appendfsync always --dir "$tmp" --daemonize no --logfile "$tmp/aof.log" &
    pid=$!
    run aof
    echo "zsetbench: round $round of $rounds done" >&2
done

echo "$(basename "$kv") and redis-server $(redis-server --version | sed -n 's/.* v=\([0-9.]*\) .*/\1/p')," \
    "redis-benchmark -c 50, -n $n (-P 1) and $((n * 10)) (-P 16), median of $rounds rounds:"
echo "thousands of requests/s (kvstore, redis-server without persistence, with appendfsync always)," \
    "and the server's CPU time per request (ns)"
awk -F, "$awk_median"'
    { k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; m = ++c[k]; v[k, m] = $5; u[k, m] = $6
      if (!((($2, $3, $4) in seen))) { seen[$2, $3, $4] = 1; order[++nrow] = $2 SUBSEP $3 SUBSEP $4 } }
    function med(x, k,    a, i) {
        for (i = 1; i <= c[k]; i++) a[i] = x == "v" ? v[k, i] : u[k, i]
        return median(a, c[k])
    }
    END {
        printf "%-6s %3s %-8s %9s %9s %9s %8s %8s   %9s %9s %9s\n", "-r", "-P", "test",
               "kvstore", "redis", "r+aof", "kv/redis", "kv/r+aof", "kv ns", "redis ns", "aof ns"
        for (i = 1; i <= nrow; i++) {
            split(order[i], f, SUBSEP)
            kk = "kv" SUBSEP order[i]; rk = "redis" SUBSEP order[i]; ak = "aof" SUBSEP order[i]
            a = med("v", kk); b = med("v", rk); w = med("v", ak)
            printf "%-6s %3s %-8s %9.1f %9.1f %9.1f %8.3f %8.3f   %9d %9d %9d\n",
                   f[1] == 0 ? "-" : f[1], f[2], f[3], a / 1000, b / 1000, w / 1000,
                   b ? a / b : 0, w ? a / w : 0, med("u", kk), med("u", rk), med("u", ak)
        }
    }' "$tmp/raw.csv"
