/* gbench.h - Google Benchmark for C programs: a benchmark is a C function,
 * registered with its argument lists, that runs a timed loop and reports
 * counters; gbench_main() takes the standard --benchmark_* flags (filter,
 * repetitions, min_time, format, out, ...) and runs what they select.
 *
 *     static void bm_copy(gbench_state *st, void *arg)
 *     {
 *         size_t n = (size_t)gbench_range(st, 0);
 *         ... untimed setup ...
 *         while (gbench_keep_running(st))
 *             ... one iteration ...
 *         gbench_counter(st, "bytes", (double)n * gbench_iterations(st),
 *                        GBENCH_RATE);
 *     }
 *     gbench *b = gbench_register("Copy", bm_copy, NULL);
 *     gbench_arg_names(gbench_args(b, (int64_t[]){64}, 1),
 *                      (const char *[]){"bytes"}, 1);   -> Copy/bytes:64
 *     return gbench_main(argc, argv, NULL);
 */
#ifndef PMTX_GBENCH_H
#define PMTX_GBENCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gbench gbench;             /* a registered benchmark family */
typedef struct gbench_state gbench_state; /* one run of one benchmark */

/* The body of a benchmark. Untimed setup, then the loop
 * `while (gbench_keep_running(st)) { one iteration }`, then untimed checks
 * and counters. Google Benchmark calls it several times per benchmark
 * (growing iteration counts until --benchmark_min_time is reached, then
 * once per repetition). */
typedef void gbench_fn(gbench_state *st, void *arg);

/* Register benchmark family `name`: fn(st, arg) is its body. Benchmarks
 * run in registration order; names need not be unique. Never NULL. */
gbench *gbench_register(const char *name, gbench_fn *fn, void *arg);

/* Add one benchmark of the family with these n arguments (read back with
 * gbench_range). Returns b, for chaining. */
gbench *gbench_args(gbench *b, const int64_t *args, size_t n);

/* Name the arguments: the benchmark is then called `name/a:1/b:2`. */
gbench *gbench_arg_names(gbench *b, const char *const *names, size_t n);

/* Time unit of the report (default nanoseconds). */
typedef enum { GBENCH_NS, GBENCH_US, GBENCH_MS, GBENCH_S } gbench_unit;
gbench *gbench_set_unit(gbench *b, gbench_unit u);

/* ---- inside the body */

/* Nonzero while another iteration should run; the first call starts the
 * timer and the last one (returning 0) stops it. */
int gbench_keep_running(gbench_state *st);

/* Stop and restart the timer inside the loop (each costs a clock read or
 * two: keep them out of very short iterations). */
void gbench_pause_timing(gbench_state *st);
void gbench_resume_timing(gbench_state *st);

/* Argument i of this benchmark; i must be below the number it was given
 * (gbench_args). */
int64_t gbench_range(const gbench_state *st, size_t i);

/* Iterations run so far (after the loop: all of them). */
int64_t gbench_iterations(const gbench_state *st);

/* Counter flags, combined with |: */
#define GBENCH_TOTAL 0u         /* reported as given */
#define GBENCH_PER_ITERATION 8u /* divided by the iterations run */
#define GBENCH_RATE 1u          /* divided by the seconds measured */

/* Report counter `name` = v under `flags` (set again: replaced). */
void gbench_counter(gbench_state *st, const char *name, double v,
                    unsigned flags);

/* A free-text label shown beside the result. */
void gbench_label(gbench_state *st, const char *label);

/* Fail this benchmark with `msg`: the loop ends (leave it right away), the
 * result is reported as an error and gbench_main() will return 1. */
void gbench_skip_with_error(gbench_state *st, const char *msg);
int gbench_error_occurred(const gbench_state *st);

/* ---- the program */

/* Add key: value to the run's context (console header, JSON "context").
 * Call before gbench_main. */
void gbench_context(const char *key, const char *value);

/* Parse --benchmark_* flags out of argv, run the selected benchmarks and
 * shut the library down. An argument it does not know is an error; --help
 * prints help() (if not NULL), then the library's flags, and exits.
 * Returns 0, or 1 when an argument was bad, no benchmark matched the
 * filter, or a benchmark failed (gbench_skip_with_error). */
int gbench_main(int argc, char **argv, void (*help)(void));

#ifdef __cplusplus
}
#endif
#endif /* PMTX_GBENCH_H */
