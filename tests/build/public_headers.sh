#!/bin/sh
# Every installed public header, included alone, compiles as C++17 and as C11 with every
# warning an error: it is self-contained (only the installed headers on the include path) and
# uses nothing C++ lacks (_Atomic, C-only syntax).
#   public_headers.sh SRC BUILD      install into a scratch prefix and check its headers
#   public_headers.sh --dir INCDIR   check INCDIR/strata/*.h (fixtures)
set -eu
if [ "$1" = --dir ]; then
        inc=$2
else
        src=$1 build=$2
        prefix=$build/stage-headers
        rm -rf "$prefix"
        env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install \
                >/dev/null
        inc=$prefix/include
fi
cxx="g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c++"
cc="gcc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c"
n=0 bad=0
for h in "$inc"/strata/*.h; do
        [ -f "$h" ] || continue
        name=strata/${h##*/}
        n=$((n + 1))
        # The typedef keeps a header of macros only from being an empty translation unit.
        printf '#include <%s>\ntypedef int tu_not_empty;\n' "$name" | $cxx -I"$inc" - ||
                { echo "$name does not compile as C++17"; bad=$((bad + 1)); }
        printf '#include <%s>\ntypedef int tu_not_empty;\n' "$name" | $cc -I"$inc" - ||
                { echo "$name does not compile as C11"; bad=$((bad + 1)); }
done
[ "$n" -gt 0 ] || { echo "no header in $inc/strata"; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "$n public headers compile as C++17 and C11"
