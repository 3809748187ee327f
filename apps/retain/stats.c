/* stats.c - medians and quartiles of the runs' samples. */
#include <stdlib.h>

#include "retain.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v (sorted in place), interpolated between ranks. */
static double quantile(double *v, unsigned n, double q)
{
    qsort(v, n, sizeof *v, cmp_double);
    double x = q * (double)(n - 1);
    unsigned i = (unsigned)x;
    return i + 1 < n ? v[i] + (x - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

double median(double *v, unsigned n)
{
    return quantile(v, n, 0.5);
}

void quartiles(double *v, unsigned n, double out[3])
{
    out[0] = quantile(v, n, 0.25);
    out[1] = quantile(v, n, 0.5);
    out[2] = quantile(v, n, 0.75);
}
