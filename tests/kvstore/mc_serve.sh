# mc_serve.sh - sourced by the memcached-protocol test scripts.
# mc_wait PORT PID: wait until something accepts on 127.0.0.1:PORT (20 s
# at most) while process PID lives; 0 once it does, 1 (with a message) if
# PID died or the time ran out.
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
