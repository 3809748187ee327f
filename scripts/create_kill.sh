#!/usr/bin/env bash
# create_kill.sh - SIGKILLs during the creation of a pool, on every
# persistent engine, and of a database of the SQLite VFS (issue #41, item
# 5): CREATE_KILLS rounds each (default 200) of tests/create_kill.c and
# tests/sqlite/sqlite_create_kill.c, whose short runs are in ctest. Each
# prints a line: kills, how many landed before the creation ended, and the
# later starts that failed (all must succeed). Exit 1 when any failed.
#   BUILD_DIR (default build), CREATE_KILLS, CREATE_KILL_SEED
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export PMEM_IS_PMEM_FORCE=1 CREATE_KILLS=${CREATE_KILLS:-200} CK_DEFAULT_TIMEOUT=3600
status=0
ran=0
for e in undo redo redo1 cow incll pmdk; do
    for prog in create_kill sqlite-create-kill; do
        bin=$BUILD_DIR/bin/$prog-$e
        [ -x "$bin" ] || continue
        ran=1
        out=$("$bin" 2>&1)
        rc=$?
        grep '^create-kill' <<<"$out" || echo "$prog-$e: no result line (exit $rc)"
        [ "$rc" -eq 0 ] || status=1
    done
done
if [ "$ran" = 0 ]; then
    echo "create_kill: no create_kill-* programs in $BUILD_DIR/bin (build them)" >&2
    exit 1
fi
exit $status
