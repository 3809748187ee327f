/* txn_layout.h - persistent data retention: what happens to a pool when
 * the program that reads it changes its structs. Three models, on every
 * engine (see persistent-data-retention-models in the project's papers):
 *
 *  Reset     The pool records its layout name, a layout version and, per
 *            registered persistent type, a signature (size and fields).
 *            txn_layout_open() refuses a pool of another name, version or
 *            signature with TXN_E_LAYOUT / TXN_E_LAYOUTVER / TXN_E_TYPESIG,
 *            leaving the file as it was; txn_layout_error() names what the
 *            pool holds and what the program expects. TXN_LAYOUT_RESET
 *            recreates the pool instead.
 *
 *  Manual    The program registers migrations, each converting version v
 *            to v + 1 (txn_migration). Opening an older pool runs them, in
 *            transactions of a size the program bounds. A migration builds
 *            the new data beside the old (objects from txn_migrate_alloc),
 *            then one transaction switches to it and bumps the version,
 *            then the old objects (txn_migrate_retire) are freed. A crash
 *            leaves the old version or the new, never a mix: an open by the
 *            new program resumes an interrupted migration, an open by the
 *            old program drops it (frees what it built).
 *
 *  Automatic Lazily extendible structs (LEDS): a struct that may grow
 *            carries a hidden link (TXN_EXTENDIBLE) to its next extension
 *            block. New fields live in extension blocks, declared once and
 *            never changed (TXN_EXT_LEVEL); reaching a field of level k
 *            through txn_ext_get() allocates and initialises the missing
 *            levels 1..k inside the caller's transaction, the first time.
 *            Objects nobody touches are never converted; objects a new
 *            program makes may be born extended (txn_ext_alloc).
 *
 * Handles stored in extension links are txn_obj * values, valid across runs
 * like every handle (txn.h).
 */
#ifndef PMTX_TXN_LAYOUT_H
#define PMTX_TXN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- persistent types: a signature is the hash of the type's name, size
 * and each field's offset and size (in declaration order). */
typedef struct txn_field {
    uint32_t off, size;
} txn_field;

typedef struct txn_type {
    const char *name;
    size_t size;
    const txn_field *fields;
    size_t nfields;
} txn_type;

#define TXN_FIELD(type, f) {(uint32_t)offsetof(type, f), (uint32_t)sizeof(((type *)0)->f)}
/* TXN_TYPE(struct node, TXN_FIELD(struct node, key), ...) */
#define TXN_TYPE(type, ...)                                                    \
    {#type, sizeof(type), (const txn_field[]){__VA_ARGS__},                    \
     sizeof((const txn_field[]){__VA_ARGS__}) / sizeof(txn_field)}

/* ---- manual model */
typedef struct txn_migrate txn_migrate; /* a running migration */

/* What step() returns while work remains. */
#define TXN_MIGRATE_MORE 1

typedef struct txn_migration {
    uint32_t from; /* converts a pool of layout version `from` to from + 1 */
    size_t scratch_size; /* bytes of a zero-filled persistent object the
                            migration keeps its progress in (0: none) */
    /* One bounded piece of the work, in transaction tx (the library begins
     * and commits it): read old data, write only objects made with
     * txn_migrate_alloc() and the scratch object, never old objects.
     * Returns TXN_MIGRATE_MORE while work remains, 0 when the new data is
     * complete, or a TXN_E_* code (the transaction is then aborted and the
     * open fails; the next open resumes). */
    int (*step)(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg);
    /* The switch, in the transaction that also bumps the version: make
     * the root (or whatever is the entry point) refer to the new data and
     * retire the old objects that remain (txn_migrate_retire). NULL: none. */
    int (*finish)(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg);
    void *arg;
} txn_migration;

/* Allocate an object of the new version in the migration's transaction
 * `tx`; if the migration is dropped, the library frees it. */
int txn_migrate_alloc(txn_migrate *m, txn *tx, size_t n, txn_obj **out);

/* Free `old` (an object of the old version) once the new version is in
 * place, in a later transaction of bounded size. */
int txn_migrate_retire(txn_migrate *m, txn *tx, txn_obj *old);

/* ---- the layout a program expects */
typedef struct txn_layout {
    const char *name;       /* as for txn_pool_create (<= 63 bytes) */
    uint32_t version;       /* >= 1 */
    const txn_type *types;  /* persistent types whose signatures must match */
    size_t ntypes;
    const txn_migration *migrations; /* the manual model's steps, any order */
    size_t nmigrations;
    unsigned batch;         /* objects the library frees per transaction
                               when it retires old data (default 64) */
} txn_layout;

