#!/usr/bin/env bash
# setbench.sh KVSTORE [--rounds R] [--requests N] [--tests LIST] [--random K]
#             [--fill]
# The set and hash commands' throughput (issue #44): kvstore (KVSTORE: a Release
# build of kvstore-<engine>) side by side with redis-server 7.0, without
# persistence and with an append-only file fsynced at every write
# (appendfsync always), over UNIX sockets: redis-benchmark -c 50 -n N
# (default 200000) of LIST (its -t; default sadd,spop), with -P 1 and -P
# 16. --random K passes -r K: SADD's member is then one of K (the set
# grows to about K members; without it, every SADD adds the same member);
# LIST may name hset too (HSET myhash element:R xxx: the hash grows to K
# fields). --fill (with --random K): before each measured run, the same
# test with -P 16 and 5K requests fills the collection to about K
# elements (99%), so that the run measures a collection of that size.
# The server runs pinned to CPU 1 (kvstore with --threads 1), the client
# on CPU 0, TXN_PDOM=1; a fresh pool (or directory) for each server and
# round. Prints the median of R rounds (default 3): thousands of requests/s
# and the ratios kvstore/redis, and the server's CPU time per request
# (utime + stime over the test, /proc), which other jobs on a shared
# machine move less than the throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

usage="usage: $0 KVSTORE [--rounds R] [--requests N] [--tests LIST] [--random K] [--fill]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
kv=$(realpath "$1")
shift
rounds=3
n=200000
tests=sadd,spop
rnd=()
fill=0
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift ;;
    --requests) n=$2; shift ;;
    --tests) tests=$2; shift ;;
    --random) rnd=(-r "$2"); shift ;;
    --fill) fill=1 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
hz=$(getconf CLK_TCK)

tmp=$(mktemp -d /tmp/setbench-XXXXXX)
pool=/dev/shm/setbench-$$.pool
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
    echo "setbench: no server on $1" >&2
    exit 1
}

# CPU time the server ($pid) has used, in clock ticks
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

# run NAME: each test with -P 1 and -P 16 against $tmp/s.sock, starting
# from an empty store each time; a CSV line per test: NAME, test/P,
# requests/s, the server's CPU time per request in ns
run() {
    wait_sock "$tmp/s.sock"
    local t p c0 c1 rps
    for p in 1 16; do
        for t in ${tests//,/ }; do
            redis-cli -s "$tmp/s.sock" flushall >/dev/null
            # SPOP pops what a SADD run left (as redis-benchmark's own order)
            [ "$fill" = 1 ] && [ ${#rnd[@]} = 2 ] && [ "$t" != spop ] && taskset -c 0 \
                redis-benchmark -s "$tmp/s.sock" -c 50 -P 16 -n $((5 * rnd[1])) "${rnd[@]}" \
                -t "$t" -q >/dev/null
            [ "$t" = spop ] && taskset -c 0 redis-benchmark -s "$tmp/s.sock" -c 50 -P 16 \
                -n "$n" "${rnd[@]}" -t sadd -q >/dev/null
            c0=$(cpu)
            rps=$(taskset -c 0 redis-benchmark -s "$tmp/s.sock" -c 50 -P $p -n "$n" \
                "${rnd[@]}" -t "$t" --csv | tr -d '"' | awk -F, 'NR == 2 { print $2 }')
            c1=$(cpu)
            echo "$1,${t^^}/P$p,$rps,$(((c1 - c0) * 1000000000 / hz / n))" >>"$tmp/raw.csv"
        done
    done
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

for r in $(seq "$rounds"); do
    rm -f "$pool"
    taskset -c 1 "$kv" --pool "$pool" --unix "$tmp/s.sock" --port 0 --threads 1 \
        >"$tmp/kv.log" 2>&1 &
    pid=$!
    run kv
    rm -f "$pool"
    taskset -c 1 redis-server --port 0 --unixsocket "$tmp/s.sock" --save "" --appendonly no \
        --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" &
    pid=$!
    run redis
    rm -f "$tmp"/*.aof "$tmp"/appendonlydir/* 2>/dev/null || true
    taskset -c 1 redis-server --port 0 --unixsocket "$tmp/s.sock" --save "" --appendonly yes \
        --appendfsync always --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" &
    pid=$!
    run aof
    echo "setbench: round $r of $rounds done" >&2
done

echo "redis-benchmark -c 50 -n $n ${rnd[*]}$([ "$fill" = 1 ] && echo ' (filled)'), median of $rounds rounds: thousands of" \
    "requests/s (kvstore, redis-server without persistence, with appendfsync always)" \
    "and the server's CPU time per request (ns)"
awk -F, "$awk_median"'
    { k = $1 SUBSEP $2; m = ++c[k]; v[k, m] = $3; u[k, m] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++nt] = $2 } }
    function med(x, k,    a, i) {
        for (i = 1; i <= c[k]; i++) a[i] = x == "v" ? v[k, i] : u[k, i]
        return median(a, c[k])
    }
    END {
        printf "%-9s %7s %7s %7s %9s %9s   %7s %8s %7s\n", "test", "kvstore", "redis", "r+aof",
               "kv/redis", "kv/r+aof", "ns kv", "ns redis", "ns aof"
        for (i = 1; i <= nt; i++) {
            t = order[i]
            a = med("v", "kv" SUBSEP t); r = med("v", "redis" SUBSEP t)
            f = med("v", "aof" SUBSEP t)
            printf "%-9s %7.1f %7.1f %7.1f %9.3f %9.3f   %7.0f %8.0f %7.0f\n", t, a / 1000,
                   r / 1000, f / 1000, a / r, a / f, med("u", "kv" SUBSEP t),
                   med("u", "redis" SUBSEP t), med("u", "aof" SUBSEP t)
        }
    }' "$tmp/raw.csv"
