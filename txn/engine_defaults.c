/* engine_defaults.c - what an engine gets when it does not define a call
 * of engine.h itself (weak definitions: an engine's own one wins at link
 * time). They fit engines whose objects are single heap blocks read in
 * place, with nothing to do at begin and durability at commit. */
#include <string.h>

#include "engine.h"

__attribute__((weak)) int eng_begin(struct txn *tx)
{
    (void)tx;
    return 0;
}

/* Durable at commit: nothing to wait for. */
__attribute__((weak)) int eng_sync(txn_pool *p)
{
    (void)p;
    return 0;
}

/* The object is one block. */
__attribute__((weak)) int eng_obj_blocks(txn_pool *p, const txn_obj *o, void *blk[2])
{
    (void)p;
    blk[0] = (void *)o;
    return 1;
}

/* The object is its payload, read in place. */
__attribute__((weak)) void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    (void)tx;
    (void)mode;
    return o;
}

/* Reads go to what txn_open(TXN_RO) gives this transaction. */
__attribute__((weak)) int eng_read(struct txn *tx, txn_obj *o, size_t off, void *dst,
                                   size_t n)
{
    memcpy(dst, (char *)eng_open(tx, o, TXN_RO) + off, n);
    return 0;
}

__attribute__((weak)) void eng_read_committed(txn_pool *p, txn_obj *o, size_t off, void *dst,
                                              size_t n)
{
    (void)p;
    memcpy(dst, (char *)o + off, n);
}

/* Every access calls the engine. */
__attribute__((weak)) const int eng_inlines = 0;

/* Every begin and commit calls the engine. */
__attribute__((weak)) const int eng_quick = 0;

__attribute__((weak)) int eng_inline(struct txn *tx, txn_obj *o, struct txn__way *w)
{
    (void)tx;
    (void)o;
    (void)w;
    return ENG_WAY_NONE;
}

/* The slots' logs are log.c's: pool.c recovered them. */
__attribute__((weak)) int eng_recover_logs(txn_pool *p)
{
    (void)p;
    return 0;
}

/* A format without a uuid: its pools are joined by nothing. */
__attribute__((weak)) uint64_t eng_pool_uuid(txn_pool *p)
{
    (void)p;
    return 0;
}

/* No two-phase commit: txn_join is TXN_E_NOTSUP. */
__attribute__((weak)) const int eng_joins = 0;

__attribute__((weak)) int eng_prepare(struct txn *tx, struct join_ref *ref)
{
    (void)tx;
    (void)ref;
    return TXN_E_NOTSUP;
}

__attribute__((weak)) void eng_finish(struct txn *tx)
{
    (void)tx;
}
