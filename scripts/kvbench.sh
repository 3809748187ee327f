#!/usr/bin/env bash
# kvbench.sh [--full] [--requests N] [--rounds R] [--keyspace N] [--no-build]
#            [--all-requests M] [--all-engines LIST] [--all-only]
# redis-benchmark against every kvstore-<engine> (TXN_PDOM=1; incll also with
# --ack commit, the paper's buffered durability) and against Debian's
# redis-server with appendfsync always, appendfsync everysec and no
# persistence, all over UNIX sockets, one after the other:
#     redis-benchmark -t set,get -c 50 -n N -P 1   (and -n 10N -P 16)
# The whole sequence runs R times (default 3) and every figure is the median
# of its R measurements: the machine is shared and one run of a server can
# fall on a busy moment; each run also waits (at most 30 s) for the CPUs to
# be 90% idle before it starts. Writes results/kvstore.md (ops/s, p50 and p99
# latency) and results/kvstore.png. N is 100000 (--full: 1000000; --requests N)
# at -P 1 and 10 N at -P 16, so that both depths run about as long (100000
# pipelined GETs take 40 ms, too short to measure on a shared machine).
# Without --keyspace every request names the same key, as redis-benchmark
# does by default; --keyspace N adds -r N (random keys). $BUILD_DIR
# (default build) holds the binaries; --no-build uses them as they are.
# Then every test of redis-benchmark's default run (no -t: PING, SET, GET,
# INCR, the list, set, hash and sorted set tests, LRANGE_100 to 600, MSET)
# against kvstore-<engine> for each engine of LIST (default undo) and
# redis-server with appendfsync always and without persistence:
#     redis-benchmark -c 50 -n M -P 1   (and -n 10M -P 16)
# M is N / 10 (--all-requests M), as many rounds, medians; a second table
# in results/kvstore.md, each test's requests/s side by side with the
# ratios. A test that does not run to the end is shown as "-".
# --all-only runs that part alone (and leaves results/kvstore.md as it is:
# its table goes to results/kvstore-all.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

n=100000
rounds=3
keyspace=
nobuild=
all_n=
all_engines=undo
all_only=
while [ $# -gt 0 ]; do
    case $1 in
    --full) n=1000000 ;;
    --all-requests) all_n=$2; shift ;;
    --all-engines) all_engines=$2; shift ;;
    --all-only) all_only=1 ;;
    --keyspace) keyspace=$2; shift ;;
    --requests) n=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --no-build) nobuild=1 ;;
    *) echo "usage: $0 [--full] [--requests N] [--rounds R] [--keyspace N] [--no-build]" \
        "[--all-requests M] [--all-engines LIST] [--all-only]" >&2; exit 2 ;;
    esac
    shift
done

ensure_deps # redis-tools, redis-server and gnuplot-nox among them
export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=1
BUILD_DIR=${BUILD_DIR:-build}
[ -n "$nobuild" ] || build "$BUILD_DIR"

tmp=$(mktemp -d /tmp/kvbench-XXXXXX)
aof=$(mktemp -d /dev/shm/kvbench-aof-XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp" "$aof" /dev/shm/kvbench-$$-*.pool
}
trap cleanup EXIT
mkdir -p results
raw=$tmp/raw.csv # server,persistence,P,test,rps,p50,p99

