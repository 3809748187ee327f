#!/usr/bin/env bash
# rangebench.sh [--count N] [--mib M] [engine...]
# Reads of a part of one long string: a key grown to M MiB (default 16) by
# APPENDs of 64 KiB, then N (default 2,000) GETRANGEs of 10 bytes from its
# middle and N STRLENs, each batch sent by `redis-cli --pipe` over a UNIX
# socket, to Debian's redis-server (no persistence) and to kvstore-<engine>
# (default undo redo redo1 cow incll; TXN_PDOM=1), one server after the
# other. Prints seconds per batch and the ratio to redis-server's (lower
# is better), and checks every server's STRLEN. Uses the binaries in
# $BUILD_DIR (default build); pools and sockets go to a temporary
# directory under /dev/shm that the script removes.
set -euo pipefail
cd "$(dirname "$0")/.."
count=2000
mib=16
while [ $# -gt 0 ]; do
    case $1 in
    --count) count=$2; shift ;;
    --mib) mib=$2; shift ;;
    -*) echo "usage: $0 [--count N] [--mib M] [engine...]" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
engines=${*:-undo redo redo1 cow incll}
BUILD_DIR=${BUILD_DIR:-build}
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
. scripts/pipelib.sh
pipe_init rangebench

len=$((mib * 1048576))
mid=$((len / 2))
chunk=$(head -c 65536 /dev/zero | tr '\0' r)
awk -v n=$((len / 65536)) -v v="$chunk" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "*3\r\n$6\r\nAPPEND\r\n$1\r\nk\r\n$%d\r\n%s\r\n", length(v), v
}' >"$dir/load.resp"
awk -v n="$count" -v a="$mid" -v b=$((mid + 9)) 'BEGIN {
    for (i = 0; i < n; i++)
        printf "*4\r\n$8\r\nGETRANGE\r\n$1\r\nk\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(a), a,
            length(b), b
}' >"$dir/getrange.resp"
awk -v n="$count" 'BEGIN {
    for (i = 0; i < n; i++)
        printf "*2\r\n$6\r\nSTRLEN\r\n$1\r\nk\r\n"
}' >"$dir/strlen.resp"

# measure NAME: the load (not timed), then both timed pipes
measure() {
    local g s l
    timed_pipe "$dir/load.resp" >/dev/null
    g=$(timed_pipe "$dir/getrange.resp")
    s=$(timed_pipe "$dir/strlen.resp")
    l=$(redis-cli -s "$dir/sock" strlen k)
    [ "$l" = "$len" ] || { echo "rangebench: $1 ends with STRLEN $l, not $len" >&2; exit 1; }
    echo "$g $s"
}

pipe_redis
read -r rg rs < <(measure redis-server)
pipe_stop

echo "$count GETRANGEs of 10 bytes and $count STRLENs of a $mib MiB string, redis-cli --pipe"
echo
echo "| server | GETRANGE s | ratio | STRLEN s | ratio |"
echo "| --- | ---: | ---: | ---: | ---: |"
echo "| redis-server | $rg | 1.00 | $rs | 1.00 |"
for e in $engines; do
    pipe_kvstore "$e"
    read -r kg ks < <(measure "kvstore-$e")
    pipe_stop
    awk -v e="$e" -v kg="$kg" -v ks="$ks" -v rg="$rg" -v rs="$rs" 'BEGIN {
        printf "| kvstore-%s | %s | %.2f | %s | %.2f |\n", e, kg, kg / rg, ks, ks / rs }'
done
