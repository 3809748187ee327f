#!/usr/bin/env bash
# dispatchbench.sh BEFORE AFTER [--rounds R] [--requests N] [--tests LIST]
# Request throughput of two kvstore binaries (BEFORE and AFTER: a build of
# each commit, Release) side by side with redis-server 7.0 (no
# persistence), over UNIX sockets: redis-benchmark -c 50 -P 16 -n N
# (default 1000000) of LIST (redis-benchmark's -t; default SET, GET, INCR,
# MSET of 10 keys and HSET), the server pinned to CPU 1 with --threads 1,
# the client on CPU 0, TXN_PDOM=1. Each round runs the three servers in
# turn (a fresh pool each); every figure is the median of R rounds
# (default 5). Prints thousands of requests/s per test and the ratios
# after/before and after/redis-server, and the server's CPU time per
# request (utime + stime over the test, /proc): on a shared machine the
# CPU time moves less than the throughput does. Waits (at most 10 s) for
# the CPUs to be 90% idle before each test.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

usage="usage: $0 BEFORE AFTER [--rounds R] [--requests N] [--tests LIST]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
before=$(realpath "$1")
after=$(realpath "$2")
shift 2
rounds=5
n=1000000
tests=set,get,incr,mset,hset
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift ;;
    --requests) n=$2; shift ;;
    --tests) tests=$2; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
hz=$(getconf CLK_TCK)

tmp=$(mktemp -d /tmp/dispatchbench-XXXXXX)
pool=/dev/shm/dispatchbench-$$.pool
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
    echo "dispatchbench: no server on $1" >&2
    exit 1
}

settle() {
    local _ u n s id io irq sirq st i0 t0 i=0 idle=0
    while [ $i -lt 20 ]; do
        read -r _ u n s id io irq sirq st _ </proc/stat
        t0=$((u + n + s + id + io + irq + sirq + st)) i0=$id
        sleep 0.5
        read -r _ u n s id io irq sirq st _ </proc/stat
        idle=$(((id - i0) * 100 / (u + n + s + id + io + irq + sirq + st - t0 + 1)))
        [ $idle -lt 90 ] || break
        i=$((i + 1))
    done
}

# CPU time the server ($pid) has used, in clock ticks
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

# run NAME: each test in turn against $tmp/s.sock; a CSV line per test:
# NAME, test, requests/s, the server's CPU time per request in ns
run() {
    wait_sock "$tmp/s.sock"
    local t c0 c1 rps
    for t in ${tests//,/ }; do
        settle
        c0=$(cpu)
        rps=$(taskset -c 0 redis-benchmark -s "$tmp/s.sock" -c 50 -P 16 -n "$n" -t "$t" --csv |
            tr -d '"' | awk -F, 'NR == 2 { print $2 }')
        c1=$(cpu)
        echo "$1,${t^^},$rps,$(((c1 - c0) * 1000000000 / hz / n))" >>"$tmp/raw.csv"
    done
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

for r in $(seq "$rounds"); do
    for which in before after; do
        bin=$before
        [ $which = after ] && bin=$after
        rm -f "$pool"
        taskset -c 1 "$bin" --pool "$pool" --unix "$tmp/s.sock" --port 0 --threads 1 \
            >"$tmp/kv.log" 2>&1 &
        pid=$!
        run "$which"
    done
    taskset -c 1 redis-server --port 0 --unixsocket "$tmp/s.sock" --save "" --appendonly no \
        --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" &
    pid=$!
    run redis
    echo "dispatchbench: round $r of $rounds done" >&2
done

echo "redis-benchmark -c 50 -P 16 -n $n, median of $rounds rounds: thousands of requests/s," \
    "and the server's CPU time per request (ns)"
awk -F, "$awk_median"'
    { k = $1 SUBSEP $2; m = ++c[k]; v[k, m] = $3; u[k, m] = $4; tests[$2] = 1 }
    function med(x, k,    a, i) {
        for (i = 1; i <= c[k]; i++) a[i] = x == "v" ? v[k, i] : u[k, i]
        return median(a, c[k])
    }
    END {
        printf "%-5s %7s %7s %7s %12s %11s   %9s %9s %9s %12s\n", "test", "before", "after",
               "redis", "after/before", "after/redis", "ns before", "ns after", "ns redis",
               "after/before"
        for (t in tests) {
            b = med("v", "before" SUBSEP t); a = med("v", "after" SUBSEP t)
            r = med("v", "redis" SUBSEP t)
            nb = med("u", "before" SUBSEP t); na = med("u", "after" SUBSEP t)
            nr = med("u", "redis" SUBSEP t)
            printf "%-5s %7.0f %7.0f %7.0f %12.3f %11.3f   %9.0f %9.0f %9.0f %12.3f\n", t,
                   b / 1000, a / 1000, r / 1000, a / b, a / r, nb, na, nr, nb ? na / nb : 0
        }
    }' "$tmp/raw.csv"
