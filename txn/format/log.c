/* log.c - append, flush and scan of the chunked per-thread log. */
#include "log.h"

#include "alloc.h"
#include "common.h"
#include "persist.h"

#define SLOT_SEG_OFF 64u        /* first segment inside a slot */
#define SEG_DATA_OFF 64u        /* records start after the seg_hdr */
#define REC_TAIL 8u             /* the checksum */
#define JUMP_SIZE (sizeof(struct log_rec) + REC_TAIL)

static inline size_t rec_size(uint32_t len)
{
    return sizeof(struct log_rec) + (((size_t)len + 7) & ~(size_t)7) + REC_TAIL;
}

static inline char *first_seg(txn_pool *p, struct slot_hdr *slot)
{
    (void)p;
    return (char *)slot + SLOT_SEG_OFF;
}

static inline size_t seg_end(txn_pool *p, struct slot_hdr *slot, char *seg)
{
    return seg == first_seg(p, slot) ? POOL_FMT(p)->hdr->slot_size - SLOT_SEG_OFF
                                     : CHUNK_SIZE;
}

static uint64_t rec_csum(const struct log_rec *h, const void *payload)
{
    return csum64(csum64(LOG_SENTINEL, h, sizeof *h), payload, h->len);
}

void log_attach(struct log *l, txn_pool *p, struct slot_hdr *slot)
{
    l->p = p;
    l->slot = slot;
    log_rewind(l);
}

void log_rewind(struct log *l)
{
    l->seg = first_seg(l->p, l->slot);
    l->off = SEG_DATA_OFF;
    l->end = seg_end(l->p, l->slot, l->seg);
    l->used = 0;
    l->flushed = SEG_DATA_OFF;
}

void log_flush(struct log *l)
{
    pm_flush(l->seg + l->flushed, l->off - l->flushed);
    l->flushed = l->off;
}

/* The record's header word of type and len, as struct log_rec lays them
 * out on x86 (little-endian), computed rather than loaded back. */
static inline uint64_t type_len(uint32_t type, uint32_t len)
{
    _Static_assert(offsetof(struct log_rec, len) == offsetof(struct log_rec, type) + 4 &&
                       offsetof(struct log_rec, type) % 8 == 0,
                   "type and len share a word");
    return (uint64_t)len << 32 | type;
}

/* Stores the record and its checksum, rec_csum's value summed while the
 * words are stored: the header from registers, word by word (a header
 * built in memory and read back in wider loads than its fields' stores
 * stalled each record on store forwarding), the payload read once (a
 * separate pass over the record cost undo a tenth of its instructions on
 * Array, docs/engines.md and docs/access.md). The header, the payload with
 * its padding and the checksum are three stores, in that order, for the
 * crash simulator. */
static void put_rec(struct log *l, uint64_t version, uint32_t type, uint64_t addr,
                    uint64_t aux, const void *src, uint32_t len)
{
    char *at = l->seg + l->off;
    size_t sz = rec_size(len), n = len;
    uint64_t tl = type_len(type, len), *hw = (uint64_t *)(void *)at;
    struct csum s = csum_start(LOG_SENTINEL, sizeof(struct log_rec));
    csum_step(&s, LOG_SENTINEL, version);
    csum_step(&s, tl, addr);
    csum_tail(&s, aux, 0);
    s = csum_start(csum_end(s), n);
    /* word stores the compiler cannot merge into 16-byte stores of a
     * copy on the stack */
    PM_TRACE_LOCK();
    __atomic_store_n(&hw[0], LOG_SENTINEL, __ATOMIC_RELAXED);
    __atomic_store_n(&hw[1], version, __ATOMIC_RELAXED);
    __atomic_store_n(&hw[2], tl, __ATOMIC_RELAXED);
    __atomic_store_n(&hw[3], addr, __ATOMIC_RELAXED);
    __atomic_store_n(&hw[4], aux, __ATOMIC_RELAXED);
    pm_ctr.bytes_stored += sizeof(struct log_rec);
    PM_TRACE_STORE(at, sizeof(struct log_rec));
    if (n) {
        const unsigned char *b = src;
        char *d = at + sizeof(struct log_rec);
        uint64_t w, v;
        PM_TRACE_LOCK();
        for (; n >= 16; n -= 16, b += 16, d += 16) {
            memcpy(&w, b, 8);
            memcpy(&v, b + 8, 8);
            memcpy(d, &w, 8);
            memcpy(d + 8, &v, 8);
            csum_step(&s, w, v);
        }
        if (n) { /* the last 1-15 bytes and the zeros padding them */
            uint64_t t[2] = {0, 0};
            size_t k = 0;
            if (n >= 8) {
                memcpy(&t[0], b, 8);
                k = 8;
            }
            for (; k < n; k++)
                ((unsigned char *)t)[k] = b[k];
            memcpy(d, &t[0], 8);
            if (n > 8)
                memcpy(d + 8, &t[1], 8);
            csum_tail(&s, t[0], t[1]);
        }
        pm_ctr.bytes_stored += sz - sizeof(struct log_rec) - REC_TAIL;
        PM_TRACE_STORE(at + sizeof(struct log_rec), sz - sizeof(struct log_rec) - REC_TAIL);
    }
    pm_store64(at + sz - REC_TAIL, csum_end(s));
    pm_ctr.log_bytes += sz;
    l->off += sz;
    l->used += sz;
}

