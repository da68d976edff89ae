#!/usr/bin/env bash
# make bench-invariant: invariant mode (issue 34, decision 0029), from one run:
#  - cost: Fashion-MNIST (pixel / 255), global batch 128, EPOCHS epochs, training samples/s
#    (the samples over the epochs' time, the test passes excluded) of ddp in invariant mode
#    beside normal ddp at each of DEVICES, on the default MLP 784-256-128-10 and the wide
#    784-2048-2048-10 (SGD lr 0.05, momentum 0.9), with the ratio; the target is <= 15%
#    slower (ratio >= 0.85) at 2 devices on the default MLP
#  - accuracy: ACC_EPOCHS epochs x SEEDS of the default MLP on 2 devices, normal and
#    invariant: each seed's final test accuracy, the band (lowest, highest) of each mode
# Every configuration of the cost part runs once per rep; the order is reversed on every
# other rep; figures are medians over the reps.
# Usage: tools/bench-invariant.sh [REPS [EPOCHS]] ; env BUILD (default build), DEVICES
# (default "1 2 4"), MODELS (default "784-256-128-10 784-2048-2048-10"), ACC_EPOCHS
# (default 10), SEEDS (default "1 2 3"), DATA (strata-train's data options, default its
# Fashion-MNIST; e.g. "--synthetic 2048" for a smoke test), PARTS (default "cost accuracy");
# BENCH_QUICK=1: 2 devices, the default MLP, 1024 synthetic rows, the cost only. The rows
# (invariant against normal at each devices and model) go to the results file when quiet
# (tools/bench-lib.sh).
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}
epochs=${2:-1}
default_mlp=784-256-128-10
if [ "$quick" = 1 ]; then
        devices=${DEVICES:-2}; models=${MODELS:-$default_mlp}; data=${DATA:---synthetic 1024}
        parts=" ${PARTS:-cost} "
else
        devices=${DEVICES:-1 2 4}; models=${MODELS:-784-256-128-10 784-2048-2048-10}
        data=${DATA:-}; parts=" ${PARTS:-cost accuracy} "
fi
acc_epochs=${ACC_EPOCHS:-10}
seeds=${SEEDS:-1 2 3}
batch=128
bench_begin bench-invariant

mode_args() { # normal|invariant -> strata-train's options
        [ "$1" = invariant ] && echo "--invariant" || true
}
sps() { # mode devices model -> training samples / training time, all epochs
        "$train" $data --epochs "$epochs" --json --quiet --raw-pixels --batch "$batch" \
                --strategy ddp --devices "$2" --model "$3" --optim sgd --lr 0.05 \
                --momentum 0.9 $(mode_args "$1") | grep '"epoch":' |
                sed 's/.*"samples_per_s":\([0-9.]*\),"epoch_s":\([0-9.]*\).*/\1 \2/' |
                awk '{ n += $1 * $2; t += $2 } END { if (t > 0) printf "%.0f\n", n / t }'
}
accuracy() { # mode seed -> the final test accuracy of the default MLP on 2 devices
        "$train" $data --epochs "$acc_epochs" --json --quiet --raw-pixels --batch "$batch" \
                --strategy ddp --devices 2 --model "$default_mlp" --seed "$2" \
                $(mode_args "$1") | grep '"final"' | sed 's/.*"test_acc":\([0-9.]*\).*/\1/'
}

declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
med() { median_of ${v[$1]}; }

if [[ $parts == *" cost "* ]]; then
        configs=()
        for m in $models; do
                for d in $devices; do
                        configs+=("normal $d $m" "invariant $d $m")
                done
        done
        for ((r = 0; r < reps; r++)); do
                list=("${configs[@]}")
                if ((r % 2)); then
                        for ((i = ${#configs[@]} - 1, j = 0; i >= 0; i--, j++)); do
                                list[j]=${configs[i]}
                        done
                fi
                for c in "${list[@]}"; do
                        add "$c" "$(sps $c)"
                done
        done
        echo "== cost of invariant mode: ddp, batch $batch, $epochs epoch(s), median of $reps"
        printf '%-18s %7s %12s %12s %7s\n' model devices normal invariant ratio
        for m in $models; do
                for d in $devices; do
                        n=$(med "normal $d $m")
                        i=$(med "invariant $d $m")
                        printf '%-18s %7s %12s %12s %7.3f\n' "$m" "$d" "$n" "$i" \
                                "$(ratio "$i" "$n")"
                done
        done
        echo "target: invariant / normal >= 0.85 at 2 devices on $default_mlp"
        for m in $models; do
                for d in $devices; do
                        bench_compare "invariant mode / normal ddp, $m, $d devices, batch $batch" \
                                samples/s "${v[invariant $d $m]}" "${v[normal $d $m]}"
                done
        done
fi

if [[ $parts == *" accuracy "* ]]; then
        echo "== test accuracy: $default_mlp, ddp on 2 devices, $acc_epochs epochs"
        for mode in normal invariant; do
                accs=()
                for s in $seeds; do
                        accs+=("$(accuracy "$mode" "$s")")
                done
                lo=$(printf '%s\n' "${accs[@]}" | sort -g | head -1)
                hi=$(printf '%s\n' "${accs[@]}" | sort -g | tail -1)
                printf '%-10s seeds %s: %s  band [%s, %s]\n' "$mode" "$seeds" "${accs[*]}" \
                        "$lo" "$hi"
        done
fi
bench_end
