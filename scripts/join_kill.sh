#!/usr/bin/env bash
# join_kill.sh [--rounds N] [ENGINE...]: SIGKILLs in transactions over two
# pools, N rounds (default 200) of each of two tests on each engine that
# joins (default: undo redo redo1): tests/join.c's kill case (two new pools a
# round, a child committing joined transactions over both, killed 1 to 30
# ms in; then one pool opened first: its recovery opens the other when it
# must) and tests/sqlite/sqlite_attach_kill.c (SQLite transactions over a
# main and an ATTACHed pmtx database, killed 5 to 60 ms in). Prints each
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
engines=${*:-undo redo redo1}
export PMEM_IS_PMEM_FORCE=1 JOIN_KILL_ROUNDS=$rounds SQLITE_ATTACH_KILLS=$rounds \
    CK_DEFAULT_TIMEOUT=$((60 + rounds))
bad=0
for e in $engines; do
    for t in join sqlite-attach-kill; do
        t0=$(date +%s)
        if out=$(CK_RUN_CASE=$([ $t = join ] && echo kill || echo sigkill) \
                 "$BUILD_DIR/bin/$t-$e" 2>&1); then
            verdict=$(grep -m1 -E 'rounds, .*(0 inconsistent|0 in one database only)' <<<"$out" ||
                      echo "no verdict")
        else
            verdict="FAILED: $(grep -m1 -E ':[FE]:' <<<"$out" | tail -c 300)"
            bad=1
        fi
        echo "$t $e: $verdict ($(($(date +%s) - t0)) s; $(grep -m1 KILL_SEED <<<"$out" | sed 's/.*KILL_SEED/KILL_SEED/'))"
    done
done
exit $bad
