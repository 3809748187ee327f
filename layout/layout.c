/* layout.c - persistent data retention (txn_layout.h): layout records,
 * signature checks, the reset option, migrations and lazily extendible
 * structs, all on txn.h (the record lives in txn_meta_root()), so every
 * engine runs them unchanged.
 *
 * Invariants (a crash anywhere leaves the old version or the new):
 * 1. The record's version and state change only in transactions; the
 *    version of the data reachable from the root is the record's version.
 * 2. BUILD: steps write only new objects (each listed in `made` in the
 *    transaction that allocates it) and the scratch object; the old data
 *    stays whole. Dropping a build frees `made`'s objects.
 * 3. The switch (finish + version + state CLEAN) is one transaction.
 * 4. CLEAN: `retired` lists only objects nothing reachable refers to;
 *    freeing them in batches changes nothing a reader can see.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_int.h"
#include "txn_layout.h"
#include "util.h" /* csum64: the type signatures' hash (header only) */

#define MIG_IDLE 0u
#define MIG_BUILD 1u /* building version `target` beside the old data */
#define MIG_CLEAN 2u /* version switched; freeing `retired` */

/* The layout record's payload (TXN_META_SIZE bytes). */
struct lrec {
    uint64_t version; /* of the data reachable from the root; 0: none */
    uint64_t sigs;    /* handle of the signature table, 0: not recorded */
    uint64_t state;   /* MIG_* */
    uint64_t target;  /* version a migration builds or has reached */
    uint64_t scratch; /* the running migration's scratch object */
    uint64_t made;    /* head chunk of the objects it allocated */
    uint64_t retired; /* head chunk of the old objects it frees */
    uint64_t join;    /* not the layout's: txn_join's table (api.c) */
};
_Static_assert(sizeof(struct lrec) == TXN_META_SIZE, "layout record size");
#define REC_OFF(f) offsetof(struct lrec, f)

/* A chunk of a list of handles (made, retired), newest first. */
#define LCHUNK_CAP 126u
struct lchunk {
    uint64_t next; /* older chunk */
    uint64_t n;    /* handles in use */
    uint64_t h[LCHUNK_CAP];
};

/* The signature table: n pairs (hash of the type's name, signature). */
struct sig {
    uint64_t name, sig;
};

#define DEF_BATCH 64u

static __thread char err_msg[320];

const char *txn_layout_error(void)
{
    return err_msg;
}

static int refuse(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return rc;
}

static txn_obj *h2o(uint64_t h)
{
    return (txn_obj *)(uintptr_t)h;
}

static uint64_t o2h(const txn_obj *o)
{
    return (uint64_t)(uintptr_t)o;
}

static uint64_t name_hash(const char *name)
{
    return csum64(0x6e616d65, name, strlen(name));
}

static uint64_t type_sig(const txn_type *t)
{
    uint64_t h = csum64(name_hash(t->name), &(uint64_t){t->size}, 8);
    for (size_t i = 0; i < t->nfields; i++)
        h = csum64(h, &t->fields[i], sizeof t->fields[i]);
    return h;
}

/* ---- transactions of the library: begin, run, commit */

static int rec_read(txn_pool *p, txn_obj *rec, struct lrec *r)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    rc = txn_read(tx, rec, 0, r, sizeof *r);
    txn_abort(tx); /* read only */
    return rc;
}

static int rec_set(txn *tx, txn_obj *rec, size_t off, uint64_t v)
{
    return txn_write_u64(tx, rec, off, v);
}

/* ---- lists of handles */

/* Append handle o to the list at `field`. A transaction appends to a
 * chunk it allocated itself (`*fresh`), whose writes no engine logs: the
 * lists cost a migration little more than the objects they name. */
static int list_push(txn *tx, txn_obj *rec, size_t field, txn_obj **fresh, txn_obj *o)
{
    uint64_t head, n = LCHUNK_CAP;
    int rc = txn_read_u64(tx, rec, field, &head);
    if (!rc && head && h2o(head) == *fresh)
        rc = txn_read_u64(tx, h2o(head), offsetof(struct lchunk, n), &n);
    if (!rc && n == LCHUNK_CAP) {
        txn_obj *c;
        if ((rc = txn_alloc(tx, sizeof(struct lchunk), &c)) ||
            (rc = txn_write_u64(tx, c, offsetof(struct lchunk, next), head)) ||
            (rc = rec_set(tx, rec, field, o2h(c))))
            return rc;
        head = o2h(c);
        *fresh = c;
        n = 0;
    }
    if (!rc)
        rc = txn_write_u64(tx, h2o(head), offsetof(struct lchunk, h) + 8 * n, o2h(o));
    if (!rc)
        rc = txn_write_u64(tx, h2o(head), offsetof(struct lchunk, n), n + 1);
    return rc;
}

