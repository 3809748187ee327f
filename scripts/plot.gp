# plot.gp - one figure in the style of the paper's Figure 5, from the data
# report.sh writes: latency per transaction against read-write slots, one
# line per engine, one panel per slot size (rows) x PDOM (columns).
#   gnuplot -e "data='results/plots'; bench='Array'; name='Array';
#               out='results/array.png'; slots='4 64'; pdom_ns='500 100 0';
#               engines='pmdk undo redo cow none'"
#           scripts/plot.gp
# data/<bench>-pdom<P>-slot<S>.dat: a header "wslots <engine>...", then
# rows "W us-per-tx..." ("-" where an engine has no number); its columns
# are the engines in the order of `engines`.

# one colour per engine, the same in every figure; none (the zero line) dashed
# an <engine>-paper variant (the papers' logging): its engine's colour, dotted
base(e) = strstrt(e, "-paper") > 0 ? e[1:strstrt(e, "-paper") - 1] : e
color(e) = base(e) eq "pmdk" ? "#000000" : base(e) eq "undo" ? "#0072b2" : \
           base(e) eq "redo" ? "#009e73" : base(e) eq "cow" ? "#d55e00" : \
           base(e) eq "incll" ? "#cc79a7" : base(e) eq "none" ? "#7f7f7f" : "#e69f00"
dash(e) = e eq "none" ? 2 : strstrt(e, "-paper") > 0 ? 3 : 1

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,950 font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,950
}
set output out
set datafile missing "-"
set multiplot layout words(slots),3 \
    title sprintf("%s: latency per transaction (20 slots, W of them read-write)", name) \
    font ",15"
set xlabel "read-write slots W (of 20)"
set ylabel "µs per transaction"
set xrange [-0.5:20.5]
set xtics 0,5,20
set logscale y
set ytics () # labels at 1, 2, 5 x 10^k: several per panel even when its range is narrow
do for [k = -2:6] {
    set ytics add (sprintf("%g", 10.0**k) 10.0**k, sprintf("%g", 2 * 10.0**k) 2 * 10.0**k, \
                   sprintf("%g", 5 * 10.0**k) 5 * 10.0**k)
}
set grid xtics ytics mytics
set key top left reverse Left samplen 2 spacing 1.1 box opaque
set style data linespoints

do for [s = 1:words(slots)] {
    do for [p = 0:2] {
        set title sprintf("slot of %s integers, PDOM %d (%s ns per barrier)", \
                          word(slots, s), p, word(pdom_ns, p + 1))
        f = sprintf("%s/%s-pdom%d-slot%s.dat", data, bench, p, word(slots, s))
        plot for [i = 2:words(engines) + 1] f using 1:i title columnheader(i) \
             lc rgb color(word(engines, i - 1)) dt dash(word(engines, i - 1)) lw 2 pt 7 ps 0.9
    }
}
unset multiplot
