/* kernel.c - the kernels by kind and by name. */
#include <string.h>

#include "retain.h"

static const struct kernel *const kernels[KINDS] = {
    [HASH] = &hash_kernel,
    [BTREE] = &btree_kernel,
    [SKIP] = &skip_kernel,
};

const struct kernel *kernel_of(enum kind kind)
{
    return kernels[kind];
}

int kind_named(const char *name)
{
    for (int kd = 0; kd < KINDS; kd++)
        if (!strcmp(name, kernels[kd]->name))
            return kd;
    return -1;
}
