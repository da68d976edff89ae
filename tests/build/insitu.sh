#!/bin/sh
# The in-situ examples (examples/c/insitu.c, examples/fortran/insitu.f90) as a user builds
# them — installed into a scratch prefix, compiled with mpicc / mpifort and pkg-config — run on
# a short horizon: alone with 2 devices (ddp) and under `mpirun -np 2` (mpi, one device each,
# on the application's communicator). Each run must bring the validation MSE below a bound
# that the untrained model (which each run reports) does not meet; the C and Fortran programs
# under mpirun must end with bitwise the same parameters (exported weights) and last loss, and
# so must the 1-process (ddp, 2 devices) and 2-process (mpi) runs. The same again with --fcn
# (TorchFort's circular Conv2d, stated in C as a struct and in Fortran as one line), whose
# 10 parameters only begin to learn in so few steps: its validation MSE must be below the
# untrained one.
#   insitu.sh SRC BUILD [STEPS]
set -eu
src=$1 build=$2 steps=${3:-100}
bound=0.5 # the validation MSE after 100 steps is ~0.01, untrained ~5 (each run prints both)
for tool in mpicc mpifort mpirun; do
        command -v $tool >/dev/null || { echo "insitu: $tool missing, examples not run"; exit 0; }
done
prefix=$build/stage-insitu
dir=$build/insitu
rm -rf "$prefix" "$dir"
mkdir -p "$dir"
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
mpicc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/insitu-c" "$src/examples/c/insitu.c" \
        $(pkg-config --cflags --libs strata) -lm -Wl,-rpath,"$prefix/lib"
(cd "$dir" &&
        gfortran -std=f2018 -Wall -Wextra -Werror -c "$prefix/include/strata/strata.f90" &&
        mpifort -std=f2018 -O2 -Wall -Wextra -Werror -o insitu-f90 \
                "$src/examples/fortran/insitu.f90" strata.o $(pkg-config --libs strata) \
                -Wl,-rpath,"$prefix/lib")
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"

field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p" "$2"; }

# run NAME LAUNCH PROGRAM DEVICES [--fcn]: one run, its JSON line kept in $dir/NAME.json.
run() {
        $2 "$dir/$3" "$steps" 16 "$4" ${5:-} --export "$dir/$1.safetensors" \
                --ckpt "$dir/$1.ckpt" > "$dir/$1.out"
        cat "$dir/$1.out"
        grep '^{' "$dir/$1.out" > "$dir/$1.json"
        mse=$(field val_mse "$dir/$1.json")
        untrained=$(field val_mse_untrained "$dir/$1.json")
        awk -v m="$mse" -v u="$untrained" -v b="$bound" -v n="$1" -v f="${5:-}" 'BEGIN {
                printf "%s: validation MSE %g, untrained %g, bound %g\n", n, m, u,
                       f ? u : b
                exit !(f ? m < u : m < b && u >= b) }' ||
                { echo "$1: the validation MSE is not below $bound, or the untrained one is"
                  exit 1; }
}

# same A B: bitwise the same parameters (exported weights) and last loss, or fail.
same() {
        cmp -s "$dir/$1.safetensors" "$dir/$2.safetensors" &&
                [ "$(field loss_bits "$dir/$1.json" | tr A-F a-f)" = \
                  "$(field loss_bits "$dir/$2.json" | tr A-F a-f)" ] ||
                { echo "$1 and $2: the parameters or the last losses differ"; return 1; }
        echo "$1 and $2: bitwise the same parameters and loss ($(field loss_bits "$dir/$1.json"))"
}

run c-alone "" insitu-c 2
run c-mpi2 "$mpirun" insitu-c 1
same c-alone c-mpi2
run f90-alone "" insitu-f90 2
run f90-mpi2 "$mpirun" insitu-f90 1
same f90-alone f90-mpi2
same c-mpi2 f90-mpi2
run c-alone-fcn "" insitu-c 2 --fcn
run c-mpi2-fcn "$mpirun" insitu-c 1 --fcn
same c-alone-fcn c-mpi2-fcn
run f90-mpi2-fcn "$mpirun" insitu-f90 1 --fcn
same c-mpi2-fcn f90-mpi2-fcn
