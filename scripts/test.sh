#!/usr/bin/env bash
# The README's test command: installs what it needs, builds, and runs every
# suite twice: a normal build and an AddressSanitizer+UBSan build.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
export PMEM_IS_PMEM_FORCE=1

echo "== build (RelWithDebInfo)"
build build
(cd build && ctest --output-on-failure -j2)

echo "== build (AddressSanitizer + UndefinedBehaviorSanitizer)"
build build-asan -DCMAKE_BUILD_TYPE=Debug -DPMTX_SANITIZE=address,undefined
(cd build-asan && ctest --output-on-failure -j2)