/* Free up to *budget entries (with their objects when `objects`) and
 * emptied chunks of the list at `field`; *empty once nothing is left. */
static int list_drain(txn *tx, txn_obj *rec, size_t field, int objects, unsigned *budget,
                      int *empty)
{
    uint64_t head;
    int rc = txn_read_u64(tx, rec, field, &head);
    while (!rc && head && *budget) {
        txn_obj *c = h2o(head);
        uint64_t n, next;
        if ((rc = txn_read_u64(tx, c, offsetof(struct lchunk, n), &n)) ||
            (rc = txn_read_u64(tx, c, offsetof(struct lchunk, next), &next)))
            break;
        if (n > LCHUNK_CAP)
            return TXN_E_CORRUPT;
        uint64_t keep = n;
        while (objects && keep && *budget) {
            uint64_t h;
            if ((rc = txn_read_u64(tx, c, offsetof(struct lchunk, h) + 8 * (keep - 1), &h)) ||
                (rc = txn_free(tx, h2o(h))))
                return rc;
            keep--;
            (*budget)--;
        }
        if (objects && keep) {
            rc = txn_write_u64(tx, c, offsetof(struct lchunk, n), keep);
            break;
        }
        if ((rc = txn_free(tx, c)) || (rc = rec_set(tx, rec, field, next)))
            break;
        if (*budget) /* the chunk's last entries may have taken the rest */
            (*budget)--;
        head = next;
    }
    *empty = !rc && !head;
    return rc;
}

/* ---- signatures */

static int sigs_write(txn *tx, txn_obj *rec, const txn_layout *l)
{
    uint64_t old;
    int rc = txn_read_u64(tx, rec, REC_OFF(sigs), &old);
    if (rc)
        return rc;
    if (old && (rc = txn_free(tx, h2o(old))))
        return rc;
    if (!l || l->ntypes == 0)
        return rec_set(tx, rec, REC_OFF(sigs), 0);
    size_t sz = 8 + l->ntypes * sizeof(struct sig);
    uint64_t *buf = malloc(sz);
    if (!buf)
        return TXN_E_NOMEM;
    buf[0] = l->ntypes;
    struct sig *s = (struct sig *)(buf + 1);
    for (size_t i = 0; i < l->ntypes; i++)
        s[i] = (struct sig){name_hash(l->types[i].name), type_sig(&l->types[i])};
    txn_obj *t;
    if (!(rc = txn_alloc(tx, sz, &t)) && !(rc = txn_write(tx, t, 0, buf, sz)))
        rc = rec_set(tx, rec, REC_OFF(sigs), o2h(t));
    free(buf);
    return rc;
}

/* Compare l's types with the table at `sigs`. */
static int sigs_check(txn_pool *p, const char *path, uint64_t sigs, const txn_layout *l)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    uint64_t n = 0;
    struct sig *s = NULL;
    rc = txn_read_u64(tx, h2o(sigs), 0, &n);
    if (!rc && (n > (1u << 20) || 8 + n * sizeof *s > txn_obj_size(p, h2o(sigs))))
        rc = TXN_E_CORRUPT;
    if (!rc && n && !(s = malloc(n * sizeof *s)))
        rc = TXN_E_NOMEM;
    if (!rc && n)
        rc = txn_read(tx, h2o(sigs), 8, s, n * sizeof *s);
    txn_abort(tx);
    for (size_t i = 0; !rc && i < l->ntypes; i++) {
        uint64_t nh = name_hash(l->types[i].name), sg = type_sig(&l->types[i]);
        size_t j = 0;
        while (j < n && s[j].name != nh)
            j++;
        if (j == n)
            rc = refuse(TXN_E_TYPESIG, "%s: pool '%s' version %u records no type %s", path,
                        l->name, l->version, l->types[i].name);
        else if (s[j].sig != sg)
            rc = refuse(TXN_E_TYPESIG,
                        "%s: pool '%s' version %u: type %s (%zu bytes, %zu fields) differs "
                        "from the one the pool recorded",
                        path, l->name, l->version, l->types[i].name, l->types[i].size,
                        l->types[i].nfields);
    }
    if (!rc && n != l->ntypes)
        rc = refuse(TXN_E_TYPESIG, "%s: pool '%s' version %u records %llu types, program %zu",
                    path, l->name, l->version, (unsigned long long)n, l->ntypes);
    free(s);
    return rc;
}

/* ---- migrations */

struct txn_migrate {
    txn_pool *p;
    txn_obj *rec;
    txn_obj *fresh_made, *fresh_retired; /* chunks of the running transaction */
};

int txn_migrate_alloc(txn_migrate *m, txn *tx, size_t n, txn_obj **out)
{
    if (!m || !out)
        return TXN_E_INVAL;
    int rc = txn_alloc(tx, n, out);
    return rc ? rc : list_push(tx, m->rec, REC_OFF(made), &m->fresh_made, *out);
}

