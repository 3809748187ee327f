#!/usr/bin/env bash
# warmrestart.sh [--full] [--seconds S] [--no-build] [ENGINE...]
# A cache after a crash (issue #32). kvstore-<engine> serves memcached's
# protocol; mcwarm (apps/kvstore/mcwarm.c) sets key:0, key:1, ... on one
# connection while memcaslap adds a 90/10 get/set load on 16 more, and
# after S seconds (default 2; --full 10) the server is killed with
# SIGKILL. mcwarm's count of acknowledged sets says which keys must be
# there. The server starts again on the same pool and mcwarm times the
# first served get (from the restart's exec: opening and recovering the
# pool included) and reads every acknowledged key back, values checked.
# The same for memcached 1.6 with its restartable cache (-e FILE on
# /dev/shm, 1 GiB): killed with SIGKILL, and stopped gracefully with
# SIGUSR1 (restarted 2.5 s later: it refuses a cache saved within the
# last second or two). Engines: the persistent ones built (or those named). Writes
# results/warmrestart.md and results/warmrestart.json. $BUILD_DIR (default
# build) holds the binaries; --no-build uses them as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

secs=2
nobuild=
engines=()
while [ $# -gt 0 ]; do
    case $1 in
    --full) secs=10 ;;
    --seconds) secs=$2; shift ;;
    --no-build) nobuild=1 ;;
    -*) echo "usage: $0 [--full] [--seconds S] [--no-build] [ENGINE...]" >&2; exit 2 ;;
    *) engines+=("$1") ;;
    esac
    shift
done

sweep_build "$nobuild"
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=${TXN_PDOM:-1}
bin=$BUILD_DIR/bin
if [ ${#engines[@]} -eq 0 ]; then
    for e in $(built_engines "$BUILD_DIR"); do
        [ "$e" = none ] || engines+=("$e")
    done
fi
for tool in memcached memcaslap; do
    command -v $tool >/dev/null || { echo "warmrestart: $tool missing (bash scripts/main.sh installs it)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/warmrestart-XXXXXX)
pool=/dev/shm/warmrestart-$$.pool
mem=/dev/shm/warmrestart-$$.mem
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp" "$pool" "$mem"*
}
trap cleanup EXIT
mkdir -p results
port=$((20000 + $$ % 20000))


# load SERVER_PID: mcwarm and memcaslap for $secs seconds, then the
# server is stopped by $stop_sig (and reaped); the acknowledged count goes
# to $tmp/acked
load() {
    "$bin/mcwarm" load "$port" 100000000 >"$tmp/acked" &
    local loader=$!
    memcaslap -s "127.0.0.1:$port" -T 1 -c 16 -t 600s >/dev/null 2>&1 &
    local slap=$!
    pids+=("$slap")
    sleep "$secs"
    kill "-$stop_sig" "$1"
    wait "$1" 2>/dev/null || true
    wait "$loader" || true
    kill "$slap" 2>/dev/null || true
    wait "$slap" 2>/dev/null || true
}

rows=()
# measure LABEL HOW START_COMMAND...: load, stop, restart, check
measure() {
    local label=$1 how=$2
    shift 2
    "$@" >"$tmp/server.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    wait_tcp "$port"
    load "$pid"
    local acked
    acked=$(cat "$tmp/acked")
    # memcached refuses to restore a cache saved less than a second or two
    # before it starts ("restart incompatible due to setting for
    # [stop_time]"): it gets the pause, not counted in its time
    [ "$1" = memcached ] && sleep 2.5
    "$@" >>"$tmp/server.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    local out first hits
    out=$("$bin/mcwarm" check "$port" "$acked")
    first=$(echo "$out" | awk '{print $2}')
    hits=$(echo "$out" | awk '{print $4}')
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local ratio
    ratio=$(awk -v h="$hits" -v a="$acked" 'BEGIN { printf "%.4f", a ? h / a : 0 }')
    echo "warmrestart: $label, $how: $acked acknowledged, first get after $first ms, $hits hits ($ratio)"
    rows+=("$label|$how|$acked|$first|$hits|$ratio")
}

for e in "${engines[@]}"; do
    rm -f "$pool"
    stop_sig=KILL
    measure "kvstore-$e" "SIGKILL" "$bin/kvstore-$e" --pool "$pool" --port 0 \
        --memcached-port "$port" --threads 1 --pool-size 2G
    rm -f "$pool"
done
mc=(memcached -p "$port" -U 0 -u root -l 127.0.0.1 -t 1 -m 1024 -e "$mem")
rm -f "$mem"*
stop_sig=KILL
measure "memcached -e" "SIGKILL" "${mc[@]}"
rm -f "$mem"*
stop_sig=USR1
measure "memcached -e" "SIGUSR1 (graceful)" "${mc[@]}"

{
    echo "# Warm restart: memcached's clients after the server stops"
    echo
    echo "$(date -u +%Y-%m-%d), $secs s of load (mcwarm's sets on one connection, memcaslap"
    echo "90/10 on 16 more), then the stop; the server restarted on the same pool or"
    echo "memory file. First get: ms from the restart's exec to the first reply."
    echo "Hit ratio: acknowledged keys read back with their values."
    echo
    echo "| server | stopped by | keys acknowledged | first get (ms) | hits | hit ratio |"
    echo "|---|---|---|---|---|---|"
    for r in "${rows[@]}"; do
        IFS='|' read -r a b c d e f <<<"$r"
        echo "| $a | $b | $c | $d | $e | $f |"
    done
} >results/warmrestart.md
{
    echo "["
    n=0
    for r in "${rows[@]}"; do
        IFS='|' read -r a b c d e f <<<"$r"
        [ $n -gt 0 ] && echo ","
        printf '  {"server": "%s", "stop": "%s", "acknowledged": %s, "first_get_ms": %s, "hits": %s, "hit_ratio": %s}' \
            "$a" "$b" "$c" "$d" "$e" "$f"
        n=$((n + 1))
    done
    echo
    echo "]"
} >results/warmrestart.json
echo "warmrestart: results/warmrestart.md"
