#!/usr/bin/env bash
# mchit.sh [--seconds S] [--pool-size SIZE] [--no-build] [ENGINE...]
# Hit ratios under memory pressure (issue #41): memcaslap 90/10 get/set
# against memcached 1.6 with -m 64 and against kvstore-<engine>'s
# memcached port with --max-memory 64M (a pool of SIZE, default 256M;
# near 64M, the pool itself fills and values of one size need the room
# that evicted values of another size left), side by side.
# Values of mixed sizes (half 100-400 bytes, 30% 1,000-3,000, 20%
# 5,000-10,000), keys of 64, 16 connections with a window of 40k keys
# each: far more than 64 MiB, so both evict. One server thread each, S
# seconds a run (default 20). Prints get hits / gets for every server and
# the ratio to memcached's. Engines: the persistent ones built, pmdk
# aside (or those named); BUILD_DIR picks the build (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

secs=20
psize=256M
nobuild=
engines=()
while [ $# -gt 0 ]; do
    case $1 in
    --seconds) secs=$2; shift ;;
    --pool-size) psize=$2; shift ;;
    --no-build) nobuild=1 ;;
    -*) echo "usage: $0 [--seconds S] [--pool-size SIZE] [--no-build] [ENGINE...]" >&2; exit 2 ;;
    *) engines+=("$1") ;;
    esac
    shift
done
sweep_build "$nobuild"
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=${TXN_PDOM:-1}
[ ${#engines[@]} -gt 0 ] || read -ra engines <<<"$(cache_engines "$BUILD_DIR")"
server_scratch mchit
port=$((20500 + $$ % 20000))
cat >"$tmp/mix" <<'EOF'
key
64 64 1
value
100 400 0.5
1000 3000 0.3
5000 10000 0.2
cmd
0 0.1
1 0.9
EOF

# run NAME command...: one server, one memcaslap run; prints and keeps
# "name gets misses"
run() {
    local name=$1
    shift
    "$@" >"$tmp/server.log" 2>&1 &
    pid=$!
    wait_tcp "$port"
    memcaslap -s "127.0.0.1:$port" -T 1 -c 16 -w 40k -t "${secs}s" -F "$tmp/mix" >"$tmp/out" 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    rm -f "$pool"
    local gets misses
    gets=$(awk '/^cmd_get:/ { print $2 }' "$tmp/out")
    misses=$(awk '/^get_misses:/ { print $2 }' "$tmp/out")
    echo "$name ${gets:-0} ${misses:-0}" >>"$tmp/raw"
}

run memcached memcached -p "$port" -U 0 -u root -l 127.0.0.1 -t 1 -m 64
for e in "${engines[@]}"; do
    run "kvstore-$e" "$BUILD_DIR/bin/kvstore-$e" --pool "$pool" --port 0 --memcached-port "$port" \
        --threads 1 --pool-size "$psize" --max-memory 64M
done
awk -v secs="$secs" -v psize="$psize" -v day="$(date -u +%Y-%m-%d)" '
{ hit = $2 ? 1 - $3 / $2 : 0; if (NR == 1) ref = hit
  row[NR] = sprintf("| %s | %d | %d | %.3f | %.2f |", $1, $2, $3, hit, ref ? hit / ref : 0) }
END {
    printf "%s, memcaslap -T 1 -c 16 -w 40k, %d s, 90/10 get/set, 64 MiB, pool %s\n\n", day, secs, psize
    print "| server | gets | misses | hit ratio | to memcached |"
    print "|---|---|---|---|---|"
    for (i = 1; i <= NR; i++) print row[i]
}' "$tmp/raw"
