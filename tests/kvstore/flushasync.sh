#!/usr/bin/env bash
# flushasync.sh SERVER - FLUSHALL ASYNC of 100,000 keys: first SIGKILL
# right after its OK, --check, a restart: DBSIZE 0, frees pending, resumed
# to 0, and a second fill of the same keys that needs no larger pool (the
# space came back). Then a whole one: right after its OK, DBSIZE and
# used_memory 0, KEYS and SCAN find none, an old key's name can be SET
# again, and INFO's lazyfree_pending_objects is not 0 (a flag, not a
# time: an eager flush leaves 0; the background thread may have freed a
# few thousand keys already); drained, refilled in the same pool. Last,
# SIGKILL while two workers write new keys and the old table is freed.
# Skips (77) without redis-cli.
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve.sh"
resp_test kvflushasync
start() {
    serve "$dir/kv.log" --pool "$pool" --pool-size 256M --unix "$sock" --port 0 \
        --threads 1 || exit 1
    pids=$pid
}
info() { cli info "$1" | tr -d '\r' | sed -n "s/^$2://p"; }
fill() {
    seq 100000 | awk '{ printf "SET key:%d v%0100d\r\n", $1, $1 }' |
        redis-cli -s "$sock" --pipe >"$dir/pipe" 2>&1 || bad "fill: $(tail -2 "$dir/pipe")"
}
# wait_drained: lazyfree_pending_objects 0 within 60 s
wait_drained() {
    local p
    for _ in $(seq 600); do
        p=$(info memory lazyfree_pending_objects)
        [ "$p" = 0 ] && return 0
        sleep 0.1
    done
    bad "lazyfree_pending_objects still $p after 60 s"
}
start
fill
[ "$(cli dbsize)" = 100000 ] || bad "DBSIZE $(cli dbsize) after the fill"
size1=$(info memory pool_size)
# SIGKILL right after the OK, the frees pending; --check, restart
[ "$(cli flushall async)" = OK ] || bad "FLUSHALL ASYNC did not answer OK"
kill -9 "$pid" && wait "$pid" 2>/dev/null
"$server" --pool "$pool" --check >"$dir/check" 2>&1 || bad "--check: $(cat "$dir/check")"
start
[ "$(cli dbsize)" = 0 ] || bad "DBSIZE $(cli dbsize) after the restart"
resumed=$(info memory lazyfree_pending_objects)
[ "$resumed" -gt 0 ] || bad "nothing pending after the restart"
wait_drained
freed=$(info stats lazyfreed_objects)
[ "$freed" -ge 50000 ] || bad "lazyfreed_objects $freed after the restart"
fill
size2=$(info memory pool_size)
[ "$size2" -le "$size1" ] || bad "the pool grew from $size1 to $size2 bytes after the restart"
# the keyspace empty at once
[ "$(cli flushall async)" = OK ] || bad "FLUSHALL ASYNC did not answer OK"
pending=$(info memory lazyfree_pending_objects)
[ "$pending" -gt 0 ] || bad "lazyfree_pending_objects $pending right after FLUSHALL ASYNC"
[ "$(cli dbsize)" = 0 ] || bad "DBSIZE $(cli dbsize) after FLUSHALL ASYNC"
[ "$(info memory used_memory)" = 0 ] || bad "used_memory $(info memory used_memory)"
[ -z "$(cli keys '*')" ] || bad "KEYS * finds $(cli keys '*' | head -3)"
[ "$(cli scan 0 count 100000 | sed 1d | grep -c .)" = 0 ] || bad "SCAN finds keys"
[ "$(cli exists key:7)" = 0 ] || bad "an old key still exists"
[ "$(cli set key:7 new)" = OK ] && [ "$(cli get key:7)" = new ] ||
    bad "an old key's name cannot be set again"
wait_drained
fill
size3=$(info memory pool_size)
[ "$size3" -le "$size1" ] || bad "the pool grew from $size1 to $size3 bytes: space not back"
[ "$(cli get key:7 | cut -c1-6)" = v00000 ] || bad "key:7 not refilled"
cli shutdown nosave >/dev/null 2>&1
wait "$pid" 2>/dev/null
"$server" --pool "$pool" --check >"$dir/check" 2>&1 || bad "--check at the end: $(cat "$dir/check")"
# Two workers, and two clients writing new keys while the old table is
# freed: SIGKILL during both, then --check, and every SET acknowledged
# (redis-cli answers one at a time: its OK lines are the acknowledged
# prefix) reads its value after the restart.
two() {
    serve "$dir/kv.log" --pool "$pool" --pool-size 256M --unix "$sock" --port 0 \
        --threads 2 || exit 1
    pids=$pid
}
# The frees run in the background at their own pace: on a loaded machine
# the writers' first 300 acknowledgements can come after the last of
# them, and then the kill tests nothing of the two together. Such a round
# is taken again (its SETs stay: the same keys and values), 3 at most.
two
for round in 1 2 3; do
    fill
    [ "$(cli flushall async)" = OK ] || bad "FLUSHALL ASYNC did not answer OK"
    writers=
    for w in 1 2; do
        seq 200000 | awk -v w=$w '{ print "SET w" w ":" $1 " " $1 }' |
            redis-cli -s "$sock" >"$dir/acks$w" 2>&1 &
        writers="$writers $!"
    done
    for _ in $(seq 200); do # until both have 300 acknowledged (10 s at most)
        [ "$(grep -c '^OK' "$dir/acks1")" -ge 300 ] &&
            [ "$(grep -c '^OK' "$dir/acks2")" -ge 300 ] && break
        sleep 0.05
    done
    during=$(info memory lazyfree_pending_objects)
    kill -9 "$pid" && wait "$pid" 2>/dev/null
    kill $writers 2>/dev/null
    wait $writers 2>/dev/null
    [ "$during" -gt 0 ] && break
    echo "round $round: the frees were over before the writers were killed; again"
    "$server" --pool "$pool" --check >"$dir/check" 2>&1 ||
        bad "--check after round $round's kill: $(cat "$dir/check")"
    two
done
[ "$during" -gt 0 ] || bad "the frees were over before the writers were killed ($during pending), 3 rounds"
"$server" --pool "$pool" --check >"$dir/check" 2>&1 || bad "--check after the second kill: $(cat "$dir/check")"
two
acked=
for w in 1 2; do
    n=$(grep -c '^OK' "$dir/acks$w")
    acked="$acked $n"
    [ "$n" -ge 300 ] || bad "writer $w: $n SETs acknowledged before the kill"
    got=$(seq "$n" | awk -v w=$w '{ print "GET w" w ":" $1 }' | redis-cli -s "$sock" |
        awk '$1 != NR { bad++ } END { print bad + 0 }')
    [ "$got" = 0 ] || bad "writer $w: $got of $n acknowledged SETs lost or wrong"
done
wait_drained
cli shutdown nosave >/dev/null 2>&1
wait "$pid" 2>/dev/null
"$server" --pool "$pool" --check >"$dir/check" 2>&1 || bad "--check at the end: $(cat "$dir/check")"
echo "flushasync $(basename "$server"): $resumed pending after SIGKILL and restart," \
    "$pending right after the OK; pool $size1, $size2, $size3 bytes;" \
    "two writers:$acked SETs acknowledged, $during frees pending at the kill"
exit $fail
