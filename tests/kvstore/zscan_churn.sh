#!/usr/bin/env bash
# zscan_churn.sh SERVER [SEED] - ZSCAN's guarantee on a large sorted set
# (docs/kvstore.md, section 32): a scan with COUNT 25 over a set of 3,000
# members that stay ("k" ones: scores in groups of three, and 40 of one
# score, more than a page) and others ("c" ones) added and removed between
# every two calls returns every member that stayed, in pages of COUNT
# plus at most the rest of the last member's score, and ends (cursor 0).
# Before that, ZRANDMEMBER's distinct sample of 2,000 of its members.
# Fails (exit 1) on a member missed, a page past that size, a scan of
# fewer than 50 pages (not paging) or more than 1,000 (not ending).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
server=$1
RANDOM=${2:-1}
bash "$here/deps.sh" redis-cli || exit
. "$here/serve.sh"
workdir zscanchurn
sock=$dir/kv.sock
serve "$dir/kv.log" --pool "$pool" --unix "$sock" --port 0 --pool-size 64M ||
    { echo "FAIL: $(basename "$server") did not start"; exit 1; }
pids=$pid
cli() { redis-cli -s "$sock" "$@"; }

# the members that stay: k0..k2959 scored i/3 (groups of three), k2960..
# k2999 all scored 5000
awk 'BEGIN {
    for (i = 0; i < 3000; i += 100) {
        line = "ZADD z"
        for (j = i; j < i + 100; j++) line = line " " (j < 2960 ? int(j / 3) : 5000) " k" j
        print line
    }
}' | cli >/dev/null
[ "$(cli OBJECT ENCODING z)" = skiplist ] || { echo "FAIL: the set is not in the large form"; exit 1; }

# ZRANDMEMBER on the same form: a count below the size gives distinct
# members (by rank, zrand_big), a negative one that many
got=$(cli ZRANDMEMBER z 2000 | sort -u | grep -c '^k[0-9]*$')
[ "$got" = 2000 ] || { echo "FAIL: ZRANDMEMBER z 2000 gave $got distinct members"; exit 1; }
got=$(cli ZRANDMEMBER z -5000 | grep -c '^k[0-9]*$')
[ "$got" = 5000 ] || { echo "FAIL: ZRANDMEMBER z -5000 gave $got members"; exit 1; }

cursor=0 pages=0 maxpage=0
: >"$dir/seen"
while :; do
    cli ZSCAN z "$cursor" COUNT 25 >"$dir/page" || { echo "FAIL: ZSCAN failed"; exit 1; }
    cursor=$(head -n 1 "$dir/page")
    # members are the even lines after the cursor
    sed -n '2~2p' "$dir/page" >>"$dir/seen"
    n=$(($(wc -l <"$dir/page") / 2))
    [ "$n" -gt "$maxpage" ] && maxpage=$n
    pages=$((pages + 1))
    [ "$cursor" = 0 ] && break
    [ "$pages" -gt 1000 ] && { echo "FAIL: no end after 1,000 pages"; exit 1; }
    # churn: 30 members added and 30 removed, scored anywhere in the set
    add="ZADD z" rem="ZREM z"
    for _ in $(seq 30); do
        add="$add $((RANDOM % 1100 - 50)) c$((RANDOM % 400))"
        rem="$rem c$((RANDOM % 400))"
    done
    printf '%s\n%s\n' "$add" "$rem" | cli >/dev/null
done
missed=$(seq 0 2999 | sed 's/^/k/' | sort | comm -23 - <(sort -u "$dir/seen") | wc -l)
echo "zscan_churn: $pages pages, the largest $maxpage members, $(sort -u "$dir/seen" | grep -c '^c') churned members seen, $missed of 3000 staying members missed"
fail=0
[ "$missed" -eq 0 ] || { echo "FAIL: $missed members present throughout were not returned"; fail=1; }
[ "$maxpage" -le 65 ] || { echo "FAIL: a page of $maxpage members (COUNT 25, groups of at most 40)"; fail=1; }
[ "$pages" -ge 50 ] || { echo "FAIL: $pages pages: the scan did not page"; fail=1; }
exit $fail
