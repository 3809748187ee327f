#!/usr/bin/env bash
# memccapable.sh SERVER KVCLIENT - libmemcached's conformance tests of the
# text protocol (memccapable -a) and of the binary protocol (memccapable
# -b) against kvstore-<engine>'s memcached port
# (issue #32). Passes on "All tests passed" and a clean SIGTERM exit; skips
# (77) without memccapable. TCP only: memccapable 1.1 resolves a host name
# and has no way to name a UNIX socket.
set -uo pipefail
server=$1
kvclient=$2
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/deps.sh" memccapable || exit
. "$here/serve.sh"
workdir kvmemccapable
port=$("$kvclient" freeport)
"$server" --pool "$pool" --port 0 --memcached-port "$port" --pool-size 64M \
    >"$dir/server.log" 2>&1 &
pid=$!
pids=$pid
mc_wait "$port" "$pid" || { tail "$dir/server.log"; exit 1; }

status=0
for proto in a b; do
    memccapable -$proto -h 127.0.0.1 -p "$port" -t 10 >"$dir/out" 2>&1
    tail -n 3 "$dir/out"
    if ! grep -q '^All tests passed' "$dir/out"; then
        echo "FAIL: memccapable -$proto:"
        grep -v '\[pass\]' "$dir/out"
        status=1
    fi
done
kill -TERM "$pid"
wait "$pid"
rc=$?
pids=
if [ "$rc" -ne 0 ]; then
    echo "FAIL: $(basename "$server") exited $rc on SIGTERM"
    tail "$dir/server.log"
    status=1
fi
[ "$status" -eq 0 ] && echo "memccapable: 1 passed, 0 failed" || echo "memccapable: 0 passed, 1 failed"
exit "$status"
