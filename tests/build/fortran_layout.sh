#!/bin/sh
# The Fortran module (fortran/strata.f90) against the C headers, so that the two cannot drift:
# every bind(C) type has the size of the C struct of the same name and the same fields, by
# name, in the same order, at the same offsets; every integer constant of the module has the
# value of the C enumerator or macro of the same name, and every status has one. Layouts are read from each compiler's
# own debug information (DWARF, with readelf): what gfortran and gcc actually laid out, with
# no list of fields kept by hand on either side, so a field added to a C struct and not to its
# Fortran type fails here.
#   fortran_layout.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/fortran-layout
rm -rf "$dir"
mkdir -p "$dir"
f90=$src/fortran/strata.f90

# The bind(C) types of the module, and its integer constants (NAME = value, continuations
# joined).
types=$(sed -n 's/^ *type, *bind(C), *public *:: *\([a-z_0-9]*\).*/\1/p' "$f90" | tr '\n' ' ')
[ -n "$types" ] || { echo "no bind(C) type found in $f90"; exit 1; }
awk '/integer\(c_int\), parameter, public ::/ { on = 1 }
     on { line = line $0; if ($0 !~ /&[ \t]*$/) { print line; line = ""; on = 0 } }' "$f90" |
        sed -e 's/.*:://' -e 's/&//g' | tr ',' '\n' |
        sed -n 's/^ *\([A-Z_0-9]*\) *= *\([0-9-]*\) *$/\1 \2/p' > "$dir/fortran.consts"
[ -s "$dir/fortran.consts" ] || { echo "no integer constant found in $f90"; exit 1; }

# Both sides compiled with debug information: the module as a user compiles it, and a C
# translation unit with one object of each struct (so that each is described).
(cd "$dir" && gfortran -std=f2018 -g -c "$f90" -o fortran.o)
{
        echo '#include <stdio.h>'
        echo '#include "strata/strata.h"'
        echo '#include "strata/rl.h"'
        for t in $types; do
                echo "struct $t v_$t;"
        done
        echo 'int main(void)'
        echo '{'
        while read -r name value; do
                printf '        printf("%%s %%d\\n", "%s", (int)%s);\n' "$name" "$name"
        done < "$dir/fortran.consts"
        echo '        return 0;'
        echo '}'
} > "$dir/c.c"
gcc -std=c11 -g -I"$src/include" -o "$dir/c" "$dir/c.c"
"$dir/c" > "$dir/c.consts"

# "type size N" and "type.field offset" for each wanted structure, from readelf's DWARF dump.
layout() {
        readelf --debug-dump=info "$1" 2>/dev/null | awk -v want=" $types " '
        function value(line) { sub(/.*: /, "", line); return line }
        /^ *<[0-9]+><[0-9a-f]+>:/ {
                split($1, p, /[<>]/); depth = p[2] + 0
                if (in_s && depth <= sdepth) in_s = 0
                tag = $0; sub(/.*\(/, "", tag); sub(/\).*/, "", tag)
                name = ""; next
        }
        /DW_AT_name/ { name = value($0)
                if (tag == "DW_TAG_structure_type" && index(want, " " name " ")) {
                        in_s = 1; sdepth = depth; sname = name
                } }
        /DW_AT_byte_size/ && in_s && depth == sdepth && name == sname {
                print sname " size " value($0) }
        /DW_AT_data_member_location/ && in_s && depth == sdepth + 1 {
                print sname "." name " " value($0) }
        ' | sort -u
}
layout "$dir/fortran.o" > "$dir/fortran.layout"
layout "$dir/c" > "$dir/c.layout"

bad=0
for t in $types; do
        if ! grep -q "^$t size" "$dir/c.layout"; then
                echo "bind(C) type $t: no C struct of that name"; bad=1
        fi
        if ! grep -q "^$t size" "$dir/fortran.layout"; then
                echo "bind(C) type $t: not found in gfortran's debug information"; bad=1
        fi
done
if ! diff -u "$dir/c.layout" "$dir/fortran.layout"; then
        echo "fortran/strata.f90's bind(C) types differ from the C structs (- C, + Fortran)"
        bad=1
fi
if ! diff -u "$dir/c.consts" "$dir/fortran.consts"; then
        echo "fortran/strata.f90's constants differ from the C values (- C, + Fortran)"
        bad=1
fi
# Every status of the C list (STRATA_STATUS_LIST) is named in the module.
for name in $(sed -n 's/^ *X(\(STRATA_[A-Z0-9_]*\), *-\{0,1\}[0-9][0-9]*,.*/\1/p' \
                "$src/include/strata/status.h"); do
        grep -q "^$name " "$dir/fortran.consts" ||
                { echo "status $name is not named in fortran/strata.f90"; bad=1; }
done
[ $bad = 0 ] || exit 1
echo "fortran layout: $(echo $types | wc -w) types, $(grep -c . "$dir/c.layout") sizes and" \
        "offsets, $(grep -c . "$dir/c.consts") constants match"
