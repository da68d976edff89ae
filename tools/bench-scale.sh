#!/usr/bin/env bash
# The scale model of the collectives (issue 46, item 3; decision 0037), from what this machine
# measures:
#  1. alpha and beta of two links by ping-pong (strata-bench-link), the two alternated REPS
#     times, medians: Open MPI's shared memory (vader), and TCP between two network namespaces
#     (tools/hosts-apart.sh; skipped, with the reason, where namespaces cannot be made);
#  2. gamma, the f32 sum kernel's time per byte on one core (strata-bench-scale --rate);
#  3. the model from them (strata-bench-scale): the all_reduce at 1 024 and 16 384 processes
#     against the alpha-beta lower bound, and every collective of a ddp, zero2 and fsdp step;
#  4. the model checked against runs here: strata-bench-sched's all_reduce, broadcast and
#     all_gather at PROCS processes (shared memory, oversubscribed past 2 on 2 cores; and TCP
#     across 2 namespaces, threads not pinned: each "host" would pin its device to core 0):
#     MPI messages of rank 0 exactly, times beside the model's;
#  5. the curves, drawn by gnuplot into $OUT/scale.png.
# Usage: tools/bench-scale.sh [REPS] [PROCS...]; env BUILD (default build), OUT (default
# $BUILD/scale). Prints the tables; exit 1 when a message count differs from the model's.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # bench_begin, bench_end (no rows: its tables are the model's)
bench_begin bench-scale
reps=${1:-5}; shift $(( $# > 0 ? 1 : 0 )); procs=${*:-2 4 8 16}
bin=${BUILD:-build}/bin
out=${OUT:-${BUILD:-build}/scale}
here=$(cd "$(dirname "$0")" && pwd)
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
shm="--mca btl vader,self --mca btl_vader_eager_limit 8192"
sizes="8 4096 65536 1048576"
mkdir -p "$out"

# The two links alternated REPS times (each run: strata-bench-link's median of 3); medians.
echo "== links, alternated $reps times: shared memory (vader) and TCP between two network" \
     "namespaces (veth, bridge), 2 processes"
tcp=1
: > "$out/link-shm.txt"; : > "$out/link-tcp.txt"
for r in $(seq "$reps"); do
        $mpirun -np 2 $shm "$bin/strata-bench-link" 3 2>/dev/null >> "$out/link-shm.txt"
        [ $tcp = 1 ] || continue
        if ! "$here/hosts-apart.sh" -m -- -np 2 "$bin/strata-bench-link" 3 \
                >> "$out/link-tcp.txt" 2> "$out/link-tcp.err"; then
                tcp=0
                echo "TCP skipped: $(tail -1 "$out/link-tcp.err")"
        fi
done
links="shm"; [ $tcp = 1 ] && links="shm tcp"
printf '%-4s %10s %12s\n' link bytes oneway_us
for k in $links; do
        for b in $(awk '$1 ~ /^[0-9]+$/ {print $1}' "$out/link-$k.txt" | sort -nu); do
                printf '%-4s %10d %12.2f\n' "$k" "$b" \
                       "$(awk -v b="$b" '$1 == b {print $2}' "$out/link-$k.txt" | median)"
        done
done
sa=$(awk '/^alpha_us/ {print $2}' "$out/link-shm.txt" | median)
sb=$(awk '/^alpha_us/ {print $4}' "$out/link-shm.txt" | median)
echo "shm: alpha $sa us, beta $sb ns/B (medians of $reps)"
if [ $tcp = 1 ]; then
        ta=$(awk '/^alpha_us/ {print $2}' "$out/link-tcp.txt" | median)
        tb=$(awk '/^alpha_us/ {print $4}' "$out/link-tcp.txt" | median)
        echo "tcp: alpha $ta us, beta $tb ns/B (medians of $reps)"
fi
read -r _ gamma _ _ < <("$bin/strata-bench-scale" --rate)
echo "== f32 sum on one core: gamma $gamma s/B"

model() { "$bin/strata-bench-scale" --alpha "$(echo "$1 / 1000000" | bc -l)" \
                 --beta "$(echo "$2 / 1000000000" | bc -l)" --gamma "$gamma" "${@:3}"; }
if [ $tcp = 1 ]; then
        echo "== model, TCP between namespaces"
        model "$ta" "$tb" --dir "$out" | tee "$out/model-tcp.txt"
fi
echo "== model, shared memory"
mkdir -p "$out/shm"
model "$sa" "$sb" --dir "$out/shm" | tee "$out/model-shm.txt"

# strata-bench-sched's "procs bytes median_us msgs" against the model's at the same size.
bad=0
check() { # LINK OP ALPHA BETA MEASURED_FILE
        while read -r p b t m; do
                read -r _ _ _ mm mt < <(model "$3" "$4" --counts "$p" --op "$2" "$b")
                printf '%-4s %-10s %5d %9d %12.1f %12.1f %8.2f %6d %6d\n' "$1" "$2" "$p" "$b" \
                       "$t" "$mt" "$(echo "$t / $mt" | bc -l)" "$m" "$mm"
                [ "$m" = "$mm" ] || bad=1
        done < "$5"
}
echo "== the model against runs here: median of $reps; MPI messages of rank 0 (exact)"
printf '%-4s %-10s %5s %9s %12s %12s %8s %6s %6s\n' link op procs bytes measured_us model_us \
       ratio msgs model
for op in all_reduce broadcast all_gather; do
        : > "$out/sched-shm-$op.txt"
        for p in $procs; do
                $mpirun -np "$p" $shm "$bin/strata-bench-sched" --op $op --iters 20 "$reps" \
                        $sizes \
                        2>/dev/null | grep -v '^strata' >> "$out/sched-shm-$op.txt"
        done
        check shm $op "$sa" "$sb" "$out/sched-shm-$op.txt"
done
if [ $tcp = 1 ]; then
        for op in all_reduce broadcast all_gather; do
                "$here/hosts-apart.sh" -m -- -np 2 "$bin/strata-bench-sched" --op $op \
                        --iters 20 --no-bind "$reps" $sizes 2>/dev/null | grep -v '^strata' \
                        > "$out/sched-tcp-$op.txt"
                check tcp $op "$ta" "$tb" "$out/sched-tcp-$op.txt"
        done
fi

if command -v gnuplot >/dev/null; then
        d=$out; [ $tcp = 1 ] || d=$out/shm
        gnuplot -e "dir='$d'; png='$out/scale.png'" "$here/scale.gp"
        echo "== plot: $out/scale.png (from $d)"
else
        echo "== no gnuplot: no plot (make deps installs gnuplot-nox)"
fi
bench_end
[ $bad = 0 ] || { echo "bench-scale: a message count differs from the model's" >&2; exit 1; }
