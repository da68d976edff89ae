#!/usr/bin/env bash
# Many processes oversubscribed on this machine (issue 46's done-when: 128 processes run a
# short ddp job to the end, bitwise equal to threads): the same job, the same world of N
# devices, split three ways, and the exported weights compared byte for byte:
#   mpi   N processes x 1 device (mpirun, oversubscribed, shared memory);
#   mpi   2 processes x N/2 devices (threads inside each);
#   ddp   N threads in one process, where N <= STRATA_MAX_DEVICES (64) (strata-train refuses
#         more: one runtime drives at most 64 devices, include/strata/limits.h).
# Each job's wall time is printed. Not part of `make test` (minutes on 2 cores).
# Usage: tools/many-procs.sh [N (even, default 128)]; env BUILD (default build).
# Exit: 0 when every layout that ran gave the same bytes, 1 otherwise.
set -euo pipefail
n=${1:-128}
if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ] || [ $((n % 2)) != 0 ]; then
        echo "usage: $0 [N: an even number of devices, at least 2]" >&2
        exit 2
fi
bin=${BUILD:-build}/bin/strata-train
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
job="--synthetic $((20 * n)) --batch $((2 * n)) --model 784-16-10 --epochs 1 --quiet \
--seed 46 --timeout 600"
dir=$(mktemp -d /tmp/strata-many-XXXXXX)
trap 'rm -rf "$dir"' EXIT

run() { # NAME LAUNCH... : the job under LAUNCH, its weights in dir/NAME
        local name=$1 t0
        shift
        t0=$(date +%s.%N)
        "$@" $job --export-safetensors "$dir/$name" > "$dir/$name.log" 2>&1 ||
                { echo "$name: failed"; tail -5 "$dir/$name.log"; return 1; }
        printf '%-34s %8.1f s\n' "$name" "$(echo "$(date +%s.%N) - $t0" | bc -l)"
}
echo "== $n devices, 10 steps of a global batch of $((2 * n)) rows, on $(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc) cores"
run "mpi ${n}x1" $mpirun -np "$n" "$bin" --strategy mpi --devices 1
run "mpi 2x$((n / 2))" $mpirun -np 2 "$bin" --strategy mpi --devices $((n / 2))
names=("mpi 2x$((n / 2))")
if [ "$n" -le 64 ]; then
        run "ddp $n" "$bin" --strategy ddp --devices "$n"
        names+=("ddp $n")
else
        echo "ddp $n: not run: strata-train --devices is at most 64 (STRATA_MAX_DEVICES)"
fi
rc=0
for other in "${names[@]}"; do
        if cmp -s "$dir/mpi ${n}x1" "$dir/$other"; then
                echo "mpi ${n}x1 == $other: bitwise equal"
        else
                echo "mpi ${n}x1 != $other: DIFFERENT"
                rc=1
        fi
done
exit $rc
