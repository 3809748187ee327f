#!/usr/bin/env bash
# run.sh SERVER - the same command script through redis-server 7.0 and
# kvstore-<engine> (SERVER), one redis-cli session each, and the replies
# compared command by command (issue #31).
#
# commands.redis: one command a line in redis-cli's syntax; '#' lines are
# comments, except two markers that change how the next command's reply is
# compared:
#   #@sort  the reply's elements sorted (hash and keyspace orders differ
#           between implementations; nested indexes are dropped)
#   #@type  only the reply's type (replies that name the server, a client
#           id, a time, or an encoding)
#   #@info  COMMAND INFO's entries cut to their first seven fields (name,
#           arity, flags, first key, last key, step, ACL categories): the
#           tips, key specs and subcommands are Redis's own
#           (docs/kvstore.md)
# unsupported.txt: the known differences, one a line: a single word names
# a command (every line of the script that starts with it), more words are
# an exact line of the script (spaces collapsed).
#
# Prints each command whose replies differ, with both replies (the listed
# ones on one line each), then "N commands identical, M differ as listed,
# K differ unexpectedly". Fails (exit 1) when K > 0, when a listed line now
# gives redis-server's reply (remove it from the list), when an entry of
# the list names nothing in the script, when the script has fewer than 300
# commands or when a server does not start or dies. Skips (exit 77) without
# redis-server or redis-cli, or when redis-server is not 7.0.
# The comparison is ../compat.awk's, each reply as normal.awk makes it.
# COMPAT_KEEP=1 keeps the work directory (both outputs) and prints it.
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
script=${COMPAT_SCRIPT:-$here/commands.redis}
known=${COMPAT_KNOWN:-$here/unsupported.txt}
bash "$here/../deps.sh" redis-server redis-cli || exit
version=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\) .*/\1/p')
case $version in
7.0.*) ;;
*)
    echo "SKIP: redis-server $version: the replies to compare with are 7.0's (7.0.15)"
    exit 77
    ;;
esac
. "$here/../serve.sh"
workdir kvcompat
kvstore=$server
server=redis-server
sock=$dir/redis.sock
serve "$dir/redis.log" --port 0 --unixsocket "$sock" --save '' --appendonly no \
    --dir "$dir" || { echo "FAIL: redis-server did not start"; exit 1; }
redis_pid=$pid
pids=$pid
server=$kvstore
sock=$dir/kv.sock
serve "$dir/kv.log" --pool "$pool" --unix "$sock" --port 0 --pool-size 64M ||
    { echo "FAIL: $(basename "$kvstore") did not start"; exit 1; }
kv_pid=$pid
pids="$pids $pid"

# The commands (line number, marker, text) and redis-cli's input: each
# command followed by "clear", which redis-cli answers itself by writing
# the screen-clearing sequence: one separator after each reply. Lines that
# redis-cli would answer itself (or repeat: a leading count) are refused.
awk -v cmds="$dir/cmds" -v feed="$dir/feed" '
    /^[ \t]*$/ { next }
    tolower($1) ~ /^(clear|quit|exit|connect|help|restart|:.*|[0-9]+)$/ {
        printf "%s line %d: redis-cli runs this itself: %s\n", FILENAME, NR, $0
        bad = 1
        next
    }
    /^#@(sort|type|info)[ \t]*$/ { sub(/[ \t]*$/, ""); mark = substr($0, 3); next }
    /^#/ { next }
    {
        line = $0
        sub(/^[ \t]+/, "", line)
        sub(/[ \t\r]+$/, "", line)
        printf "%d\t%s\t%s\n", NR, mark == "" ? "-" : mark, line > cmds
        printf "%s\nclear\n", line > feed
        mark = ""
    }
    END { exit bad }' "$script" || exit 1
n=$(wc -l <"$dir/cmds")
echo "script: $n commands ($(basename "$script")), redis-server $version, $(basename "$kvstore")"

# One line per reply: its lines joined by \001, carriage returns dropped.
run() {
    redis-cli --no-raw -s "$1" <"$dir/feed" 2>&1 |
        awk 'BEGIN { RS = "\033\\[H\033\\[2J" }
             { gsub(/\r/, ""); sub(/\n$/, ""); gsub(/\n/, "\001"); print }' >"$2"
}
run "$dir/redis.sock" "$dir/redis.out"
run "$dir/kv.sock" "$dir/kv.out"
status=0
for p in $redis_pid $kv_pid; do
    if ! kill -0 "$p" 2>/dev/null; then
        echo "FAIL: a server died during the script (pid $p)"
        tail -n 5 "$dir/kv.log" "$dir/redis.log"
        status=1
    fi
done
[ "$status" -eq 0 ] || exit 1

awk -v cmds="$dir/cmds" -v ref="$dir/redis.out" -v ours="$dir/kv.out" -v known="$known" \
    -v refname=redis-server -v unit=commands -v min=300 -v fold=1 -f "$here/../compat.awk" \
    -f "$here/normal.awk"