int txn_migrate_retire(txn_migrate *m, txn *tx, txn_obj *old)
{
    if (!m || !old)
        return TXN_E_INVAL;
    return list_push(tx, m->rec, REC_OFF(retired), &m->fresh_retired, old);
}

static const txn_migration *find_step(const txn_layout *l, uint64_t from)
{
    for (size_t i = 0; i < l->nmigrations; i++)
        if (l->migrations[i].from == from)
            return &l->migrations[i];
    return NULL;
}

/* Run one bounded library transaction: fn(tx) then commit. fn returns
 * 1 for "more", 0 for "done", or an error (the transaction aborts). */
static int in_tx(txn_pool *p, int (*fn)(txn *, void *), void *arg)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    int r = fn(tx, arg);
    if (r < 0) {
        txn_abort(tx);
        return r;
    }
    rc = txn_commit(tx);
    return rc ? rc : r;
}

struct drain_arg {
    txn_obj *rec;
    unsigned batch;
    int build; /* dropping a build rather than cleaning after a switch */
};

/* One batch of freeing: CLEAN frees retired objects and the chunks of
 * both lists; dropping a BUILD frees made objects instead. Last, the
 * scratch object goes and the record becomes IDLE. */
static int drain_once(txn *tx, void *arg)
{
    struct drain_arg *a = arg;
    unsigned budget = a->batch;
    int e1, e2, rc;
    if ((rc = list_drain(tx, a->rec, REC_OFF(made), a->build, &budget, &e1)) ||
        (rc = list_drain(tx, a->rec, REC_OFF(retired), !a->build, &budget, &e2)))
        return rc;
    if (!e1 || !e2)
        return 1;
    uint64_t scratch;
    if ((rc = txn_read_u64(tx, a->rec, REC_OFF(scratch), &scratch)))
        return rc;
    if (scratch && (rc = txn_free(tx, h2o(scratch))))
        return rc;
    if ((rc = rec_set(tx, a->rec, REC_OFF(scratch), 0)) ||
        (rc = rec_set(tx, a->rec, REC_OFF(target), 0)))
        return rc;
    return rec_set(tx, a->rec, REC_OFF(state), MIG_IDLE);
}

static int drain(txn_pool *p, txn_obj *rec, const txn_layout *l, int build)
{
    struct drain_arg a = {rec, l->batch ? l->batch : DEF_BATCH, build};
    int rc;
    while ((rc = in_tx(p, drain_once, &a)) == 1)
        ;
    return rc;
}

struct start_arg {
    txn_obj *rec;
    const txn_migration *mg;
    uint64_t target;
};

static int start_once(txn *tx, void *arg)
{
    struct start_arg *a = arg;
    txn_obj *s = NULL;
    int rc = 0;
    if (a->mg->scratch_size && (rc = txn_alloc(tx, a->mg->scratch_size, &s)))
        return rc;
    if ((rc = rec_set(tx, a->rec, REC_OFF(scratch), o2h(s))) ||
        (rc = rec_set(tx, a->rec, REC_OFF(target), a->target)))
        return rc;
    return rec_set(tx, a->rec, REC_OFF(state), MIG_BUILD);
}

struct step_arg {
    txn_migrate m;
    const txn_migration *mg;
    txn_obj *scratch;
    const txn_layout *l;
    uint64_t target;
};

static int step_once(txn *tx, void *arg)
{
    struct step_arg *a = arg;
    a->m.fresh_made = a->m.fresh_retired = NULL;
    int rc = a->mg->step(&a->m, tx, a->scratch, a->mg->arg);
    return rc < 0 ? rc : rc == TXN_MIGRATE_MORE;
}

/* Invariant 3: the switch. */
static int switch_once(txn *tx, void *arg)
{
    struct step_arg *a = arg;
    int rc = 0;
    a->m.fresh_made = a->m.fresh_retired = NULL;
    if (a->mg->finish && (rc = a->mg->finish(&a->m, tx, a->scratch, a->mg->arg)) < 0)
        return rc;
    if ((rc = sigs_write(tx, a->m.rec, a->target == a->l->version ? a->l : NULL)) ||
        (rc = rec_set(tx, a->m.rec, REC_OFF(version), a->target)))
        return rc;
    return rec_set(tx, a->m.rec, REC_OFF(state), MIG_CLEAN);
}

static int build(txn_pool *p, txn_obj *rec, const struct lrec *r, const txn_layout *l)
{
    struct step_arg a = {{p, rec, NULL, NULL}, find_step(l, r->version), h2o(r->scratch), l, r->target};
    int rc;
    while ((rc = in_tx(p, step_once, &a)) == 1)
        ;
    if (!rc)
        rc = in_tx(p, switch_once, &a);
    return rc < 0 ? rc : 0;
}

struct adopt_arg {
    txn_obj *rec;
    const txn_layout *l;
};

