#!/usr/bin/env bash
# appendbench.sh [--count N] [--size BYTES] [engine...]
# The time of N APPENDs of BYTES each to one key (default 8,000 of 1,024:
# issue #41, item 4), then of N SETRANGEs that grow another key the same
# way (offset i * BYTES), sent by `redis-cli --pipe` over a UNIX socket
# to Debian's redis-server (no persistence) and to kvstore-<engine> (default
# undo redo redo1 cow incll; TXN_PDOM=1), one server after the other.
# Prints a table: seconds for each server and the ratio to redis-server's
# (lower is better; 1.00 is redis-server's time), and checks that every
# server ends with strings of N * BYTES bytes. Uses the binaries in
# $BUILD_DIR (default build) as they are; pools and sockets go to a
# temporary directory under /dev/shm that the script removes.
set -euo pipefail
cd "$(dirname "$0")/.."
count=8000
size=1024
while [ $# -gt 0 ]; do
    case $1 in
    --count) count=$2; shift ;;
    --size) size=$2; shift ;;
    -*) echo "usage: $0 [--count N] [--size BYTES] [engine...]" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
engines=${*:-undo redo redo1 cow incll}
BUILD_DIR=${BUILD_DIR:-build}
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
. scripts/pipelib.sh
pipe_init appendbench

# the requests, in RESP (what redis-cli --pipe sends as it is)
value=$(head -c "$size" /dev/zero | tr '\0' 'a')
awk -v n="$count" -v v="$value" -v s="$size" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "*3\r\n$6\r\nAPPEND\r\n$2\r\nak\r\n$%d\r\n%s\r\n", length(v), v > "/dev/stdout"
}' >"$dir/append.resp"
awk -v n="$count" -v v="$value" -v s="$size" 'BEGIN {
    for (i = 0; i < n; i++) {
        off = sprintf("%d", i * s)
        printf "*4\r\n$8\r\nSETRANGE\r\n$2\r\nsk\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(off), off,
            length(v), v
    }
}' >"$dir/setrange.resp"

# measure NAME: both pipes against the server on $dir/sock, then its lengths
measure() {
    local a s la ls
    a=$(timed_pipe "$dir/append.resp")
    s=$(timed_pipe "$dir/setrange.resp")
    la=$(redis-cli -s "$dir/sock" strlen ak)
    ls=$(redis-cli -s "$dir/sock" strlen sk)
    if [ "$la" != $((count * size)) ] || [ "$ls" != $((count * size)) ]; then
        echo "appendbench: $1 ends with lengths $la and $ls, not $((count * size))" >&2
        exit 1
    fi
    echo "$a $s"
}

pipe_redis
read -r ra rs < <(measure redis-server)
pipe_stop

echo "$count APPENDs and $count growing SETRANGEs of $size bytes, one key each, redis-cli --pipe"
echo
echo "| server | APPEND s | ratio | SETRANGE s | ratio |"
echo "| --- | ---: | ---: | ---: | ---: |"
echo "| redis-server | $ra | 1.00 | $rs | 1.00 |"
for e in $engines; do
    pipe_kvstore "$e"
    read -r ka ks < <(measure "kvstore-$e")
    pipe_stop
    awk -v e="$e" -v ka="$ka" -v ks="$ks" -v ra="$ra" -v rs="$rs" 'BEGIN {
        printf "| kvstore-%s | %s | %.2f | %s | %.2f |\n", e, ka, ka / ra, ks, ks / rs }'
done