/* flags of txn_layout_open */
#define TXN_LAYOUT_CREATE 1u /* create the pool (with opts) if it is missing */
#define TXN_LAYOUT_RESET  2u /* reset model: a pool of another layout name,
                                version or signature is deleted and created
                                anew (with opts); its data is lost */

/* Open the pool at `path` for layout `l`, as txn_pool_open() (recovery
 * included), then compare its layout record with `l`:
 *  - version 0 (a pool made by txn_pool_create, or created here): the
 *    record takes l's version and signatures;
 *  - same version: every type of l must be recorded with the same
 *    signature, and no other (else TXN_E_TYPESIG);
 *  - older version: the migrations from it to l->version run (all must be
 *    registered, else TXN_E_LAYOUTVER) before this returns;
 *  - newer version: TXN_E_LAYOUTVER.
 * The refusals are decided before anything is written, on a private
 * copy-on-write view of the file with interrupted transactions recovered
 * in memory (the pool as the open would find it): a refused pool's file
 * keeps every byte (an interrupted transaction stays for the next open to
 * recover), unless TXN_LAYOUT_RESET recreates it. An open that is not
 * refused opens the file twice (the view, then the pool).
 * Other errors: those of txn_pool_open/txn_pool_create, and those of the
 * migrations (the pool then holds the old version or the new, and the next
 * open resumes). Durable on return. */
int txn_layout_open(const char *path, const txn_layout *l, const txn_pool_opts *opts,
                    unsigned flags, txn_pool **out);

/* What txn_layout_open() does once the pool is open, for a pool opened
 * already: check it against l and run the migrations it needs. No other
 * thread may use the pool meanwhile (nor during txn_layout_open). */
int txn_layout_apply(txn_pool *p, const txn_layout *l);

/* What the calling thread's last failed txn_layout_open() or
 * txn_layout_inspect() found, naming the pool's layout and the program's,
 * e.g. "pool 'kv' version 2, program 'kv' version 3: no migration from
 * version 2". "" after a success. */
const char *txn_layout_error(void);

/* The layout version the pool's record holds (0: none recorded). */
int txn_layout_version(txn_pool *p, uint32_t *version);

/* What the pool's layout record holds (txn_layout_inspect). */
typedef struct txn_layout_info {
    uint32_t version;   /* of the data reachable from the root; 0: none */
    uint32_t target;    /* a migration in progress: the version it builds
                           (or, once switched, has reached); 0: none */
    int cleaning;       /* the migration switched and still frees the old
                           version's objects */
    uint64_t types;     /* type signatures recorded */
} txn_layout_info;

/* Read and check the pool's layout record and its signature table:
 * TXN_E_CORRUPT, with txn_layout_error() naming the damage, when either
 * is malformed. Reads only (on a view, txn_pool_view(), it writes nothing
 * anywhere). */
int txn_layout_inspect(txn_pool *p, txn_layout_info *out);

/* ---- automatic model: lazily extendible structs
 *
 *   struct node { uint32_t key; txn_obj *next; TXN_EXTENDIBLE; };
 *   struct node_v2 { uint64_t key64; TXN_EXTENDIBLE; };   level 1
 *   static int node_v2_init(txn *tx, txn_obj *o, void *ext)
 *   { struct node_v2 *e = ext; uint32_t k;
 *     int rc = txn_read(tx, o, offsetof(struct node, key), &k, 4);
 *     e->key64 = k; return rc; }
 *   static const txn_ext_type node_t =
 *       TXN_EXT_TYPE(struct node, TXN_EXT_LEVEL(struct node_v2, node_v2_init));
 *
 *   uint64_t k; txn_ext_read(tx, &node_t, o, 1, offsetof(struct node_v2, key64), &k, 8);
 *
 * Levels are strictly nested (level k extends level k-1) and, once a
 * program has run with them, never changed or removed: add a level.
 */
#define TXN_EXTENDIBLE txn_obj *txn_ext_link_ /* hidden link, NULL until extended */

/* Fills the zero-filled volatile image `ext` of a new extension of object
 * `o` (read o through tx); the library writes it in one piece. */
typedef int (*txn_ext_init_fn)(txn *tx, txn_obj *o, void *ext);

typedef struct txn_ext_level {
    size_t size;     /* bytes of the extension block */
    size_t link_off; /* offset of its TXN_EXTENDIBLE link */
    txn_ext_init_fn init; /* NULL: the new fields start zeroed */
} txn_ext_level;

