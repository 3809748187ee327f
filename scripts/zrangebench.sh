#!/usr/bin/env bash
# zrangebench.sh [--requests N] [--members M] KVSTORE[:N]...
# Range reads of one large sorted set: M members (default 100,000, scores
# 0..M-1, "m:<i>"), then redis-benchmark -c 10 -P 1 -n N (default 20,000)
# of ZRANGE z 0 9, ZCOUNT z M/3 2M/3 and ZRANGEBYSCORE z M/2 +inf LIMIT
# 0 10, against redis-server 7.0 (no persistence) and each KVSTORE in turn
# (a fresh pool each; KVSTORE:N runs N requests a test on it, for a slow
# one), over a UNIX socket, the server pinned to CPU 1
# with --threads 1, the client to CPU 0, TXN_PDOM=1. Prints requests/s and
# each server's CPU time per request (utime + stime over the test, /proc),
# which other jobs on a shared machine move less than the throughput, and
# the ratio of each KVSTORE's CPU time to redis-server's.
set -euo pipefail
cd "$(dirname "$0")/.."
n=20000
m=100000
while [ $# -gt 0 ]; do
    case $1 in
    --requests) n=$2; shift ;;
    --members) m=$2; shift ;;
    -*) echo "usage: $0 [--requests N] [--members M] KVSTORE..." >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
[ $# -gt 0 ] || { echo "usage: $0 [--requests N] [--members M] KVSTORE..." >&2; exit 2; }
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
hz=$(getconf CLK_TCK)
. scripts/pipelib.sh
pipe_init zrangebench
sock=$dir/sock
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

tests=("ZRANGE z 0 9" "ZCOUNT z $((m / 3)) $((2 * m / 3))"
    "ZRANGEBYSCORE z $((m / 2)) +inf LIMIT 0 10")
# run NAME N: fill the set, then N requests of each test; a line per test
run() {
    pipe_wait "$1"
    awk -v m="$m" 'BEGIN { for (i = 0; i < m; i += 1000) { l = "ZADD z"
        for (j = i; j < i + 1000 && j < m; j++) l = l " " j " m:" j; print l } }' |
        redis-cli -s "$sock" >/dev/null
    local card enc t c0 c1 rps n=$2
    card=$(redis-cli -s "$sock" ZCARD z)
    enc=$(redis-cli -s "$sock" OBJECT ENCODING z)
    for t in "${tests[@]}"; do
        c0=$(cpu)
        # shellcheck disable=SC2086
        rps=$(taskset -c 0 redis-benchmark -s "$sock" -c 10 -P 1 -n "$n" --csv $t |
            tr -d '"' | awk -F, 'NR == 2 { print $2 }')
        c1=$(cpu)
        printf '%-34s %-38s %8s %9.0f %10d   (%s members, %s)\n' "$1" "$t" "$n" "$rps" \
            $(((c1 - c0) * 1000000000 / hz / n)) "$card" "$enc"
        echo "$1|$t|$(((c1 - c0) * 1000000000 / hz / n))" >>"$dir/ns"
    done
    pipe_stop
}

printf '%-34s %-38s %8s %9s %10s\n' server test requests "req/s" "CPU ns/req"
taskset -c 1 redis-server --port 0 --unixsocket "$sock" --save "" --appendonly no \
    --dir "$dir" --daemonize no --logfile "$dir/redis.log" &
pid=$!
run redis-server "$n"
for arg in "$@"; do
    kv=${arg%%:*}
    kn=$n
    [ "$kv" = "$arg" ] || kn=${arg##*:}
    rm -f "$dir/pool"
    taskset -c 1 "$kv" --pool "$dir/pool" --unix "$sock" --port 0 --threads 1 --pool-size 1G \
        >"$dir/kv.log" 2>&1 &
    pid=$!
    run "$kv" "$kn"
done
echo "CPU time per request over redis-server's:"
awk -F'|' '$1 == "redis-server" { r[$2] = $3; next }
    { printf "  %-34s %-38s %8.2fx\n", $1, $2, r[$2] ? $3 / r[$2] : 0 }' "$dir/ns"
