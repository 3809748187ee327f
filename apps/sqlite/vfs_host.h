/* vfs_host.h - the VFS on a store its program made (pagestore.h:
 * pgs_adopt), in a pool the program opened itself: what the crash
 * simulator needs (tests/crashsim/wl_sqlite.c), whose driver creates,
 * traces and crashes the pool. Not part of the VFS's API (pmtx_sqlite.h):
 * a program that opens its databases by file name never calls these. */
#ifndef PMTX_VFS_HOST_H
#define PMTX_VFS_HOST_H

#include "pagestore.h"

/* Open main databases named `name` (as SQLite passes it to xOpen: an
 * absolute path, which need not exist as a file) on the store s from now
 * on. The VFS owns s from here. SQLITE_BUSY if the name is hosted
 * already; pmtx_sqlite_register() must have run. */
int pmtx_sqlite_host(const char *name, pgs *s);

/* Stop hosting `name` and close its store (pgs_close: its pool stays
 * open). SQLITE_BUSY while a connection has it open, SQLITE_NOTFOUND
 * when it is not hosted. */
int pmtx_sqlite_unhost(const char *name);

#endif
