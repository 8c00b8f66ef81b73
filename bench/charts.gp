# charts.gp — the PNG charts of a bench/run.sh run (gnuplot 5).
#
#   gnuplot -e "data='DIR'; out='DIR'" bench/charts.gp
#
# Reads from `data` what the run left there: cdf-notify.dat,
# cdf-notify-concurrent.dat, cdf-wal.dat and cdf-poll.dat (pgoutbox-bench latency
# --samples: "ms fraction"), relays.dat, steady.dat and held.dat
# (bench/report.py --chart-data).  Writes to `out`:
#   latency-notify.png   commit-to-sink CDF at 500/s with NOTIFY, and
#                        through the WAL (a queue captured by it)
#   latency-poll.png     the same, poll only (1 s interval)
#   throughput-relays.png  drain events/s against relays, both modes
#   steady.png           p99, backlog and dead tuples over time,
#                        steady and with a held snapshot
set terminal pngcairo size 900,560 font "sans,11"
set grid
set key top left box opaque

# --- latency CDF, NOTIFY ---
set output out.'/latency-notify.png'
set title "Commit-to-sink latency at 500 events/s: NOTIFY wake-up, WAL stream (CDF)"
set xlabel "latency (ms, log scale)"
set ylabel "fraction of events at or below"
set logscale x
set yrange [0:1.02]
set arrow 1 from 0.4, graph 0 to 0.4, graph 1 nohead dt 2 lc rgb "#888888"
set arrow 2 from 1.5, graph 0 to 1.5, graph 1 nohead dt 2 lc rgb "#888888"
set label 1 "target p50 0.4 ms" at 0.4, 0.3 rotate by 90 offset -1,0 tc rgb "#666666"
set label 2 "target p99 1.5 ms" at 1.5, 0.3 rotate by 90 offset -1,0 tc rgb "#666666"
plot data.'/cdf-notify.dat' using 1:2 with lines lw 2 title "ordered (default)", \
     data.'/cdf-notify-concurrent.dat' using 1:2 with lines lw 2 title "concurrent", \
     data.'/cdf-wal.dat' using 1:2 with lines lw 2 title "WAL capture (slot streamed)"
unset arrow 1
unset arrow 2
unset label 1
unset label 2

# --- latency CDF, poll only ---
set output out.'/latency-poll.png'
set title "Commit-to-sink latency at 500 events/s, poll only every 1 s (CDF)"
set xlabel "latency (ms)"
unset logscale x
set xrange [0:*]
plot data.'/cdf-poll.dat' using 1:2 with lines lw 2 title "poll only (--listen off --poll-interval 1s)"
set autoscale x

# --- throughput against relays ---
set output out.'/throughput-relays.png'
set title "Drain of 100,000 events: throughput against relays (no-op sink)"
set xlabel "relays"
set ylabel "events/s"
set xrange [0.5:4.5]
set xtics 1
set yrange [0:*]
set format y "%.0s%c"
set key bottom right
set offsets 0, 0, 40000, 0
plot data.'/relays.dat' using 1:2 with linespoints lw 2 pt 7 title "ordered", \
     data.'/relays.dat' using 1:3 with linespoints lw 2 pt 5 title "concurrent", \
     250000 with lines dt 2 lc rgb "#1f77b4" title "target, concurrent 1 relay", \
     150000 with lines dt 2 lc rgb "#9467bd" title "target, ordered 1 relay"
set autoscale
set offsets 0, 0, 0, 0
set format y "%g"
set xtics autofreq

# --- over time: steady and held snapshot ---
set output out.'/steady.png'
set terminal pngcairo size 900,760 font "sans,11"
set output out.'/steady.png'
unset title
set multiplot layout 2,1 title "Steady load, and the same load with a REPEATABLE READ snapshot held (big dots: held)"
set key top right
set xlabel "seconds since the measured start"
set ylabel "commit-to-sink p99 (ms, log scale)"
set logscale y
plot data.'/steady.dat' using 1:3 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "steady p99", \
     50 with lines dt 2 lc rgb "#888888" title "target: every window's p99 <= 50 ms", \
     data.'/held.dat' using 1:3 with linespoints lw 2 pt 5 lc rgb "#d62728" title "held-xmin p99", \
     data.'/held.dat' using 1:($7 > 0 ? $3 : NaN) with points pt 7 ps 2 lc rgb "#d62728" title "snapshot held"
unset logscale y
set ylabel "count"
set logscale y
plot data.'/steady.dat' using 1:($5 + 1) with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "steady backlog + 1", \
     data.'/held.dat' using 1:($5 + 1) with linespoints lw 2 pt 5 lc rgb "#d62728" title "held-xmin backlog + 1", \
     data.'/steady.dat' using 1:($6 + 1) with linespoints lw 2 pt 6 dt 2 lc rgb "#1f77b4" title "steady dead tuples + 1", \
     data.'/held.dat' using 1:($6 + 1) with linespoints lw 2 pt 4 dt 2 lc rgb "#d62728" title "held-xmin dead tuples + 1"
unset multiplot
