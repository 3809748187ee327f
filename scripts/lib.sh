# lib.sh - shared by the README's commands: Debian packages and the build.

# redis-tools and tmux: the kvstore tests (tests/kvstore/deps.sh checks
# them); redis-server: scripts/kvbench.sh; libsqlite3-dev: the SQLite VFS
# (apps/sqlite), sqlite3: its shell tests; memcached, libmemcached-tools
# (memccapable, memcaslap) and nutcracker: issue #32's tests and
# scripts/warmrestart.sh
PMTX_PACKAGES="cmake make gcc g++ pkg-config libpmem-dev libpmemobj-dev check
libatomic-ops-dev libbenchmark-dev clang libclang-rt-14-dev gnuplot-nox
redis-tools redis-server tmux libsqlite3-dev sqlite3 memcached libmemcached-tools
nutcracker"

# Install the Debian packages that are missing (needs root, as the README
# says); does nothing when all are there.
ensure_deps() {
    local missing=()
    for p in $PMTX_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# build DIR [cmake options...]: configure and build into DIR
# (BUILD_TARGET: only that target).
build() {
    local dir=$1
    shift
    cmake -S . -B "$dir" -DPMTX_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$(nproc)" ${BUILD_TARGET:+--target "$BUILD_TARGET"} >/dev/null
}

# sweep_build NOBUILD: a sweep's binaries in $BUILD_DIR (default build),
# the whole tree built (with the packages it needs) unless NOBUILD is
# non-empty: then they are used as they are.
sweep_build() {
    BUILD_DIR=${BUILD_DIR:-build}
    if [ -z "$1" ]; then
        ensure_deps
        BUILD_TARGET= build "$BUILD_DIR"
    fi
}

# built_engines DIR [engine...]: the engines the build in DIR has (its
# engines.txt, written by CMake), those named first in their order.
built_engines() {
    local dir=$1 e have
    shift
    have=" $(tr '\n' ' ' <"$dir/engines.txt") "
    for e in "$@"; do
        [[ $have == *" $e "* ]] && printf '%s ' "$e"
    done
    for e in $have; do
        [[ " $* " == *" $e "* ]] || printf '%s ' "$e"
    done
}

# cache_engines DIR: the engines built in DIR that keep a memcached port's
# items in pmtx's own pool format (none and pmdk aside).
cache_engines() {
    local e
    for e in $(built_engines "$1"); do
        case $e in none | pmdk) ;; *) printf '%s ' "$e" ;; esac
    done
}

# server_scratch NAME: $tmp (a folder) and $pool (a pool file) for one
# server at a time, whose process is $pid; all removed at exit.
server_scratch() {
    tmp=$(mktemp -d "/tmp/$1-XXXXXX")
    pool=/dev/shm/$1-$$.pool
    pid=
    trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; fi; rm -rf "$tmp" "$pool"' EXIT
}

# wait_tcp PORT: until something listens on 127.0.0.1:PORT (30 s at most,
# then exit 1)
wait_tcp() {
    for _ in $(seq 600); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "$0: nothing listens on port $1" >&2
    exit 1
}

# The scripts' medians, one awk function: median(a, n) sorts a[1..n]
# (compared as numbers) and returns the middle one, or the mean of the
# two middle ones. Put before an awk program: awk "$awk_median"'...'
awk_median='
function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) {
        t = a[i]
        for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--)
            a[j + 1] = a[j]
        a[j + 1] = t
    }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'
