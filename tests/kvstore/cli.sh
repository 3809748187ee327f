#!/usr/bin/env bash
# cli.sh SERVER KVCLIENT - kvstore-<engine> driven by the real clients:
# redis-cli (every command, binary values, --scan, an interactive session
# in tmux when tmux is there, TCP) and redis-benchmark (-P 1 and -P 16),
# then SHUTDOWN and a restart that finds the data again.
# Skips (exit 77) when redis-cli or redis-benchmark is missing.
set -uo pipefail
server=$1
kvclient=$2
bash "$(dirname "$0")/deps.sh" redis-cli redis-benchmark || exit
engine=${server##*kvstore-}
dir=$(mktemp -d /tmp/kvcli-XXXXXX)
pool=/dev/shm/kvcli-$engine-$$.pool
sock=$dir/kv.sock
port=$("$kvclient" freeport)
pid=
pass=0
fail=0

cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ "$fail" -gt 0 ] && tail -n 20 "$dir/log"
    rm -rf "$dir" "$pool"
}
trap cleanup EXIT

. "$(dirname "$0")/serve.sh"
start() { serve "$dir/log" --pool "$pool" --unix "$sock" --port "$port" --pool-size 64M; }

# expect NAME WANT COMMAND...: the command's output must be WANT
expect() {
    local name=$1 want=$2 got
    shift 2
    got=$("$@" 2>&1)
    if [ "$got" = "$want" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL %s: want [%s] got [%s]\n' "$name" "$want" "$got"
    fi
}

# ok NAME COMMAND...: the command must succeed
ok() {
    local name=$1
    shift
    if "$@" >"$dir/out" 2>&1; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL %s:\n' "$name"
        head -n 20 "$dir/out"
    fi
}

start || exit 1
R=(redis-cli -s "$sock")
expect ping PONG "${R[@]}" ping
expect echo hello "${R[@]}" echo hello
expect set OK "${R[@]}" set k1 v1
expect get v1 "${R[@]}" get k1
expect get-missing "" "${R[@]}" get nosuch
expect mset OK "${R[@]}" mset k2 v2 k3 v3
expect mget $'v1\n\nv3' "${R[@]}" mget k1 nosuch k3
expect exists 2 "${R[@]}" exists k1 k2 nosuch
expect incr 1 "${R[@]}" incr counter
expect incr2 2 "${R[@]}" incr counter
expect incr-err "ERR value is not an integer or out of range" "${R[@]}" incr k1
expect del 2 "${R[@]}" del k2 k3 nosuch
expect dbsize 2 "${R[@]}" dbsize
expect keys $'counter\nk1' bash -c "redis-cli -s '$sock' keys '*' | sort"
expect scan $'counter\nk1' bash -c "redis-cli -s '$sock' --scan | sort"
expect scan-pattern k1 "${R[@]}" --scan --pattern 'k*'
expect unknown "ERR unknown command 'frobnicate', with args beginning with: 'x' " \
    "${R[@]}" frobnicate x
expect arity "ERR wrong number of arguments for 'get' command" "${R[@]}" get
expect config-save save "${R[@]}" config get save
expect config-aof $'appendonly\nno' "${R[@]}" config get appendonly
expect info-engine "engine:$engine" bash -c "redis-cli -s '$sock' info persistence | tr -d '\r' | grep '^engine:'"
ok info-barriers bash -c "redis-cli -s '$sock' info stats | grep -q '^persist_barriers:'"
ok command-count bash -c "[ \$(redis-cli -s '$sock' command count) -gt 15 ]"
expect tcp PONG redis-cli -p "$port" ping

# binary values: NUL, CR LF and every byte, through redis-cli -x
head -c 3000 /dev/urandom >"$dir/bin"
printf 'a\0b\r\nc\r\n\0' >>"$dir/bin"
expect set-binary OK bash -c "redis-cli -s '$sock' -x set bin <'$dir/bin'"
"${R[@]}" --raw get bin >"$dir/got"
# redis-cli ends raw output with a newline of its own
truncate -s -1 "$dir/got"
ok get-binary cmp "$dir/bin" "$dir/got"
expect strlen-like 1 "${R[@]}" exists bin

# an interactive session, as a person would start it
if command -v tmux >/dev/null; then
    tm=kvcli-$$
    tmux new-session -d -s "$tm" -x 100 -y 20 "redis-cli -s '$sock'"
    sleep 0.5
    tmux send-keys -t "$tm" 'set who tmux' Enter
    sleep 0.3
    tmux send-keys -t "$tm" 'get who' Enter
    sleep 0.3
    tmux capture-pane -t "$tm" -p >"$dir/screen"
    tmux kill-session -t "$tm"
    ok interactive grep -q '"tmux"' "$dir/screen"
    ok interactive-clean bash -c "! grep -qi -e error -e warning '$dir/screen'"
fi

# redis-benchmark: it asks CONFIG GET save / appendonly, then runs
for p in 1 16; do
    ok "benchmark-P$p" bash -c "redis-benchmark -s '$sock' -t set,get -n 3000 -c 20 -P $p -q 2>&1 |
        tr '\r' '\n' | grep -E '^(SET|GET): [0-9.]+ requests per second' | wc -l | grep -qx 2"
done
ok benchmark-keys bash -c "redis-benchmark -s '$sock' -t set -n 3000 -r 100000 -c 10 -P 8 -q >/dev/null"
# its default test set (no -t) reaches LPUSH, which this server does not
# have: redis-benchmark stops there with the server's error, after the
# tests before it; neither side may hang or crash
ok benchmark-default bash -c "timeout 60 redis-benchmark -s '$sock' -n 1000 -c 5 -q 2>&1 |
    tr '\r' '\n' | grep -E '^(PING_INLINE|PING_MBULK|SET|GET|INCR): [0-9.]+ requests per second' |
    wc -l | grep -qx 5"
expect benchmark-default-alive PONG "${R[@]}" ping

expect flushall OK "${R[@]}" flushall
expect dbsize-0 0 "${R[@]}" dbsize
expect set-last OK "${R[@]}" set last durable
expect shutdown "" "${R[@]}" shutdown
wait "$pid"
st=$?
pid=
expect shutdown-status 0 echo "$st"
ok check "$server" --pool "$pool" --check
if [ "$engine" != none ]; then
    start || exit 1
    expect durable durable "${R[@]}" get last
    kill -TERM "$pid"
    wait "$pid"
    st=$?
    pid=
    expect sigterm-status 0 echo "$st"
fi
echo "kvstore cli ($engine): $pass passed, $fail failed"
[ "$fail" -eq 0 ]
