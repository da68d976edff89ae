#!/bin/sh
# Install into a scratch prefix, then build and run a program through pkg-config only.
set -eu
src=$1 build=$2
prefix=$build/stage
rm -rf "$prefix"
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
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists strata
cc -o "$build/stage-hello" "$build/stage-hello.c" $(pkg-config --cflags --libs strata) \
   -Wl,-rpath,"$prefix/lib"
out=$("$build/stage-hello")
[ "$out" = ok ] || { echo "stage-hello printed '$out'"; exit 1; }
# The tools: the trainer runs from the prefix, the plotter is beside it.
"$prefix/bin/strata-train" --help | grep -q -- '--metrics-csv' ||
        { echo "installed strata-train missing or broken"; exit 1; }
[ -x "$prefix/bin/strata-plot" ] || { echo "strata-plot not installed"; exit 1; }
