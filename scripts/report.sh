#!/usr/bin/env bash
# report.sh - the engine comparison (the paper's Figure 5): runs Array and
# ArrayRAW (build/bin/array-<engine>, every engine built) at PDOM 0, 1 and
# 2, slot sizes 4 and 64, 0..20 read-write slots, and writes to results/:
#   raw/          Google Benchmark JSON and console log of every run
#   results.csv   engine,pdom,bench,slot,wslots,ns_per_tx,barriers_per_tx,...
#   report.md     per PDOM and W: each engine's latency, speedup over pmdk
#                 and persist barriers; the machine; the summary line
#   array.png, array_raw.png   latency against read-write slots
#
#   bash scripts/report.sh          a few minutes: 1M slots of 4, 250k of 64,
#                                   median of 3 runs of 0.1 s per benchmark
#   bash scripts/report.sh --full   the paper's 10M slots; median of 3 runs
#                                   of 2 s after 1 s of warm-up (about 2 h)
# Environment: BUILD_DIR (default build; configured and built if missing),
# OUT_DIR (default results), REPORT_MIN_TIME and REPORT_SLOTS to override
# the seconds per benchmark and the slots of both sizes.
# Needs gnuplot: installs gnuplot-nox when missing (as root).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT_DIR:-results}
PDOMS="0 1 2"
SLOT_SIZES="4 64"
WSLOTS=0,5,10,15,20
ENGINE_ORDER="pmdk undo undo-paper redo cow incll incll-paper none" # others follow, by name
# <engine>-paper: the same binary with TXN_LOG_BATCH=0, the papers' logging
# (a record and a fence at each first write instead of one fence for the
# objects a transaction opens read-write)
PAPER_VARIANTS="undo incll"

case "${1:-}" in
"")
    slots_4=1000000 slots_64=250000
    gb_flags=(--benchmark_min_time="${REPORT_MIN_TIME:-0.1}")
    how="median of 3 runs of at least ${REPORT_MIN_TIME:-0.1} s per benchmark" ;;
--full)
    slots_4=10000000 slots_64=10000000
    gb_flags=(--benchmark_min_time="${REPORT_MIN_TIME:-2}" --benchmark_min_warmup_time=1)
    how="median of 3 runs of at least ${REPORT_MIN_TIME:-2} s per benchmark after 1 s of warm-up" ;;
*)
    echo "usage: $0 [--full]" >&2
    exit 2 ;;
esac
gb_flags+=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
if [ -n "${REPORT_SLOTS:-}" ]; then
    slots_4=$REPORT_SLOTS slots_64=$REPORT_SLOTS
fi

ensure_gnuplot() {
    command -v gnuplot >/dev/null && return
    if [ "$(id -u)" != 0 ]; then
        echo "report: gnuplot is missing; as root: apt-get install gnuplot-nox" >&2
        exit 1
    fi
    echo "installing gnuplot-nox"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
}

# Configure if needed, then (re)build only the array programs.
ensure_build() {
    if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
        echo "configuring $BUILD_DIR (Release)"
        cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
    fi
    local targets
    # "... array-undo" (Makefiles) or "array-undo: phony" (Ninja)
    targets=$(cmake --build "$BUILD_DIR" --target help |
        sed -n -e 's/^\.\.\. \(array-[a-z0-9_]*\).*/\1/p' -e 's/^\(array-[a-z0-9_]*\): .*/\1/p' | sort -u)
    if [ -z "$targets" ]; then
        echo "report: no array-<engine> target in $BUILD_DIR" >&2
        exit 1
    fi
    # shellcheck disable=SC2086
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target $targets >/dev/null
}

# The engines built, in ENGINE_ORDER first.
list_engines() {
    local e have=" "
    for e in "$BUILD_DIR"/bin/array-*; do
        [ -x "$e" ] && have+="${e##*/array-} "
    done
    for e in $PAPER_VARIANTS; do
        [[ $have == *" $e "* ]] && have+="$e-paper "
    done
    for e in $ENGINE_ORDER; do
        [[ $have == *" $e "* ]] && printf '%s ' "$e"
    done
    for e in $have; do
        [[ " $ENGINE_ORDER " == *" $e "* ]] || printf '%s ' "$e"
    done
}

