#!/bin/sh
# Several models on one runtime across processes (decision 0069): examples/c/ddpg.c, DDPG's
# critic and actor with a Polyak target of each, built against the library as a user links
# it, learns alone on 2 devices (ddp: the mean reward of its actions rises from about -0.9 to
# above -0.3), and under `mpirun -np 2` (mpi, one device each) ends with bitwise the same
# four models (their exported weights).
#   models_mpi.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/models-mpi
rm -rf "$dir"
mkdir -p "$dir"
cc -std=c11 -O2 -Wall -Wextra -Werror -I"$src/include" -o "$dir/ddpg" "$src/examples/c/ddpg.c" \
        -L"$build" -lstrata -lm -Wl,-rpath,"$build"
"$dir/ddpg" 300 2 --export "$dir/ddp" > "$dir/ddp.out"
cat "$dir/ddp.out"
grep '^{' "$dir/ddp.out" | awk -F'[:,}]' '{ exit !($6 < -0.5 && $8 > -0.3) }' ||
        { echo "ddpg: the actor did not learn (reward before < -0.5, after > -0.3)"; exit 1; }
if ! command -v mpirun >/dev/null || [ ! -r "$build/libstrata-mpi.so" ]; then
        echo "models_mpi: mpirun or libstrata-mpi.so missing: the mpi run not made"
        exit 0
fi
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
        "$dir/ddpg" 300 1 mpi --export "$dir/mpi"
for m in critic actor critic-target actor-target; do
        cmp -s "$dir/ddp-$m.safetensors" "$dir/mpi-$m.safetensors" ||
                { echo "ddpg: the $m of 2 mpi processes differs from ddp's"; exit 1; }
        echo "ddpg: the $m of 2 mpi processes is bitwise ddp's"
done
