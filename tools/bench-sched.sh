#!/usr/bin/env bash
# The schedule across processes against another build's (e.g. main's direct all-to-all), run
# alternately REPS times under mpirun, oversubscribed, one device per process: the median time
# of one deterministic f32 all_reduce and the MPI messages each process sends per call
# (strata-bench-sched, counted exactly).
# Usage: tools/bench-sched.sh OLD_BIN_DIR [REPS] [PROCS...]; env BUILD (default build).
# Prints: procs bytes old_us new_us new/old old_msgs new_msgs.
set -euo pipefail
old=$1; reps=${2:-5}; shift $(( $# > 1 ? 2 : 1 )); procs=${*:-2 4 8 16}
new=${BUILD:-build}/bin
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl_vader_eager_limit 8192"
sizes="8 4096 1048576"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for p in $procs; do
        for r in $(seq "$reps"); do
                for which in old new; do
                        dir=$old; [ $which = new ] && dir=$new
                        $mpirun -np "$p" "$dir/strata-bench-sched" 1 $sizes 2>/dev/null |
                                grep -v '^strata' >> "$tmp/$which.$p"
                done
        done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '%6s %10s %12s %12s %8s %9s %9s\n' procs bytes old_us new_us new/old old_msgs new_msgs
for p in $procs; do
        for b in $sizes; do
                o=$(awk -v b="$b" '$2==b {print $3}' "$tmp/old.$p" | median)
                n=$(awk -v b="$b" '$2==b {print $3}' "$tmp/new.$p" | median)
                om=$(awk -v b="$b" '$2==b {print $4}' "$tmp/old.$p" | head -1)
                nm=$(awk -v b="$b" '$2==b {print $4}' "$tmp/new.$p" | head -1)
                printf '%6d %10d %12.1f %12.1f %8.2f %9d %9d\n' "$p" "$b" "$o" "$n" \
                        "$(echo "$n / $o" | bc -l)" "$om" "$nm"
        done
done
