/* barriers.h - incll's persist barriers, as tests/barrier_counts.c checks
 * them (epochs end only at txn_sync there): objects allocated in the
 * epoch log nothing, so commits and aborts cost none (an abort restores
 * from DRAM); after txn_sync each object is logged again: one fence for
 * all the objects a transaction opens (batched) or one each
 * (TXN_LOG_BATCH=0), and a second such transaction in the same epoch logs
 * nothing. */
#define ENGINE_BARRIERS                                                        \
    {.commit_a = 0, .commit_b = 0, .abort_a = 0, .abort_b = 0, .read_only = 0, \
     .open_a = 1, .open_b = 0, .paper_a = 0, .paper_b = 1, .epoch_logs_once = 1}
