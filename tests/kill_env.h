/* kill_env.h - the name masstree_kill.c still includes: its helpers
 * (env_u64, the pool directory) are those of common.h. It goes once
 * masstree_kill.c includes common.h and names its pool with it. */
#ifndef PMTX_KILL_ENV_H
#define PMTX_KILL_ENV_H

#include "common.h"

static inline const char *pool_dir(void)
{
    return test_pool_dir();
}

#endif
