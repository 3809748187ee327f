#!/usr/bin/env bash
# listbench.sh [--requests N] [--rounds R] [--engine E] [--no-build] [--server PATH]
# Lists side by side with redis-server 7.0 (issue #44): kvstore-E (default
# undo, TXN_PDOM=1, --threads 1), redis-server with appendfsync always and
# redis-server without persistence, over UNIX sockets, each in turn every
# round, the server on CPU 1 and redis-benchmark on CPU 0:
#   - redis-benchmark -c 50 -t T for T = lpush, rpush in turn, then
#     LRANGE mylist 0 99 (redis-benchmark's LRANGE_100), then -t T for T
#     = lpop, rpop, N requests each at -P 1 and 5 x N at -P 16 (LPUSH
#     and RPUSH grow one list, "mylist", to 2 x the requests, LPOP and
#     RPOP empty it again: -t lrange_100 would count the LPUSHes of its
#     fill in the CPU time);
#   - on one list "bl" filled to S = 10, 1,000 and 100,000 elements of 8
#     bytes: RPOPLPUSH bl bl (a pop and a push, the size stays S) at -P 1
#     and -P 16, and LINDEX bl 0 at -P 1, -c 50, N requests (5 x N at
#     -P 16).
# Every figure is the median of its R runs (default 3). Prints two tables:
# requests/s, and the server's CPU time per request (utime + stime from
# /proc over the test, in ns: other jobs on a shared machine move it less
# than throughput), each with kvstore's ratio to each redis-server (for
# CPU, redis's ns over kvstore's: above 1, kvstore uses less; a clock
# tick is 10 ms, so N sets the CPU figures' resolution, 10 ms / N). N
# defaults to 100000. $BUILD_DIR (default build) holds the binaries;
# --no-build uses them as they are; --server PATH runs that kvstore
# binary instead (a build of another commit, for a comparison before and
# after).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

n=100000
rounds=3
engine=undo
nobuild=
server=
while [ $# -gt 0 ]; do
    case $1 in
    --requests) n=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --engine) engine=$2; shift ;;
    --no-build) nobuild=1 ;;
    --server) server=$2; shift ;;
    *) echo "usage: $0 [--requests N] [--rounds R] [--engine E] [--no-build] [--server PATH]" >&2; exit 2 ;;
    esac
    shift
done

export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
BUILD_DIR=${BUILD_DIR:-build}
[ -n "$nobuild" ] || [ -n "$server" ] || build "$BUILD_DIR"
server=${server:-$BUILD_DIR/bin/kvstore-$engine}

tmp=$(mktemp -d /tmp/listbench-XXXXXX)
aof=$(mktemp -d /dev/shm/listbench-aof-XXXXXX)
pool=/dev/shm/listbench-$$.pool
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp" "$aof"
    rm -f "$pool"
}
trap cleanup EXIT
raw=$tmp/raw.csv # server,test,rps,ns
sock=$tmp/s.sock

wait_sock() {
    for _ in $(seq 400); do
        [ "$(redis-cli -s "$sock" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "listbench: no server on $sock" >&2
    exit 1
}

# fill SIZE: "bl" emptied, then RPUSHes of up to 1,000 elements
fill() {
    redis-cli -s "$sock" del bl >/dev/null
    awk -v s="$1" 'BEGIN { for (i = 0; i < s; i += 1000) {
                               line = "RPUSH bl"
                               for (j = i; j < s && j < i + 1000; j++) line = line sprintf(" e%07d", j)
                               print line } }' | redis-cli -s "$sock" >/dev/null
    [ "$(redis-cli -s "$sock" llen bl)" = "$1" ] || { echo "listbench: fill $1 failed" >&2; exit 1; }
}

# CPU time the server ($pid) has used, in clock ticks
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)

