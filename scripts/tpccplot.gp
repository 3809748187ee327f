# tpccplot.gp - results/tpcc.png from scripts/tpcc.sh: tpmC per engine at
# PDOM 0, 1, 2 beside stock SQLite (memory, wal, delete), a panel per
# warehouse count.
#   gnuplot -e "files='w1.dat w4.dat'; out='results/tpcc.png'; ws='1 4'" scripts/tpccplot.gp
# a file per warehouse count: "line pdom0 pdom1 pdom2 stock" lines, "-"
# where a value is none.

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
set key outside bottom center horizontal
set xtics rotate by -30
n = words(ws)
set multiplot layout 1, n
do for [i = 1:n] {
    set title sprintf("TPC-C, W = %s", word(ws, i))
    f = word(files, i)
    plot f using 2:xtic(1) title "PDOM 0", '' using 3 title "PDOM 1", \
         '' using 4 title "PDOM 2", '' using 5 title "stock SQLite"
}
unset multiplot
