#!/bin/sh
# The MeshGraphNet-style surrogate through strata-train: the simulation (examples/c/mesh_h5.c:
# a diffusion on a triangulated domain of 256 nodes and 1410 edges, examples/c/mesh_sim.h)
# writes node fields (u, x, y) -> u and the mesh's edge_index to one HDF5 file and prints the
# model line (node and edge encoders, two processor steps of gather, edge MLP, LayerNorm,
# residual, scatter(sum), node MLP, LayerNorm, residual; a decoder); strata-train reads the
# mesh with --mesh and trains it, MSE, Adam, the last fifth of the samples validating.
# examples/c/mesh_surrogate.c and examples/fortran/mesh_surrogate.f90 train the same from C
# and Fortran. Decision 0072; docs/guide.md, "Graph networks".
#   [LAUNCH=...] examples/mesh.sh [BUILD [SAMPLES [EPOCHS [STRATEGY DEVICES [OPTION...]]]]]
#   (build, 320, 10, ddp 2). BUILD: a build tree or an install prefix (its bin/strata-train);
#   OPTIONs go to strata-train; LAUNCH prefixes it, e.g. LAUNCH="mpirun -np 2" with STRATEGY mpi,
#   DEVICES 1 (the data are written once, before the launch; decision 0083).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
samples=${2:-320}
epochs=${3:-10}
strategy=${4:-ddp}
devices=${5:-2}
[ $# -gt 5 ] && shift 5 || set --
dir=$build/mesh
mkdir -p "$dir"
h5flags=$(pkg-config --cflags --libs hdf5 2>/dev/null || echo "-I/usr/include/hdf5/serial -lhdf5_serial")
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/mesh_h5" "$src/examples/c/mesh_h5.c" $h5flags -lm
line=$("$dir/mesh_h5" "$dir/mesh.h5" "$samples")
exec ${LAUNCH:-} "$build/bin/strata-train" \
        --data "$dir/mesh.h5" --inputs x --targets y --loss mse \
        --mesh "$dir/mesh.h5" --val-fraction 0.2 --model "$line" --optim adamw --lr 1e-3 \
        --epochs "$epochs" --batch 8 --strategy "$strategy" --devices "$devices" "$@"
