/* pmtx_sqlite.h - the SQLite VFS "pmtx": a main database file kept in a
 * pmtx pool, each SQLite write transaction one txn.h transaction.
 *
 * Use: call pmtx_sqlite_register() once, then open a database with the VFS
 * ("file:/dev/shm/app.db?vfs=pmtx" with SQLITE_OPEN_URI, or the zVfs
 * argument of sqlite3_open_v2). The file is a pool of the engine the
 * program is linked with (txn_engine_name()); it is created when it does
 * not exist and SQLITE_OPEN_CREATE is given. A new pool starts at 4 MiB
 * (PGS_START) and grows as the database does, up to TXN_POOL_MAX. URI
 * parameters (bytes; K, M, G suffixes): pmtx_size=N makes it N bytes at
 * once and no more; pmtx_max=N lets it grow to N (from pmtx_size, if
 * given). A full pool makes writes fail with SQLITE_FULL and changes
 * nothing.
 *
 * Semantics (docs/sqlite.md):
 * - journal_mode is MEMORY, chosen by the VFS at open; the PRAGMA refuses
 *   any other mode. Pages written during a write transaction are staged
 *   in memory and applied at SQLite's commit in one txn.h transaction, so
 *   a crash leaves the database as of the last durable commit; ROLLBACK
 *   and failed statements never reach the pool.
 * - Durability is the engine's (txn.h): at commit for undo, redo, redo1,
 *   cow, pmdk; incll: at the epoch's end with PRAGMA synchronous=OFF, at
 *   commit otherwise (the commit waits for txn_sync); none: never.
 * - One process opens a pool at a time: another process gets SQLITE_BUSY
 *   when it opens it. Connections of one process share it, with SQLite's
 *   locking between them.
 * - Pool errors become SQLite codes: not a pool or a pool of another
 *   layout SQLITE_NOTADB, corrupt or truncated SQLITE_CORRUPT, open
 *   elsewhere SQLITE_BUSY, full SQLITE_FULL, anything else SQLITE_CANTOPEN
 *   or SQLITE_IOERR; the reason goes to sqlite3_log() and to the VFS's
 *   xGetLastError. A refused file is left exactly as it was.
 * - Temporary files and every file other than main databases go to the
 *   VFS that was the default when pmtx_sqlite_register() ran.
 *
 * The loadable extension build/lib/sqlite/pmtx-<engine>.so registers the
 * same VFS for the stock sqlite3 shell (".load", then ".open
 * file:...?vfs=pmtx"); it stays loaded for the process's life. */
#ifndef PMTX_SQLITE_H
#define PMTX_SQLITE_H

#define PMTX_SQLITE_VFS "pmtx"

/* Register the VFS (once per process; later calls return SQLITE_OK and
 * change nothing). make_default: make it the default VFS. Returns an
 * SQLite result code. */
int pmtx_sqlite_register(int make_default);

#endif
