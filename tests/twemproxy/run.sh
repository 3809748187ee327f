#!/usr/bin/env bash
# run.sh SERVER - three kvstore servers behind twemproxy (nutcracker,
# ketama), for RESP and for memcached's protocol (issue #32;
# docs/scaleout.md). Starts SERVER (a kvstore-<engine> binary) three times
# on loopback, each with a RESP port and a memcached port, and one
# nutcracker with a pool per protocol over them (the same server names, so
# a key goes to the same server by either protocol); runs redis-benchmark
# and memcaslap through the proxy; sets KEYS keys by each protocol through
# it; finds which server holds which key (asking each server directly);
# SIGKILLs the server that holds the most, checks that the others' keys are
# still served while it is down, restarts it on its pool and checks that
# every key is served again through the proxy with its value. Exits 0 on
# success, 1 on a failure, 77 (skip) when a tool is missing.
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../kvstore/deps.sh" redis-cli redis-benchmark || exit
for tool in nutcracker memcaslap; do
    command -v $tool >/dev/null || { echo "SKIP: $tool missing (packages nutcracker, libmemcached-tools)"; exit 77; }
done
export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
KEYS=${TWEM_KEYS:-300}
dir=$(mktemp -d /tmp/twemproxy-XXXXXX)
base=$((21000 + ($$ % 400) * 10)) # ten ports from here
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$dir" /dev/shm/twem-$$-*.pool
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$dir"/*.log; do echo "--- $f"; tail -n 5 "$f"; done
    exit 1
}

resp_port() { echo $((base + $1)); }    # server i (1..3)
mc_port() { echo $((base + 3 + $1)); }
proxy_resp=$((base + 7)) proxy_mc=$((base + 8)) proxy_stats=$((base + 9))

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
    for _ in $(seq 200); do port_open "$1" && return 0; sleep 0.05; done
    fail "nothing listens on port $1"
}

declare -A spid
start() { # i
    "$server" --pool "/dev/shm/twem-$$-$1.pool" --port "$(resp_port "$1")" \
        --memcached-port "$(mc_port "$1")" --threads 1 --pool-size 64M >>"$dir/kv$1.log" 2>&1 &
    spid[$1]=$!
    pids+=("$!")
    wait_port "$(resp_port "$1")"
    wait_port "$(mc_port "$1")"
}
for i in 1 2 3; do start $i; done

cat >"$dir/nutcracker.yml" <<EOF
resp:
  listen: 127.0.0.1:$proxy_resp
  hash: md5
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: 2000
  server_retry_timeout: 200
  servers:
   - 127.0.0.1:$(resp_port 1):1 kv1
   - 127.0.0.1:$(resp_port 2):1 kv2
   - 127.0.0.1:$(resp_port 3):1 kv3
mc:
  listen: 127.0.0.1:$proxy_mc
  hash: md5
  distribution: ketama
  redis: false
  auto_eject_hosts: false
  timeout: 2000
  server_retry_timeout: 200
  servers:
   - 127.0.0.1:$(mc_port 1):1 kv1
   - 127.0.0.1:$(mc_port 2):1 kv2
   - 127.0.0.1:$(mc_port 3):1 kv3
EOF
nutcracker -t -c "$dir/nutcracker.yml" >/dev/null 2>&1 || fail "nutcracker refuses the configuration"
nutcracker -c "$dir/nutcracker.yml" -s "$proxy_stats" -a 127.0.0.1 -o "$dir/nutcracker.log" &
pids+=("$!")
wait_port "$proxy_resp"
wait_port "$proxy_mc"

# ---- load through the proxy
bench=$(redis-benchmark -h 127.0.0.1 -p "$proxy_resp" -t set,get -n 20000 -c 20 -r 1000 -q 2>&1 |
    tr '\r' '\n' | grep -E '^(SET|GET): [0-9.]+ requests per second' | sort -u)
echo "$bench"
[ "$(echo "$bench" | grep -c 'requests per second')" = 2 ] || fail "redis-benchmark through the proxy: $bench"
slap=$(memcaslap -s "127.0.0.1:$proxy_mc" -T 1 -c 8 -t 2s 2>&1)
tps=$(echo "$slap" | awk '/^Run time/ { for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i + 1) }')
echo "memcaslap through the proxy: ${tps:-?} ops/s"
[ -n "$tps" ] && [ "$tps" -gt 0 ] || fail "memcaslap through the proxy: $slap"

