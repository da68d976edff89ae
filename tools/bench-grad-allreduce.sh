#!/usr/bin/env bash
# Gradients all-reduced in f32 or bf16 (--grad-allreduce) on 2 devices, this machine:
#  - speed: ddp (one process, shared memory) and spawn (two processes) alternated REPS times,
#    medians of training samples/s (batch / median step, the test pass excluded), on the
#    default MLP 784-256-128-10 (global batch 128, 0.94 MB of f32 gradients) and on
#    784-2048-2048-10 (batch 512, 23.3 MB); beside PyTorch DDP over Gloo in f32, 2 processes,
#    same run. (PyTorch's bf16_compress_hook cannot run here: Gloo refuses bf16 all_reduce.)
#  - accuracy: ddp 2, Fashion-MNIST, 10 epochs, f32 vs bf16 gradients, under precision 32
#    and bf16-mixed, seeds 0..SEEDS-1 (deterministic: one run each; the seeds show the spread).
# Usage: tools/bench-grad-allreduce.sh [REPS] ; env BUILD (default build), PEERS (tools/peers), SEEDS (4).
# Rows (tools/bench-lib.sh, written when quiet): bf16 gradients against f32 (ddp, spawn),
# Strata ddp bf16 against PyTorch DDP. BENCH_QUICK=1: the default MLP on 2048 rows, no
# accuracy part.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}
bench_begin bench-grad-allreduce

strata_sps() { # strategy model batch samples grad-type -> samples/s of the median step
        "$train" --strategy "$1" --devices 2 --model "$2" --batch "$3" --synthetic "$4" \
                --epochs 1 --grad-allreduce "$5" --json 2>/dev/null | step_sps "$3"
}
torch_ddp_sps() { # PyTorch DDP, Gloo, 2 processes, global batch 128, one thread each
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" "$peers/torch_mlp_fmnist.py" 2 1 128 |
                sed 's/.*samples_per_s=\([0-9.]*\).*/\1/'
}

speed() { # model batch samples with-torch
        local d32=() dbf=() s32=() sbf=() t=()
        for _ in $(seq "$reps"); do
                d32+=("$(strata_sps ddp "$1" "$2" "$3" 32)")
                dbf+=("$(strata_sps ddp "$1" "$2" "$3" bf16)")
                s32+=("$(strata_sps spawn "$1" "$2" "$3" 32)")
                sbf+=("$(strata_sps spawn "$1" "$2" "$3" bf16)")
                [ "$4" = 1 ] && t+=("$(torch_ddp_sps)")
        done
        local a b c d e=
        a=$(median_of "${d32[@]}"); b=$(median_of "${dbf[@]}")
        c=$(median_of "${s32[@]}"); d=$(median_of "${sbf[@]}")
        echo "MLP $1, global batch $2, 2 devices; median of $reps alternated runs, samples/s"
        printf '%-10s %12s %12s %10s\n' "" "f32 grads" "bf16 grads" "bf16/f32"
        printf '%-10s %12.0f %12.0f %10.2f\n' ddp "$a" "$b" "$(ratio "$b" "$a")"
        printf '%-10s %12.0f %12.0f %10.2f\n' spawn "$c" "$d" "$(ratio "$d" "$c")"
        if [ "$4" = 1 ]; then
                e=$(median_of "${t[@]}")
                printf '%-10s %12.0f %12s   (Strata ddp bf16 / PyTorch: %.2f)\n' \
                        "PyTorch DDP" "$e" "-" "$(ratio "$b" "$e")"
                bench_compare "gradients in bf16, MLP $1, global batch $2, Strata ddp against PyTorch DDP (f32)" \
                        samples/s "${dbf[*]}" "${t[*]}"
        fi
        echo
        bench_compare "gradients in bf16 against f32, MLP $1, global batch $2, ddp 2 devices" \
                samples/s "${dbf[*]}" "${d32[*]}"
        bench_compare "gradients in bf16 against f32, MLP $1, global batch $2, spawn 2 processes" \
                samples/s "${sbf[*]}" "${s32[*]}"
}
if [ "$quick" = 1 ]; then
        speed 784-256-128-10 128 2048 1
        bench_end
        exit 0
fi
speed 784-256-128-10 128 25600 1
speed 784-2048-2048-10 512 8192 0

seeds=${SEEDS:-4}
echo "ddp 2, Fashion-MNIST, 10 epochs: test accuracy for seeds 0..$((seeds - 1)), then the mean"
for p in 32 bf16-mixed; do
        for g in 32 bf16; do
                acc=()
                for seed in $(seq 0 $((seeds - 1))); do
                        acc+=("$("$train" --strategy ddp --devices 2 --epochs 10 --seed "$seed" \
                                --precision "$p" --grad-allreduce "$g" --json 2>/dev/null |
                                grep '"final"' | sed 's/.*"test_acc":\([0-9.]*\).*/\1/')")
                done
                printf '%-11s %-11s' "$p" "$g grads"
                printf ' %.4f' "${acc[@]}"
                printf '   mean %.4f\n' "$(printf '%s\n' "${acc[@]}" | awk '{s+=$1} END {print s/NR}')"
        done
done
bench_end