# one NAME TEST REQUESTS redis-benchmark-arguments...: a line of $raw
one() {
    local name=$1 test=$2 reqs=$3 c0 c1 rps
    shift 3
    c0=$(cpu)
    rps=$(taskset -c 0 redis-benchmark -s "$sock" -c 50 -n "$reqs" --csv "$@" |
        tr -d '"' | awk -F, 'NR == 2 { print $2 }')
    c1=$(cpu)
    echo "$name,$test,$rps,$(((c1 - c0) * 1000000000 / hz / reqs))" >>"$raw"
}

bench() { # NAME
    local p s k t
    for p in 1 16; do
        k=$((p == 1 ? n : 5 * n))
        redis-cli -s "$sock" flushall >/dev/null
        for t in lpush rpush lrange_100 lpop rpop; do
            if [ "$t" = lrange_100 ]; then
                one "$1" "P$p LRANGE_100" "$k" -P "$p" LRANGE mylist 0 99
            else
                one "$1" "P$p ${t^^}" "$k" -P "$p" -t "$t"
            fi
        done
    done
    for s in 10 1000 100000; do
        fill "$s"
        for p in 1 16; do
            k=$((p == 16 ? 5 * n : n))
            one "$1" "P$p RPOPLPUSH on $s" "$k" -P "$p" RPOPLPUSH bl bl
        done
        one "$1" "P1 LINDEX 0 on $s" "$n" -P 1 LINDEX bl 0
    done
}

stop() {
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

kv_run() {
    rm -f "$pool"
    taskset -c 1 "$server" --pool "$pool" --unix "$sock" --port 0 --threads 1 \
        >"$tmp/kv.log" 2>&1 &
    pid=$!
    wait_sock
    echo "listbench: kvstore-$engine"
    bench "kvstore-$engine"
    stop
    rm -f "$pool"
}

redis_run() { # NAME redis-server options...
    local name=$1
    shift
    rm -rf "${aof:?}"/*
    taskset -c 1 redis-server --port 0 --unixsocket "$sock" --dir "$aof" --save "" --daemonize no \
        --logfile "$tmp/redis.log" "$@" &
    pid=$!
    wait_sock
    echo "listbench: $name"
    bench "$name"
    stop
}

for round in $(seq "$rounds"); do
    echo "listbench: round $round of $rounds"
    kv_run
    redis_run "redis always" --appendonly yes --appendfsync always
    redis_run "redis none" --appendonly no
done

echo
echo "redis-benchmark -c 50, -n $n at -P 1, $((5 * n)) at -P 16, medians of $rounds rounds;"
echo "kvstore-$engine at TXN_PDOM=1 --threads 1;"
echo "$(redis-server --version | cut -d' ' -f1-3); $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);"
echo "$(date -u +%Y-%m-%d)."
# table COLUMN INVERT TITLE: the medians of $raw's COLUMN (3 requests/s,
# 4 ns), the ratios kvstore / redis (INVERT 1: redis / kvstore)
table() {
    echo
    echo "$3"
    echo
    echo "| test | kvstore-$engine | redis always | redis none | kv/always | kv/none |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    awk -F, -v kv="kvstore-$engine" -v col="$1" -v inv="$2" "$awk_median"'
        function med(k,   i, v) {
            for (i = 1; i <= cnt[k]; i++) v[i] = val[k, i]
            return median(v, cnt[k])
        }
        function ratio(x, y) { return inv ? (x ? y / x : 0) : (y ? x / y : 0) }
        { k = $1 SUBSEP $2; val[k, ++cnt[k]] = $col; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
        END {
            for (i = 1; i <= n; i++) {
                t = order[i]; a = med(kv SUBSEP t); b = med("redis always" SUBSEP t)
                c = med("redis none" SUBSEP t)
                printf "| %s | %.0f | %.0f | %.0f | %.3f | %.3f |\n", t, a, b, c, ratio(a, b), ratio(a, c)
            }
        }' "$raw"
}
table 3 0 "requests/s"
table 4 1 "server CPU per request, ns (ratios: redis's ns / kvstore's)"
