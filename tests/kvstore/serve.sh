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
