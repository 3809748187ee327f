#!/usr/bin/env bash
# deps.sh [TOOL...] - are the tools that the kvstore tests drive the server
# with installed? Default: all of them. Exits 0 if so, else names what is
# missing and its Debian package and exits 77, which ctest reports as a
# skip. Installs nothing: the test command (scripts/test.sh) installs
# scripts/lib.sh's PMTX_PACKAGES, these among them.
set -uo pipefail
declare -A package=([redis-cli]=redis-tools [redis-benchmark]=redis-tools [redis-server]=redis-server
    [tmux]=tmux [memccapable]=libmemcached-tools [memcslap]=libmemcached-tools
    [memcaslap]=libmemcached-tools [memcached]=memcached [nutcracker]=nutcracker)
[ $# -gt 0 ] || set -- redis-cli redis-benchmark tmux memccapable memcslap memcaslap memcached \
    nutcracker
missing=()
for tool in "$@"; do
    command -v "$tool" >/dev/null || missing+=("$tool (${package[$tool]:-?})")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "SKIP: missing ${missing[*]}; bash scripts/test.sh installs them"
    exit 77
fi
