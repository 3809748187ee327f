#!/usr/bin/env bash
# deps.sh - install redis-cli and redis-benchmark (Debian's redis-tools) if
# they are missing: the kvstore tests drive the server with them. Needs
# root, as the README's commands do.
set -euo pipefail
if command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends redis-tools >/dev/null
command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null
