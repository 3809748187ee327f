/* barriers.h - cow's persist barriers, as tests/barrier_counts.c checks
 * them at every PDOM: a commit is write set, COMMITTED, swap, IDLE (4); an
 * abort puts the wrappers back and sets IDLE (2). */
#define ENGINE_BARRIERS                                                        \
    {.commit_a = 4, .commit_b = 0, .abort_a = 2, .abort_b = 0, .read_only = 0, \
     .open_a = 4, .open_b = 0, .paper_a = 4, .paper_b = 0}
