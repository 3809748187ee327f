#!/usr/bin/env bash
# layers.sh DIR [OBJECT...] - no circle between the store's files (issue
# #44): a file X.c and its header X.h are one module X; X depends on Y when
# X.c or X.h includes Y.h (Y one of DIR's modules), and, with the objects
# of a build, when X.o uses a symbol that Y.o defines (what the linker
# sees: a header that declares another module's functions cannot hide a
# call). Fails (exit 1) on a cycle of either graph, printing it, or when
# no edges were found; else prints the modules lowest first.
set -euo pipefail
dir=$1
shift
objects=()
for a in "$@"; do # ctest passes the objects as one ;-separated list
    IFS=';' read -r -a more <<<"$a"
    for o in "${more[@]}"; do
        [ -z "$o" ] || objects+=("$o")
    done
done
set -- ${objects[@]+"${objects[@]}"}
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

module() { local b=${1##*/}; b=${b%.o}; echo "${b%.*}"; }

# #include "Y.h" edges, for the headers of DIR
for f in "$dir"/*.c "$dir"/*.h; do
    m=$(module "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f" |
        while read -r h; do
            if [ -e "$dir/$h.h" ] && [ "$h" != "$m" ]; then
                echo "include $m $h"
            fi
        done
done >>"$edges"

# symbol edges: X.o's undefined symbols that another object defines
if [ $# -gt 0 ]; then
    defs=$(mktemp)
    trap 'rm -f "$edges" "$defs"' EXIT
    for o in "$@"; do
        nm --defined-only -g "$o" | awk -v m="$(module "$o")" 'NF == 3 { print $3, m }'
    done | sort -u >"$defs"
    for o in "$@"; do
        nm -u "$o" | awk -v m="$(module "$o")" '{ print $NF, m }'
    done | sort -u | join - "$defs" | awk '$2 != $3 { print "symbol", $2, $3 }' | sort -u >>"$edges"
fi

[ -s "$edges" ] || { echo "FAIL: no edges between the files of $dir"; exit 1; }

# A depth-first search per graph: a grey node met again closes a cycle.
awk '
    { kind[$1] = 1; key = $1 SUBSEP $2; if (!(key in n)) n[key] = 0
      out[key, n[key]++] = $3; nodes[$1, $2] = 1; nodes[$1, $3] = 1 }
    function visit(k, v,    i, j, w, s) {
        color[k, v] = 1
        path[++depth] = v
        for (i = 0; i < n[k, v]; i++) {
            w = out[k, v, i]
            if (color[k, w] == 1) {
                s = w
                for (j = depth; j >= 1 && path[j] != w; j--)
                    s = path[j] " -> " s
                printf "FAIL: a circle of %s edges: %s -> %s\n", k, w, s
                bad = 1
            } else if (!color[k, w])
                visit(k, w)
        }
        depth--
        color[k, v] = 2
        order[k] = order[k] " " v
    }
    END {
        for (k in kind) {
            for (kv in nodes) {
                split(kv, p, SUBSEP)
                if (p[1] == k && !color[k, p[2]])
                    visit(k, p[2])
            }
            printf "%s edges, lowest first:%s\n", k, order[k]
        }
        exit bad
    }' "$edges"
