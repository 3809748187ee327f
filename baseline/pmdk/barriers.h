/* barriers.h - what PMDK 1.12 issues, measured at every PDOM and checked
 * by tests/barrier_counts.c: a transaction of N add_range writes (N >= 1,
 * distinct objects) costs 2N + 3 barriers; an empty one 2. Per range: a
 * pmem_memset of the next undo entry (flush + drain) and a pmem_memcpy of
 * the snapshot (flush) + pmem_drain. Commit: flush the ranges + drain, a
 * drain, and the pmem_persist that invalidates the undo log. Its abort
 * restores and flushes each range too (3N + 2). Lines for 32-byte writes:
 * 3N + 1. */
#define ENGINE_BARRIERS                                                        \
    {.commit_a = 3, .commit_b = 2, .abort_a = 2, .abort_b = 3, .read_only = 2, \
     .open_a = 3, .open_b = 2, .paper_a = 3, .paper_b = 2}
