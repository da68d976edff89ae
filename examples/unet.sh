#!/bin/sh
# A U-Net surrogate of a simulation's fields, as an HPC user trains one: the simulation
# (examples/c/diffusion_h5.c, 2-D heat equation on a periodic grid) writes (u, u_next) pairs
# to HDF5 in (N, C, H, W); strata-train learns u -> u_next with a small U-Net stated in one
# line: two levels, circular padding (the domain is periodic), a skip connection that
# concatenates the encoder's features onto the upsampled decoder's (concat(from=3): the output
# of module 3), MSE, AdamW with cosine annealing; the last eighth of the samples validates.
# The layout comes from the file's dimensions, so the line needs no input(...).
#   [LAUNCH=...] examples/unet.sh [BUILD [SAMPLES [EPOCHS [STRATEGY DEVICES [OPTION...]]]]]
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
dir=$build/unet
mkdir -p "$dir"
h5flags=$(pkg-config --cflags --libs hdf5 2>/dev/null || echo "-I/usr/include/hdf5/serial -lhdf5_serial")
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/diffusion_h5" "$src/examples/c/diffusion_h5.c" \
        $h5flags -lm
"$dir/diffusion_h5" "$dir/field.h5" "$samples" 32
c="padding=1,padding_mode=circular"
unet="conv2d(8,3,$c) relu conv2d(8,3,$c) relu maxpool2d(2) conv2d(16,3,$c) relu"
unet="$unet conv2d(16,3,$c) relu upsample(2) concat(from=3) conv2d(8,3,$c) relu conv2d(1,1)"
exec ${LAUNCH:-} "$build/bin/strata-train" \
        --data "$dir/field.h5" --inputs u --targets u_next --loss mse \
        --val-fraction 0.125 --model "$unet" --optim adamw --lr 3e-3 --lr-schedule cosine \
        --epochs "$epochs" --batch 64 --strategy "$strategy" --devices "$devices" "$@"