static int adopt_once(txn *tx, void *arg)
{
    struct adopt_arg *a = arg;
    int rc = sigs_write(tx, a->rec, a->l);
    return rc ? rc : rec_set(tx, a->rec, REC_OFF(version), a->l->version);
}

/* Which migration path from `v` to l->version; 0 if complete. */
static int path_ok(const txn_layout *l, uint64_t v, uint64_t *missing)
{
    for (; v < l->version; v++)
        if (!find_step(l, v) || !find_step(l, v)->step) {
            *missing = v;
            return 0;
        }
    return 1;
}

/* Whether settle resumes the migration a BUILD record describes (else it
 * drops what the migration built). */
static int resumable(const struct lrec *r, const txn_layout *l)
{
    return r->target == r->version + 1 && r->target <= l->version &&
           find_step(l, r->version) && find_step(l, r->version)->step;
}

#define JUDGE_ADOPT 2 /* record l's version and signatures */
#define JUDGE_START 3 /* start the migration from r->version */

/* What a record at rest (IDLE, or CLEAN once drained) at r->version means
 * for l: 0 when it matches, JUDGE_ADOPT, JUDGE_START, or a refusal
 * (TXN_E_LAYOUTVER, TXN_E_TYPESIG) or another error. Writes nothing. */
static int judge(txn_pool *p, const char *path, const struct lrec *r, const txn_layout *l)
{
    uint64_t missing;
    if (r->version == 0)
        return JUDGE_ADOPT;
    if (r->version == l->version) {
        if (!r->sigs) /* none, or reached by a chain of migrations */
            return l->ntypes ? JUDGE_ADOPT : 0;
        return sigs_check(p, path, r->sigs, l);
    }
    if (r->version > l->version)
        return refuse(TXN_E_LAYOUTVER,
                      "%s: pool '%s' version %llu, program '%s' version %u: the pool is newer",
                      path, l->name, (unsigned long long)r->version, l->name, l->version);
    if (!path_ok(l, r->version, &missing))
        return refuse(TXN_E_LAYOUTVER,
                      "%s: pool '%s' version %llu, program '%s' version %u: no migration from "
                      "version %llu",
                      path, l->name, (unsigned long long)r->version, l->name, l->version,
                      (unsigned long long)missing);
    return JUDGE_START;
}

/* One move toward l: 1 when another is needed, 0 when the pool is at
 * l's version and checked, or an error. */
static int settle_once(txn_pool *p, const char *path, txn_obj *rec, const txn_layout *l)
{
    struct lrec r;
    int rc = rec_read(p, rec, &r);
    if (rc)
        return rc;
    if (r.state == MIG_BUILD) {
        rc = resumable(&r, l) ? build(p, rec, &r, l) : drain(p, rec, l, 1);
        return rc ? rc : 1;
    }
    if (r.state == MIG_CLEAN && r.version <= l->version)
        return (rc = drain(p, rec, l, 0)) ? rc : 1;
    if (r.state > MIG_CLEAN)
        return TXN_E_CORRUPT;
    rc = judge(p, path, &r, l);
    if (rc == JUDGE_ADOPT) {
        struct adopt_arg a = {rec, l};
        return in_tx(p, adopt_once, &a);
    }
    if (rc == JUDGE_START) {
        struct start_arg a = {rec, find_step(l, r.version), r.version + 1};
        rc = in_tx(p, start_once, &a);
        return rc ? rc : 1;
    }
    return rc;
}

/* Whether settle() would refuse l, decided from the record alone, running
 * and writing nothing: the refusal settle would end with (TXN_E_LAYOUTVER,
 * TXN_E_TYPESIG, and the message) or 0 when it would not refuse (it may
 * still fail otherwise, e.g. in a migration step). settle_once's moves
 * change the version a judge sees only through a BUILD it resumes, which
 * ends at the target with l's signatures when that is l's version (a
 * match) or passes on to the target's own migration path; dropping a
 * BUILD or draining a CLEAN keeps the version and the signatures. */
static int verdict(txn_pool *p, const char *path, const txn_layout *l)
{
    txn_obj *rec = txn_meta_root(p);
    struct lrec r;
    if (!rec)
        return refuse(TXN_E_VERSION, "%s: the pool file has no layout record", path);
    if (rec_read(p, rec, &r) || r.state > MIG_CLEAN)
        return 0; /* settle reports it */
    if (r.state == MIG_BUILD && resumable(&r, l)) {
        r.version = r.target;
        r.sigs = 0;
    }
    int rc = judge(p, path, &r, l);
    return rc == JUDGE_ADOPT || rc == JUDGE_START ? 0 : rc;
}

static int settle(txn_pool *p, const char *path, const txn_layout *l)
{
    txn_obj *rec = txn_meta_root(p);
    if (!rec)
        return refuse(TXN_E_VERSION, "%s: the pool file has no layout record", path);
    int rc;
    while ((rc = settle_once(p, path, rec, l)) == 1)
        ;
    return rc;
}

