# The scale model's curves (tools/bench-scale.sh): gnuplot -e "dir='D'; png='F.png'" scale.gp
# Top: one f32 all_reduce of 8 B, 1 MiB, 64 MiB against the processes: Strata's schedule,
# the all-to-all before decision 0035, the ring and Rabenseifner bounds. Bottom: the
# collectives of a training step of the default and the wide model, ddp, zero2, fsdp (one
# collective per layer, decision 0045; dashed: one per shard piece, as before it); the
# MPI messages one all_reduce sends per process.
set terminal pngcairo size 1500,900 font "Liberation Sans,10"
set output png
set multiplot layout 2,3
set logscale xy
set format x "%.0f"
set format y "10^{%L}"
set xlabel "processes (1 device each)"
set ylabel "modeled time (us)"
set key top left
set grid
do for [s in "8 1048576 67108864"] {
        label = s eq "8" ? "8 B" : s eq "1048576" ? "1 MiB" : "64 MiB"
        set title "all\\_reduce f32, ".label
        plot dir."/allreduce-".s.".dat" u 1:2 w lp lw 2 pt 7 t "Strata (0035)", \
             "" u 1:3 w lp dt 2 pt 6 t "all-to-all (before)", \
             "" u 1:4 w l dt 3 lw 2 t "ring bound", \
             "" u 1:5 w l lw 2 t "Rabenseifner bound"
}
do for [m in "784-256-128-10 784-2048-2048-10"] {
        set title "collectives of one step, ".m
        plot dir."/step-".m.".dat" u 1:2 w lp lw 2 pt 7 t "ddp", \
             "" u 1:3 w lp pt 5 t "zero2 (0045)", \
             "" u 1:4 w lp pt 9 t "fsdp (0045)", \
             "" u 1:8 w lp dt 2 pt 4 t "zero2 (0037: per piece)", \
             "" u 1:9 w lp dt 2 pt 8 t "fsdp (0037: per piece)"
}
set title "MPI messages per process, one all\\_reduce f32"
set ylabel "messages"
set format y "%.0f"
plot dir."/allreduce-8.dat" u 1:6 w lp lw 2 pt 7 t "Strata, 8 B", \
     "" u 1:7 w lp dt 2 pt 6 t "all-to-all, 8 B", \
     dir."/allreduce-1048576.dat" u 1:6 w lp lw 2 pt 5 t "Strata, 1 MiB", \
     "" u 1:7 w lp dt 2 pt 4 t "all-to-all, 1 MiB"
unset multiplot
