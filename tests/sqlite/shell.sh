#!/usr/bin/env bash
# shell.sh EXT OTHER_EXT [SANITIZERS CC] - the stock sqlite3 shell on the
# pmtx VFS through the loadable extension EXT (build/lib/sqlite/pmtx-E.so):
#  1. it makes and fills a database in several transactions (with a
#     ROLLBACK, and a statement that fails half-way inside a transaction,
#     both after pages spilled), reopens it, and .dump equals the dump of
#     the same script run on a database of SQLite's own VFS;
#  2. files the VFS must refuse (a text file, a stock SQLite database, a
#     truncated and a corrupt pool, a pool of another engine: OTHER_EXT's)
#     give SQLite's error, the VFS's reason on the log, and stay byte for
#     byte as they were.
# Exits 77 (skipped) without the sqlite3 shell. A sanitizer build's
# extension needs the sanitizer's runtime loaded first: LD_PRELOAD.
set -euo pipefail
ext=${1%.so} other=${2%.so} san=${3:-} cc=${4:-cc}
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 shell (Debian: sqlite3)"; exit 77; }
tmp=$(mktemp -d "${TXN_POOL_DIR:-/dev/shm}/pmtx-sqlshell-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
shell=(sqlite3)
if [[ $san == *address* ]]; then # the shell only: not cp, dd, ...
    shell=(env LD_PRELOAD="$("$cc" -print-file-name=libasan.so)" sqlite3)
fi
fail() { echo "FAIL: $*"; exit 1; }

# pmtx FILE [EXT]: the shell on FILE through the VFS, SQL on stdin
pmtx() { "${shell[@]}" -bail -cmd ".log stderr" -cmd ".load ${2:-$ext}" -cmd ".open file:$1?vfs=pmtx"; }

# the same work for both VFSes: deterministic, several transactions
cat >"$tmp/fill.sql" <<'SQL'
PRAGMA cache_size = 10;
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, data BLOB,
                  note TEXT DEFAULT 'none');
CREATE UNIQUE INDEX item_name ON item(name);
CREATE TABLE audit(id INTEGER, what TEXT);
CREATE TRIGGER item_audit AFTER INSERT ON item BEGIN
  INSERT INTO audit VALUES (new.id, 'added ' || new.name);
END;
CREATE VIEW cheap AS SELECT id, name FROM item WHERE price < 10;
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000)
INSERT INTO item(id, name, price, data)
  SELECT x, printf('item-%05d', x), x * 0.25, zeroblob(x % 700) FROM c;
COMMIT;
UPDATE item SET note = printf('%.*c', id % 300, 'n') WHERE id % 3 = 0;
DELETE FROM item WHERE id % 7 = 0;
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000)
INSERT INTO item(id, name, price, data) SELECT 10000 + x, printf('gone-%05d', x), x, zeroblob(900) FROM c;
UPDATE item SET price = -1;
ROLLBACK;
INSERT INTO item(id, name, price) VALUES (5000, 'after rollback', 1.5);
BEGIN;
INSERT INTO item(id, name) VALUES (5001, 'kept');
SQL
# a statement that fails on its last row (the name clash), after spilling:
# run apart from -bail so that the transaction goes on
cat >"$tmp/clash.sql" <<'SQL'
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000)
INSERT INTO item(id, name, data)
  SELECT 20000 + x, CASE WHEN x = 3000 THEN 'kept' ELSE printf('clash-%05d', x) END, zeroblob(800)
  FROM c;
SQL
cat >"$tmp/end.sql" <<'SQL'
INSERT INTO item(id, name) VALUES (5002, 'also kept');
COMMIT;
SQL

run_fill() { # SHELL-FUNCTION FILE: the script, the clash inside its open transaction
    {
        cat "$tmp/fill.sql"
        echo ".bail off"
        cat "$tmp/clash.sql"
        echo ".bail on"
        cat "$tmp/end.sql"
    } | "$@" 2>"$tmp/fill.err" || true
    grep -q "UNIQUE constraint failed: item.name" "$tmp/fill.err" ||
        fail "the clash did not fail as expected: $(cat "$tmp/fill.err")"
    # anything else said: an error of the VFS or of the database
    if grep -qE "pmtx:|Parse error|I/O|malformed|unable to open|full" "$tmp/fill.err"; then
        fail "errors while filling: $(cat "$tmp/fill.err")"
    fi
}

stock() { "${shell[@]}" -bail "$1"; }
run_fill stock "$tmp/stock.db"
echo ".dump" | stock "$tmp/stock.db" >"$tmp/stock.dump"

db=$tmp/app.db
run_fill pmtx "$db"
engine=$(echo "PRAGMA pmtx_engine;" | pmtx "$db")
echo ".dump" | pmtx "$db" >"$tmp/pmtx.dump"
cmp -s "$tmp/stock.dump" "$tmp/pmtx.dump" ||
    fail "$engine: .dump differs from the default VFS's: $(diff "$tmp/stock.dump" "$tmp/pmtx.dump" | head -5)"
want=$(echo "SELECT count(*) FROM item;" | stock "$tmp/stock.db")
check=$(printf 'PRAGMA integrity_check;\nPRAGMA journal_mode;\nSELECT count(*) FROM item;\n' | pmtx "$db" | tr '\n' ' ')
[ "$check" = "ok memory $want " ] || fail "$engine: integrity, journal mode, rows: $check (want $want rows)"
echo "ok: $engine: made, filled (a ROLLBACK, a failed statement), reopened; .dump equals the default VFS's ($(wc -l <"$tmp/pmtx.dump") lines)"

# refused FILE WHAT [EXT]: the shell cannot open FILE, says WHAT, and
# logs the VFS's reason; FILE is unchanged
refused() {
    cp "$1" "$tmp/before"
    local out
    out=$(echo "SELECT count(*) FROM item;" | pmtx "$1" "${3:-}" 2>&1 || true)
    [[ $out == *"$2"* ]] || fail "$engine: $1: expected '$2', got: $out"
    [[ $out == *"pmtx: $1: "* ]] || fail "$engine: $1: no reason logged: $out"
    cmp -s "$1" "$tmp/before" || fail "$engine: $1 changed"
    echo "ok: $engine: $(basename "$1") refused: $(grep -o "pmtx: $1: .*" <<<"$out" | head -1)"
}
printf 'not a database\n' >"$tmp/text.db"
refused "$tmp/text.db" "file is not a database"
refused "$tmp/stock.db" "file is not a database"
cp "$db" "$tmp/truncated.db"
truncate -s 1M "$tmp/truncated.db"
refused "$tmp/truncated.db" "database disk image is malformed"
cp "$db" "$tmp/corrupt.db"
printf '\x5a' | dd of="$tmp/corrupt.db" bs=1 seek=100 conv=notrunc status=none
refused "$tmp/corrupt.db" "database disk image is malformed"
refused "$db" "unable to open database file" "$other"
