#!/usr/bin/env bash
# msetbench.sh [--keys 10000,40000,80000,200000] [--rounds R] [--engines "undo redo ..."]
#              [--no-build]
# One MSET of N keys, then one DEL of the same N keys, against every
# kvstore-<engine> (TXN_PDOM=1, --threads 2) and against redis-server 7
# (no persistence, and appendfsync always), over UNIX sockets, with the same
# client: redis-cli --pipe sending a file that holds the one command. Each
# figure is the median of R rounds (default 3) of the whole sequence.
# Prints, per server and N, the MSET and DEL times in seconds and their
# ratio to redis-server's (no persistence), and checks DBSIZE after each
# command (N, then 0); then the same for the CPU time the server's threads
# used during each command, which a host shared with other work inflates
# far less than the time from sending to reply.
#
# Then, per engine, a GET of another key sent 50 ms after a 200,000-key
# MSET was: its time, from sending to reply, with the MSET's (the issue's
# "every client waits").
# $BUILD_DIR (default build) holds the binaries; --no-build uses them as
# they are.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

keys=10000,40000,80000,200000
rounds=3
engines=
nobuild=
while [ $# -gt 0 ]; do
    case $1 in
    --keys) keys=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --engines) engines=$2; shift ;;
    --no-build) nobuild=1 ;;
    *) echo "usage: $0 [--keys N,N,...] [--rounds R] [--engines \"e ...\"] [--no-build]" >&2
       exit 2 ;;
    esac
    shift
done

export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
BUILD_DIR=${BUILD_DIR:-build}
[ -n "$nobuild" ] || build "$BUILD_DIR"
if [ -z "$engines" ]; then
    for bin in "$BUILD_DIR"/bin/kvstore-*; do
        e=${bin##*kvstore-}
        [ "$e" = pmdk ] || engines="$engines $e"
    done
fi

tmp=$(mktemp -d /tmp/msetbench-XXXXXX)
aof=$(mktemp -d /dev/shm/msetbench-aof-XXXXXX)
pool=/dev/shm/msetbench-$$.pool
pid=
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp" "$aof"
    rm -f "$pool"
}
trap cleanup EXIT
sock=$tmp/s.sock

# the commands, RESP-encoded: MSET k:0 v:0 ... and DEL k:0 ...
for n in ${keys//,/ }; do
    awk -v n="$n" 'BEGIN {
        printf "*%d\r\n$4\r\nMSET\r\n", 2 * n + 1
        for (i = 0; i < n; i++) {
            k = "k:" i; v = "value-of-" i
            printf "$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v
        }
    }' >"$tmp/mset-$n"
    awk -v n="$n" 'BEGIN {
        printf "*%d\r\n$3\r\nDEL\r\n", n + 1
        for (i = 0; i < n; i++) { k = "k:" i; printf "$%d\r\n%s\r\n", length(k), k }
    }' >"$tmp/del-$n"
done