wait_sock() {
    for _ in $(seq 400); do
        [ "$(redis-cli -s "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "kvbench: no server on $1" >&2
    exit 1
}

# Wait (at most 30 s) until the CPUs are at least 90% idle over half a
# second, so that a server's run does not start while other jobs hold the
# machine; the idle share seen last goes into $tmp/idle.
settle() {
    local _ u n s id io irq sirq st i0 t0 i=0 idle=0
    while [ $i -lt 60 ]; do
        read -r _ u n s id io irq sirq st _ </proc/stat
        t0=$((u + n + s + id + io + irq + sirq + st)) i0=$id
        sleep 0.5
        read -r _ u n s id io irq sirq st _ </proc/stat
        idle=$(((id - i0) * 100 / (u + n + s + id + io + irq + sirq + st - t0 + 1)))
        [ $idle -lt 90 ] || break
        i=$((i + 1))
    done
    echo "$idle" >>"$tmp/idle"
}

# bench NAME PERSISTENCE SOCKET: both pipeline depths (bench_all: every
# test of the default run; bench_fn says which one kv_run and redis_run use)
bench_fn=bench
bench_all() {
    local p csv
    for p in 1 16; do
        settle
        csv=$(redis-benchmark -s "$3" -c 50 -n $((p == 1 ? all_n : 10 * all_n)) -P "$p" --csv \
            2>"$tmp/bench.err" | tr -d '"')
        # a test's name up to its first space ("LPUSH (needed to benchmark
        # LRANGE)" is LPUSH_FOR_LRANGE)
        awk -F, -v s="$1" -v d="$2" -v p="$p" 'NR > 1 {
                t = $1; if (t ~ /needed to benchmark LRANGE/) t = "LPUSH_FOR_LRANGE"
                sub(/ .*/, "", t); print s "," d "," p "," t "," $2 }' <<<"$csv" >>"$raw_all"
        if grep -q . "$tmp/bench.err"; then
            echo "kvbench: $1 -P $p: redis-benchmark said: $(head -c 300 "$tmp/bench.err")" >&2
        fi
    done
}
bench() {
    for p in 1 16; do
        settle
        redis-benchmark -s "$3" -t set,get -c 50 -n $((p == 1 ? n : 10 * n)) -P "$p" \
            ${keyspace:+-r "$keyspace"} --csv |
            tr -d '"' | awk -F, -v s="$1" -v d="$2" -v p="$p" \
                '$1 == "SET" || $1 == "GET" { print s "," d "," p "," $1 "," $2 "," $5 "," $7 }' >>"$raw"
    done
}

