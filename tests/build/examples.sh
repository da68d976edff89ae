#!/bin/sh
# The examples as a user builds them: install into a scratch prefix, then compile with
# pkg-config only — the plain C one (no MPI), the C++ examples (classification; regression on f64 arrays with batch-1
# inference; two inputs and two outputs) against the shared library and, with --static,
# against the archive; the Fortran examples (classification; two inputs and two outputs) with
# the installed strata.f90 — and run them.
set -eu
src=$1 build=$2
prefix=$build/stage-examples
rm -rf "$prefix"
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cxx="g++ -std=c++17 -Wall -Wextra -Werror"
# Plain C, one process, no MPI: it must not need mpi.h (issue 58, item 15).
if grep -q 'mpi\.h' "$src/examples/c/train.c"; then
        echo "examples/c/train.c includes mpi.h"; exit 1
fi
cc -std=c11 -Wall -Wextra -Werror -o "$build/example-c" "$src/examples/c/train.c" \
        $(pkg-config --cflags --libs strata) -Wl,-rpath,"$prefix/lib"
"$build/example-c"
$cxx -o "$build/example-cpp" "$src/examples/cpp/train.cpp" \
        $(pkg-config --cflags --libs strata) -Wl,-rpath,"$prefix/lib"
"$build/example-cpp"
# Regression on the application's f64 arrays, then batch-1 inference into its array.
$cxx -o "$build/example-cpp-regress" "$src/examples/cpp/regress.cpp" \
        $(pkg-config --cflags --libs strata) -Wl,-rpath,"$prefix/lib"
"$build/example-cpp-regress"
# Two inputs and two outputs, each with its loss and weight, described in C++.
$cxx -o "$build/example-cpp-multiarg" "$src/examples/cpp/multiarg.cpp" \
        $(pkg-config --cflags --libs strata) -Wl,-rpath,"$prefix/lib"
"$build/example-cpp-multiarg"
static_flags=$(pkg-config --cflags --libs --static strata)
$cxx -o "$build/example-cpp-static" "$src/examples/cpp/train.cpp" -Wl,-Bstatic -lstrata \
        -Wl,-Bdynamic $static_flags
"$build/example-cpp-static"
# The static program has no libstrata.so to find: it must not depend on one.
if ldd "$build/example-cpp-static" | grep -q libstrata; then
        echo "the --static build still needs libstrata.so"; exit 1
fi
# Fortran: the installed module source, compiled with the program.
mkdir -p "$build/example-fortran"
(cd "$build/example-fortran" &&
        gfortran -std=f2018 -Wall -Wextra -Werror -c "$prefix/include/strata/strata.f90" &&
        gfortran -std=f2018 -Wall -Wextra -Werror -o train "$src/examples/fortran/train.f90" \
                strata.o $(pkg-config --libs strata) -Wl,-rpath,"$prefix/lib")
"$build/example-fortran/train"
# Two inputs and two outputs from a model line (TorchFort's train_multiarg).
(cd "$build/example-fortran" &&
        gfortran -std=f2018 -Wall -Wextra -Werror -o train_multiarg \
                "$src/examples/fortran/train_multiarg.f90" strata.o $(pkg-config --libs strata) \
                -Wl,-rpath,"$prefix/lib")
"$build/example-fortran/train_multiarg"
# The U-Net surrogate on a simulation's HDF5 fields (examples/unet.sh), briefly: it trains, the
# line's concat included, within its plan and without heap during steps.
"$src/examples/unet.sh" "$build" 256 1 single 1 > "$build/example-unet.out"
grep -q "heap allocations during training: 0" "$build/example-unet.out" ||
        { cat "$build/example-unet.out"; echo "examples/unet.sh did not end as it should"; exit 1; }
# The ViT-style surrogate on the same fields (examples/vit.sh), briefly, under ddp on 2.
"$src/examples/vit.sh" "$build" 256 1 ddp 2 > "$build/example-vit.out"
grep -q "heap allocations during training: 0" "$build/example-vit.out" ||
        { cat "$build/example-vit.out"; echo "examples/vit.sh did not end as it should"; exit 1; }
