#!/bin/sh
# expect_run.sh STATUS REGEX COMMAND [ARG...]: run COMMAND and pass only
# if it exits with STATUS and its output (stdout and stderr together)
# matches the extended regular expression REGEX (a ctest
# PASS_REGULAR_EXPRESSION alone ignores the exit status).
want=$1
regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want" ]; then
    echo "expect_run: $1 exited with $rc, expected $want"
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
    echo "expect_run: no line of the output matches: $regex"
    exit 1
fi
