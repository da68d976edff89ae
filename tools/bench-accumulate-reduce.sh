#!/usr/bin/env bash
# accumulate_reduce window against each (decision 0047): the mean training step (a micro-batch;
# the epoch's training samples/s of strata-train --json, test passes excluded) of
#   ddp window, ddp each, zero2 each and zero2 window (zero1's layout)
# with --accumulate 4, AdamW, --clip-norm 1, global batch 128, synthetic rows, on MODELS
# (default: the default MLP 784-256-128-10 and the wide 784-2048-2048-10), as 2 devices of one
# process (threads) and as mpirun -np 4 of one device each (ddp: the mpi strategy); every
# configuration once per rep, the order reversed every other rep; medians over REPS, and the
# medians of each rep's ratios to ddp window (the same rep's runs are side by side). Then the
# per-device plan (strata-train --plan --json) of issue 46's model 784-512-512-512-512-10 on
# 4 devices, AdamW, --clip-norm 1, --accumulate 4.
# Usage: tools/bench-accumulate-reduce.sh [REPS]; env BUILD, MODELS, LAYOUTS ("threads procs").
set -euo pipefail
reps=${1:-5}
models=${MODELS:-784-256-128-10 784-2048-2048-10}
layouts=${LAYOUTS:-threads procs}
. "$(dirname "$0")/bench-lib.sh" # here, build, train; median, ratio, median_of
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none"
args="--accumulate 4 --optim adamw --lr 0.001 --clip-norm 1 --batch 128 --epochs 1 --json"
args="$args --quiet --bind none --seed 4646"
variants="ddp:window ddp:each zero2:each zero2:window"

rows() { # model -> synthetic rows (the wide model: fewer, its steps are longer)
        case $1 in 784-2048-2048-10) echo 4096 ;; *) echo 16384 ;; esac
}
step_us() { # layout strategy:order model -> mean training step, us
        local s=${2%%:*} o=${2##*:} launch="" dev=2
        if [ "$1" = procs ]; then
                launch="$mpirun -np 4"; dev=1
                [ "$s" = ddp ] && s=mpi
        fi
        $launch "$train" --strategy "$s" --devices $dev --model "$3" --synthetic "$(rows "$3")" \
                --accumulate-reduce "$o" $args 2>/dev/null | grep '"epoch":' | head -1 |
                sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/' | awk '{printf "%.1f\n", 128e6 / $1}'
}
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)" \
     "cores; load $(cut -d' ' -f1-3 /proc/loadavg); $(git -C "$here" rev-parse --short HEAD)"
echo "== mean training step (us, a micro-batch), --accumulate 4, AdamW, --clip-norm 1," \
     "batch 128; median of $reps alternated reps"
printf '%-18s %-8s %10s %10s %10s %10s %9s %9s %9s\n' model layout ddp:win ddp:each \
       zero2:each zero2:win each/win z2each/win z2win/win
for m in $models; do
        for l in $layouts; do
                declare -A t=()
                for r in $(seq "$reps"); do
                        list=$variants
                        [ $((r % 2)) = 0 ] && list=$(tr ' ' '\n' <<< "$variants" | tac)
                        for v in $list; do t[$v]="${t[$v]:-} $(step_us "$l" "$v" "$m")"; done
                done
                declare -A med=() rat=()
                for v in $variants; do
                        med[$v]=$(median_of ${t[$v]})
                        rat[$v]=$(paste -d' ' <(tr ' ' '\n' <<< "${t[$v]# }") \
                                  <(tr ' ' '\n' <<< "${t[ddp:window]# }") |
                                  awk '{print $1 / $2}' | median)
                done
                printf '%-18s %-8s %10.1f %10.1f %10.1f %10.1f %9.3f %9.3f %9.3f\n' "$m" "$l" \
                       "${med[ddp:window]}" "${med[ddp:each]}" "${med[zero2:each]}" \
                       "${med[zero2:window]}" "${rat[ddp:each]}" "${rat[zero2:each]}" \
                       "${rat[zero2:window]}"
                for v in $variants; do echo "    $v:${t[$v]}"; done
                unset t med rat
        done
done
echo "== per-device plan (bytes), 784-512-512-512-512-10, 4 devices, AdamW, --clip-norm 1," \
     "--accumulate 4"
printf '%-8s %12s %12s\n' strategy window each
for s in ddp zero1 zero2 fsdp; do
        row=()
        for o in window each; do
                row+=("$("$train" --strategy $s --devices 4 --model 784-512-512-512-512-10 \
                        --synthetic 512 --optim adamw --clip-norm 1 --accumulate 4 \
                        --accumulate-reduce $o --plan --json 2>/dev/null |
                        sed 's/.*"per_device":\[{"device":0,"bytes":\([0-9]*\).*/\1/')")
        done
        printf '%-8s %12s %12s\n' $s "${row[0]}" "${row[1]}"
done
