#!/bin/sh
# Flow control in situ (issue 56): examples/rl/heat.c, a 1-D heat equation driven towards a
# target profile by its left boundary, learns under SAC in 8000 steps (the last 10 episodes'
# mean return is less than a third as negative as the first 10's), two runs bitwise equal.
#   rl_heat.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/rl-heat
rm -rf "$dir"
mkdir -p "$dir"
cc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$src/include" -o "$dir/heat" \
        "$src/examples/rl/heat.c" -L"$build" -lstrata -lm -Wl,-rpath,"$build"
"$dir/heat" sac --steps 8000 | grep '^{' > "$dir/1.json"
"$dir/heat" sac --steps 8000 | grep '^{' > "$dir/2.json"
cat "$dir/1.json"
sed 's/.*"first10": \([-0-9.]*\), "last10": \([-0-9.]*\).*/\1 \2/' "$dir/1.json" |
        awk '{ if (!($1 < 0 && $2 > $1 / 3)) { print "heat: returns did not rise: " $0;
                                               exit 1 } }'
cmp -s "$dir/1.json" "$dir/2.json" || { echo "heat: two runs differ"; exit 1; }
echo "heat: SAC learned the boundary control; two runs bitwise equal"
