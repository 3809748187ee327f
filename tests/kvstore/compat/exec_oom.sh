#!/usr/bin/env bash
# exec_oom.sh SERVER - MULTI/EXEC past maxmemory as redis-server 7.0
# answers it, which one connection's script (run.sh) cannot show: the limit
# changes (CONFIG SET from a second connection) while a block is queued.
# The same session through redis-server and SERVER, the replies of both
# connections in order, compared line by line:
#   a write queued below the limit, the limit passed before EXEC: EXEC
#   answers EXECABORT with the OOM error and the block is gone;
#   a block of reads only: EXEC runs it past the limit;
#   past the limit inside MULTI every command (a read too) is refused and
#   EXEC answers "previous errors"; DISCARD is taken;
#   a WATCHed block refused at EXEC drops its watches too.
# Skips (77) without redis-server 7.0 or redis-cli.
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/../deps.sh" redis-server redis-cli || exit
case $(redis-server --version) in
*" v=7.0."*) ;;
*) echo "SKIP: not redis-server 7.0"; exit 77 ;;
esac
. "$here/../serve.sh"
workdir kvexecoom
fail=0

# session SOCK OUT: the session on SOCK, both connections' replies to OUT.
# The first connection reads a fifo, so each step waits for its replies
# (until OUT has that many lines, both connections', an error's
# blank line after it included) before the second connection acts.
session() {
    local s=$1 out=$2
    rm -f "$dir/in" && mkfifo "$dir/in"
    : >"$out" # both append: each writes at the end
    redis-cli -s "$s" <"$dir/in" >>"$out" &
    local cli=$!
    exec 4>"$dir/in"
    say() { printf '%s\n' "$@" >&4; }
    upto() {
        for _ in $(seq 200); do
            [ "$(wc -l <"$out")" -ge "$1" ] && return 0
            sleep 0.02
        done
        echo "FAIL: $(basename "$out"): fewer than $1 reply lines"
        fail=1
    }
    other() { redis-cli -s "$s" "$@" >>"$out"; }
    say FLUSHALL "SET a 1" MULTI "SET b 2" "GET a"; upto 5
    other CONFIG SET maxmemory 1
    say EXEC "GET b" EXEC; upto 11
    other CONFIG SET maxmemory 0
    say MULTI "GET a" "STRLEN a"; upto 15
    other CONFIG SET maxmemory 1
    say EXEC MULTI "GET a" "SET c 1" EXEC "GET c"; upto 26
    say MULTI "GET a" DISCARD; upto 30
    other CONFIG SET maxmemory 0
    say "WATCH a" MULTI "INCR a"; upto 34
    other CONFIG SET maxmemory 1
    say EXEC; upto 37
    other CONFIG SET maxmemory 0
    say MULTI "INCR a" EXEC; upto 41
    exec 4>&-
    wait "$cli"
}

sock=$dir/redis.sock
server=redis-server
serve "$dir/redis.log" --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$dir" ||
    { echo "FAIL: redis-server did not start"; exit 1; }
pids=$pid
session "$sock" "$dir/redis.out"
server=$1
sock=$dir/kv.sock
serve "$dir/kv.log" --pool "$pool" --unix "$sock" --port 0 --pool-size 64M ||
    { echo "FAIL: $(basename "$server") did not start"; exit 1; }
pids="$pids $pid"
session "$sock" "$dir/kv.out"
if ! diff "$dir/redis.out" "$dir/kv.out"; then
    echo "FAIL: replies differ (< redis-server, > $(basename "$server"))"
    fail=1
fi
echo "exec_oom: $(wc -l <"$dir/kv.out") reply lines, $([ $fail = 0 ] && echo identical || echo differing)"
exit $fail
