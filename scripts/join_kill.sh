#!/usr/bin/env bash
# join_kill.sh [--rounds N] [ENGINE...]: SIGKILLs in transactions over two
# pools (tests/join.c, its kill case), N rounds (default 200) on each engine
# that joins (default: undo): each round two new pools, a child committing
# joined transactions over both, killed 1 to 30 ms in; then one pool opened
# first (its recovery opens the other when it must). Prints each engine's
# verdict; exit 1 if any round left the pools disagreeing, lost an
# acknowledged transaction or left a pool that does not open.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

rounds=200
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    -*) echo "usage: $0 [--rounds N] [ENGINE...]" >&2; exit 2 ;;
    *) break ;;
    esac
done
BUILD_DIR=${BUILD_DIR:-build}
build "$BUILD_DIR"
engines=${*:-undo}
export PMEM_IS_PMEM_FORCE=1 JOIN_KILL_ROUNDS=$rounds CK_DEFAULT_TIMEOUT=$((60 + rounds)) \
    CK_RUN_CASE=kill
bad=0
for e in $engines; do
    t0=$(date +%s)
    if out=$("$BUILD_DIR/bin/join-$e" 2>&1); then
        verdict=$(grep -m1 'rounds, 0 inconsistent' <<<"$out" || echo "no verdict")
    else
        verdict="FAILED: $(grep -m1 -E ':[FE]:' <<<"$out" | tail -c 300)"
        bad=1
    fi
    echo "join_kill $e: $verdict ($(($(date +%s) - t0)) s; $(grep -m1 KILL_SEED <<<"$out" | sed 's/.*KILL_SEED/KILL_SEED/'))"
done
exit $bad