# ---- keys by both protocols, through the proxy
mc() { # PORT: send stdin's requests, print the replies (one connection)
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    cat >&3
    printf 'version\r\n' >&3
    local line
    while IFS= read -r -t 5 line <&3; do
        line=${line%$'\r'}
        [[ $line == VERSION* ]] && break
        printf '%s\n' "$line"
    done
    exec 3<&-
}
for i in $(seq "$KEYS"); do echo "set r:$i rv:$i"; done | redis-cli -h 127.0.0.1 -p "$proxy_resp" >"$dir/set.out"
[ "$(grep -c '^OK$' "$dir/set.out")" = "$KEYS" ] || fail "RESP sets through the proxy: $(sort "$dir/set.out" | uniq -c)"
for i in $(seq "$KEYS"); do printf 'set m:%d 7 0 %d\r\nmv:%d\r\n' "$i" $((3 + ${#i})) "$i"; done |
    mc "$proxy_mc" >"$dir/mcset.out"
[ "$(grep -c '^STORED$' "$dir/mcset.out")" = "$KEYS" ] || fail "memcached sets through the proxy"

# which server holds which key (asked directly)
declare -A count
victim=1
for i in 1 2 3; do
    for k in $(seq "$KEYS"); do echo "exists r:$k"; done | redis-cli -p "$(resp_port $i)" >"$dir/has$i"
    count[$i]=$(grep -c '^1$' "$dir/has$i")
    [ "${count[$i]}" -gt "${count[$victim]}" ] && victim=$i
done
echo "RESP keys per server: ${count[1]} ${count[2]} ${count[3]}"
[ $((count[1] + count[2] + count[3])) = "$KEYS" ] || fail "the servers hold $((count[1] + count[2] + count[3])) of $KEYS keys"
for i in 1 2 3; do [ "${count[$i]}" -gt 0 ] || fail "server $i holds no key: no distribution"; done

# read every key through the proxy: prints how many come back right
# (RESP and memcached)
check() {
    local ok=0 i
    for i in $(seq "$KEYS"); do echo "get r:$i"; done |
        redis-cli -h 127.0.0.1 -p "$proxy_resp" >"$dir/get.out" 2>&1
    for i in $(seq "$KEYS"); do
        [ "$(sed -n "${i}p" "$dir/get.out")" = "rv:$i" ] && ok=$((ok + 1))
    done
    local mok=0 line
    for i in $(seq "$KEYS"); do printf 'get m:%d\r\n' "$i"; done | mc "$proxy_mc" >"$dir/mcget.out"
    mok=$(awk '/^VALUE m:[0-9]+ 7 / { split($2, k, ":"); key = k[2]; getline v; if (v == "mv:" key) n++ } END { print n + 0 }' "$dir/mcget.out")
    echo "$ok $mok"
}
read -r ok mok <<<"$(check)"
[ "$ok" = "$KEYS" ] && [ "$mok" = "$KEYS" ] || fail "before the kill: $ok RESP and $mok memcached keys of $KEYS"

# ---- SIGKILL the server holding the most keys
kill -9 "${spid[$victim]}"
wait "${spid[$victim]}" 2>/dev/null
# while it is down, the other servers' keys are served (20 of them, each
# on a connection of its own: the proxy may close one whose request went
# to the dead server)
ok=0 asked=0
for k in $(seq "$KEYS"); do
    [ "$(sed -n "${k}p" "$dir/has$victim")" = 1 ] && continue
    [ "$(redis-cli -h 127.0.0.1 -p "$proxy_resp" get "r:$k" 2>/dev/null)" = "rv:$k" ] && ok=$((ok + 1))
    asked=$((asked + 1))
    [ $asked = 20 ] && break
done
echo "server $victim killed: $ok of $asked other servers' keys served through the proxy"
[ "$ok" = "$asked" ] || fail "with server $victim down, $ok of $asked keys of the other servers"

start "$victim"
for _ in $(seq 50); do
    read -r ok mok <<<"$(check)"
    [ "$ok" = "$KEYS" ] && [ "$mok" = "$KEYS" ] && break
    sleep 0.1
done
echo "server $victim restarted: $ok of $KEYS RESP keys and $mok of $KEYS memcached keys served with their values"
[ "$ok" = "$KEYS" ] && [ "$mok" = "$KEYS" ] || fail "after the restart"
echo PASS
