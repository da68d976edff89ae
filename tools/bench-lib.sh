# What the tools/bench-*.sh scripts share (sourced): where things are (env BUILD, default
# build; PEERS, default tools/peers: the PyTorch and C peers), the median of numbers on stdin,
# and a / b to full precision; the median of its arguments; samples/s of strata-train's
# median step.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$here/build}
peers=${PEERS:-$here/tools/peers}
train=$build/bin/strata-train
py=/usr/bin/python3
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { echo "$1 / $2" | bc -l; }
median_of() { printf '%s\n' "$@" | median; }
step_sps() { # batch; strata-train --json on stdin -> batch / median training step, samples/s
        grep '"final"' | sed 's/.*"step_us_median":\([0-9.]*\).*/\1/' |
                awk -v b="$1" '{print b / $1 * 1e6}'
}
