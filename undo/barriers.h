/* barriers.h - undo's persist barriers, as tests/barrier_counts.c checks
 * them at every PDOM, for N distinct 32-byte writes: a record and a
 * barrier per write, then the ranges and the commit record (N + 2); an
 * abort restores and invalidates (N + 2); objects opened TXN_RW first
 * share one fence for their records (3), or a fence each with
 * TXN_LOG_BATCH=0 (N + 2). */
#define ENGINE_BARRIERS                                                        \
    {.commit_a = 2, .commit_b = 1, .abort_a = 2, .abort_b = 1, .read_only = 0, \
     .open_a = 3, .open_b = 0, .paper_a = 2, .paper_b = 1}
