// gbench.cc - the C shim over Google Benchmark (see gbench.h); the only
// C++ in pmtx. A gbench is a benchmark::internal::Benchmark and a
// gbench_state a benchmark::State, passed through C as opaque pointers.
#include "gbench.h"

#include <benchmark/benchmark.h>

#include <atomic>
#include <string>
#include <vector>

namespace {

using benchmark::Counter;

static_assert(GBENCH_PER_ITERATION == Counter::kAvgIterations, "flag");
static_assert(GBENCH_RATE == Counter::kIsRate, "flag");

std::atomic<bool> failed{false};
void (*user_help)(void);

benchmark::internal::Benchmark *B(gbench *b)
{
    return reinterpret_cast<benchmark::internal::Benchmark *>(b);
}

gbench *C(benchmark::internal::Benchmark *b)
{
    return reinterpret_cast<gbench *>(b);
}

benchmark::State &S(gbench_state *st)
{
    return *reinterpret_cast<benchmark::State *>(st);
}

const benchmark::State &S(const gbench_state *st)
{
    return *reinterpret_cast<const benchmark::State *>(st);
}

void help()
{
    if (user_help)
        user_help();
    benchmark::PrintDefaultHelp();
}

} // namespace

extern "C" {

gbench *gbench_register(const char *name, gbench_fn *fn, void *arg)
{
    return C(benchmark::RegisterBenchmark(name, [fn, arg](benchmark::State &st) {
        fn(reinterpret_cast<gbench_state *>(&st), arg);
    }));
}

gbench *gbench_args(gbench *b, const int64_t *args, size_t n)
{
    return C(B(b)->Args(std::vector<int64_t>(args, args + n)));
}

gbench *gbench_arg_names(gbench *b, const char *const *names, size_t n)
{
    return C(B(b)->ArgNames(std::vector<std::string>(names, names + n)));
}

gbench *gbench_set_unit(gbench *b, gbench_unit u)
{
    static const benchmark::TimeUnit units[] = {
        benchmark::kNanosecond, benchmark::kMicrosecond,
        benchmark::kMillisecond, benchmark::kSecond};
    return C(B(b)->Unit(units[u]));
}

int gbench_keep_running(gbench_state *st)
{
    return S(st).KeepRunning();
}

void gbench_pause_timing(gbench_state *st)
{
    S(st).PauseTiming();
}

void gbench_resume_timing(gbench_state *st)
{
    S(st).ResumeTiming();
}

int64_t gbench_range(const gbench_state *st, size_t i)
{
    return S(st).range(i);
}

int64_t gbench_iterations(const gbench_state *st)
{
    return static_cast<int64_t>(S(st).iterations());
}

void gbench_counter(gbench_state *st, const char *name, double v, unsigned flags)
{
    S(st).counters[name] = Counter(v, static_cast<Counter::Flags>(flags));
}

void gbench_label(gbench_state *st, const char *label)
{
    S(st).SetLabel(label);
}

void gbench_skip_with_error(gbench_state *st, const char *msg)
{
    failed = true;
    S(st).SkipWithError(msg);
}

int gbench_error_occurred(const gbench_state *st)
{
    return S(st).error_occurred();
}

void gbench_context(const char *key, const char *value)
{
    benchmark::AddCustomContext(key, value);
}

int gbench_main(int argc, char **argv, void (*help_fn)(void))
{
    user_help = help_fn;
    benchmark::Initialize(&argc, argv, help);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    size_t ran = benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return ran == 0 || failed ? 1 : 0;
}

} // extern "C"
