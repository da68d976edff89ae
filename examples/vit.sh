#!/bin/sh
# A ViT-style surrogate of a simulation's fields: the simulation (examples/c/diffusion_h5.c,
# 2-D heat equation on a periodic 32 x 32 grid) writes (u, u_next) pairs to HDF5 in
# (N, C, H, W); strata-train learns u -> u_next with a model stated in one line: a patch
# embedding (conv2d(32,4,stride=4): 64 patches of 4 x 4, then tokens: a sequence (64, 32)),
# a learned positional embedding, two pre-norm transformer encoder blocks (LayerNorm on each
# token, 4-head self-attention, a GELU MLP of kernel-1 conv1d between two tokens, residual
# adds), and a linear head onto the 32 x 32 field. MSE, AdamW with cosine annealing; the last
# eighth of the samples validates. Decision 0060; docs/guide.md, "Sequences".
#   [LAUNCH=...] examples/vit.sh [BUILD [SAMPLES [EPOCHS [STRATEGY DEVICES [OPTION...]]]]]
#   (build, 2048, 8, ddp 2). BUILD: a build tree or an install prefix (its bin/strata-train);
#   OPTIONs go to strata-train; LAUNCH prefixes it, e.g. LAUNCH="mpirun -np 2" with STRATEGY mpi,
#   DEVICES 1 (the data are written once, before the launch; decision 0083).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
samples=${2:-2048}
epochs=${3:-8}
strategy=${4:-ddp}
devices=${5:-2}
[ $# -gt 5 ] && shift 5 || set --
dir=$build/vit
mkdir -p "$dir"
h5flags=$(pkg-config --cflags --libs hdf5 2>/dev/null || echo "-I/usr/include/hdf5/serial -lhdf5_serial")
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/diffusion_h5" "$src/examples/c/diffusion_h5.c" \
        $h5flags -lm
"$dir/diffusion_h5" "$dir/field.h5" "$samples" 32
# one pre-norm encoder block whose input is module $1's output (its first add is module $1 + 3)
block() {
        echo "layernorm(dims=1) mha(4) add(from=$1)" \
             "layernorm(dims=1) tokens conv1d(64,1) gelu conv1d(32,1) tokens add(from=$(($1 + 3)))"
}
vit="conv2d(32,4,stride=4) tokens posembed $(block 2) $(block 12) flatten linear(1024)"
exec ${LAUNCH:-} "$build/bin/strata-train" \
        --data "$dir/field.h5" --inputs u --targets u_next --loss mse \
        --val-fraction 0.125 --model "$vit" --optim adamw --lr 1e-3 --lr-schedule cosine \
        --epochs "$epochs" --batch 64 --strategy "$strategy" --devices "$devices" "$@"
