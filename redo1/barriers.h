/* barriers.h - redo1's persist barriers, as tests/barrier_counts.c checks
 * them at every PDOM: a commit is one barrier whatever it wrote (its log's
 * parts, checksummed); an abort costs none. Reading its own write looks
 * the transaction's log up once. */
#define ENGINE_BARRIERS                                                        \
    {.commit_a = 1, .commit_b = 0, .abort_a = 0, .abort_b = 0, .read_only = 0, \
     .open_a = 1, .open_b = 0, .paper_a = 1, .paper_b = 0, .own_read_lookups = 1}