static int layout_ok(const txn_layout *l)
{
    return l && l->name && *l->name && l->version >= 1 && (l->types || !l->ntypes) &&
           (l->migrations || !l->nmigrations);
}

int txn_layout_apply(txn_pool *p, const txn_layout *l)
{
    err_msg[0] = 0;
    if (!p || !layout_ok(l))
        return TXN_E_INVAL;
    return settle(p, "pool", l);
}

static int is_mismatch(int rc)
{
    return rc == TXN_E_LAYOUT || rc == TXN_E_LAYOUTVER || rc == TXN_E_TYPESIG;
}

/* On a private view of the file (txn_pool_view): the pool as the real
 * open will find it, interrupted transactions recovered in memory only.
 * So a refusal writes nothing (no recovery, no boot count, no run-time
 * state; an interrupted transaction is left for the next open), and it is
 * the refusal settle() would end with, never one of a state recovery
 * would change. */
int layout_verdict(const char *path, const txn_layout *l)
{
    err_msg[0] = 0;
    if (!path || !layout_ok(l))
        return TXN_E_INVAL;
    txn_pool *p = NULL;
    int rc = txn_pool_view(path, l->name, &p);
    if (rc == TXN_E_LAYOUT)
        refuse(rc, "%s: the pool's layout is not '%s' (version %u)", path, l->name, l->version);
    if (rc)
        return rc;
    rc = verdict(p, path, l);
    txn_pool_close(p);
    int refused = is_mismatch(rc) || rc == TXN_E_VERSION;
    if (!refused) /* not a refusal: the real open finds out */
        err_msg[0] = 0;
    return refused ? rc : 0;
}

int txn_layout_open(const char *path, const txn_layout *l, const txn_pool_opts *opts,
                    unsigned flags, txn_pool **out)
{
    err_msg[0] = 0;
    if (!path || !out || !layout_ok(l) || flags & ~(TXN_LAYOUT_CREATE | TXN_LAYOUT_RESET))
        return TXN_E_INVAL;
    /* The verdict first (layout_verdict): a refusal writes no byte of the
     * file. Another process may change the pool between the view and the
     * real open: the real open's settle() then still decides (a refusal
     * there writes what an open writes). */
    txn_pool *p = NULL;
    int rc = flags & TXN_LAYOUT_RESET ? 0 /* a refused pool is recreated */
                                      : layout_verdict(path, l);
    if (!rc) {
        rc = txn_pool_open(path, l->name, &p);
        if (rc == TXN_E_LAYOUT)
            refuse(rc, "%s: the pool's layout is not '%s' (version %u)", path, l->name,
                   l->version);
    }
    if (!rc && (rc = settle(p, path, l))) {
        txn_pool_close(p); /* settle refused after the verdict passed: a
                              race, or a failed migration */
        p = NULL;
    }
    int create = (rc == TXN_E_NOENT && flags & TXN_LAYOUT_CREATE) ||
                 (is_mismatch(rc) && flags & TXN_LAYOUT_RESET);
    if (create) {
        if (rc != TXN_E_NOENT) {
            char full[4096];
            if (txn_pool_path(path, full, sizeof full) || remove(full))
                return TXN_E_IO;
        }
        err_msg[0] = 0;
        rc = txn_pool_create(path, l->name, opts, &p);
        if (!rc && (rc = settle(p, path, l))) {
            txn_pool_close(p);
            p = NULL;
        }
    } else if (rc && !err_msg[0]) {
        refuse(rc, "%s: %s", path, txn_pool_strerror(rc));
    }
    if (!rc)
        *out = p;
    return rc;
}

int txn_layout_version(txn_pool *p, uint32_t *version)
{
    txn_obj *rec = p ? txn_meta_root(p) : NULL;
    if (!rec || !version)
        return TXN_E_INVAL;
    struct lrec r;
    int rc = rec_read(p, rec, &r);
    if (!rc)
        *version = (uint32_t)r.version;
    return rc;
}

/* The signature table's entries, checked to fit its object. */
static int sigs_count(txn_pool *p, uint64_t sigs, uint64_t *n)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    rc = txn_read_u64(tx, h2o(sigs), 0, n);
    txn_abort(tx);
    if (rc == TXN_E_INVAL || (!rc && (*n > (1u << 20) ||
                                      8 + *n * sizeof(struct sig) > txn_obj_size(p, h2o(sigs)))))
        return refuse(TXN_E_CORRUPT, "layout record: signature table %#llx is damaged",
                      (unsigned long long)sigs);
    return rc;
}

