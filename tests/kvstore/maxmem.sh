#!/usr/bin/env bash
# maxmem.sh SERVER - --max-memory counts a big hash's element table: a
# server with --max-memory 1M, HSETs of 100-byte values into one hash (a
# table past 512 fields, t_dict.c) in batches of 1,000 until one is
# refused with Redis's OOM error, which must come before 20,000 fields (2
# MB of values); INFO used_memory then passes the limit by at most one
# field's node. HDEL (not refused: it frees) of half the fields brings it
# below and HSET is taken again; a restart counts the same bytes. Then
# under allkeys-lru more HSETs evict (evicted_keys > 0) instead of being
# refused. Before the tables were counted, no HSET was ever refused: the
# bytes stayed those of the key's node.
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve.sh"
resp_test kvmaxmem
start() {
    serve "$dir/kv.log" --pool "$pool" --pool-size 64M --unix "$sock" --port 0 --threads 1 \
        --max-memory 1M || exit 1
    pids=$pid
}
# fill KEY FROM: batches of 1,000 HSETs from field FROM on, until a reply
# is an error; the field count reached in $fields
fill() {
    local key=$1 b
    for ((b = $2 / 1000; b < 20; b++)); do
        seq $((b * 1000)) $((b * 1000 + 999)) |
            awk -v k="$key" '{ printf "HSET %s f%d %0100d\n", k, $1, $1 }' | cli >"$dir/out"
        grep -m1 -v '^[01]$' "$dir/out" >"$dir/err" && break
    done
    fields=$(cli hlen "$key")
}
limit=1048576
start
fill big 0
nfields=$fields
[ "$(cat "$dir/err")" = "OOM command not allowed when used memory > 'maxmemory'." ] ||
    bad "no OOM error after $fields fields: '$(cat "$dir/err")'"
[ "$(cli object encoding big)" = hashtable ] || bad "big is not a table"
u=$(used)
[ "$u" -gt $limit ] && [ "$u" -lt $((limit + 1024)) ] ||
    bad "used_memory $u after the refusal (limit $limit)"
# HDEL is not refused, and frees
seq 0 2 "$fields" | sed 's/^/f/' | xargs redis-cli -s "$sock" hdel big >/dev/null
u2=$(used)
[ "$u2" -lt $((limit * 3 / 4)) ] || bad "used_memory $u2 after HDEL of half the fields"
[ "$(cli hset big again 1)" = 1 ] || bad "HSET refused below the limit"
# a restart counts the table's bytes again
kill -9 "$pid" && wait "$pid" 2>/dev/null
start
u3=$(used)
[ "$u3" -ge "$u2" ] && [ "$u3" -lt $((u2 + 1024)) ] ||
    bad "used_memory $u3 after a restart, $u2 before (and one HSET)"
# allkeys-lru: a write past the limit evicts instead
cli config set maxmemory-policy allkeys-lru >/dev/null
for i in $(seq 100); do echo "SET s:$i x"; done | cli >/dev/null
fill big2 0
ev=$(cli info stats | tr -d '\r' | sed -n 's/^evicted_keys://p')
[ "$ev" -gt 0 ] || bad "allkeys-lru evicted nothing"
grep -q OOM "$dir/err" && bad "allkeys-lru refused: $(cat "$dir/err")"
echo "maxmem $(basename "$server"): OOM after $nfields fields, used_memory $u," \
    "$u2 after HDEL, $u3 after restart; allkeys-lru: $ev keys evicted"
exit $fail
