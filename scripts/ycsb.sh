#!/usr/bin/env bash
# ycsb.sh [--full] [--keys N] [--ops M] [--threads T] [--reps R] [--pairs P]
#         [--pair-ops M] [--engines "a b"] [--recovery-nodes N] [--no-build]
# Throughput of the Masstree on every engine (ycsb-<engine>, TXN_PDOM=1) on
# YCSB workloads a, b, c, e x uniform, zipf; each configuration loads its
# own tree. Defaults sized for 2 cores: 1M keys, 2 threads, 500K operations
# per thread (--full: 20M keys, 1M operations per thread, as the paper);
# every run is repeated R times (--reps R, default 3: one run's ratio to
# ycsb-none moved by up to 0.4 on this shared machine), the whole sweep
# again, so the repetitions are spread in time; the tables give medians.
# Writes results/ycsb.json (one JSON line per run) and results/ycsb.md
# (Mops/s, and each engine's throughput relative to the transient tree,
# ycsb-none, measured in the same sweep; incll against none side by side:
# --pairs P pairs of longer runs, --pair-ops M operations per thread, each
# pair back to back, which one first alternating, per configuration: the
# median of the pairs' ratios, and A uniform once more per pair with
# --op-times (the mean time of a get and of an update); what incll's
# InCLLs did in each configuration: nodes logged per epoch, InCLL hits;
# recovery) and
# results/ycsb.png (throughput of every engine per configuration, and
# incll's overhead over the transient tree).
# Recovery (ycsb-incll --crash-recovery, when incll is among the engines):
# a crash just before the end of an epoch of updates in which N nodes
# (default 84000, the paper's worst case) went to the external log, three
# times; the restart's times (pool open with the log's replay, first get)
# and the engine's replay split into its scan and its copy back
# (TXN_INCLL_STATS). $BUILD_DIR (default build) holds the binaries;
# --no-build uses them as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

keys=1000000
ops=500000
threads=2
reps=3
pairs=5
pops=1500000
engines= # default: every engine built, in this order first
rnodes=84000
nobuild=
while [ $# -gt 0 ]; do
    case $1 in
    --full) keys=20000000; ops=1000000 ;;
    --keys) keys=$2; shift ;;
    --ops) ops=$2; shift ;;
    --threads) threads=$2; shift ;;
    --reps) reps=$2; shift ;;
    --pairs) pairs=$2; shift ;;
    --pair-ops) pops=$2; shift ;;
    --engines) engines=$2; shift ;;
    --recovery-nodes) rnodes=$2; shift ;;
    --no-build) nobuild=1 ;;
    *) echo "usage: $0 [--full] [--keys N] [--ops M] [--threads T] [--reps R] [--pairs P] [--pair-ops M] [--engines \"a b\"] [--recovery-nodes N] [--no-build]" >&2
       exit 2 ;;
    esac
    shift
done

export PMEM_IS_PMEM_FORCE=1 TXN_PDOM=${TXN_PDOM:-1}
sweep_build "$nobuild"
[ -n "$engines" ] || engines=$(built_engines "$BUILD_DIR" none undo redo cow pmdk incll)
mkdir -p results
json=results/ycsb.json
: >"$json"
configs="a-uniform a-zipf b-uniform b-zipf c-uniform c-zipf e-uniform e-zipf"

