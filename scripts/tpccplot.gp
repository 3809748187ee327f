# tpccplot.gp - results/tpcc.png from scripts/tpcc.sh: tpmC per engine at
# PDOM 0, 1, 2 beside stock SQLite (memory, wal, delete), a panel per
# warehouse count.
#   gnuplot -e "data='tpcc.dat'; out='results/tpcc.png'; ws='1 4'" scripts/tpccplot.gp
# data: "W line pdom0 pdom1 pdom2 stock" lines, "-" where a value is none.

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1400,500 noenhanced font ",10"
} else {
    set terminal png size 1400,500
}
set output out
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "tpmC (New-Order per minute)"
set format y "%.0s%c"
set grid ytics
set yrange [0:*]
set key top right
set xtics rotate by -30
n = words(ws)
set multiplot layout 1, n
do for [i = 1:n] {
    w = word(ws, i) + 0
    set title sprintf("TPC-C, W = %d", w)
    plot data using ($1 == w ? $3 : NaN):xtic($1 == w ? strcol(2) : "") title "PDOM 0", \
         '' using ($1 == w ? $4 : NaN) title "PDOM 1", \
         '' using ($1 == w ? $5 : NaN) title "PDOM 2", \
         '' using ($1 == w ? $6 : NaN) title "stock SQLite"
}
unset multiplot
