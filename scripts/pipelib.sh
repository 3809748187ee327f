# pipelib.sh - what the benchmarks that time batches of requests sent by
# `redis-cli --pipe` over a UNIX socket share (appendbench.sh,
# rangebench.sh; zrangebench.sh its directory and pipe_wait, pipe_stop):
# a scratch directory, redis-server (no persistence) and
# kvstore-<engine> started and stopped on its socket, and a timed batch.
# Sourced; the caller sets `set -euo pipefail` and names itself:
#     pipe_init NAME       $dir: a directory under /dev/shm removed at exit
#     pipe_redis           redis-server on $dir/sock
#     pipe_kvstore ENGINE  $BUILD_DIR/bin/kvstore-ENGINE on $dir/sock, a
#                          new pool of at most 512 MiB
#     timed_pipe FILE      prints the seconds the batch took; stops the
#                          script if a reply was an error
#     pipe_stop            shuts the server down

pipe_init() {
    pipe_name=$1
    local tool
    for tool in redis-server redis-cli; do
        command -v "$tool" >/dev/null || { echo "$pipe_name: $tool is missing" >&2; exit 1; }
    done
    dir=$(mktemp -d "/dev/shm/$pipe_name.XXXXXX")
    pid=
    trap pipe_cleanup EXIT
}

pipe_cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
}

pipe_wait() {
    for _ in $(seq 100); do
        redis-cli -s "$dir/sock" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$pipe_name: $1 did not start" >&2
    exit 1
}

pipe_redis() {
    redis-server --port 0 --unixsocket "$dir/sock" --save '' --appendonly no \
        --dir "$dir" >"$dir/redis.log" 2>&1 &
    pid=$!
    pipe_wait redis-server
}

pipe_kvstore() {
    local bin=$BUILD_DIR/bin/kvstore-$1
    [ -x "$bin" ] || { echo "$pipe_name: $bin is missing" >&2; exit 1; }
    rm -f "$dir/pool" "$dir/sock"
    "$bin" --pool "$dir/pool" --unix "$dir/sock" --port 0 --pool-size 512M \
        >"$dir/kv.log" 2>&1 &
    pid=$!
    pipe_wait "kvstore-$1"
}

timed_pipe() {
    local start end
    start=$(date +%s.%N)
    redis-cli -s "$dir/sock" --pipe <"$1" >"$dir/pipe.out"
    end=$(date +%s.%N)
    grep -q 'errors: 0,' "$dir/pipe.out" ||
        { echo "$pipe_name: errors: $(cat "$dir/pipe.out")" >&2; exit 1; }
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }'
}

pipe_stop() {
    redis-cli -s "$dir/sock" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    pid=
}
