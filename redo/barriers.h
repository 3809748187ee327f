/* barriers.h - redo's persist barriers, as tests/barrier_counts.c checks
 * them at every PDOM: a commit is log, COMMITTED, apply, IDLE (4) whatever
 * it wrote; an abort costs none. Reading its own write searches the log
 * once. */
#define ENGINE_BARRIERS                                                        \
    {.commit_a = 4, .commit_b = 0, .abort_a = 0, .abort_b = 0, .read_only = 0, \
     .open_a = 4, .open_b = 0, .paper_a = 4, .paper_b = 0, .own_read_lookups = 1}
