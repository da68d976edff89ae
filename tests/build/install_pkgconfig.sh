#!/bin/sh
# Plain `make` gives everything a program links with; then the documented link line, typed as
# a user types it (no -rpath, no LD_LIBRARY_PATH), works against the build tree and against
# an install into a scratch prefix.
set -eu
src=$1 build=$2
prefix=$build/stage
rm -rf "$prefix"
# `make` alone (the default goal is all): the shared library, its soname, the build tree's
# strata.pc, and the MPI link wherever mpicc is.
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" >/dev/null
for f in libstrata.a libstrata.so libstrata.so.0 pkgconfig/strata.pc; do
        [ -e "$build/$f" ] || { echo "plain make did not build $build/$f"; exit 1; }
done
if command -v mpicc >/dev/null; then
        [ -e "$build/libstrata-mpi.so" ] ||
                { echo "plain make did not build libstrata-mpi.so"; exit 1; }
fi
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install >/dev/null
cat > "$build/stage-hello.c" <<'C'
#include <stdio.h>
#include <strata/strata.h>
int main(void)
{
        static unsigned char mem[4096];
        struct strata_arena a;
        void *p;
        if (strata_version() != STRATA_VERSION_HEX) return 1;
        if (strata_arena_init(&a, mem, sizeof mem, NULL) != STRATA_OK) return 2;
        if (strata_arena_alloc(&a, 100, 0, &p) != STRATA_OK) return 3;
        puts("ok");
        return 0;
}
C
unset LD_LIBRARY_PATH
# The build tree, as the guide writes it.
out=$(PKG_CONFIG_PATH="$build/pkgconfig" pkg-config --cflags --libs strata)
cc -o "$build/tree-hello" "$build/stage-hello.c" $out
ldd "$build/tree-hello" | grep -q "libstrata.so.0 => $build/libstrata.so.0" ||
        { echo "the build tree's program does not find $build/libstrata.so.0"; exit 1; }
out=$("$build/tree-hello")
[ "$out" = ok ] || { echo "tree-hello printed '$out'"; exit 1; }
# The install.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists strata
cc -o "$build/stage-hello" "$build/stage-hello.c" $(pkg-config --cflags --libs strata)
out=$("$build/stage-hello")
[ "$out" = ok ] || { echo "stage-hello printed '$out'"; exit 1; }
# The tools: the trainer runs from the prefix, the plotter is beside it.
"$prefix/bin/strata-train" --help | grep -q -- '--metrics-csv' ||
        { echo "installed strata-train missing or broken"; exit 1; }
[ -x "$prefix/bin/strata-plot" ] || { echo "strata-plot not installed"; exit 1; }
for t in strata-from-torch strata-to-torch; do
        [ -x "$prefix/bin/$t" ] || { echo "$t not installed"; exit 1; }
done
