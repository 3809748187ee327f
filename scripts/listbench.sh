#!/usr/bin/env bash
# listbench.sh [--requests N] [--rounds R] [--engine E] [--no-build] [--server PATH]
# Lists side by side with redis-server 7.0 (issue #44): kvstore-E (default
# undo, TXN_PDOM=1), redis-server with appendfsync always and redis-server
# without persistence, over UNIX sockets, each in turn every round:
#   - redis-benchmark -t lpush,rpush,lpop,rpop,lrange_100 -c 50 -n N at -P 1
#     and -P 16 (its LPUSH and RPUSH grow one list, "mylist", to N elements;
#     LRANGE_100 fills its own first);
#   - on one list "bl" filled to S = 10, 1,000 and 100,000 elements of 8
#     bytes: RPOPLPUSH bl bl (a pop and a push, the size stays S) and
#     LINDEX bl 0, -c 50 -P 1, N requests at S = 10 and 1,000, N / 20 at
#     100,000.
# Every figure is the median of its R runs (default 3). Prints a table of
# requests/s with kvstore's ratio to each redis-server. N defaults to
# 20000. $BUILD_DIR (default build) holds the binaries; --no-build uses
# them as they are; --server PATH runs that kvstore binary instead (a
# build of another commit, for a comparison before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

n=20000
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
raw=$tmp/raw.csv # server,test,rps
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

bench() { # NAME
    local p s k
    for p in 1 16; do
        redis-cli -s "$sock" flushall >/dev/null
        redis-benchmark -s "$sock" -t lpush,rpush,lpop,rpop,lrange_100 -c 50 -n "$n" -P "$p" --csv |
            tr -d '"' | awk -F, -v s="$1" -v p="$p" \
                'NR > 1 && $1 !~ /needed/ { print s ",P" p " " $1 "," $2 }' >>"$raw"
    done
    for s in 10 1000 100000; do
        k=$((s == 100000 ? n / 20 : n))
        fill "$s"
        redis-benchmark -s "$sock" -c 50 -n "$k" -P 1 --csv RPOPLPUSH bl bl |
            tr -d '"' | awk -F, -v s="$1" -v z="$s" 'NR > 1 { print s ",RPOPLPUSH on " z "," $2 }' >>"$raw"
        redis-benchmark -s "$sock" -c 50 -n "$k" -P 1 --csv LINDEX bl 0 |
            tr -d '"' | awk -F, -v s="$1" -v z="$s" 'NR > 1 { print s ",LINDEX 0 on " z "," $2 }' >>"$raw"
    done
}

stop() {
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

kv_run() {
    rm -f "$pool"
    "$server" --pool "$pool" --unix "$sock" --port 0 >"$tmp/kv.log" 2>&1 &
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
    redis-server --port 0 --unixsocket "$sock" --dir "$aof" --save "" --daemonize no \
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
echo "redis-benchmark -c 50, -n $n (RPOPLPUSH and LINDEX on 100,000: $((n / 20))), medians of $rounds rounds;"
echo "kvstore-$engine at TXN_PDOM=1; $(redis-server --version | cut -d' ' -f1-3); $(nproc) CPUs,"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)."
echo
echo "| test | kvstore-$engine | redis always | redis none | kv/always | kv/none |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
awk -F, -v kv="kvstore-$engine" '
    function median(k,   c, i, j, t, v) {
        c = cnt[k]
        for (i = 1; i <= c; i++) v[i] = val[k, i] + 0
        for (i = 2; i <= c; i++) {
            t = v[i]
            for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
        return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
    }
    { k = $1 SUBSEP $2; val[k, ++cnt[k]] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
    END {
        for (i = 1; i <= n; i++) {
            t = order[i]; a = median(kv SUBSEP t); b = median("redis always" SUBSEP t)
            c = median("redis none" SUBSEP t)
            printf "| %s | %.0f | %.0f | %.0f | %.3f | %.3f |\n", t, a, b, c, b ? a / b : 0, c ? a / c : 0
        }
    }' "$raw"
