#!/bin/sh
# The deployment examples as a user builds them (examples/c/predict.c,
# examples/fortran/predict.f90): installed into a scratch prefix, compiled with pkg-config, run
# on weights the installed strata-train exports. Each loads them into an inference-only
# runtime and advances a field with one batch-1 prediction a step; the C program's plan holds
# no optimizer state, and both print the same checksum of the final field (the same
# predictions, bit for bit). A file that does not fit the model is refused by both.
#   deploy.sh SRC BUILD
set -eu
src=$1 build=$2
prefix=$build/stage-deploy
dir=$build/deploy
rm -rf "$prefix" "$dir"
mkdir -p "$dir"
env -u MAKEFLAGS -u MFLAGS make -s -C "$src" BUILD="$build" PREFIX="$prefix" install >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
"$prefix/bin/strata-train" --synthetic-regression 256 --model 16-32-16 --loss mse \
        --strategy single --epochs 2 --quiet --export-safetensors "$dir/w.safetensors"
"$prefix/bin/strata-train" --synthetic-regression 256 --model 16-8-16 --loss mse \
        --strategy single --epochs 1 --quiet --export-safetensors "$dir/other.safetensors"
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/predict-c" "$src/examples/c/predict.c" \
        $(pkg-config --cflags --libs strata) -lm -Wl,-rpath,"$prefix/lib"
(cd "$dir" &&
        gfortran -std=f2018 -Wall -Wextra -Werror -c "$prefix/include/strata/strata.f90" &&
        gfortran -std=f2018 -O2 -Wall -Wextra -Werror -o predict-f90 \
                "$src/examples/fortran/predict.f90" strata.o $(pkg-config --libs strata) \
                -Wl,-rpath,"$prefix/lib")
"$dir/predict-c" "$dir/w.safetensors" 50 | tee "$dir/c.out"
"$dir/predict-f90" "$dir/w.safetensors" 50 | tee "$dir/f90.out"
grep -q "optimizer state 0 " "$dir/c.out" ||
        { echo "deploy: the C example's plan holds optimizer state"; exit 1; }
grep -q "^50 predictions" "$dir/c.out" && grep -q "^50 predictions" "$dir/f90.out" ||
        { echo "deploy: an example did not make its 50 predictions"; exit 1; }
c=$(sed -n 's/^checksum //p' "$dir/c.out")
f=$(sed -n 's/^checksum *//p' "$dir/f90.out")
[ -n "$c" ] && [ "$c" = "$f" ] ||
        { echo "deploy: checksums differ: C '$c', Fortran '$f'"; exit 1; }
echo "deploy: C and Fortran give the same field ($c)"
for p in predict-c predict-f90; do
        if "$dir/$p" "$dir/other.safetensors" 5 > "$dir/$p.bad" 2>&1; then
                echo "deploy: $p took weights of another model"; exit 1
        fi
        grep -q "does not fit this model" "$dir/$p.bad" ||
                { cat "$dir/$p.bad"; echo "deploy: $p did not say why"; exit 1; }
done
echo "deploy: both refuse weights of another model"
