#!/usr/bin/env bash
# make bench-latency: prediction latency of Strata's inference-only runtime (cfg.inference_only:
# strategy single, one device, tools/strata-bench-latency.c) against PyTorch eager
# (tools/peers/torch_latency.py, torch.inference_mode) and LibTorch (the same model traced to
# TorchScript, loaded by tools/peers/libtorch_latency.cpp, compiled here against Debian's
# libtorch-dev), one thread each, on the same model and the same weights: strata-train exports
# them, tools/strata-to-torch writes the PyTorch module that loads them. Models: strata-train's
# default MLP 784-256-128-10 and the Fashion-MNIST CNN (conv32-relu-pool-conv64-relu-pool-
# linear128-relu-linear10), each at batch 1 and 16. Every call is timed alone after WARMUP
# calls; each run gives the median of ITERS calls; runs alternate Strata, eager, LibTorch, REPS
# times; the table shows the medians of the runs' medians and how many times faster Strata is
# (the issue's target: >= 3x PyTorch eager at batch 1). Every process is held on core CORE
# (taskset; default 0).
# Usage: tools/bench-latency.sh [REPS [ITERS]] ; env BUILD (default build), PEERS
# (tools/peers), MODELS ("mlp cnn"), BATCHES ("1 16"), WARMUP (200), CORE (0).
set -euo pipefail
reps=${1:-5}
iters=${2:-2000}
warmup=${WARMUP:-200}
models=${MODELS:-mlp cnn}
batches=${BATCHES:-1 16}
core=${CORE:-0}

. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, median_of
dir=$build/bench-latency
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
pin=""
command -v taskset >/dev/null && pin="taskset -c $core"

declare -A line shape
line[mlp]="input(784) linear(256) relu linear(128) relu linear(10)"
shape[mlp]="784"
line[cnn]="input(1,28,28) conv2d(32,3,padding=1) relu maxpool2d(2) conv2d(64,3,padding=1) relu"
line[cnn]="${line[cnn]} maxpool2d(2) flatten linear(128) relu linear(10)"
shape[cnn]="1 28 28"

g++ -O2 -std=c++17 "$peers/libtorch_latency.cpp" -I/usr/include/torch/csrc/api/include \
        -ltorch -ltorch_cpu -lc10 -o "$dir/libtorch-latency"
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }

# The weights (a short strata-train run's export), the PyTorch module, the TorchScript files.
for m in $models; do
        "$train" --synthetic 256 --model "${line[$m]}" --epochs 1 --batch 16 --strategy single \
                --quiet --export-safetensors "$dir/$m.safetensors"
        "$py" "$here/tools/strata-to-torch" "$dir/$m.safetensors" -o "$dir/${m}_torch.py" >/dev/null
        for b in $batches; do
                "$py" "$peers/torch_latency.py" "$dir/${m}_torch.py" "$dir/$m.safetensors" "$b" \
                        1 0 --script "$dir/$m-$b.pt" >/dev/null
        done
done

declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
for _ in $(seq "$reps"); do
        for m in $models; do
                for b in $batches; do
                        add "s $m $b" "$($pin "$build/bin/strata-bench-latency" \
                                --model "${line[$m]}" --weights "$dir/$m.safetensors" \
                                --batch "$b" --iters "$iters" --warmup "$warmup" --json |
                                field us_median)"
                        add "e $m $b" "$($pin "$py" "$peers/torch_latency.py" "$dir/${m}_torch.py" \
                                "$dir/$m.safetensors" "$b" "$iters" "$warmup" | field us_median)"
                        # shellcheck disable=SC2086 # the shape's extents are separate arguments
                        add "l $m $b" "$($pin "$dir/libtorch-latency" "$dir/$m-$b.pt" "$b" \
                                "$iters" "$warmup" ${shape[$m]} | field us_median)"
                done
        done
done

echo "prediction latency, us (median of $reps alternated runs' medians of $iters calls;" \
        "one thread, core $core; lower is better)"
printf '%-5s %5s %12s %12s %12s %10s %10s\n' model batch Strata "PyTorch" LibTorch \
        "eager/S" "LibTorch/S"
for m in $models; do
        for b in $batches; do
                s=$(median_of ${v["s $m $b"]}) e=$(median_of ${v["e $m $b"]})
                l=$(median_of ${v["l $m $b"]})
                awk -v m="$m" -v b="$b" -v s="$s" -v e="$e" -v l="$l" 'BEGIN {
                        printf "%-5s %5d %12.2f %12.2f %12.2f %9.2fx %9.2fx\n", m, b, s, e, l,
                               e / s, l / s }'
        done
done
echo "(x: how many times faster Strata is; the issue's target at batch 1: >= 3x PyTorch eager)"