stop() {
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

kv_run() { # ENGINE DURABILITY kvstore options...
    local engine=$1 what=$2 sock=$tmp/kv.sock pool=/dev/shm/kvbench-$$-$1.pool
    shift 2
    "$BUILD_DIR/bin/kvstore-$engine" --pool "$pool" --unix "$sock" --port 0 "$@" \
        >"$tmp/$engine.log" 2>&1 &
    pid=$!
    wait_sock "$sock"
    echo "kvbench: kvstore-$engine, $what ($(head -n 1 "$tmp/$engine.log" | sed 's/kvstore: //'))"
    $bench_fn "kvstore-$engine" "$what" "$sock"
    stop
    rm -f "$pool"
}

redis_run() { # NAME PERSISTENCE redis-server options...
    local name=$1 what=$2 sock=$tmp/redis.sock
    shift 2
    rm -rf "${aof:?}"/*
    redis-server --port 0 --unixsocket "$sock" --dir "$aof" --save "" --daemonize no \
        --logfile "$tmp/redis.log" "$@" &
    pid=$!
    wait_sock "$sock"
    echo "kvbench: redis-server, $what"
    $bench_fn "$name" "$what" "$sock"
    stop
}
raw_all=$tmp/raw_all.csv # server,persistence,P,test,rps
all_n=${all_n:-$((n / 10))}
all_tests() {
    local runs=() round i e
    for e in ${all_engines//,/ }; do
        runs+=("kv_run $e 'commit at PDOM 1'")
    done
    runs+=("redis_run redis-server 'AOF fsync always' --appendonly yes --appendfsync always")
    runs+=("redis_run redis-server none --appendonly no")
    bench_fn=bench_all
    for round in $(seq "$rounds"); do
        echo "kvbench: every redis-benchmark test, round $round of $rounds" >&2
        for i in "${!runs[@]}"; do
            [ $((round % 2)) -eq 1 ] || i=$((${#runs[@]} - 1 - i))
            eval "${runs[$i]}" >&2 # its progress: not into the table
        done
    done
    bench_fn=bench
    echo "## Every test of redis-benchmark's default run"
    echo
    echo "redis-benchmark -c 50 -n $all_n -P 1 and -n $((10 * all_n)) -P 16 (no -t) over UNIX sockets;"
    echo "medians of $rounds rounds; thousands of requests/s, and kvstore's over redis-server's."
    echo "$(redis-server --version | cut -d' ' -f1-3); $(date -u +%Y-%m-%d); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo
    awk -F, -v engines="$all_engines" "$awk_median"'
        function med(k,    a, i) {
            for (i = 1; i <= c[k]; i++) a[i] = v[k, i]
            return median(a, c[k])
        }
        function fig(k) { return (k in c) ? sprintf("%.1f", med(k) / 1000) : "-" }
        function ratio(a, b) { return (a in c) && (b in c) && med(b) ? sprintf("%.2f", med(a) / med(b)) : "-" }
        { k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; v[k, ++c[k]] = $5
          if (!($4 in seen)) { seen[$4] = 1; order[++nt] = $4 } }
        END {
            ne = split(engines, e, ",")
            printf "| test | P |"
            for (i = 1; i <= ne; i++) printf " kvstore-%s |", e[i]
            printf " redis AOF always | redis none |"
            for (i = 1; i <= ne; i++) printf " %s / AOF always | %s / none |", e[i], e[i]
            printf "\n| --- | ---: |"
            for (i = 1; i <= ne + 2 + 2 * ne; i++) printf " ---: |"
            printf "\n"
            for (p = 1; p <= 16; p += 15)
                for (t = 1; t <= nt; t++) {
                    x = order[t]
                    ra = "redis-server" SUBSEP "AOF fsync always" SUBSEP p SUBSEP x
                    rn = "redis-server" SUBSEP "none" SUBSEP p SUBSEP x
                    printf "| %s | %d |", x, p
                    for (i = 1; i <= ne; i++)
                        printf " %s |", fig("kvstore-" e[i] SUBSEP "commit at PDOM 1" SUBSEP p SUBSEP x)
                    printf " %s | %s |", fig(ra), fig(rn)
                    for (i = 1; i <= ne; i++) {
                        k = "kvstore-" e[i] SUBSEP "commit at PDOM 1" SUBSEP p SUBSEP x
                        printf " %s | %s |", ratio(k, ra), ratio(k, rn)
                    }
                    printf "\n"
                }
        }' "$raw_all"
}
if [ -n "$all_only" ]; then
    all_tests | tee results/kvstore-all.md
    exit 0
fi

# Every server of a round, one command line each (the second field says
# what a reply to a write promises).
runs=()
for bin in "$BUILD_DIR"/bin/kvstore-*; do
    engine=${bin##*kvstore-}
    case $engine in
    none) runs+=("kv_run none none") ;;
    incll)
        runs+=("kv_run incll 'epoch flushed at PDOM 1'")
        runs+=("kv_run incll 'buffered (ack at commit)' --ack commit") ;;
    *) runs+=("kv_run $engine 'commit at PDOM 1'") ;;
    esac
done
runs+=("redis_run redis-server 'AOF fsync always' --appendonly yes --appendfsync always")
runs+=("redis_run redis-server 'AOF fsync everysec' --appendonly yes --appendfsync everysec")
runs+=("redis_run redis-server none --appendonly no")
# even rounds run the servers in the reverse order, so that a load that
# grows or fades during a round favours no server
for round in $(seq "$rounds"); do
    echo "kvbench: round $round of $rounds"
    for i in "${!runs[@]}"; do
        [ $((round % 2)) -eq 1 ] || i=$((${#runs[@]} - 1 - i))
        eval "${runs[$i]}"
    done
done

# the median of each figure over the rounds
med=$tmp/median.csv
awk -F, "$awk_median"'function med(a, k, c,   i, v) {
             for (i = 1; i <= c; i++) v[i] = a[k, i]
             return median(v, c)
         }
         { k = $1 FS $2 FS $3 FS $4; if (!(k in c)) order[++n] = k
           i = ++c[k]; rps[k, i] = $5; p50[k, i] = $6; p99[k, i] = $7 }
         END { for (x = 1; x <= n; x++) { k = order[x]
                   printf "%s,%.0f,%.3f,%.3f\n", k, med(rps, k, c[k]), med(p50, k, c[k]),
                          med(p99, k, c[k]) } }' "$raw" >"$med"

# one row per server and depth: SET and GET side by side
table=$tmp/table.csv
awk -F, '{ k = $1 "," $2 "," $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
           v[k "," $4] = $5 "," $6 "," $7 }
         END { for (i = 1; i <= n; i++) print order[i] "," v[order[i] ",SET"] "," v[order[i] ",GET"] }' \
    "$med" >"$table"
{
    echo "# kvstore vs redis-server"
    echo
    echo "redis-benchmark -t set,get -c 50 -n $n -P 1 and -n $((10 * n)) -P 16${keyspace:+ -r $keyspace} over UNIX sockets;"
    echo "medians of $rounds rounds (each round runs every server in turn);"
    echo "kvstore at TXN_PDOM=1 ($(nproc) cores shared by server and client; pools and AOF in /dev/shm)."
    echo "Each server's run waited (up to 30 s) for the CPUs to be 90% idle: $(awk '$1 >= 90 { q++ } END { print q + 0 " of " NR }' "$tmp/idle") runs started so;"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "$(redis-server --version | cut -d' ' -f1-3); $(date -u +%Y-%m-%d)."
    echo
    echo "| server | durability | P | SET ops/s | SET p50 ms | SET p99 ms | GET ops/s | GET p50 ms | GET p99 ms |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    awk -F, '{ printf "| %s | %s | %s | %.0f | %s | %s | %.0f | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$table"
    echo
    # the comparisons the issue asks for
    # the fastest persistent engine of each operation (a durable kvstore:
    # acknowledged at commit or after the epoch's flush)
    for p in 1 16; do
        awk -F, -v p="$p" '
            $3 == p && $1 ~ /^kvstore-/ && $2 ~ /PDOM/ {
                if ($4 > ks) { ks = $4; bs = $1 }
                if ($7 > kg) { kg = $7; bg = $1 }
            }
            $3 == p && $1 == "redis-server" && $2 == "AOF fsync always" { rs = $4; rg = $7 }
            $3 == p && $1 == "kvstore-none" { ns = $4; ng = $7 }
            $3 == p && $1 == "redis-server" && $2 == "none" { os = $4; og = $7 }
            END {
                if (rs && ks) printf "- P %s: fastest persistent engine vs redis-server appendfsync always: SET %.2fx (%s), GET %.2fx (%s)\n", p, ks / rs, bs, kg / rg, bg
                if (os && ns) printf "- P %s: kvstore-none vs redis-server without persistence: SET %.2fx, GET %.2fx\n", p, ns / os, ng / og
            }' "$table"
    done
} >results/kvstore.md
{
    echo
    all_tests
} >>results/kvstore.md

# the plot: ops/s per server, SET and GET, a panel per depth (scripts/kvplot.gp)
awk -F, '{ d = $2; sub(/commit at /, "", d); print $1 " (" d ")," $3 "," $4 "," $7 }' "$table" >"$tmp/plot.csv"
gnuplot -e "data='$tmp/plot.csv'; out='results/kvstore.png'; depths='1 16'; requests='$n $((10 * n))'; rounds=$rounds; flags='${keyspace:+-r $keyspace}'" \
    scripts/kvplot.gp
cat results/kvstore.md
echo "(plot: results/kvstore.png)"
