#!/usr/bin/env bash
# The README's test command: installs what it needs, builds, and runs every
# suite: the normal build (including the crash simulator's campaigns), an
# AddressSanitizer+UBSan build, and the libFuzzer targets for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
export PMEM_IS_PMEM_FORCE=1

echo "== build (Release: what the main command builds, -O3 warnings included)"
build build-release -DCMAKE_BUILD_TYPE=Release -DPMTX_TESTS=OFF

# crash images per engine and workload: 300 here, 2000 with --full (the
# build's default) (CI's 30 minutes)
images=300
[ "${1:-}" = --full ] && images=2000

echo "== build (RelWithDebInfo)"
build build -DPMTX_CRASH_IMAGES=$images
(cd build && ctest --output-on-failure -j2)

echo "== build (AddressSanitizer + UndefinedBehaviorSanitizer)"
build build-asan -DCMAKE_BUILD_TYPE=Debug -DPMTX_SANITIZE=address,undefined \
    -DPMTX_CRASH_IMAGES=100
(cd build-asan && ctest --output-on-failure -j2)
# twice more: a library thread that outlives what it uses (incll's epoch
# thread and the crash simulator's trace) shows in some runs only
(cd build-asan && ctest --output-on-failure -j2 --repeat until-fail:2 -R '^crashsim-incll-epoch-1ms')

echo "== build (ThreadSanitizer): the suites that run threads"
# the server's, the SQLite VFS's and TPC-C's threads are the same code on every
# engine: their tests run on one engine of each kind (a barrier per write,
# one per commit, an epoch thread), the other suites on all
BUILD_TARGET=threaded_tests build build-tsan -DCMAKE_BUILD_TYPE=Debug -DPMTX_SANITIZE=thread
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j2 \
    -R '^(conformance-|shared_reuse-|kvstore-(proto|shutdown|pubsub|blocking)-(undo|redo1|incll|cow)$|(kvstore-kill|kvstore-shared-kill|kvstore-evict-kill|sqlite-vfs|tpcc-run)-(undo|redo1|incll)$|(alloc_reuse|large_tx|kvstore-load|pool_grow)-(undo|incll)$|join-(undo|redo|cow)$|masstree-stress-|incll-granule)')

echo "== fuzzing (libFuzzer, ${PMTX_FUZZ_SECONDS:-4} s per target)"
BUILD_TARGET=fuzzers build build-fuzz -DPMTX_FUZZ=ON -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DPMTX_FUZZ_SECONDS="${PMTX_FUZZ_SECONDS:-4}"
(cd build-fuzz && ctest --output-on-failure -j2)
