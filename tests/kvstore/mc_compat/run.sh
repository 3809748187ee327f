#!/usr/bin/env bash
# run.sh SERVER KVCLIENT - the same request script through memcached
# 1.6.18 and kvstore-<engine>'s memcached port (SERVER), one connection
# each (kvclient mc-replay, both at once), and the replies compared
# request by request (issue #32). Both servers take objects of at most
# 1 MiB (memcached -I 1m, kvstore --max-value 1M), and items of 32 MiB
# in all (memcached -m 32, kvstore --max-memory 32M on a pool of 64 MiB:
# stats' limit_maxbytes is the limit, not the pool).
#
# commands.mc: one request a line (its syntax is in its header); a
# "#@stats FIELD..." line before a request compares only the reply's shape
# (STAT lines, then END) and the named fields' values.
# unsupported.txt: the known differences, one a line: a single word names
# a command (every request of the script that starts with it), more words
# are an exact line of the script (spaces collapsed).
#
# Prints each request whose replies differ, with both replies (the listed
# ones on one line each), then "N requests identical, M differ as listed,
# K differ unexpectedly". Fails (exit 1) when K > 0, when a listed request
# now gets memcached's reply (remove it from the list), when an entry of
# the list names nothing in the script, when the script has fewer than 200
# (COMPAT_MIN)
# requests or when a server does not start or dies. Skips (exit 77)
# without memcached, or when memcached is not 1.6.18.
# The comparison is ../compat.awk's, each reply as normal.awk makes it.
# COMPAT_KEEP=1 keeps the work directory (both outputs) and prints it.
# COMPAT_REPLAY=mc-bin-replay with COMPAT_SCRIPT=binary.mc compares the
# binary protocol (its known differences: COMPAT_KNOWN=binary_unsupported.txt).
set -uo pipefail
server=$1
kvclient=$2
here=$(cd "$(dirname "$0")" && pwd)
script=${COMPAT_SCRIPT:-$here/commands.mc}
known=${COMPAT_KNOWN:-$here/unsupported.txt}
replay=${COMPAT_REPLAY:-mc-replay} # mc-bin-replay: the binary protocol (binary.mc)
min=${COMPAT_MIN:-200}
bash "$here/../deps.sh" memcached || exit
version=$(memcached --version | sed -n 's/^memcached \([0-9.]*\).*/\1/p')
if [ "$version" != 1.6.18 ]; then
    echo "SKIP: memcached $version: the replies to compare with are 1.6.18's"
    exit 77
fi
. "$here/../serve.sh"
workdir kvmccompat
mc_port=$("$kvclient" freeport)
memcached -p "$mc_port" -U 0 -u root -l 127.0.0.1 -I 1m -m 32 >"$dir/memcached.log" 2>&1 &
mc_pid=$!
pids=$mc_pid
mc_wait "$mc_port" "$mc_pid" || { echo "FAIL: memcached did not start"; exit 1; }
kv_port=$("$kvclient" freeport)
"$server" --pool "$pool" --port 0 --memcached-port "$kv_port" --max-value 1M \
    --pool-size 64M --max-memory 32M >"$dir/kv.log" 2>&1 &
kv_pid=$!
pids="$pids $kv_pid"
mc_wait "$kv_port" "$kv_pid" ||
    { echo "FAIL: $(basename "$server") did not start"; tail "$dir/kv.log"; exit 1; }

# The requests: line number, marker, text (as kvclient mc-replay reads them)
awk -v cmds="$dir/cmds" '
    /^#@stats([ \t]|$)/ { mark = $0; sub(/^#@/, "", mark); next }
    /^#/ || /^$/ { next }
    { printf "%d\t%s\t%s\n", NR, mark == "" ? "-" : mark, $0 > cmds; mark = "" }
' "$script"
n=$(wc -l <"$dir/cmds")
echo "script: $n requests ($(basename "$script")), memcached $version, $(basename "$server")"

"$kvclient" "$replay" "$mc_port" <"$script" >"$dir/memcached.out" &
mc_replay=$!
"$kvclient" "$replay" "$kv_port" <"$script" >"$dir/kv.out"
kv_rc=$?
wait "$mc_replay"
mc_rc=$?
status=0
[ "$mc_rc" -eq 0 ] && [ "$kv_rc" -eq 0 ] ||
    { echo "FAIL: kvclient $replay exited $mc_rc (memcached), $kv_rc (kvstore)"; status=1; }
for p in $mc_pid $kv_pid; do
    if ! kill -0 "$p" 2>/dev/null; then
        echo "FAIL: a server died during the script (pid $p)"
        tail -n 5 "$dir/kv.log" "$dir/memcached.log"
        status=1
    fi
done
[ "$status" -eq 0 ] || exit 1

awk -v cmds="$dir/cmds" -v ref="$dir/memcached.out" -v ours="$dir/kv.out" -v known="$known" \
    -v refname=memcached -v unit=requests -v min="$min" -f "$here/../compat.awk" \
    -f "$here/normal.awk"
