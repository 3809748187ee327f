#!/usr/bin/env bash
# tpcc_kill.sh TPCC [ROUNDS]: SIGKILL tpcc-<engine> (the pmtx VFS, two
# terminals) at a random moment ROUNDS times (TPCC_KILLS, default 20) on
# one database; after each kill the database must open, pass TPC-C's
# consistency conditions 1-4 and integrity_check, and hold every New-Order
# and Payment acknowledged in any round so far (tpcc --check-only --acks).
# A small scale (2,000 items, 300 customers a district) keeps a check
# under a second.
set -euo pipefail
tpcc=$1
rounds=${2:-${TPCC_KILLS:-20}}
dir=$(mktemp -d /dev/shm/tpcc-kill.XXXXXX)
trap 'rm -rf "$dir"' EXIT
db=$dir/tpcc.db
acks=$dir/acks
: >"$acks"
# the database grows by about 0.5 MB a round on a loaded host; on an idle
# one a round runs more transactions (redo filled 32 + 20 MB in round 20):
# room for 3 MB a round
"$tpcc" --db "$db" --load-only --items 2000 --customers 300 --pool-mb $((32 + 3 * rounds)) >/dev/null
for ((i = 1; i <= rounds; i++)); do
    "$tpcc" --db "$db" --seconds 600 --terminals 2 --acks "$acks" --seed "$i" \
        >"$dir/run.out" 2>&1 &
    pid=$!
    # 50 to 550 ms: some kills land while the pool opens, most mid-run
    sleep "0.$(printf '%03d' $((50 + RANDOM % 500)))"
    if ! kill -KILL "$pid" 2>/dev/null; then
        echo "round $i: tpcc ended before its kill:"
        cat "$dir/run.out"
        exit 1
    fi
    wait "$pid" 2>/dev/null || true
    if ! out=$("$tpcc" --db "$db" --check-only --acks "$acks" 2>&1); then
        echo "round $i: the database after the kill fails its checks:"
        echo "$out"
        echo "the killed run said:"
        cat "$dir/run.out"
        exit 1
    fi
done
n=$(wc -l <"$acks")
echo "$rounds kills: $n acknowledged transactions, all there; consistent, integrity ok"
# a test that saw nothing acknowledged checked nothing
if ((n < rounds)); then
    echo "too few acknowledged transactions ($n) for $rounds rounds"
    exit 1
fi
