# kvplot.gp - results/kvstore.png from scripts/kvbench.sh's medians: SET and
# GET ops/s per server, one panel per pipeline depth, each with its own y
# axis (a server does about a tenth at -P 1 of what it does at -P 16, so on
# one shared axis the -P 1 bars could not be read).
#   gnuplot -e "data='plot.csv'; out='results/kvstore.png'; depths='1 16';
#               requests='100000 1000000'; rounds=3; flags=''" scripts/kvplot.gp
# data: a line per server and depth, "server (durability),P,SET ops/s,GET ops/s",
# in the order the bars are drawn; flags: redis-benchmark's extra flags (-r N).

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,700 noenhanced font ",10"
} else {
    set terminal png size 1500,700
}
set output out
set datafile separator ","
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set format y "%.1s%c"
set ylabel "ops/s"
set grid ytics
set key top center horizontal
set offsets 0, 0, graph 0.1, 0 # headroom for the key
set xtics nomirror rotate by -35 font ",8"
set lmargin 10
set bmargin 12

set multiplot layout 1, words(depths) \
    title sprintf("redis-benchmark -t set,get -c 50%s over UNIX sockets: ops/s, medians of %d rounds", \
                  flags eq "" ? "" : " ".flags, rounds) font ",13"
do for [i = 1:words(depths)] {
    p = word(depths, i)
    set title sprintf("-P %s, -n %s", p, word(requests, i)) font ",11"
    plot sprintf("< awk -F, '$2 == %s' '%s'", p, data) using 3:xtic(1) title "SET" lc rgb "#0072b2", \
         "" using 4 title "GET" lc rgb "#e69f00"
}
unset multiplot
