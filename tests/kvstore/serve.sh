# serve.sh - sourced by the kvstore test scripts.
# serve LOG ARGS...: start the server ($server) with ARGS in the background
# ($pid), its output appended to LOG, and wait until it answers PING on
# $sock (20 s at most).
serve() {
    local log=$1
    shift
    "$server" "$@" >>"$log" 2>&1 &
    pid=$!
    for _ in $(seq 400); do
        [ "$(redis-cli -s "$sock" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "server did not start"
    tail "$log"
    return 1
}

# mc_wait PORT PID: wait until something accepts on 127.0.0.1:PORT (20 s
# at most) while process PID lives (a memcached port); 0 once it does, 1
# (with a message) if PID died or the time ran out.
mc_wait() {
    local port=$1 pid=$2
    for _ in $(seq 400); do
        kill -0 "$pid" 2>/dev/null || { echo "FAIL: server (pid $pid) exited"; return 1; }
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "FAIL: nothing listens on port $port after 20 s"
    return 1
}

# workdir TAG: a work directory ($dir, in $TMPDIR) and a pool name ($pool, in
# /dev/shm) for a test script, and PMEM_IS_PMEM_FORCE=1 unless it is set.
# At the script's exit the servers whose pids are in $pids are killed and
# both are removed; COMPAT_KEEP=1 keeps the directory and prints its name.
workdir() {
    export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
    dir=$(mktemp -d -t "$1-XXXXXX")
    pool=/dev/shm/$1-$$.pool
    pids=
    trap workdir_end EXIT
}

# resp_test TAG: a test script of one server on $sock: redis-cli there
# (else exit 77, deps.sh), workdir TAG, $sock in it, $fail 0, and
# cli ARGS: redis-cli on $sock; bad WHY: a failure said, $fail 1;
# used: INFO's used_memory.
resp_test() {
    bash "$(dirname "${BASH_SOURCE[0]}")/deps.sh" redis-cli || exit
    workdir "$1"
    sock=$dir/kv.sock
    fail=0
    cli() { redis-cli -s "$sock" "$@"; }
    bad() { echo "FAIL: $*"; fail=1; }
    used() { cli info memory | tr -d '\r' | sed -n 's/^used_memory://p'; }
}

workdir_end() {
    local p
    for p in $pids; do
        kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -f "$pool"
    if [ -n "${COMPAT_KEEP:-}" ]; then
        echo "kept: $dir"
    else
        rm -rf "$dir"
    fi
}
