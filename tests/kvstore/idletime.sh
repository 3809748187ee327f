#!/usr/bin/env bash
# idletime.sh SERVER - OBJECT IDLETIME counts seconds since the key was
# last looked up: 0 or 1 right after SET, 2 or 3 after 2.1 s idle, back to
# 0 or 1 after a GET; OBJECT itself is no access (1 to 3 after 1.2 s more
# of OBJECT calls only); nil for a missing key. About 4 s (the clock
# counts whole seconds, as Redis's: each bound allows a tick more).
set -uo pipefail
server=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/serve.sh"
resp_test kvidle
# within WHAT LOW HIGH: object idletime of key a in [LOW, HIGH]
within() {
    local v
    v=$(cli object idletime a)
    [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -ge "$2" ] && [ "$v" -le "$3" ] ||
        { echo "FAIL: OBJECT IDLETIME $1: '$v', not $2 to $3"; fail=1; }
}
serve "$dir/kv.log" --pool "$pool" --unix "$sock" --port 0 --threads 1 || exit 1
pids=$pid
cli set a 1 >/dev/null
within "right after SET" 0 1
sleep 2.1
within "after 2.1 s" 2 3
cli get a >/dev/null
within "after a GET" 0 1
for _ in 1 2 3 4; do
    cli object encoding a >/dev/null
    sleep 0.3
done
cli object encoding a >/dev/null # (were it an access, the next answer were 0)
within "after 1.2 s of OBJECT calls" 1 3
[ -z "$(cli object idletime none)" ] || { echo "FAIL: a missing key's idle time"; fail=1; }
echo "idletime $(basename "$server"): $([ $fail = 0 ] && echo passed || echo failed)"
exit $fail