echo "== ycsb: $keys keys, $threads threads x $ops operations, PDOM $TXN_PDOM, $reps rep(s)"
# configurations inside repetitions, engines innermost: the engines of
# one column run close together in time, so machine noise hits them alike
for rep in $(seq "$reps"); do
    for cfg in $configs; do
        wl=${cfg%-*} dist=${cfg#*-}
        for e in $engines; do
            bin=$BUILD_DIR/bin/ycsb-$e
            [ -x "$bin" ] || { echo "ycsb: no $bin" >&2; exit 1; }
            out=$("$bin" --workload "$wl" --dist "$dist" --keys "$keys" --threads "$threads" \
                  --ops "$ops" --seed "$rep")
            echo "$out" | grep -v '^[#{]'
            echo "$out" | grep '^{' >>"$json"
        done
    done
done

# incll against none side by side: a short run's ratio moves by up to
# 0.2 on this shared machine, so each pair runs back to back, longer
pjson=results/ycsb_pairs.json
: >"$pjson"
has_pair=
if [[ " $engines " == *" none "* && " $engines " == *" incll "* ]] && [ "$pairs" -gt 0 ]; then
    has_pair=1
    echo "== ycsb: incll against none, $pairs pairs per configuration, $pops operations per thread"
    for p in $(seq "$pairs"); do
        order="none incll"
        [ $((p % 2)) -eq 0 ] && order="incll none"
        for cfg in $configs; do
            wl=${cfg%-*} dist=${cfg#*-}
            for e in $order; do
                out=$("$BUILD_DIR/bin/ycsb-$e" --workload "$wl" --dist "$dist" --keys "$keys" \
                      --threads "$threads" --ops "$pops" --seed "$((100 + p))")
                echo "$out" | grep '^{' | sed "s/^{/{\"pair\":$p,/" >>"$pjson"
            done
        done
        # where the time goes: A uniform again, every operation timed
        for e in $order; do
            out=$("$BUILD_DIR/bin/ycsb-$e" --workload a --dist uniform --keys "$keys" \
                  --threads "$threads" --ops "$pops" --seed "$((100 + p))" --op-times)
            echo "$out" | grep '^{' | sed "s/^{/{\"pair\":$p,\"timed\":1,/" >>"$pjson"
        done
    done
fi

# recovery: a crash in an epoch with $rnodes logged nodes, three times
rec=$(mktemp)
trap 'rm -f "$rec" "$rec.dat" "$rec.ovh"' EXIT
if [[ " $engines " == *" incll "* ]]; then
    echo "== ycsb-incll recovery: crash in an epoch with $rnodes logged nodes"
    for r in 1 2 3; do
        out=$(TXN_INCLL_STATS=1 "$BUILD_DIR/bin/ycsb-incll" --keys "$keys" --threads "$threads" \
              --crash-recovery "$rnodes" --seed "$r" 2>&1)
        echo "$out" | grep '^ycsb-incll recovery'
        echo "$out" | grep '^{' >>"$json"
        # the engine's replay of the crashed open (the clean open replays nothing)
        echo "$out" | grep '^incll-recover' | head -1 >>"$rec"
    done
fi

# the tables: a row per engine, a column per configuration
field() { # name: its value in the JSON lines read, one per line
    sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"
}
median() { # [what to print for no values, default -]
    sort -g | awk -v none="${1--}" '{ v[NR] = $1 }
        END { if (NR) print v[int((NR + 1) / 2)]; else if (none != "") print none }'
}
mops() { # engine cfg: the median of its runs (nothing without runs)
    grep "\"engine\":\"$1\"" "$json" |
        grep "\"workload\":\"${2%-*}\",\"dist\":\"${2#*-}\"" | field mops | median ""
}
ratio() { # engine cfg: throughput over that of none
    awk -v a="$(mops "$1" "$2")" -v b="$(mops none "$2")" \
        'BEGIN { if (b > 0 && a != "") printf "%.2f", a / b; else printf "-" }'
}
pair_ratios() { # cfg: incll/none of each pair, one per line
    local c=$1 p a b
    for p in $(seq "$pairs"); do
        a=$(grep "^{\"pair\":$p,\"engine\":\"incll\"" "$pjson" |
            grep "\"workload\":\"${c%-*}\",\"dist\":\"${c#*-}\"" | field mops)
        b=$(grep "^{\"pair\":$p,\"engine\":\"none\"" "$pjson" |
            grep "\"workload\":\"${c%-*}\",\"dist\":\"${c#*-}\"" | field mops)
        awk -v a="$a" -v b="$b" 'BEGIN { if (a != "" && b > 0) printf "%.4f\n", a / b }'
    done
}
pair_cell() { # cfg: median [lowest, highest] of the pairs' ratios
    pair_ratios "$1" | sort -g | awk '{ v[NR] = $1 }
        END { if (!NR) { printf "-"; exit }
              m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.2f [%.2f, %.2f]", m, v[1], v[NR] }'
}
pair_median() { # cfg: nothing without pairs
    pair_cell "$1" | cut -d' ' -f1 | grep -v '^-$' || true
}
table() { # cell function
    printf '| engine |'; for c in $configs; do printf ' %s |' "$c"; done; echo
    printf '| --- |'; for c in $configs; do printf ' ---: |'; done; echo
    for e in $engines; do
        printf '| %s |' "$e"
        for c in $configs; do printf ' %s |' "$("$1" "$e" "$c")"; done
        echo
    done
}
incll_row() { # cfg: ycsb-incll's counters in that configuration (medians)
    local lines
    lines=$(grep '"engine":"incll"' "$json" | grep "\"workload\":\"${1%-*}\",\"dist\":\"${1#*-}\"" || true)
    [ -n "$lines" ] || return 0
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" \
        "$(echo "$lines" | field epochs | median)" \
        "$(echo "$lines" | field logged_per_epoch | median)" \
        "$(echo "$lines" | field incll_hits | median)" \
        "$(echo "$lines" | field in_logged | median)" \
        "$(echo "$lines" | field barriers_per_op | median)" \
        "$(echo "$lines" | field log_bytes_per_op | median)"
}
{
    echo "# Masstree YCSB throughput (Mops/s)"
    echo
    echo "$keys keys, $threads threads x $ops operations, PDOM $TXN_PDOM;"
    echo "median of $reps run(s) each, all in one sweep."
    echo "none = the transient tree (MT+: mmap'd node pool, epochs);"
    echo "undo, redo, cow, pmdk = every node change a txn_write, one transaction per put;"
    echo "incll = the nodes in the pool, changed through InCLLs, up to 32 puts of a"
    echo "thread per transaction of the epoch (ycsb --batch, its default)."
    echo
    table mops
    echo
    echo "Relative to none (1.00 = as fast as the transient tree):"
    echo
    table ratio
    echo
    if [ -n "$has_pair" ]; then
        echo "incll against none side by side: $pairs pairs of runs per configuration,"
        echo "$pops operations per thread, each pair back to back (which one first"
        echo "alternating); the median of the pairs' ratios incll/none [lowest, highest]:"
        echo
        printf '|'; for c in $configs; do printf ' %s |' "$c"; done; echo
        printf '|'; for c in $configs; do printf ' ---: |'; done; echo
        printf '|'; for c in $configs; do printf ' %s |' "$(pair_cell "$c")"; done; echo
        echo
        echo "Where the time goes: A uniform once more in each pair, every operation"
        echo "timed (--op-times: two clock reads each, counted in); medians of the"
        echo "$pairs runs, nanoseconds per operation:"
        echo
        echo "| engine | get ns | update ns |"
        echo "| --- | ---: | ---: |"
        for e in none incll; do
            tl=$(grep "^{\"pair\":[0-9]*,\"timed\":1,\"engine\":\"$e\"" "$pjson")
            printf '| %s | %s | %s |\n' "$e" "$(echo "$tl" | field get_ns | median)" \
                "$(echo "$tl" | field update_ns | median)"
        done
        echo
    fi
    echo "![throughput per configuration, and incll's overhead over none](ycsb.png)"
    if grep -q '"engine":"incll","storage"' "$json"; then
        echo
        echo "## ycsb-incll: what the InCLLs did (medians)"
        echo
        echo "Epochs the run spanned; nodes copied to the external log per epoch;"
        echo "InCLL hits (updates, inserts and removes an InCLL absorbed, and updates"
        echo "moved to a free slot: no log);"
        echo "changes of nodes already in the epoch's log; barriers and log bytes per"
        echo "operation."
        echo
        echo "| configuration | epochs | logged nodes / epoch | InCLL hits | in logged nodes | barriers / op | log bytes / op |"
        echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        for c in $configs; do incll_row "$c"; done
    fi
    if [ -s "$rec" ]; then
        rj=$(grep '"test":"recovery"' "$json")
        echo
        echo "## ycsb-incll recovery: a crash just before an epoch boundary"
        echo
        echo "$keys keys loaded and made durable, then $threads threads update random keys"
        echo "in one epoch (no epoch thread) until $rnodes nodes are in its external log;"
        echo "the process is killed (SIGKILL) before the epoch ends. Restart: the pool's"
        echo "open replays the log (every logged node copied back), the tree's open reads"
        echo "its anchor, the first get recovers the nodes on its path. Medians of 3."
        echo
        echo "| logged nodes | pool open (replay) ms | its CPU time ms | clean open ms | first get ms | first operation after restart ms | replay: records gathered ms | replay: copy back ms | every node touched ms |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
            "$(echo "$rj" | field logged_nodes | median)" \
            "$(echo "$rj" | field recovery_ms | median)" \
            "$(echo "$rj" | field recovery_cpu_ms | median)" \
            "$(echo "$rj" | field clean_open_ms | median)" \
            "$(echo "$rj" | field first_get_ms | median)" \
            "$(echo "$rj" | field first_op_ms | median)" \
            "$(sed 's/.* in \([0-9.]*\) ms, .*/\1/' "$rec" | median)" \
            "$(sed 's/.*) in \([0-9.]*\) ms$/\1/' "$rec" | median)" \
            "$(echo "$rj" | field touch_all_ms | median)"
        echo
        echo "Every run checks that each key holds its loaded value after the restart"
        echo "(\"ok\" in results/ycsb.json): the failed epoch's updates are all gone."
        echo "The pool open minus the clean open is the replay: the pool's pass over the"
        echo "logs (every record read and its checksum checked), the engine's gathering"
        echo "of those records (the failed epoch marked), and its copy back of every"
        echo "logged node (320 bytes) in place, at PDOM 0 and 1 with non-temporal stores"
        echo "(a node's lines between its first and last are not read). The pool file is mapped afresh,"
        echo "so each page the replay touches faults once (4 KiB pages of /dev/shm)."
        echo "Times are wall-clock but for the CPU time of the opening thread, which"
        echo "leaves out the time other processes held the cores."
    fi
} >results/ycsb.md

# the plot: Mops/s of every engine per configuration (the colours of
# plot.gp), and incll's overhead over none in percent
for c in $configs; do
    printf '%s' "$c"
    for e in $engines; do v=$(mops "$e" "$c"); printf ' %s' "${v:--}"; done
    echo
done >"$rec.dat"
for c in $configs; do # the pairs' median when there are pairs
    if [ -n "$has_pair" ]; then
        awk -v c="$c" -v r="$(pair_median "$c")" \
            'BEGIN { if (r != "") printf "%s %.2f\n", c, 100 * (1 - r) }'
    else
        awk -v c="$c" -v a="$(mops incll "$c")" -v b="$(mops none "$c")" \
            'BEGIN { if (a != "" && b > 0) printf "%s %.2f\n", c, 100 * (1 - a / b) }'
    fi
done >"$rec.ovh"
if [[ " $engines " == *" none "* && " $engines " == *" incll "* ]] && command -v gnuplot >/dev/null; then
    gnuplot <<EOF
color(e) = e eq "pmdk" ? "#000000" : e eq "undo" ? "#0072b2" : e eq "redo" ? "#009e73" : \\
           e eq "cow" ? "#d55e00" : e eq "incll" ? "#cc79a7" : e eq "none" ? "#7f7f7f" : "#e69f00"
engines = "$engines"
set terminal pngcairo size 1300,900 noenhanced font ",10"
set output "results/ycsb.png"
set datafile missing "-"
set multiplot layout 2,1 title "Masstree YCSB: $keys keys, $threads threads x $ops operations, PDOM $TXN_PDOM (median of $reps)" font ",13"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set ylabel "Mops/s"
set yrange [0:*]
set key outside right top
set title "throughput per workload-distribution"
plot for [i = 1:words(engines)] "$rec.dat" using i + 1:xtic(1) title word(engines, i) lc rgb color(word(engines, i))
set title "incll: throughput lost against the transient tree (none), percent$([ -n "$has_pair" ] && echo ", median of $pairs pairs side by side")"
set ylabel "% slower than none"
set yrange [*:*]
set key off
plot "$rec.ovh" using 2:xtic(1) lc rgb color("incll"), \\
     "" using 0:2:(sprintf("%.1f", \$2)) with labels offset 0,0.8
unset multiplot
EOF
fi
cat results/ycsb.md
