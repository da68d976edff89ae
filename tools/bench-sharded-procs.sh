#!/usr/bin/env bash
# zero2 and fsdp across processes, two builds alternated (decision 0045: one collective per
# layer where there was one per shard piece):
#  1. time: the median training step (strata-train --json: step_us_median) of mpirun -np P,
#     one device per process, P in TIME_PROCS (default "2 4"; oversubscribed past 2 on 2
#     cores), Fashion-MNIST, MODEL (default 784-256-128-10), global batch 128, one epoch; each
#     build REPS times, the order reversed every other rep; medians and new / old;
#  2. messages: the MPI messages rank 0 sends per training step (strata-count-isend.so
#     preloaded: MPI_Isend counted), P in COUNT_PROCS (default "8 16"), synthetic rows, the
#     difference of a 10-step and a 20-step epoch over 10 (set-up and evaluation cancel).
# Usage: tools/bench-sharded-procs.sh OLD_BUILD [REPS]; env BUILD (default build: the new),
# ROWS (time on ROWS synthetic rows instead of Fashion-MNIST: shorter epochs at 8-16 processes).
set -euo pipefail
old=${1:?usage: tools/bench-sharded-procs.sh OLD_BUILD [REPS]}
reps=${2:-5}
. "$(dirname "$0")/bench-lib.sh" # here, build, train; median, ratio
model=${MODEL:-784-256-128-10}
count_so=$build/bin/strata-count-isend.so
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
[ -x "$old/bin/strata-train" ] || { echo "no $old/bin/strata-train" >&2; exit 2; }
[ -f "$count_so" ] || { echo "no $count_so (make tools with mpicc)" >&2; exit 2; }

data=()
[ -n "${ROWS:-}" ] && data=(--synthetic "$ROWS")
step_us() { # build strategy procs -> median step of one epoch, us
        $mpirun -np "$3" "$1/bin/strata-train" --strategy "$2" --devices 1 --bind none \
                --model "$model" "${data[@]}" --batch 128 --epochs 1 --json 2>/dev/null |
                grep '"final"' | head -1 | sed 's/.*"step_us_median":\([0-9.]*\).*/\1/'
}
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)" \
     "cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== median training step (us), mpirun -np P x 1 device, $model, batch 128;" \
     "old $old, new $build, alternated $reps times"
printf '%-6s %5s %10s %10s %9s\n' strategy procs old_us new_us new/old
for p in ${TIME_PROCS:-2 4}; do
        for s in zero2 fsdp; do
                o=() n=()
                for r in $(seq "$reps"); do
                        if [ $((r % 2)) = 1 ]; then
                                o+=("$(step_us "$old" $s $p)"); n+=("$(step_us "$build" $s $p)")
                        else
                                n+=("$(step_us "$build" $s $p)"); o+=("$(step_us "$old" $s $p)")
                        fi
                done
                mo=$(median_of "${o[@]}"); mn=$(median_of "${n[@]}")
                printf '%-6s %5d %10.1f %10.1f %9.3f   old: %s  new: %s\n' $s $p "$mo" "$mn" \
                       "$(ratio "$mn" "$mo")" "${o[*]}" "${n[*]}"
        done
done
sends() { # build strategy procs rows -> rank 0's MPI messages over the run
        $mpirun -np "$3" -x LD_PRELOAD="$count_so" "$1/bin/strata-train" --strategy "$2" \
                --devices 1 --bind none --model "$model" --synthetic "$4" --batch 128 \
                --epochs 1 --quiet 2>&1 | awk '$1 == "isend" && $2 == 0 {print $3}'
}
echo "== MPI messages rank 0 sends per training step (20-step epoch - 10-step epoch) / 10"
printf '%-6s %5s %8s %8s\n' strategy procs old new
for p in ${COUNT_PROCS:-8 16}; do
        for s in zero2 fsdp; do
                row=()
                for b in "$old" "$build"; do
                        a=$(sends "$b" $s $p 1280); c=$(sends "$b" $s $p 2560)
                        row+=("$(( (c - a) / 10 ))")
                done
                printf '%-6s %5d %8d %8d\n' $s $p "${row[0]}" "${row[1]}"
        done
done
