#!/usr/bin/env bash
# Precision plugins on one device, one thread each, alternated REPS times; medians of
# training-only throughput (strata-train: batch / median step, the test pass excluded;
# PyTorch: the anchor's timed steps):
#  - the GEMM-bound MLP 784-2048-2048-10, batch 512, and the default 784-256-128-10, batch 128
#  - Strata 32, bf16-mixed and 16-mixed; PyTorch fp32 and autocast(bfloat16), one thread
# Usage: tools/bench-precision.sh [REPS] ; env BUILD (default build), PEERS (tools/peers).
# Rows (tools/bench-lib.sh, written when quiet): Strata 32 against PyTorch fp32, bf16-mixed
# against autocast(bfloat16). BENCH_QUICK=1: the default MLP only, 1280 rows, 10 steps.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}
bench_begin bench-precision
strata_sps() { # model batch samples precision -> samples/s of the median training step
        "$train" --strategy single --model "$1" --batch "$2" --synthetic "$3" --epochs 1 \
                --precision "$4" --json 2>/dev/null | step_sps "$2"
}
torch_sps() { # model batch steps fp32|bf16
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" "$peers/torch_autocast_mlp.py" "$@"
}

row() { printf '%-28s %12.0f %10.2f %12.2f %12.2f\n' "$1" "$2" "$(ratio "$2" "$3")" \
                "$(ratio "$2" "$4")" "$(ratio "$2" "$5")"; }
bench() { # model batch samples steps
        local s32=() sbf=() s16=() t32=() tbf=()
        for _ in $(seq "$reps"); do
                s32+=("$(strata_sps "$1" "$2" "$3" 32)")
                sbf+=("$(strata_sps "$1" "$2" "$3" bf16-mixed)")
                s16+=("$(strata_sps "$1" "$2" "$3" 16-mixed)")
                t32+=("$(torch_sps "$1" "$2" "$4" fp32)")
                tbf+=("$(torch_sps "$1" "$2" "$4" bf16)")
        done
        local a b c d e
        a=$(median_of "${s32[@]}"); b=$(median_of "${sbf[@]}"); c=$(median_of "${s16[@]}")
        d=$(median_of "${t32[@]}"); e=$(median_of "${tbf[@]}")
        echo "MLP $1, batch $2, one device, one thread; median of $reps alternated runs"
        printf '%-28s %12s %10s %12s %12s\n' "" samples/s "vs S 32" "vs T fp32" "vs T bf16"
        row "Strata 32" "$a" "$a" "$d" "$e"
        row "Strata bf16-mixed" "$b" "$a" "$d" "$e"
        row "Strata 16-mixed" "$c" "$a" "$d" "$e"
        row "PyTorch fp32" "$d" "$a" "$d" "$e"
        row "PyTorch autocast(bfloat16)" "$e" "$a" "$d" "$e"
        echo
        bench_compare "precision, MLP $1, batch $2, Strata 32 against PyTorch fp32" samples/s \
                "${s32[*]}" "${t32[*]}"
        bench_compare "precision, MLP $1, batch $2, Strata bf16-mixed against PyTorch autocast(bfloat16)" \
                samples/s "${sbf[*]}" "${tbf[*]}"
}
if [ "$quick" = 1 ]; then
        bench 784-256-128-10 128 1280 10
else
        bench 784-2048-2048-10 512 8192 16
        bench 784-256-128-10 128 25600 200
fi
bench_end
