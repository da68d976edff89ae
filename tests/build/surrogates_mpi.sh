#!/bin/sh
# The surrogate examples as a user builds and runs them across processes (issue 55, decision
# 0083): `make install` into a scratch prefix, each example compiled with pkg-config only (the
# C ones with cc: they make no MPI call, Strata's MPI link comes from the install; the Fortran
# one with mpifort and the installed strata.f90), then run briefly at tiny sizes as ddp on 2
# devices in one process and under `mpirun -np 2` (strategy mpi, one device a process, each
# process computing only its rows): the FNO in 2-D and 3-D (examples/c/fno.c), the
# MeshGraphNet-style surrogate from C and Fortran, the ViT-style and the mesh ones through the
# installed strata-train (examples/vit.sh, examples/mesh.sh). Strata's contract is that mpi is
# bitwise ddp on as many devices: the last loss's bits and the exported weights must be equal,
# and every run exits 0. The bits compared tell a summation order apart: one device's differ.
# Skipped without mpirun or the installed libstrata-mpi.so.
#   surrogates_mpi.sh SRC BUILD
set -eu
src=$1 build=$2
prefix=$build/stage-surrogates
dir=$build/surrogates-mpi
rm -rf "$prefix" "$dir"
mkdir -p "$dir"
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install >/dev/null
if ! command -v mpirun >/dev/null || [ ! -r "$prefix/lib/libstrata-mpi.so" ]; then
        echo "surrogates_mpi: mpirun or libstrata-mpi.so missing: not run"
        exit 0
fi
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/fno" "$src/examples/c/fno.c" \
        $(pkg-config --cflags --libs strata) -lm
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/mesh" "$src/examples/c/mesh_surrogate.c" \
        $(pkg-config --cflags --libs strata) -lm
for p in fno mesh; do
        ldd "$dir/$p" | grep -q "libstrata.so.0 => $prefix/lib/libstrata.so.0" ||
                { echo "$p does not find the installed libstrata.so.0"; exit 1; }
done
mpi() { timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$@"; }
bits() { sed -n 's/.*"loss_bits": "\([0-9a-f]*\)".*/\1/p' "$1"; }
# same NAME: DIR/NAME-ddp.out and -mpi.out end on the same loss bits, their weights are equal.
same() {
        a=$(bits "$dir/$1-ddp.out") b=$(bits "$dir/$1-mpi.out")
        [ -n "$a" ] && [ "$a" = "$b" ] ||
                { echo "$1: mpirun -np 2 ended on loss bits '$b', ddp on 2 '$a'"; exit 1; }
        cmp "$dir/$1-ddp.safetensors" "$dir/$1-mpi.safetensors" ||
                { echo "$1: the weights of mpirun -np 2 differ from ddp's on 2"; exit 1; }
        echo "$1: mpirun -np 2 is bitwise ddp on 2 devices (loss bits $a, weights)"
}
# run NAME PROGRAM ARGS...: ddp on 2 devices, then 2 processes of one (ARGS end in DEVICES).
run() {
        name=$1 prog=$2
        shift 2
        "$prog" "$@" 2 --export "$dir/$name-ddp.safetensors" > "$dir/$name-ddp.out"
        mpi "$prog" "$@" 1 --export "$dir/$name-mpi.safetensors" > "$dir/$name-mpi.out"
        cat "$dir/$name-mpi.out"
        same "$name"
}
run fno2d "$dir/fno" 64 2 16 32
"$dir/fno" 64 2 16 32 1 > "$dir/fno2d-single.out"
[ "$(bits "$dir/fno2d-single.out")" != "$(bits "$dir/fno2d-ddp.out")" ] ||
        { echo "fno2d: one device ended on ddp's bits: the comparison sees nothing"; exit 1; }
run fno3d "$dir/fno" --3d 32 2 8 16
run mesh "$dir/mesh" 32 2

if command -v mpifort >/dev/null; then
        (cd "$dir" &&
                gfortran -std=f2018 -Wall -Wextra -Werror -c "$prefix/include/strata/strata.f90" &&
                mpifort -std=f2018 -O2 -Wall -Wextra -Werror -o mesh-f90 \
                        "$src/examples/fortran/mesh_surrogate.f90" strata.o \
                        $(pkg-config --libs strata))
        "$dir/mesh-f90" 64 3 2 > "$dir/mesh-f90-ddp.out"
        mpi "$dir/mesh-f90" 64 3 1 > "$dir/mesh-f90-mpi.out"
        cat "$dir/mesh-f90-mpi.out"
        a=$(sed -n 's/^last loss bits *//p' "$dir/mesh-f90-ddp.out")
        b=$(sed -n 's/^last loss bits *//p' "$dir/mesh-f90-mpi.out")
        [ -n "$a" ] && [ "$a" = "$b" ] ||
                { echo "mesh-f90: mpirun -np 2 ended on loss bits '$b', ddp on 2 '$a'"; exit 1; }
        echo "mesh-f90: mpirun -np 2 is bitwise ddp on 2 devices (loss bits $a)"
fi

# The ViT-style and the mesh surrogates through the installed strata-train, launched by mpirun
# (examples/vit.sh, examples/mesh.sh: --mesh).
line() { # NAME SAMPLES
        "$src/examples/$1.sh" "$prefix" "$2" 1 ddp 2 \
                --export-safetensors "$dir/$1-cli-ddp.safetensors" > "$dir/$1-cli-ddp.out" 2>&1
        LAUNCH="timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2" \
                "$src/examples/$1.sh" "$prefix" "$2" 1 mpi 1 \
                --export-safetensors "$dir/$1-cli-mpi.safetensors" > "$dir/$1-cli-mpi.out" 2>&1
        grep -q "heap allocations during training: 0" "$dir/$1-cli-mpi.out" ||
                { cat "$dir/$1-cli-mpi.out"; echo "$1.sh: mpirun -np 2 did not end well"; exit 1; }
        cmp "$dir/$1-cli-ddp.safetensors" "$dir/$1-cli-mpi.safetensors" ||
                { echo "$1.sh: the weights of mpirun -np 2 differ from ddp's on 2"; exit 1; }
        echo "$1.sh: strata-train under mpirun -np 2 is bitwise ddp on 2 devices (weights)"
}
line vit 128
line mesh 64
echo "surrogates_mpi: ok"
