#!/usr/bin/env bash
# Strata on one GPU against PyTorch eager and the Lightning Trainer on the same GPU, run back
# to back, REPS times per row; medians of steps/s. Synthetic data of Fashion-MNIST's shape, SGD
# lr 0.05 momentum 0.9, batches from host memory on every side.
#   - MLP 784-256-128-10 at batch 128 (overhead-bound) and 8192
#   - wide MLP 784-4096-4096-10 at batch 8192 (GEMM-bound)
# Usage: tools/bench-gpu.sh [REPS] ; env BUILD (default build), STEPS (default 300; quick 20).
# Rows (tools/bench-lib.sh, written when quiet): Strata against PyTorch eager on each row.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, train; median (ratio: its own below); bench_*
reps=${1:-5}
steps=${STEPS:-$([ "$quick" = 1 ] && echo 20 || echo 300)}
py=${PYTHON:-}
if [ -z "$py" ]; then # the first Python that has torch
        for c in python3 /usr/bin/python3; do
                if "$c" -c 'import torch' 2>/dev/null; then py=$c; break; fi
        done
fi
[ -n "$py" ] || { echo "bench-gpu: no Python with torch found (set PYTHON)" >&2; exit 2; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

bench_begin bench-gpu
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$train" --accelerator cuda --synthetic 256 --batch 128 --epochs 1 --quiet >/dev/null || {
        echo "bench-gpu: strata-train cannot use a GPU here (see its message above)" >&2; exit 2; }

strata_sps() { # model batch -> steps/s from the median step time of one epoch
        local n=$(( $2 * steps ))
        "$train" --accelerator cuda --synthetic "$n" --model "$1" --batch "$2" --epochs 1 \
                --raw-pixels --json | tail -1 |
                sed 's/.*"step_us_median":\([0-9.]*\).*/\1/' | awk '{ printf "%.1f", 1e6 / $1 }'
}
peer_sps() { # name model batch
        "$py" "$here/tools/torch_gpu_peer.py" "$2" "$3" "$steps" cuda 2>/dev/null |
                awk -v n="$1" '$1 == n && $2 ~ /^steps_per_s=/ { sub("steps_per_s=", "", $2); print $2 }'
}

printf '%-22s %6s %12s %12s %12s %9s %9s\n' model batch strata torch lightning vs_torch vs_light
for row in "784-256-128-10 128" "784-256-128-10 8192" "784-4096-4096-10 128" "784-4096-4096-10 8192"; do
        set -- $row
        s=() t=() l=()
        for _ in $(seq "$reps"); do
                s+=("$(strata_sps "$1" "$2")")
                t+=("$(peer_sps torch_eager "$1" "$2")")
                l+=("$(peer_sps lightning "$1" "$2")")
        done
        ms=$(printf '%s\n' "${s[@]}" | median)
        mt=$(printf '%s\n' "${t[@]}" | grep . | median || true)
        ml=$(printf '%s\n' "${l[@]}" | grep . | median || true)
        printf '%-22s %6d %12.1f %12s %12s %9s %9s\n' "$1" "$2" "$ms" "${mt:-n/a}" "${ml:-n/a}" \
                "$(ratio "$ms" "${mt:-0}")" "$(ratio "$ms" "${ml:-0}")"
        bench_compare "GPU, MLP $1, batch $2, Strata against PyTorch eager" steps/s "${s[*]}" \
                "${t[*]}"
done
echo "steps/s, medians of $reps runs of $steps steps; ratios are Strata / peer"
bench_end
