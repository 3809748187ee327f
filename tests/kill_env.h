/* kill_env.h - what the SIGKILL suites (kill.c, masstree_kill.c) read
 * from the environment: where pools go, and their number knobs
 * (KILL_ROUNDS, KILL_SEED). */
#ifndef PMTX_KILL_ENV_H
#define PMTX_KILL_ENV_H

#include <stdint.h>
#include <stdlib.h>

static inline const char *pool_dir(void)
{
    const char *d = getenv("TXN_POOL_DIR");
    return (d && *d) ? d : "/dev/shm";
}

static inline uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return (s && *s) ? strtoull(s, NULL, 0) : dflt;
}

#endif