# JSON of one run -> CSV rows (iterations, or the median of repetitions);
# also the run's context as "#ctx,engine,pdom,pdom_ns,flush".
json_to_csv() {
    awk '
    function key(l) { sub(/^ *"/, "", l); sub(/".*/, "", l); return l }
    function val(l) { sub(/^ *"[^"]*": */, "", l); sub(/,$/, "", l); gsub(/^"|"$/, "", l); return l }
    BEGIN { unit["ns"] = 1; unit["us"] = 1e3; unit["ms"] = 1e6; unit["s"] = 1e9 }
    /"benchmarks": \[/ { inb = 1
        printf "#ctx,%s,%s,%s,%s\n", c["engine"], c["pdom"], c["pdom_ns"], c["flush"]; next }
    !inb && /^ *"[a-z_]+": / { c[key($0)] = val($0); next }
    inb && /^ *\{/ { split("", r); next }
    inb && /^ *"[a-z_]+": / { r[key($0)] = val($0); next }
    inb && /^ *\},?$/ {
        if (r["run_type"] == "aggregate" && r["aggregate_name"] != "median") next
        if (r["error_occurred"] == "true") { print "error: " r["name"] ": " r["error_message"] > "/dev/stderr"; bad = 1; next }
        n = split(r["run_name"], p, "/")
        if (n < 3) next
        sub(/^slot:/, "", p[2]); sub(/^wslots:/, "", p[3])
        printf "%s,%s,%s,%s,%s,%.1f,%.3f,%.3f,%.1f\n", c["engine"], c["pdom"], p[1], p[2], p[3],
               r["real_time"] * unit[r["time_unit"]], r["barriers_per_tx"], r["lines_per_tx"],
               r["log_bytes_per_tx"]
    }
    END { exit bad }' "$1"
}

# One gnuplot data file per bench x pdom x slot: W, then us/tx per engine.
write_plot_data() {
    local dir=$1
    mkdir -p "$dir"
    awk -F, -v dir="$dir" -v engines="$ENGINES" '
    BEGIN { ne = split(engines, E, " ") }
    NR > 1 { t[$3, $2, $4, $5, $1] = $6 / 1000; f[$3 "-pdom" $2 "-slot" $4] = $3 SUBSEP $2 SUBSEP $4; w[$5] = 1 }
    END {
        nw = 0; for (x in w) W[++nw] = x + 0
        for (i = 1; i <= nw; i++) for (j = i + 1; j <= nw; j++) if (W[j] < W[i]) { x = W[i]; W[i] = W[j]; W[j] = x }
        for (name in f) {
            file = dir "/" name ".dat"; split(f[name], k, SUBSEP)
            line = "wslots"; for (e = 1; e <= ne; e++) line = line " " E[e]
            print line > file
            for (i = 1; i <= nw; i++) {
                line = W[i]
                for (e = 1; e <= ne; e++) {
                    id = k[1] SUBSEP k[2] SUBSEP k[3] SUBSEP W[i] SUBSEP E[e]
                    line = line " " (id in t ? t[id] : "-")
                }
                print line > file
            }
            close(file)
        }
    }' "$OUT/results.csv"
}

# report.md: one table per bench x slot size, rows PDOM x W, a column per
# engine: ns per transaction (speedup over pmdk) and barriers.
write_tables() {
    awk -F, -v engines="$ENGINES" -v sizes="$SLOT_SIZES" -v pdoms="$PDOMS" '
    BEGIN { ne = split(engines, E, " "); ns = split(sizes, S, " "); np = split(pdoms, P, " ")
            for (e = 1; e <= ne; e++) if (E[e] == "pmdk") pm = 1 }
    NR > 1 { t[$3, $4, $2, $5, $1] = $6; b[$3, $4, $2, $5, $1] = $7; w[$5] = 1 }
    END {
        nw = 0; for (x in w) W[++nw] = x + 0
        for (i = 1; i <= nw; i++) for (j = i + 1; j <= nw; j++) if (W[j] < W[i]) { x = W[i]; W[i] = W[j]; W[j] = x }
        split("Array ArrayRAW", B, " "); split("Array Array-RAW", BN, " ")
        for (bi = 1; bi <= 2; bi++) for (si = 1; si <= ns; si++) {
            printf "\n### %s, slot of %s integers\n\n| PDOM | W |", BN[bi], S[si]
            for (e = 1; e <= ne; e++) printf " %s |", E[e]
            printf "\n| ---: | ---: |"
            for (e = 1; e <= ne; e++) printf " ---: |"
            printf "\n"
            for (pi = 1; pi <= np; pi++) for (i = 1; i <= nw; i++) {
                printf "| %s | %s |", P[pi], W[i]
                ref = B[bi] SUBSEP S[si] SUBSEP P[pi] SUBSEP W[i] SUBSEP "pmdk"
                for (e = 1; e <= ne; e++) {
                    id = B[bi] SUBSEP S[si] SUBSEP P[pi] SUBSEP W[i] SUBSEP E[e]
                    if (!(id in t)) { printf " - |"; continue }
                    cell = sprintf("%.0f", t[id])
                    if (pm && (ref in t) && t[id] > 0) cell = cell sprintf(" (%.2f×)", t[ref] / t[id])
                    printf " %s · %g |", cell, b[id] + 0
                }
                printf "\n"
            }
        }
    }' "$OUT/results.csv"
}

# The summary lines: barriers and the fastest engine at W=20; undo vs pmdk
# on Array slot 4 W=20, best vs none at W=0.
summary() {
    awk -F, -v engines="$ENGINES" '
    BEGIN { ne = split(engines, E, " "); for (e = 1; e <= ne; e++) if (E[e] == "pmdk") pm = 1 }
    NR > 1 && $3 == "Array" && $4 == 4 { t[$2, $5, $1] = $6; b[$2, $5, $1] = $7 }
    END {
        # W=20: barriers of the batched-logging engines, the fastest
        # persistent engine at PDOM 0 and 1
        s = "Array slot 4, W=20: barriers per transaction"
        split("undo undo-paper incll incll-paper", L, " ")
        for (i = 1; i <= 4; i++) if ((1, 20, L[i]) in b) s = s sprintf(" %s %.2f,", L[i], b[1, 20, L[i]])
        for (p = 0; p <= 1; p++) {
            best = ""
            for (e = 1; e <= ne; e++)
                if (E[e] != "none" && ((p, 20, E[e]) in t) && (best == "" || t[p, 20, E[e]] < t[p, 20, best])) best = E[e]
            if (best != "") s = s sprintf(" fastest persistent at PDOM %d: %s %.0f ns;", p, best, t[p, 20, best])
        }
        print s
        s = "Array slot 4, W=20: "
        if (!pm) s = s "pmdk not built, no undo-vs-pmdk speedup"
        else s = s sprintf("undo %.2f× pmdk at PDOM 2, %.2f× at PDOM 1", \
                          t[2, 20, "pmdk"] / t[2, 20, "undo"], t[1, 20, "pmdk"] / t[1, 20, "undo"])
        s = s "; read-only (W=0): "
        for (p = 0; p <= 2; p++) {
            best = ""
            for (e = 1; e <= ne; e++)
                if (E[e] != "none" && ((p, 0, E[e]) in t) && (best == "" || t[p, 0, E[e]] < t[p, 0, best])) best = E[e]
            if (best == "" || !((p, 0, "none") in t)) continue
            s = s sprintf("%sPDOM %d best %s %.0f ns vs none %.0f ns (%.2f×)", p ? ", " : "", p, best,
                          t[p, 0, best], t[p, 0, "none"], t[p, 0, "none"] / t[p, 0, best])
        }
        print s
    }' "$OUT/results.csv"
}

write_report() {
    local cpu cores pdom_line flush
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
    cores=$(nproc)
    pdom_line=$(awk -F, '/^#ctx/ && !($3 in s) { s[$3] = $4; o[++n] = $3 }
        END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (o[j] < o[i]) { x = o[i]; o[i] = o[j]; o[j] = x }
              for (i = 1; i <= n; i++) printf("%sPDOM %s %s ns", (i > 1 ? ", " : ""), o[i], s[o[i]]) }' "$OUT/contexts.csv")
    flush=$(awk -F, '/^#ctx/ && $3 != 2 { print $5; exit }' "$OUT/contexts.csv")
    {
        echo "# pmtx engine comparison: Array and Array-RAW"
        echo
        echo "- machine: ${cpu:-unknown CPU}, $cores cores, Linux $(uname -r)"
        echo "- persist barrier: $pdom_line (minimum per barrier); flush instruction ${flush:-none}"
        echo "- engines: $ENGINES"
        echo "- array: $slots_4 slots of 4 integers, $slots_64 slots of 64; each transaction a random run of 20 contiguous slots, the first W read-write"
        echo "- timing: Google Benchmark, $how; total $1 s for this report"
        echo
        echo "Each cell: nanoseconds per transaction$( [[ " $ENGINES " == *" pmdk "* ]] && echo " (speedup over pmdk: pmdk's time / the engine's, above 1 is faster)") · persist barriers per transaction."
        [[ " $ENGINES " == *" pmdk "* ]] || echo "pmdk is not built here, so no speedups over it are given."
        echo "Array writes a read-write slot back with one txn_write; Array-RAW reads and writes each integer (read-after-write)."
        write_tables
        echo
        echo "![Array](array.png)"
        echo
        echo "![Array-RAW](array_raw.png)"
        echo
        echo "Summary:"
        echo
        sed 's/^/- /' <<<"$SUMMARY"
    } >"$OUT/report.md"
}

plot() {
    local ns
    ns=$(awk -F, '/^#ctx/ && !($3 in s) { s[$3] = $4 } END { print s[0] + 0, s[1] + 0, s[2] + 0 }' "$OUT/contexts.csv")
    gnuplot -e "data='$OUT/plots'; bench='$1'; name='$2'; out='$OUT/$3'; slots='$SLOT_SIZES'; pdom_ns='$ns'; engines='$ENGINES'" scripts/plot.gp
}

ensure_gnuplot
ensure_build
export PMEM_IS_PMEM_FORCE=1
ENGINES=$(list_engines)
ENGINES=${ENGINES% }
if [ -z "$ENGINES" ]; then
    echo "report: no $BUILD_DIR/bin/array-* programs" >&2
    exit 1
fi
mkdir -p "$OUT/raw"
rm -f "$OUT"/raw/*.json "$OUT"/raw/*.log

start=$SECONDS
nruns=$(( $(wc -w <<<"$ENGINES") * $(wc -w <<<"$PDOMS") * $(wc -w <<<"$SLOT_SIZES") ))
i=0
echo "engine,pdom,bench,slot,wslots,ns_per_tx,barriers_per_tx,lines_per_tx,log_bytes_per_tx" >"$OUT/results.csv"
: >"$OUT/contexts.csv"
for pdom in $PDOMS; do
    for slot in $SLOT_SIZES; do
        for engine in $ENGINES; do
            i=$((i + 1))
            run="$OUT/raw/$engine-pdom$pdom-slot$slot"
            slots_var=slots_$slot
            t0=$SECONDS
            printf '[%2d/%d] %-6s PDOM %s slot %2s (%s slots) ... ' "$i" "$nruns" "$engine" "$pdom" \
                "$slot" "${!slots_var}"
            bin=${engine%-paper} batch=1
            [ "$bin" != "$engine" ] && batch=0
            if ! TXN_LOG_BATCH=$batch TXN_PDOM=$pdom ARRAY_SLOTS=${!slots_var} "$BUILD_DIR/bin/array-$bin" \
                --array_sizes="$slot" --array_wslots="$WSLOTS" "${gb_flags[@]}" \
                --benchmark_out="$run.json" --benchmark_out_format=json >"$run.log" 2>&1; then
                echo "FAILED"
                tail -n 20 "$run.log" >&2
                echo "report: $engine failed at PDOM $pdom, slot $slot (log: $run.log)" >&2
                exit 1
            fi
            json_to_csv "$run.json" | sed -e "s/^$bin,/$engine,/" -e "s/^#ctx,$bin,/#ctx,$engine,/" >"$run.csv"
            grep -v '^#ctx' "$run.csv" >>"$OUT/results.csv"
            grep '^#ctx' "$run.csv" >>"$OUT/contexts.csv"
            rm -f "$run.csv"
            echo "$((SECONDS - t0)) s"
        done
    done
done

rm -rf "$OUT/plots"
write_plot_data "$OUT/plots"
plot Array Array array.png
plot ArrayRAW Array-RAW array_raw.png
SUMMARY=$(summary)
write_report $((SECONDS - start))
echo "wrote $OUT/results.csv, $OUT/report.md, $OUT/array.png, $OUT/array_raw.png ($((SECONDS - start)) s)"
echo "Summary:"
sed 's/^/  /' <<<"$SUMMARY"
