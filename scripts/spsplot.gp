# spsplot.gp - results/sps.png from scripts/sps.sh: swaps/s against swaps
# per transaction (log scale), one panel per persistence domain, a line per
# engine and the raw lines (array layout).
#   gnuplot -e "data='sps.csv'; out='results/sps.png'; configs='pdom0 pdom1';
#               lines='raw raw-flush undo'" scripts/spsplot.gp
# data: "config,line,S,swaps/s" lines.

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1600,500 noenhanced font ",10"
} else {
    set terminal png size 1600,500
}
set output out
set datafile separator ","
set logscale x 2
set logscale y 10
set format y "%.0s%c"
set xlabel "swaps per transaction (S)"
set ylabel "swaps/s"
set grid
set tmargin 2
set key bottom right font ",8"
n = words(configs)
set multiplot layout 1, n
do for [i = 1:n] {
    c = word(configs, i)
    set title c
    plot for [j = 1:words(lines)] data \
        using ((strcol(1) eq c && strcol(2) eq word(lines, j)) ? $3 : NaN):4 \
        with linespoints title word(lines, j)
}
unset multiplot
