#!/usr/bin/env bash
# The README's main command: installs what it needs, builds, then runs the
# demo on every engine under PDOM 0, 1 and 2 and prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
export PMEM_IS_PMEM_FORCE=1
build build -DCMAKE_BUILD_TYPE=Release

printf '%-6s %4s %10s %12s %10s\n' engine pdom writes/tx barriers/tx ns/tx
for bin in build/bin/demo-*; do
    for pdom in 0 1 2; do
        TXN_PDOM=$pdom "$bin" | grep -v -e '^#' -e '^engine'
    done
done
echo "(median of 31 batches of 2000 transactions; each write is 32 bytes;" \
     "flush instruction: $(TXN_PDOM=1 build/bin/demo-none 1 | sed -n 's/.*flush \(.*\)/\1/p'))"