wait_sock() {
    for _ in $(seq 400); do
        [ "$(redis-cli -s "$sock" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "msetbench: no server on $sock" >&2
    exit 1
}

stop() {
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

# ns of CPU the server ($pid) has used, all its threads
cpu_ns() {
    cat /proc/"$pid"/task/*/schedstat | awk '{ s += $1 } END { printf "%d", s }'
}

# timed FILE: seconds that redis-cli --pipe takes to send FILE and read the
# reply (which must not be an error), then the server's CPU seconds in it
timed() {
    local t0 t1 c0 c1 out
    c0=$(cpu_ns)
    t0=$(date +%s%N)
    out=$(redis-cli -s "$sock" --pipe --pipe-timeout 0 <"$1" 2>&1)
    t1=$(date +%s%N)
    c1=$(cpu_ns)
    if ! grep -q "errors: 0" <<<"$out"; then
        echo "msetbench: $1: $out" >&2
        exit 1
    fi
    awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" \
        'BEGIN { printf "%.4f,%.4f", (b - a) / 1e9, (d - c) / 1e9 }'
}

dbsize_is() {
    local got
    got=$(redis-cli -s "$sock" dbsize)
    if [ "$got" != "$1" ]; then
        echo "msetbench: $2: DBSIZE $got, expected $1" >&2
        exit 1
    fi
}

# run NAME: the sizes on the server listening on $sock
run() {
    local n m d
    for n in ${keys//,/ }; do
        redis-cli -s "$sock" flushall >/dev/null
        m=$(timed "$tmp/mset-$n")
        dbsize_is "$n" "$1 after MSET of $n"
        d=$(timed "$tmp/del-$n")
        dbsize_is 0 "$1 after DEL of $n"
        echo "$1,$n,${m%,*},${d%,*},${m#*,},${d#*,}" >>"$tmp/raw.csv"
    done
}

kv_start() { # ENGINE
    rm -f "$pool"
    "$BUILD_DIR/bin/kvstore-$1" --pool "$pool" --unix "$sock" --port 0 --threads 2 \
        >"$tmp/kv.log" 2>&1 &
    pid=$!
    wait_sock
}

redis_start() { # redis-server options
    rm -rf "${aof:?}"/*
    redis-server --port 0 --unixsocket "$sock" --dir "$aof" --save "" --daemonize no \
        --logfile "$tmp/redis.log" "$@" &
    pid=$!
    wait_sock
}

for round in $(seq "$rounds"); do
    echo "msetbench: round $round of $rounds" >&2
    for e in $engines; do
        kv_start "$e"
        run "kvstore-$e"
        stop
    done
    redis_start --appendonly no
    run "redis-server"
    stop
    redis_start --appendonly yes --appendfsync always
    run "redis-server-aof-always"
    stop
done

# table COLUMN WHAT: the medians of raw.csv's columns COLUMN (MSET) and
# COLUMN + 1 (DEL)
table() {
echo "# MSET and DEL of N keys in one command, $2 ($(redis-server --version | cut -d' ' -f1-3);"
echo "# kvstore TXN_PDOM=1 --threads 2; medians of $rounds rounds; $(nproc) cores shared; $(date -u +%Y-%m-%d))"
printf "%-26s %8s %9s %9s %9s %9s\n" server keys mset_s del_s mset_x del_x
awk -F, -v col="$1" '{ k = $1 FS $2; if (!(k in c)) order[++no] = k
           i = ++c[k]; m[k, i] = $col; d[k, i] = $(col + 1) }
     function med(a, k, n,   i, j, t, v) {
         for (i = 1; i <= n; i++) v[i] = a[k, i] + 0
         for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
         return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
     }
     END {
         for (x = 1; x <= no; x++) { k = order[x]; M[k] = med(m, k, c[k]); D[k] = med(d, k, c[k]) }
         for (x = 1; x <= no; x++) {
             k = order[x]; split(k, f, FS); r = "redis-server" FS f[2]
             printf "%-26s %8d %9.4f %9.4f %9.2f %9.2f\n", f[1], f[2], M[k], D[k], M[k] / M[r], D[k] / D[r]
         }
     }' "$tmp/raw.csv"
}
table 3 "seconds from sending to reply"
echo
table 5 "CPU seconds of the server's threads"

# a GET of another key while a 200,000-key MSET runs (--threads 2)
big=$tmp/mset-200000
[ -f "$big" ] || awk 'BEGIN {
        printf "*%d\r\n$4\r\nMSET\r\n", 400001
        for (i = 0; i < 200000; i++) { k = "k:" i; v = "value-of-" i
            printf "$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v }
    }' >"$big"
echo
echo "# a GET of another key sent 50 ms after a 200,000-key MSET (seconds)"
printf "%-26s %9s %9s\n" server get_s mset_s
for e in $engines; do
    kv_start "$e"
    redis-cli -s "$sock" set other 1 >/dev/null
    t0=$(date +%s%N)
    redis-cli -s "$sock" --pipe --pipe-timeout 0 <"$big" >"$tmp/pipe.out" 2>&1 &
    mpid=$!
    sleep 0.05
    g0=$(date +%s%N)
    [ "$(redis-cli -s "$sock" get other)" = 1 ] || { echo "msetbench: GET other failed" >&2; exit 1; }
    g1=$(date +%s%N)
    wait "$mpid"
    t1=$(date +%s%N)
    awk -v e="kvstore-$e" -v g="$((g1 - g0))" -v m="$((t1 - t0))" \
        'BEGIN { printf "%-26s %9.4f %9.4f\n", e, g / 1e9, m / 1e9 }'
    stop
done
