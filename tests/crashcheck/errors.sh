#!/usr/bin/env bash
# errors.sh CRASHCHECK BANK: txn-crashcheck's clear errors (exit 2 and a
# message naming the problem, nothing left in /dev/shm) for bad options, a
# program not built against a -check library, a program that crashes by
# itself, a CMD that cannot be run and one that hangs, an interrupted
# check; BANK is the correct example built against a -check library.
set -uo pipefail
cc=$1 bank=$2
fail=0
# its files in a directory of this test's own (ctest may run other
# checks at once)
TXN_CHECK_DIR=$(mktemp -d /dev/shm/crashcheck-errors.XXXXXX)
export TXN_CHECK_DIR
trap 'rm -rf "$TXN_CHECK_DIR"' EXIT

expect() { # WANTED-TEXT ARGS...: exit 2 and WANTED-TEXT on stderr
    local want=$1; shift
    local err rc
    err=$("$cc" "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 2 ] || ! grep -q -- "$want" <<<"$err"; then
        echo "FAIL: txn-crashcheck $* exited $rc, said: $err (wanted: $want)"
        fail=1
    else
        echo "ok: $want"
    fi
}
expect "usage:" --images 3
expect "usage:" --images 3 -- "$bank" {pool}
expect "is not a number" --images x --check "$bank --verify {pool}" -- "$bank" {pool}
expect "is not a number from 0 to 2" --pdom 3 --check "$bank --verify {pool}" -- "$bank" {pool}
expect "must name the pool as {pool}" --check "$bank --verify" -- "$bank" {pool}
expect "PROGRAM's arguments must name" --check "$bank --verify {pool}" -- "$bank" x.pool
expect "--replay takes SEED:IMAGE" --replay 5 --check "$bank --verify {pool}" -- "$bank" {pool}
expect "not linked with a -check library" --images 3 --check "true {pool}" -- \
    sh -c 'touch "$0"' {pool}
expect "crashed by itself (signal 11" --images 3 --check "true {pool}" -- \
    sh -c 'kill -SEGV $$' {pool}
expect "CMD could not be run" --images 3 --check "no-such-command-here {pool}" -- \
    "$bank" --transfers 5 {pool}
expect "did not end within --check-timeout (1 s)" --images 3 --check-timeout 1 \
    --check "sleep 30; true {pool}" -- "$bank" --transfers 5 {pool}

# interrupted: its children ended, its files removed
"$cc" --images 100000 --check "$bank --verify {pool}" -- "$bank" --transfers 200 {pool} \
    >/dev/null 2>&1 &
sleep 2
kill -TERM $!
wait $!
[ $? -eq 143 ] && echo "ok: interrupted" || { echo "FAIL: not ended by SIGTERM"; fail=1; }

left=$(ls -A "$TXN_CHECK_DIR")
if [ -n "$left" ]; then
    echo "FAIL: files left behind: $left"
    fail=1
fi
exit $fail
