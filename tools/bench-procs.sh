#!/usr/bin/env bash
# Strata across processes, run back to back and alternated, REPS times; medians.
#  - training the Fashion-MNIST MLP 784-256-128-10, global batch 128, one epoch: ddp on 2
#    devices (threads of one process), spawn 2, mpi 2 x 1 (deterministic, and with
#    --mpi-allreduce), and PyTorch DDP over Gloo with 2 processes (one thread each)
#  - all_reduce across 2 processes (strata-bench-procs): Strata's fixed-order protocol,
#    Strata over MPI_Allreduce, and MPI_Allreduce itself, busbw at 4 KiB, 1 MiB, 64 MiB
# Usage: tools/bench-procs.sh [REPS] ; env BUILD (default build), PEERS (tools/peers).
# Rows (tools/bench-lib.sh, written when quiet): ddp, spawn and mpi against PyTorch DDP.
# BENCH_QUICK=1: 2048 rows.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
bench_begin bench-procs
sps() { # launcher args... -> training samples/s of one epoch (global rank 0's line)
        "$@" --epochs 1 --json $quick_data 2>/dev/null | grep '"epoch":1,' |
                sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/'
}
torch_sps() {
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" "$peers/torch_mlp_fmnist.py" 2 1 128 |
                sed 's/.*samples_per_s=\([0-9.]*\).*/\1/'
}

d=() s=() m=() n=() t=()
for _ in $(seq "$reps"); do
        d+=("$(sps "$train" --strategy ddp --devices 2)")
        s+=("$(sps "$train" --strategy spawn --devices 2)")
        m+=("$(sps $mpirun -np 2 "$train" --strategy mpi --devices 1)")
        n+=("$(sps $mpirun -np 2 "$train" --strategy mpi --devices 1 --mpi-allreduce)")
        t+=("$(torch_sps)")
done
md=$(printf '%s\n' "${d[@]}" | median); ms=$(printf '%s\n' "${s[@]}" | median)
mm=$(printf '%s\n' "${m[@]}" | median); mn=$(printf '%s\n' "${n[@]}" | median)
mt=$(printf '%s\n' "${t[@]}" | median)
echo "training, 2 devices, global batch 128, one epoch; median of $reps alternated runs"
printf '%-40s %12s %12s %14s\n' "" samples/s "vs ddp" "vs PyTorch DDP"
printf '%-40s %12.0f %12.2f %14.2f\n' "Strata ddp (2 threads, 1 process)" "$md" 1 "$(ratio "$md" "$mt")"
printf '%-40s %12.0f %12.2f %14.2f\n' "Strata spawn (2 processes)" "$ms" "$(ratio "$ms" "$md")" "$(ratio "$ms" "$mt")"
printf '%-40s %12.0f %12.2f %14.2f\n' "Strata mpi (mpirun -np 2, 1 device)" "$mm" "$(ratio "$mm" "$md")" "$(ratio "$mm" "$mt")"
printf '%-40s %12.0f %12.2f %14.2f\n' "Strata mpi --mpi-allreduce" "$mn" "$(ratio "$mn" "$md")" "$(ratio "$mn" "$mt")"
printf '%-40s %12.0f\n' "PyTorch DDP (Gloo, 2 processes)" "$mt"
for a in "d ddp (2 threads, 1 process)" "s spawn (2 processes)" "m mpi (mpirun -np 2)"; do
        declare -n arm=${a%% *}
        bench_compare "Strata ${a#* } against PyTorch DDP (Gloo, 2 processes), training, global batch 128" \
                samples/s "${arm[*]}" "${t[*]}"
        unset -n arm
done
echo
# strata-bench-procs initialises MPI itself: it passes the eager limit Strata sets when it does.
$mpirun --mca btl_vader_eager_limit 8192 -np 2 "$build/bin/strata-bench-procs" "$reps"
bench_end
