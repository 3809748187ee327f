#!/usr/bin/env bash
# policies.sh SERVER - maxmemory-policy past the limit, each policy on the
# same keys: 200 without expiry (p:1..200) and 16 with one (v:J expires in
# 1000 + J s, set in a scrambled order: a sample of the keyspace, 16
# candidates, sees them all), the limit set to what they use, then 8 new
# keys written (w:*), each one past the limit.
#   volatile-*: no p: key ever goes; 100 more writes take every v: key and
#   are then refused with Redis's OOM error; volatile-ttl: the v: keys left
#   after the first 8 writes are those expiring last (a suffix of J).
#   allkeys-*: nothing refused, the keys' bytes back under the limit but
#   for the last write; allkeys-lfu (lfu-log-factor 0): p:1..20, each read
#   20 times, all kept.
# And OBJECT FREQ under allkeys-lfu as Redis's: 5 after SET (or HSET of a
# new hash kept as a table), one more a GET
# with lfu-log-factor 0, Redis's error under another policy. About 1 s
# (incll: a few).
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve.sh"
resp_test kvpolicies
serve "$dir/kv.log" --pool "$pool" --pool-size 64M --unix "$sock" --port 0 --threads 1 || exit 1
pids=$pid
val=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
# count PATTERN: keys matching PATTERN
count() { cli --scan --pattern "$1" | wc -l; }
# writes FROM TO: SET w:FROM..w:TO; the errors to $dir/err
writes() {
    seq "$1" "$2" | awk -v v=$val '{ printf "SET w:%d %s\n", $1, v }' | cli >"$dir/out"
    grep -v '^OK$' "$dir/out" >"$dir/err"
}
summary=
for policy in volatile-lru volatile-lfu volatile-random volatile-ttl allkeys-lru allkeys-lfu \
    allkeys-random; do
    cli flushall >/dev/null
    cli config set maxmemory 0 >/dev/null
    cli config set maxmemory-policy "$policy" lfu-log-factor 0 >/dev/null
    seq 200 | awk -v v=$val '{ printf "SET p:%d %s\n", $1, v }' | cli >/dev/null
    for j in $(seq 0 15); do echo $(((j * 29) % 16 + 1)); done |
        awk -v v=$val '{ printf "SET v:%d %s EX %d\n", $1, v, 1000 + $1 }' | cli >/dev/null
    if [ "$policy" = allkeys-lfu ]; then
        for r in $(seq 20); do seq 20 | sed 's/^/GET p:/'; done | cli >/dev/null
    fi
    limit=$(used)
    cli config set maxmemory "$limit" >/dev/null
    writes 1 8
    u=$(used)
    case $policy in
    volatile-*)
        [ -s "$dir/err" ] && bad "$policy: refused while keys with an expiry were left: $(head -1 "$dir/err")"
        [ "$(count 'p:*')" = 200 ] || bad "$policy: $(count 'p:*') of 200 keys without expiry left"
        v=$(count 'v:*')
        [ "$v" -lt 16 ] || bad "$policy: no key with an expiry evicted"
        if [ "$policy" = volatile-ttl ]; then
            # the keys left: v:(17 - v) .. v:16
            for j in $(seq 16); do
                e=$(cli exists "v:$j")
                [ "$e" = $((j > 16 - v)) ] || { bad "volatile-ttl: v:$j (expiry in $((1000 + j)) s) exists=$e, $v left"; break; }
            done
        fi
        writes 9 108
        grep -qx "OOM command not allowed when used memory > 'maxmemory'." "$dir/err" ||
            bad "$policy: no OOM error once no key with an expiry is left"
        [ "$(count 'v:*')" = 0 ] || bad "$policy: OOM while $(count 'v:*') keys with an expiry were left"
        [ "$(count 'p:*')" = 200 ] || bad "$policy: $(count 'p:*') of 200 keys without expiry left"
        summary="$summary $policy:$((16 - v))"
        ;;
    allkeys-*)
        [ -s "$dir/err" ] && bad "$policy: refused: $(head -1 "$dir/err")"
        [ "$u" -le $((limit + 200)) ] || bad "$policy: used_memory $u, limit $limit"
        left=$(cli dbsize)
        [ "$left" -lt 224 ] || bad "$policy: nothing evicted ($left keys)"
        if [ "$policy" = allkeys-lfu ]; then
            for j in $(seq 20); do
                [ "$(cli exists "p:$j")" = 1 ] || { bad "allkeys-lfu: p:$j, read 20 times, evicted"; break; }
            done
        fi
        summary="$summary $policy:$((224 - left))"
        ;;
    esac
done
# OBJECT FREQ
cli config set maxmemory 0 maxmemory-policy allkeys-lfu lfu-log-factor 0 >/dev/null
cli set f:1 abc >/dev/null
[ "$(cli object freq f:1)" = 5 ] || bad "OBJECT FREQ after SET: $(cli object freq f:1)"
for _ in $(seq 10); do echo "GET f:1"; done | cli >/dev/null
[ "$(cli object freq f:1)" = 15 ] || bad "OBJECT FREQ after 10 GETs: $(cli object freq f:1)"
[ "$(cli object freq f:none)" = "" ] || bad "OBJECT FREQ of a missing key: $(cli object freq f:none)"
# a new hash made a table at once (a value past 64 bytes) starts at 5 too
cli hset f:h f "$val$val" >/dev/null
[ "$(cli object freq f:h)" = 5 ] || bad "OBJECT FREQ after HSET of a new big hash: $(cli object freq f:h)"
cli config set lfu-log-factor 10 >/dev/null
for _ in $(seq 1000); do echo "GET f:1"; done | cli >/dev/null
f=$(cli object freq f:1)
[ "$f" -gt 15 ] && [ "$f" -lt 40 ] || bad "OBJECT FREQ after 1000 GETs more (log factor 10): $f"
cli config set maxmemory-policy allkeys-lru >/dev/null
cli object freq f:1 | grep -q "^ERR An LFU maxmemory policy is not selected" ||
    bad "OBJECT FREQ under allkeys-lru: $(cli object freq f:1)"
echo "policies $(basename "$server"): evicted$summary; OBJECT FREQ $f after 1011 GETs"
exit $fail