typedef struct txn_ext_type {
    size_t link_off; /* offset of the base struct's link */
    const txn_ext_level *levels;
    unsigned nlevels;
    size_t base_size; /* bytes of the base struct (txn_ext_alloc) */
} txn_ext_type;

#define TXN_EXT_LEVEL(ext, init) {sizeof(ext), offsetof(ext, txn_ext_link_), init}
#define TXN_EXT_TYPE(base, ...)                                                \
    {offsetof(base, txn_ext_link_), (const txn_ext_level[]){__VA_ARGS__},      \
     (unsigned)(sizeof((const txn_ext_level[]){__VA_ARGS__}) / sizeof(txn_ext_level)), \
     sizeof(base)}

/* Objects born extended. An object made by txn_ext_alloc holds its base
 * struct and every level of its type in one block (one allocation, no
 * extension to follow): level k at txn_ext_inline_off(t, k), each link
 * that leads to a level in the block set to TXN_EXT_INLINE, the last
 * level's link NULL (a level a later program adds is a block of its own).
 * Nothing else is written: the levels' inits do not run (a new object's
 * fields are its program's to write). Every txn_ext_* call follows
 * TXN_EXT_INLINE links; only such an object holds them. */
#define TXN_EXT_INLINE ((txn_obj *)(uintptr_t)1)
int txn_ext_alloc(txn *tx, const txn_ext_type *t, txn_obj **out);
static inline size_t txn_ext_inline_off(const txn_ext_type *t, unsigned level)
{
    size_t off = (t->base_size + 7) & ~(size_t)7;
    for (unsigned k = 1; k < level; k++)
        off += (t->levels[k - 1].size + 7) & ~(size_t)7;
    return off;
}

/* Where level `level` (1..nlevels) of object o is, allocating and
 * initialising the missing levels up to it in tx, each once, level by
 * level: *out = the object that holds it, *off = where it starts there
 * (0 for an extension block; txn_ext_inline_off for a level born in o).
 * Read and write it with txn_read/txn_write at *off + the field's offset.
 * TXN_E_INVAL for a bad level, TXN_E_CORRUPT for a TXN_EXT_INLINE link
 * outside o; otherwise what txn_read/txn_alloc/txn_write return (an error
 * leaves tx able only to abort). */
int txn_ext_get(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, txn_obj **out,
                size_t *off);

/* txn_read/txn_write of n bytes at `off` of o's extension `level`,
 * through txn_ext_get (TXN_E_INVAL beyond the level's size). A write that
 * makes its own level stores the level's block once, the written bytes
 * laid over what its init produced. */
int txn_ext_read(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, size_t off,
                 void *dst, size_t n);
int txn_ext_write(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, size_t off,
                  const void *src, size_t n);

/* A read that never writes: like txn_ext_read, but when the level is
 * missing, its init runs on a volatile image that is then dropped, so the
 * bytes read are those the extension would start with. Inits of levels
 * below it must not be needed (an init that reads lower levels through
 * txn_ext_peek is fine). Valid when the init depends only on fields the
 * program no longer writes (the common case: it converts an old field);
 * it spares the allocation on paths that only look, e.g. key compares. */
int txn_ext_peek(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, size_t off,
                 void *dst, size_t n);

/* Free o and every extension it has, in tx. */
int txn_ext_free(txn *tx, const txn_ext_type *t, txn_obj *o);

/* Redundant checks removed (the paper's section 4.4): a caller that has
 * read o's link (its TXN_EXTENDIBLE field) in this transaction, e.g. with
 * o's other fields in one txn_read, passes the value as `link` and these
 * calls do not read it again. A non-NULL link is always current (a link,
 * once set, changes only when o is freed); get and write read a NULL one
 * again before they make level 1, so a stale NULL costs a read, never a
 * second extension. free_known trusts a NULL link: it must have been read
 * after the last call of this transaction that could have extended o. */
int txn_ext_get_known(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link, unsigned level,
                      txn_obj **out, size_t *off);
int txn_ext_write_known(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link,
                        unsigned level, size_t off, const void *src, size_t n);
int txn_ext_free_known(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link);

/* A deep copy: a new object with o's payload (levels born in o included)
 * and copies of its extension blocks (a plain copy would share them). */
int txn_ext_copy(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj **out);

#ifdef __cplusplus
}
#endif
#endif /* PMTX_TXN_LAYOUT_H */
