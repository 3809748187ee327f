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
export PMEM_IS_PMEM_FORCE=${PMEM_IS_PMEM_FORCE:-1}
dir=$(mktemp -d /tmp/kvcompat-XXXXXX)
pool=/dev/shm/kvcompat-$$.pool
redis_pid=
kv_pid=

cleanup() {
    for p in $redis_pid $kv_pid; do
        kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -f "$pool"
    if [ -n "${COMPAT_KEEP:-}" ]; then
        echo "kept: $dir"
    else
        rm -rf "$dir"
    fi
}
trap cleanup EXIT

. "$here/../serve.sh"
kvstore=$server
server=redis-server
sock=$dir/redis.sock
serve "$dir/redis.log" --port 0 --unixsocket "$sock" --save '' --appendonly no \
    --dir "$dir" || { echo "FAIL: redis-server did not start"; exit 1; }
redis_pid=$pid
server=$kvstore
sock=$dir/kv.sock
serve "$dir/kv.log" --pool "$pool" --unix "$sock" --port 0 --pool-size 64M ||
    { echo "FAIL: $(basename "$kvstore") did not start"; exit 1; }
kv_pid=$pid

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
    /^#@(sort|type)[ \t]*$/ { sub(/[ \t]*$/, ""); mark = substr($0, 3); next }
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
for f in redis kv; do
    r=$(wc -l <"$dir/$f.out")
    if [ "$r" -ne "$n" ]; then
        echo "FAIL: $r replies from $f for $n commands"
        status=1
    fi
done
[ "$status" -eq 0 ] || exit 1

awk -v n="$n" -v known="$known" -v cmds="$dir/cmds" -v rout="$dir/redis.out" \
    -v kout="$dir/kv.out" '
    function norm(s) {
        gsub(/[ \t]+/, " ", s)
        sub(/^ /, "", s)
        sub(/ $/, "", s)
        return s
    }
    # the elements of a reply without their indexes, sorted
    function sorted(s,    a, m, i, j, t, out) {
        m = split(s, a, "\001")
        for (i = 1; i <= m; i++)
            while (sub(/^ *[0-9]+\) /, "", a[i]))
                ;
        for (i = 2; i <= m; i++)
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
            }
        out = a[1]
        for (i = 2; i <= m; i++)
            out = out "\001" a[i]
        return out
    }
    function typeof_reply(s) {
        if (s ~ /^\(integer\) /) return "(integer)"
        if (s ~ /^\(error\) /) return "(error)"
        if (s ~ /^\(nil\)/) return "(nil)"
        if (s ~ /^"/) return "(string)"
        if (s ~ /^\(empty array\)/ || s ~ /^ *1\) /) return "(array)"
        if (s ~ /^ *1# /) return "(map)"
        # redis-cli prints the replies of INFO and CLIENT LIST raw, an
        # error too: "ERR ..." without "(error)"
        if (s ~ /^[A-Z][A-Z]+ /) return "(error)"
        return "(text)"
    }
    function show(s) {
        gsub(/\001/, "\n      ", s)
        return s
    }
    function flat(s) {
        gsub(/\001/, " | ", s)
        return length(s) > 100 ? substr(s, 1, 97) "..." : s
    }
    BEGIN {
        while ((getline e < known) > 0) {
            if (e ~ /^[ \t]*(#|$)/)
                continue
            e = norm(e)
            if (e ~ / /) exact[e] = 0
            else name[toupper(e)] = 0
        }
        for (i = 1; i <= n; i++) {
            getline c < cmds
            split(c, f, "\t")
            getline r < rout
            getline k < kout
            line = f[1]; mark = f[2]; cmd = norm(f[3])
            if (mark == "sort") { r = sorted(r); k = sorted(k) }
            if (mark == "type") { r = typeof_reply(r); k = typeof_reply(k) }
            w = cmd
            sub(/ .*/, "", w)
            w = toupper(w)
            listed = 0
            if (cmd in exact) { exact[cmd]++; listed = 1 }
            if (w in name) { name[w]++; listed = 1 }
            if (r == k && !listed) {
                same++
            } else if (r == k) {
                stale++
                printf "NOW IDENTICAL, remove it from unsupported.txt (or narrow the entry): line %d: %s\n", line, cmd
            } else if (listed) {
                as_listed++
                printf "listed      line %d: %s\n    redis:   %s\n    kvstore: %s\n", line, cmd, flat(r), flat(k)
            } else {
                bad++
                unexpected = unexpected sprintf("DIFFERS     line %d: %s\n  redis-server:\n      %s\n  kvstore:\n      %s\n", line, cmd, show(r), show(k))
            }
        }
        for (e in exact)
            if (!exact[e]) { printf "unsupported.txt: no such line in the script: %s\n", e; unused++ }
        for (e in name)
            if (!name[e]) { printf "unsupported.txt: no such command in the script: %s\n", e; unused++ }
        printf "%s", unexpected
        printf "%d commands identical, %d differ as listed, %d differ unexpectedly\n", same, as_listed, bad
        if (stale) printf "FAIL: %d listed commands now give redis-server'"'"'s reply: remove them from unsupported.txt\n", stale
        if (unused) printf "FAIL: %d entries of unsupported.txt match nothing in the script\n", unused
        if (bad) printf "FAIL: %d commands differ from redis-server and are not listed in unsupported.txt\n", bad
        if (n < 300) printf "FAIL: the script has %d commands, fewer than 300\n", n
        exit (bad || stale || unused || n < 300) ? 1 : 0
    }'
