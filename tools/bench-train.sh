#!/usr/bin/env bash
# Strata vs PyTorch (one thread each) training the Fashion-MNIST MLP 784-256-128-10, SGD
# lr 0.05 momentum 0.9, run back to back and alternated, REPS times per configuration.
# Prints median training samples/s of each and the ratio Strata/PyTorch.
# Usage: tools/bench-train.sh [REPS] ; env BUILD (default build), ANCHORS (../shared/anchors).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
anchors=${ANCHORS:-$here/../shared/anchors}
reps=${1:-3}
train=$build/bin/strata-train
py=/usr/bin/python3

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

strata_sps() { # batch -> training samples/s of one epoch
        "$train" --epochs 1 --batch "$1" --json | grep '"epoch":1,' |
                sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/'
}
torch_sps() {
        "$py" "$anchors/torch_mlp_fmnist.py" 1 1 "$1" | sed 's/.*samples_per_s=\([0-9.]*\).*/\1/'
}

run_set() { # label
        printf '%-34s %6s %14s %14s %7s\n' "$1" batch strata_sps torch_sps ratio
        for b in 128 32; do
                s=() t=()
                for _ in $(seq "$reps"); do
                        s+=("$(strata_sps "$b")")
                        t+=("$(torch_sps "$b")")
                done
                ms=$(printf '%s\n' "${s[@]}" | median)
                mt=$(printf '%s\n' "${t[@]}" | median)
                printf '%-34s %6d %14.0f %14.0f %7.2f\n' "" "$b" "$ms" "$mt" \
                        "$(echo "$ms / $mt" | bc -l)"
        done
}

"$py" -c 'import torch' 2>/dev/null || { echo "bench-train: PyTorch missing (make bench-deps)"; exit 1; }
echo "single device, one thread each; median of $reps alternated runs; training time only"
run_set "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto} (as set)"
if grep -q avx512f /proc/cpuinfo && [ "${OPENBLAS_CORETYPE:-}" != SkylakeX ]; then
        OPENBLAS_CORETYPE=SkylakeX run_set "OPENBLAS_CORETYPE=SkylakeX (both)"
fi