/* Continue in the next segment, growing the chain when it ends. */
static int next_segment(struct log *l, uint64_t version)
{
    struct seg_hdr *sh = (struct seg_hdr *)l->seg;
    char *next = (char *)(uintptr_t)sh->next;
    if (!next) {
        int rc = alloc_log_chunk(l->p, (void **)&next);
        if (rc)
            return rc;
        pm_store64(&sh->next, (uint64_t)(uintptr_t)next);
        pm_flush(&sh->next, sizeof sh->next);
    }
    put_rec(l, version, LOG_JUMP, (uint64_t)(uintptr_t)next, 0, NULL, 0);
    log_flush(l);
    l->seg = next;
    l->off = l->flushed = SEG_DATA_OFF;
    l->end = CHUNK_SIZE;
    return 0;
}

int log_append(struct log *l, uint64_t version, uint32_t type, uint64_t addr,
               uint64_t aux, const void *src, uint32_t len,
               struct log_rec **out)
{
    size_t sz = rec_size(len);
    if (len > LOG_MAX_PAYLOAD)
        return TXN_E_LOGFULL;
    if (l->off + sz + JUMP_SIZE > l->end) {
        int rc = next_segment(l, version);
        if (rc)
            return rc;
    }
    struct log_rec *at = (struct log_rec *)(l->seg + l->off);
    put_rec(l, version, type, addr, aux, src, len);
    if (out)
        *out = at;
    return 0;
}

void log_set_tail(struct log *l, uint64_t version)
{
    /* tail before tail_version: a line that keeps only a prefix of these
     * stores never pairs a new version with an old tail */
    pm_store64(&l->slot->tail, l->used);
    pm_store64(&l->slot->tail_version, version);
    pm_flush(&l->slot->tail, 16);
}

void log_invalidate(struct log *l)
{
    char *first = first_seg(l->p, l->slot) + SEG_DATA_OFF;
    pm_store64(first, 0);
    pm_flush(first, 8);
}

static int valid_segment(txn_pool *p, uint64_t a)
{
    uint64_t heap = (uint64_t)(uintptr_t)p->base + POOL_FMT(p)->hdr->heap_off;
    return a >= heap && (a - heap) % CHUNK_SIZE == 0 &&
           (a - heap) / CHUNK_SIZE < pool_heap_chunks(p);
}

int log_chain(txn_pool *p, struct slot_hdr *slot, struct vec *segs)
{
    struct seg_hdr *sh = (struct seg_hdr *)first_seg(p, slot);
    for (uint64_t n = 0; sh->next; n++) {
        if (!valid_segment(p, sh->next) || n >= pool_heap_chunks(p))
            return REFUSE(TXN_E_CORRUPT, "log segment %llu: %#llx is no heap chunk",
                          (unsigned long long)n + 1, (unsigned long long)sh->next);
        uint64_t *item = vec_push(segs);
        if (!item)
            return TXN_E_NOMEM;
        *item = sh->next;
        sh = (struct seg_hdr *)(uintptr_t)sh->next;
    }
    return 0;
}

static int rec_valid(const struct log_rec *r, size_t room)
{
    if (room < JUMP_SIZE || r->sentinel != LOG_SENTINEL)
        return 0;
    if (r->type < LOG_DATA || r->type > LOG_PREPARE || rec_size(r->len) > room)
        return 0;
    const char *end = (const char *)r + rec_size(r->len) - REC_TAIL;
    uint64_t sum;
    memcpy(&sum, end, sizeof sum);
    return sum == rec_csum(r, r + 1);
}

int log_scan(txn_pool *p, struct slot_hdr *slot, struct vec *recs)
{
    char *seg = first_seg(p, slot);
    size_t off = SEG_DATA_OFF, end = seg_end(p, slot, seg), used = 0;
    uint64_t version = 0;
    for (;;) {
        struct log_rec *r = (struct log_rec *)(seg + off);
        if (!rec_valid(r, end - off) || r->version == 0)
            break;
        if (version == 0)
            version = r->version;
        else if (r->version != version)
            break;
        used += rec_size(r->len);
        if (r->type == LOG_JUMP) {
            uint64_t next = ((struct seg_hdr *)seg)->next;
            if (r->addr != next || !valid_segment(p, next))
                break;
            seg = (char *)(uintptr_t)next;
            off = SEG_DATA_OFF;
            end = CHUNK_SIZE;
            continue;
        }
        struct log_rec **item = vec_push(recs);
        if (!item)
            return TXN_E_NOMEM;
        *item = r;
        off += rec_size(r->len);
    }
    /* records before the tail were fenced: the log of a transaction that
     * did not reach its commit and ends before the tail was damaged after
     * the fact, and rolling back half of it would be wrong. (A transaction
     * that reached its commit may have been overwritten in part by the
     * next one: its records are not needed.) */
    uint64_t settled = slot->state >> 2;
    if (version && slot->tail_version == version && used < slot->tail && settled != version)
        return REFUSE(TXN_E_CORRUPT, "a record of transaction %llu before its tail hint (%llu "
                      "of %llu bytes) is damaged", (unsigned long long)version,
                      (unsigned long long)used, (unsigned long long)slot->tail);
    /* The same without its first record: the tail hint names a transaction
     * newer than the last one settled (so the slot's latest, in flight)
     * that had fenced records, and none is left. */
    if (slot->tail && slot->tail_version > settled && slot->tail_version != version &&
        slot->tail_version < slot->next_version)
        return REFUSE(TXN_E_CORRUPT, "transaction %llu, unsettled, had %llu bytes of log "
                      "before its tail hint; its first record is damaged",
                      (unsigned long long)slot->tail_version, (unsigned long long)slot->tail);
    /* A transaction the state word says committed is replayed from its
     * records: they must be there. */
    if ((slot->state & 3) == SLOT_COMMITTED && settled != version)
        return REFUSE(TXN_E_CORRUPT, "transaction %llu is committed, its log is damaged",
                      (unsigned long long)settled);
    return 0;
}
