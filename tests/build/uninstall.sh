#!/bin/sh
# Install into a scratch prefix, uninstall, and nothing of Strata's may remain (the MPI and
# CUDA plugins included).
set -eu
src=$1 build=$2
prefix=$build/stage-uninstall
rm -rf "$prefix"
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install >/dev/null
[ -e "$prefix/bin/strata-train" ] || { echo "nothing was installed"; exit 1; }
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" uninstall >/dev/null
left=$(find "$prefix" -name '*strata*' | sort)
rm -rf "$prefix"
[ -z "$left" ] || { echo "make uninstall left: $left"; exit 1; }
