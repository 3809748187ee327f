#!/usr/bin/env bash
# mc_refill.sh SERVER KVCLIENT - the memcached port of a pool full of
# small items takes large ones (issue #41, item 1): a 16 MiB pool with
# --max-memory 8M (MC_REFILL_LIMIT) filled with 100-byte items
# (MC_REFILL_SMALL, 70,000: more than fit), then 2,000 sets of 5,000
# bytes: each answered STORED (evicting as needed), the last one there,
# and at least 1,200 of them kept (MC_REFILL_KEEP): the limit's room, once
# the small items are evicted. While emptied runs stayed in their class,
# 352 were kept (the free chunks' room), and without a limit the large
# sets evicted every small item and answered SERVER_ERROR out of memory.
# Then the same on a new pool without a limit (--max-memory 0, no count
# of kept items asked): the small items fill the pool itself, with the
# store's table mid-resize, and each large set must evict to be stored;
# undo stored none of them while an evicting delete needed a new bucket
# segment to move buckets. MC_REFILL_LIMIT set: that one case only.
set -uo pipefail
server=$1
kvclient=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve.sh"
workdir kvmcrefill
# refill LIMIT KEEP: one run on a new pool
refill() {
    local limit=$1 keep=$2 line
    small=${MC_REFILL_SMALL:-70000}
    large=2000
    port=$("$kvclient" freeport)
    "$server" --pool "$pool" --port 0 --memcached-port "$port" --pool-size 16M \
        --max-memory "$limit" \
        >"$dir/server.log" 2>&1 &
    pid=$!
    pids=$pid
    mc_wait "$port" "$pid" || { tail "$dir/server.log"; return 1; }
    exec 3<>"/dev/tcp/127.0.0.1/$port"

    # a request stream, then a round trip: everything before it was served
    sync_server() {
        printf 'version\r\n' >&3
        local line
        while IFS= read -r -t 60 line <&3; do
            case $line in VERSION*) return 0 ;; esac
        done
        echo "FAIL: no answer to version"
        return 1
    }

    awk -v n="$small" 'BEGIN { v = sprintf("%100s", ""); gsub(/ /, "s", v);
        for (i = 0; i < n; i++) printf "set s:%d 0 0 100 noreply\r\n%s\r\n", i, v }' >"$dir/small"
    awk -v n="$large" 'BEGIN { v = sprintf("%5000s", ""); gsub(/ /, "L", v);
        for (i = 0; i < n; i++) printf "set L:%d 0 0 5000\r\n%s\r\n", i, v }' >"$dir/large"
    cat "$dir/small" >&3
    sync_server || return 1
    items() {
        printf 'stats\r\n' >&3
        local line n=
        while IFS= read -r -t 60 line <&3; do
            line=${line%$'\r'}
            case $line in "STAT curr_items "*) n=${line#STAT curr_items } ;; END) break ;; esac
        done
        echo "$n"
    }
    before=$(items)
    cat "$dir/large" >&3
    stored=0 other=0
    for ((i = 0; i < large; i++)); do
        IFS= read -r -t 60 line <&3 || { echo "FAIL: no reply to set $i"; return 1; }
        line=${line%$'\r'}
        if [ "$line" = STORED ]; then
            stored=$((stored + 1))
        else
            [ "$other" -eq 0 ] && echo "set L:$i answered: $line"
            other=$((other + 1))
        fi
    done
    after=$(items)
    # the large items still there (touch: a short reply; bash reads a socket
    # byte by byte)
    for ((i = 0; i < large; i++)); do printf 'touch L:%d 0\r\n' "$i"; done >&3
    kept=0 last=
    for ((i = 0; i < large; i++)); do
        IFS= read -r -t 60 line <&3 || break
        [ "${line%$'\r'}" = TOUCHED ] && kept=$((kept + 1)) last=$i
    done
    echo "--max-memory $limit: items: $before before the large sets, $after after ($kept of them large);" \
        "large sets: $stored stored, $other not"
    if [ "$stored" -ne "$large" ]; then
        echo "FAIL: $other of $large sets of 5,000 bytes not stored"
        status=1
    fi
    if [ "$last" != $((large - 1)) ]; then
        echo "FAIL: the last large item is gone"
        status=1
    fi
    # the limit's bytes hold large items once the small ones are evicted: at
    # least 1,200 of 5,000 bytes under 8 MiB (items cost more than their value)
    if [ "$kept" -lt "$keep" ]; then
        echo "FAIL: only $kept large items kept"
        status=1
    fi
    exec 3<&-
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    pids=
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $(basename "$server") exited $rc on SIGTERM"
        tail "$dir/server.log"
        status=1
    fi
    rm -f "$pool"
}

status=0
if [ -n "${MC_REFILL_LIMIT:-}" ]; then
    refill "$MC_REFILL_LIMIT" "${MC_REFILL_KEEP:-1200}" || status=1
else
    refill 8M "${MC_REFILL_KEEP:-1200}" || status=1
    refill 0 0 || status=1
fi
exit "$status"
