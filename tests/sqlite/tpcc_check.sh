#!/usr/bin/env bash
# tpcc_check.sh TPCC: tpcc --check-only must fail on a database that
# breaks each consistency condition, and on a missing acknowledgement, and
# pass on the database as loaded (stock unix VFS; sqlite3 shell breaks it).
# Then a pool that fills up: tpcc stops with SQLite's "database or disk is
# full" and the pool's reason, and the database stays consistent; its
# check (a read-only view) leaves the file as it was.
set -euo pipefail
tpcc=$1
dir=$(mktemp -d /dev/shm/tpcc-check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$tpcc" --mode delete --db "$dir/base.db" --load-only --items 500 --customers 60 >/dev/null 2>&1
"$tpcc" --mode delete --db "$dir/base.db" --check-only >/dev/null 2>&1 ||
    { echo "the loaded database fails its checks"; exit 1; }
breaks=(
    "UPDATE warehouse SET w_ytd = w_ytd + 1"                          # 1
    "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_id = 3" # 2
    "DELETE FROM new_order WHERE no_d_id = 2 AND no_o_id = 50"        # 3
    "DELETE FROM order_line WHERE ol_d_id = 4 AND ol_o_id = 7 AND ol_number = 1" # 4
)
for b in "${breaks[@]}"; do
    cp "$dir/base.db" "$dir/t.db"
    sqlite3 "$dir/t.db" "$b"
    if "$tpcc" --mode delete --db "$dir/t.db" --check-only >"$dir/out" 2>&1; then
        echo "not found: $b"; cat "$dir/out"; exit 1
    fi
    grep -q "condition" "$dir/out" || { echo "no condition named for: $b"; cat "$dir/out"; exit 1; }
done
echo "N 1 1 9999 5" >"$dir/acks" # an order that was never made
if "$tpcc" --mode delete --db "$dir/base.db" --check-only --acks "$dir/acks" >"$dir/out" 2>&1; then
    echo "a missing acknowledged order was not found"; cat "$dir/out"; exit 1
fi
echo "each broken condition and the missing order found"

export PMEM_IS_PMEM_FORCE=1
"$tpcc" --db "$dir/full.db" --load-only --items 500 --customers 60 --pool-mb 8 >/dev/null 2>&1
if "$tpcc" --db "$dir/full.db" --seconds 120 --terminals 2 >"$dir/out" 2>&1; then
    echo "2 minutes in a pool of 8 MB and it did not fill"; exit 1
fi
grep -q "pool is full" "$dir/out" && grep -q "database or disk is full" "$dir/out" ||
    { echo "a full pool, not said so:"; cat "$dir/out"; exit 1; }
before=$(md5sum <"$dir/full.db")
"$tpcc" --db "$dir/full.db" --check-only >"$dir/out" 2>&1 ||
    { echo "the full pool's database fails its checks:"; cat "$dir/out"; exit 1; }
[ "$(md5sum <"$dir/full.db")" = "$before" ] || { echo "the check wrote to the pool"; exit 1; }
echo "a full pool: stopped with its reason, consistent, unchanged by the check"
