#!/usr/bin/env bash
# set_kill.sh KVSTORE [ROUNDS] - SIGKILL while sets and hashes change:
# nothing acknowledged lost, nothing never sent visible, no SMOVE half
# done. Each round starts KVSTORE (a kvstore-<engine> binary) on the same
# pool, fills a:R with N members x1..xN, then one redis-cli sends, one at a
# time, SADD s:R mI, SMOVE a:R b:R xI and HSET h:R fI I for I = 1, 2, ...
# until the server is killed with SIGKILL 100 to 600 ms in. After the
# restart: every SADD, SMOVE and HSET whose reply came holds (mI in s:R,
# xI in b:R, fI = I in h:R), s:R and h:R have no member or field that was
# not sent, a:R and b:R are disjoint and together x1..xN, and the sets and
# hashes of every earlier round are as that round left them. Both forms
# are under the kills: a:R (N members) and b:R are element tables
# (t_dict.c) from the start or soon, s:R and h:R are packed until their
# 129th member or field and converted then, in that SADD's or HSET's
# transaction. At the end
# --check verifies the store. ROUNDS default 20; prints a line per
# failure and a summary, exits 1 on a failure.
set -uo pipefail
kv=$(realpath "$1")
rounds=${2:-20}
n=2000
export PMEM_IS_PMEM_FORCE=1
dir=$(mktemp -d /tmp/set_kill-XXXXXX)
pool=/dev/shm/set_kill-$$.pool
sock=$dir/kv.sock
pid=
fail=0
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
    rm -f "$pool"
}
trap cleanup EXIT
bad() { echo "FAIL round $r: $*"; fail=$((fail + 1)); }
cli() { redis-cli -s "$sock" "$@"; }

start() {
    "$kv" --pool "$pool" --unix "$sock" --port 0 --threads 1 >>"$dir/kv.log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do
        # (hashes convert past 128 fields, as sets do, not Redis's 512)
        [ "$(cli ping 2>/dev/null)" = PONG ] &&
            cli config set hash-max-listpack-entries 128 >/dev/null && return 0
        sleep 0.05
    done
    echo "set_kill: the server did not start (round $r)"
    tail -5 "$dir/kv.log"
    exit 1
}

# check R ACKED: the sets of round R after ACKED replies of its stream
check() {
    local r=$1 acked=$2 adds moves hsets sa sb sent
    adds=$(((acked + 2) / 3)) moves=$(((acked + 1) / 3)) hsets=$((acked / 3))
    [ "$moves" -le $n ] || moves=$n
    # the acknowledged SADDs and SMOVEs are there
    if [ "$adds" -gt 0 ]; then
        [ "$(cli smismember "s:$r" $(seq -f 'm%.0f' 1 "$adds") | grep -c '^1$')" = "$adds" ] ||
            bad "an acknowledged SADD of s:$r is lost ($adds acknowledged)"
    fi
    if [ "$moves" -gt 0 ]; then
        [ "$(cli smismember "b:$r" $(seq -f 'x%.0f' 1 "$moves") | grep -c '^1$')" = "$moves" ] ||
            bad "an acknowledged SMOVE to b:$r is lost ($moves acknowledged)"
    fi
    # s:R holds only members sent: at most one past the acknowledged
    sent=$(cli smembers "s:$r" | sed 's/^m//' | sort -n | tail -1)
    [ -z "$sent" ] || [ "$sent" -le $((adds + 1)) ] ||
        bad "s:$r holds m$sent, never acknowledged nor in flight ($adds acknowledged)"
    # the acknowledged HSETs are there with their values; h:R holds only
    # fields sent (the one in flight, if any, with its value)
    if [ "$hsets" -gt 0 ]; then
        [ "$(cli hmget "h:$r" $(seq -f 'f%.0f' 1 "$hsets") | paste -sd' ')" = \
          "$(seq 1 "$hsets" | paste -sd' ')" ] ||
            bad "an acknowledged HSET of h:$r is lost or wrong ($hsets acknowledged)"
    fi
    [ "$(cli hlen "h:$r")" -le $((hsets + 1)) ] &&
        cli hgetall "h:$r" | paste - - | awk -v most=$((hsets + 1)) \
            '{ i = substr($1, 2) + 0; if (i < 1 || i > most || $2 != i) bad = 1 } END { exit bad }' ||
        bad "h:$r holds a field never acknowledged nor in flight ($hsets acknowledged)"
    # no SMOVE half done: a and b disjoint, together x1..xN
    sa=$(cli scard "a:$r") sb=$(cli scard "b:$r")
    [ $((sa + sb)) -eq $n ] && [ "$(cli sintercard 2 "a:$r" "b:$r")" = 0 ] &&
        [ "$(cli sunion "a:$r" "b:$r" | sort | uniq | wc -l)" -eq $n ] ||
        bad "a:$r ($sa) and b:$r ($sb) are not a split of the $n members"
    sent=$(cli smembers "b:$r" | sed 's/^x//' | sort -n | tail -1)
    [ -z "$sent" ] || [ "$sent" -le $((moves + 1)) ] ||
        bad "b:$r holds x$sent, never moved nor in flight ($moves acknowledged)"
}

declare -a acked_of
rm -f "$pool"
for r in $(seq "$rounds"); do
    start
    for ((q = 1; q < r; q++)); do check "$q" "${acked_of[$q]}"; done
    seq -f 'x%.0f' 1 $n | xargs redis-cli -s "$sock" sadd "a:$r" >/dev/null
    for ((i = 1; i <= 100000; i++)); do
        echo "SADD s:$r m$i"
        echo "SMOVE a:$r b:$r x$i"
        echo "HSET h:$r f$i $i"
    done | cli >"$dir/acks" 2>/dev/null &
    feeder=$!
    sleep "0.$((RANDOM % 5 + 1))$((RANDOM % 10))"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    wait "$feeder" 2>/dev/null
    pid=
    # a reply is one line (1 or 0: SMOVE past the N members answers 0;
    # HSET 1)
    acked_of[$r]=$(wc -l <"$dir/acks")
    start
    check "$r" "${acked_of[$r]}"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    pid=
done
"$kv" --pool "$pool" --check >"$dir/check" 2>&1 || { r=end; bad "--check: $(tail -1 "$dir/check")"; }
echo "set_kill $(basename "$kv"): $rounds kills, replies acknowledged per round:" \
    "${acked_of[*]}; $fail failures"
[ "$fail" -eq 0 ]
