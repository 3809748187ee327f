#!/usr/bin/env bash
# getcpu.sh KVSTORE... - server CPU per request of GET -P 16 for each
# kvstore binary given (e.g. one built before a change and one after),
# side by side in one run: ROUNDS (3) rounds, in each every binary in
# turn on a new pool: 100,000 keys of 32 bytes SET by redis-benchmark,
# then `redis-benchmark -t get -P 16 -c 4 -r 100000 -n N` (N: 2,000,000)
# over a UNIX socket; the server's user + system CPU time (from
# /proc/PID/stat) over the GET run divided by N. Prints a line per run,
# then each binary's median in ns per request. One worker thread.
set -euo pipefail
rounds=${ROUNDS:-3}
n=${N:-2000000}
export PMEM_IS_PMEM_FORCE=1
dir=$(mktemp -d /dev/shm/getcpu.XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
declare -A runs
for r in $(seq "$rounds"); do
    for kv in "$@"; do
        rm -f "$dir/pool"
        "$kv" --pool "$dir/pool" --unix "$dir/sock" --port 0 --threads 1 >"$dir/log" 2>&1 &
        pid=$!
        for _ in $(seq 200); do
            [ "$(redis-cli -s "$dir/sock" ping 2>/dev/null)" = PONG ] && break
            sleep 0.05
        done
        redis-benchmark -s "$dir/sock" -t set -P 16 -c 4 -r 100000 -n 400000 -d 32 -q >/dev/null
        c0=$(cpu "$pid")
        redis-benchmark -s "$dir/sock" -t get -P 16 -c 4 -r 100000 -n "$n" -d 32 -q >/dev/null
        c1=$(cpu "$pid")
        ns=$(( (c1 - c0) * 1000000000 / tick / n ))
        echo "round $r $(basename "$kv"): $((c1 - c0)) ticks, $ns ns of server CPU per GET"
        runs[$kv]="${runs[$kv]:-} $ns"
        kill "$pid" && wait "$pid" 2>/dev/null || true
        pid=
    done
done
for kv in "$@"; do
    echo "$(basename "$kv") $kv: median $(echo ${runs[$kv]} | tr ' ' '\n' | sort -n |
        awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }') ns per GET (runs:${runs[$kv]})"
done