int txn_layout_inspect(txn_pool *p, txn_layout_info *out)
{
    err_msg[0] = 0;
    txn_obj *rec = p ? txn_meta_root(p) : NULL;
    if (!rec || !out)
        return TXN_E_INVAL;
    struct lrec r;
    int rc = rec_read(p, rec, &r);
    if (rc)
        return rc == TXN_E_INVAL ? refuse(TXN_E_CORRUPT, "layout record: unreadable") : rc;
    if (r.state > MIG_CLEAN || r.version > UINT32_MAX || r.target > UINT32_MAX)
        return refuse(TXN_E_CORRUPT, "layout record: state %llu, version %llu, target %llu",
                      (unsigned long long)r.state, (unsigned long long)r.version,
                      (unsigned long long)r.target);
    *out = (txn_layout_info){(uint32_t)r.version, r.state == MIG_IDLE ? 0 : (uint32_t)r.target,
                             r.state == MIG_CLEAN, 0};
    return r.sigs ? sigs_count(p, r.sigs, &out->types) : 0;
}

/* ---- lazily extendible structs */

/* The span of img[0, n) outside which every byte is zero: [*lo, *hi). */
static void nonzero_span(const unsigned char *img, size_t n, size_t *lo, size_t *hi)
{
    size_t a = 0, b = n;
    while (b > 0 && !img[b - 1])
        b--;
    while (a < b && !img[a])
        a++;
    *lo = a;
    *hi = b;
}

/* A write that needs the level it goes to: its bytes go into the new
 * block's image instead of a second store. */
struct ext_put {
    size_t off, n;
    const void *src;
};

/* A new extension block of level lv for o: the image its init fills, with
 * `put` (when the level is made for that write) laid over it, stored in one
 * piece. txn_alloc zero-fills the block, so only the span between the first
 * and the last nonzero byte of the image is stored (the image's own link,
 * NULL, never is). */
static int ext_make(txn *tx, const txn_ext_level *lv, txn_obj *o, const struct ext_put *put,
                    txn_obj **out)
{
    int rc = txn_alloc(tx, lv->size, out);
    if (rc || (!lv->init && !put))
        return rc;
    unsigned char small[256];
    unsigned char *img = lv->size <= sizeof small ? small : malloc(lv->size);
    if (!img)
        return TXN_E_NOMEM;
    memset(img, 0, lv->size);
    if (lv->init && !(rc = lv->init(tx, o, img)))
        memset(img + lv->link_off, 0, sizeof(txn_obj *));
    if (!rc && put)
        memcpy(img + put->off, put->src, put->n);
    if (!rc) {
        size_t lo, hi;
        nonzero_span(img, lv->size, &lo, &hi);
        if (hi > lo)
            rc = txn_write(tx, *out, lo, img + lo, hi - lo);
    }
    if (img != small)
        free(img);
    return rc;
}

/* Where level k + 1 lies in an object born extended (txn_ext_alloc). */
static size_t inline_at(const txn_ext_type *t, unsigned k)
{
    return txn_ext_inline_off(t, k + 1);
}

/* Whether [off, off + n) is within level `level`'s struct. */
static int in_level(const txn_ext_type *t, unsigned level, size_t off, size_t n)
{
    const txn_ext_level *lv = &t->levels[level - 1];
    return off <= lv->size && n <= lv->size - off;
}

/* Follow link `next` (not NULL) of level k's holder: into a new block, or,
 * TXN_EXT_INLINE, to level k + 1 born in o (only o holds such links). */
static int ext_step(const txn_ext_type *t, txn_obj *o, unsigned k, txn_obj *next,
                    txn_obj **cur, size_t *at)
{
    if (next == TXN_EXT_INLINE) {
        if (*cur != o)
            return TXN_E_CORRUPT;
        *at = inline_at(t, k);
    } else {
        *cur = next;
        *at = 0;
    }
    return 0;
}

/* Where `level` is (*out, *base), making the missing levels; `link`, when
 * not NULL, is o's own link as the caller read it in this transaction
 * (section 4.4: that read is not repeated). `put` goes into the block of
 * `level` if that level is made here (*put_done then). A TXN_EXT_INLINE
 * link keeps to o: the next level is born in it. */
static int ext_chain(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link, unsigned level,
                     const struct ext_put *put, int *put_done, txn_obj **out, size_t *base)
{
    if (!t || !o || !out || level == 0 || level > t->nlevels)
        return TXN_E_INVAL;
    txn_obj *cur = o;
    size_t at = 0, off = t->link_off;
    for (unsigned k = 0; k < level; k++) {
        txn_obj *next = k == 0 ? link : NULL;
        int rc = next ? 0 : txn_read(tx, cur, at + off, &next, sizeof next);
        if (!rc && !next) {
            const txn_ext_level *lv = &t->levels[k];
            const struct ext_put *p = k + 1 == level && put && in_level(t, level, put->off, put->n)
                                          ? put
                                          : NULL; /* else the caller refuses it */
            if (!(rc = ext_make(tx, lv, o, p, &next)))
                rc = txn_write(tx, cur, at + off, &next, sizeof next);
            if (!rc && p && put_done)
                *put_done = 1;
        }
        if (!rc)
            rc = ext_step(t, o, k, next, &cur, &at);
        if (rc)
            return rc;
        off = t->levels[k].link_off;
    }
    *out = cur;
    if (base)
        *base = at;
    return 0;
}

