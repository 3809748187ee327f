#!/usr/bin/env bash
# mcbench.sh [--full] [--seconds S] [--rounds R] [--no-build] [ENGINE...]
# memcaslap (libmemcached-tools) against memcached 1.6 and against
# kvstore-<engine>'s memcached port, side by side (issue #32): one worker
# thread each (memcached -t 1, kvstore --threads 1) pinned to the last CPU,
# memcaslap on the first with 50 connections (-T 1 -c 50), 90/10 and 50/50
# get/set mixes (keys of 64 bytes, values of 1,024), S seconds a run
# (default 5; --full 30), every server in turn, R rounds (default 3);
# TXN_PDOM=1. Writes results/memcached.md (median ops/s and the median of
# the per-round ratios to memcached) and results/memcached.json.
# Engines: the persistent ones built, pmdk aside (or those named).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

secs=5
rounds=3
nobuild=
engines=()
while [ $# -gt 0 ]; do
    case $1 in
    --full) secs=30 ;;
    --seconds) secs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --no-build) nobuild=1 ;;
    -*) echo "usage: $0 [--full] [--seconds S] [--rounds R] [--no-build] [ENGINE...]" >&2; exit 2 ;;
    *) engines+=("$1") ;;
    esac
    shift
done
sweep_build "$nobuild"
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=${TXN_PDOM:-1}
[ ${#engines[@]} -gt 0 ] || read -ra engines <<<"$(cache_engines "$BUILD_DIR")"
server_scratch mcbench
mkdir -p results
port=$((20500 + $$ % 20000))
last=$(($(nproc) - 1))
cat >"$tmp/5050" <<'EOF'
key
64 64 1
value
1024 1024 1
cmd
0 0.5
1 0.5
EOF
cat >"$tmp/9010" <<'EOF'
key
64 64 1
value
1024 1024 1
cmd
0 0.1
1 0.9
EOF


# run NAME MIX command...: one server, one memcaslap run; appends
# "round name mix ops" to $tmp/raw
run() {
    local name=$1 mix=$2
    shift 2
    taskset -c "$last" "$@" >"$tmp/server.log" 2>&1 &
    pid=$!
    wait_tcp "$port"
    local tps
    tps=$(taskset -c 0 memcaslap -s "127.0.0.1:$port" -T 1 -c 50 -t "${secs}s" -F "$tmp/$mix" 2>&1 |
        awk '/^Run time/ { for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i + 1) }')
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    rm -f "$pool"
    echo "mcbench: round $round, $name, $mix: ${tps:-?} ops/s"
    echo "$round $name $mix ${tps:-0}" >>"$tmp/raw"
}

for round in $(seq "$rounds"); do
    for mix in 9010 5050; do
        run memcached $mix memcached -p "$port" -U 0 -u root -l 127.0.0.1 -t 1 -m 1024
        for e in "${engines[@]}"; do
            run "kvstore-$e" $mix "$BUILD_DIR/bin/kvstore-$e" --pool "$pool" --port 0 \
                --memcached-port "$port" --threads 1 --pool-size 2G
        done
    done
done

# medians, and the median of each round's ratio to memcached's run
awk -v secs="$secs" -v rounds="$rounds" -v day="$(date -u +%Y-%m-%d)" "$awk_median"'
{ ops[$2, $3, $1] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
END {
    print "# memcaslap: kvstore beside memcached 1.6\n"
    printf "%s, memcaslap -T 1 -c 50, %d s a run, %d rounds, one server thread each,\n", day, secs, rounds
    print "keys of 64 bytes, values of 1,024; ops/s (medians) and the median of the"
    print "per-round ratios to memcached.\n"
    print "| server | 90/10 ops/s | ratio | 50/50 ops/s | ratio |"
    print "|---|---|---|---|---|"
    for (s = 1; s <= ns; s++) {
        line = "| " order[s]
        for (m = 0; m < 2; m++) {
            mix = m ? "5050" : "9010"
            n = 0; k = 0
            for (r = 1; r <= rounds; r++) {
                key = order[s] SUBSEP mix SUBSEP r
                ref = "memcached" SUBSEP mix SUBSEP r
                if (key in ops) v[++n] = ops[key]
                if (key in ops && ref in ops && ops[ref] > 0) q[++k] = ops[key] / ops[ref]
            }
            line = line sprintf(" | %.0f | %.2f", n ? median(v, n) : 0, k ? median(q, k) : 0)
        }
        print line " |"
    }
}' "$tmp/raw" >results/memcached.md
awk 'BEGIN { print "[" } { printf "%s  {\"round\": %s, \"server\": \"%s\", \"mix\": \"%s\", \"ops\": %s}", (NR > 1 ? ",\n" : ""), $1, $2, $3, $4 } END { print "\n]" }' \
    "$tmp/raw" >results/memcached.json
cat results/memcached.md
