#!/usr/bin/env bash
# grow_kill.sh [--rounds N] [ENGINE...]: SIGKILLs while pools grow
# (tests/grow_kill.c), N rounds (default 200) on each engine of pmtx's
# format (default all of them): each a new pool of 8 MiB that may grow to
# 256 MiB, killed 1 to 120 ms into its filling. Prints each engine's
# verdict; exit 1 if any round lost an acknowledged object, kept an
# uncommitted one, or left a pool that does not open.
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
engines=${*:-undo redo redo1 cow incll}
export PMEM_IS_PMEM_FORCE=1 GROW_KILL_ROUNDS=$rounds CK_DEFAULT_TIMEOUT=$((60 + 2 * rounds))
bad=0
for e in $engines; do
    t0=$(date +%s)
    if out=$("$BUILD_DIR/bin/grow_kill-$e" 2>&1); then
        verdict="$rounds kills, 0 failed"
    else
        verdict="FAILED: $(grep -m1 -E ':[FE]:' <<<"$out" | tail -c 300)"
        bad=1
    fi
    echo "grow_kill $e: $verdict ($(($(date +%s) - t0)) s; $(grep -m1 KILL_SEED <<<"$out" | sed 's/.*KILL_SEED/KILL_SEED/'))"
done
exit $bad