int txn_ext_alloc(txn *tx, const txn_ext_type *t, txn_obj **out)
{
    if (!t || !out || !t->nlevels || t->link_off + sizeof(txn_obj *) > t->base_size)
        return TXN_E_INVAL;
    int rc = txn_alloc(tx, inline_at(t, t->nlevels), out);
    txn_obj *in = TXN_EXT_INLINE;
    /* the base's link and every level's but the last lead on in the block */
    for (unsigned k = 0; !rc && k < t->nlevels; k++) {
        size_t at = k == 0 ? t->link_off : inline_at(t, k - 1) + t->levels[k - 1].link_off;
        rc = txn_write(tx, *out, at, &in, sizeof in);
    }
    return rc;
}

int txn_ext_get(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, txn_obj **out,
                size_t *off)
{
    return ext_chain(tx, t, o, NULL, level, NULL, NULL, out, off);
}

int txn_ext_get_known(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link, unsigned level,
                      txn_obj **out, size_t *off)
{
    return ext_chain(tx, t, o, link, level, NULL, NULL, out, off);
}

int txn_ext_read(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, size_t off,
                 void *dst, size_t n)
{
    txn_obj *e;
    size_t at;
    if (t && level >= 1 && level <= t->nlevels && !in_level(t, level, off, n))
        return TXN_E_INVAL;
    int rc = txn_ext_get(tx, t, o, level, &e, &at);
    return rc ? rc : txn_read(tx, e, at + off, dst, n);
}

/* Level `level` of o as it is, or as its init would make it: missing
 * levels are computed into volatile images, level by level, and dropped. */
int txn_ext_peek(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, size_t off,
                 void *dst, size_t n)
{
    if (!t || !o || !dst || level == 0 || level > t->nlevels)
        return TXN_E_INVAL;
    if (!in_level(t, level, off, n))
        return TXN_E_INVAL;
    txn_obj *cur = o;
    size_t at = 0, link = t->link_off;
    unsigned k = 0;
    for (; k < level; k++) {
        txn_obj *next;
        int rc = txn_read(tx, cur, at + link, &next, sizeof next);
        if (rc)
            return rc;
        if (!next)
            break;
        if ((rc = ext_step(t, o, k, next, &cur, &at)))
            return rc;
        link = t->levels[k].link_off;
    }
    if (k == level)
        return txn_read(tx, cur, at + off, dst, n);
    const txn_ext_level *lv = &t->levels[level - 1];
    if (!lv->init) { /* a level without init starts zeroed */
        memset(dst, 0, n);
        return 0;
    }
    unsigned char small[256];
    void *img = lv->size <= sizeof small ? small : malloc(lv->size);
    if (!img)
        return TXN_E_NOMEM;
    memset(img, 0, lv->size);
    int rc = lv->init(tx, o, img);
    if (!rc)
        memcpy(dst, (char *)img + off, n);
    if (img != small)
        free(img);
    return rc;
}

int txn_ext_write(txn *tx, const txn_ext_type *t, txn_obj *o, unsigned level, size_t off,
                  const void *src, size_t n)
{
    return txn_ext_write_known(tx, t, o, NULL, level, off, src, n);
}

int txn_ext_write_known(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link,
                        unsigned level, size_t off, const void *src, size_t n)
{
    if (!src)
        return TXN_E_INVAL;
    if (t && level >= 1 && level <= t->nlevels && !in_level(t, level, off, n))
        return TXN_E_INVAL;
    struct ext_put put = {off, n, src};
    txn_obj *e;
    size_t at;
    int done = 0;
    int rc = ext_chain(tx, t, o, link, level, &put, &done, &e, &at);
    return rc || done ? rc : txn_write(tx, e, at + off, src, n);
}

int txn_ext_free(txn *tx, const txn_ext_type *t, txn_obj *o)
{
    if (!t || !o)
        return TXN_E_INVAL;
    txn_obj *link;
    int rc = txn_read(tx, o, t->link_off, &link, sizeof link);
    return rc ? rc : txn_ext_free_known(tx, t, o, link);
}

/* The first link of o that leads out of it: o's own link, or, past the
 * levels born in o, the link of the last of them; *k = those levels,
 * *at = where that link is in o; its value in *link, given by a caller of
 * a *_known call (NULL: read it), and NULL past the last known level. */
static int first_out(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj **link, unsigned *k,
                     size_t *at)
{
    *k = 0;
    *at = t->link_off;
    int rc = *link ? 0 : txn_read(tx, o, *at, link, sizeof *link);
    while (!rc && *link == TXN_EXT_INLINE && *k < t->nlevels) {
        *at = inline_at(t, *k) + t->levels[*k].link_off;
        *link = NULL;
        if (++*k < t->nlevels) /* the last level's link: beyond the known ones */
            rc = txn_read(tx, o, *at, link, sizeof *link);
    }
    return rc;
}

int txn_ext_free_known(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj *link)
{
    if (!t || !o)
        return TXN_E_INVAL;
    unsigned k = 0;
    size_t at;
    int rc = 0;
    if (link == TXN_EXT_INLINE) /* the levels born in o: the links in it */
        rc = first_out(tx, t, o, &link, &k, &at);
    if (!rc)
        rc = txn_free(tx, o);
    txn_obj *cur = link;
    for (; !rc && cur && k < t->nlevels; k++) {
        txn_obj *next = NULL;
        if (k + 1 < t->nlevels) /* beyond the last known level: nothing */
            rc = txn_read(tx, cur, t->levels[k].link_off, &next, sizeof next);
        if (!rc && next == TXN_EXT_INLINE)
            rc = TXN_E_CORRUPT;
        if (!rc)
            rc = txn_free(tx, cur);
        cur = next;
    }
    return rc;
}

/* A copy of o's payload, its link at `link` cleared; *out the copy. */
static int copy_block(txn *tx, txn_obj *o, size_t link, txn_obj **out, txn_obj **link_of_o)
{
    size_t n = txn_obj_size(txn_pool_of(tx), o);
    char *buf = n ? malloc(n) : NULL;
    if (!buf)
        return n ? TXN_E_NOMEM : TXN_E_INVAL;
    int rc = link + sizeof(txn_obj *) <= n ? txn_read(tx, o, 0, buf, n) : TXN_E_CORRUPT;
    if (!rc) {
        memcpy(link_of_o, buf + link, sizeof *link_of_o);
        memset(buf + link, 0, sizeof(txn_obj *));
        if (!(rc = txn_alloc(tx, n, out)))
            rc = txn_write(tx, *out, 0, buf, n);
    }
    free(buf);
    return rc;
}

int txn_ext_copy(txn *tx, const txn_ext_type *t, txn_obj *o, txn_obj **out)
{
    if (!t || !o || !out)
        return TXN_E_INVAL;
    unsigned k;
    size_t link;
    txn_obj *out_link = NULL; /* copy_block reads it again, with the block */
    /* o whole, its levels born in it included: their links stay inline */
    int rc = first_out(tx, t, o, &out_link, &k, &link);
    txn_obj *src = o, *prev = NULL, *next;
    size_t prev_link = 0;
    for (; !rc && src; k++) {
        txn_obj *c;
        rc = copy_block(tx, src, link, &c, &next);
        if (!rc && prev)
            rc = txn_write(tx, prev, prev_link, &c, sizeof c);
        if (rc)
            return rc;
        if (!prev)
            *out = c;
        if (k >= t->nlevels)
            break;
        if (next == TXN_EXT_INLINE)
            return TXN_E_CORRUPT;
        prev = c;
        prev_link = link;
        src = next;
        link = t->levels[k].link_off;
    }
    return rc;
}

/* ---- for leak checks */

static int list_objects(txn *tx, uint64_t head, int entries,
                        int (*fn)(txn_obj *o, void *arg), void *arg)
{
    int rc = 0;
    for (unsigned guard = 0; !rc && head; guard++) {
        struct lchunk c;
        if (guard > (1u << 24) || (rc = txn_read(tx, h2o(head), 0, &c, sizeof c)))
            return rc ? rc : TXN_E_CORRUPT;
        if (c.n > LCHUNK_CAP)
            return TXN_E_CORRUPT;
        rc = fn(h2o(head), arg);
        for (uint64_t i = 0; !rc && entries && i < c.n; i++)
            rc = fn(h2o(c.h[i]), arg);
        head = c.next;
    }
    return rc;
}

int layout_objects(txn_pool *p, int (*fn)(txn_obj *o, void *arg), void *arg)
{
    txn_obj *rec = txn_meta_root(p);
    if (!rec)
        return 0;
    struct lrec r;
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    if (!(rc = txn_read(tx, rec, 0, &r, sizeof r)))
        rc = fn(rec, arg);
    if (!rc && r.sigs)
        rc = fn(h2o(r.sigs), arg);
    if (!rc && r.scratch)
        rc = fn(h2o(r.scratch), arg);
    if (!rc && r.join) /* not the layout's, but reached from its record too */
        rc = fn(h2o(r.join), arg);
    if (!rc)
        rc = list_objects(tx, r.made, r.state == MIG_BUILD, fn, arg);
    if (!rc)
        rc = list_objects(tx, r.retired, r.state == MIG_CLEAN, fn, arg);
    txn_abort(tx);
    return rc;
}
