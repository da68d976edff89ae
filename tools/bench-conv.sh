#!/usr/bin/env bash
# make bench-conv: Strata's convolutional models against PyTorch (one thread, its oneDNN
# convolutions; tools/bench_conv_torch.py) on the same work, runs alternated REPS times,
# medians and the median of the per-pair ratios:
#  - TorchFort's FCN in-situ: examples/c/insitu.c --fcn (Conv2d(1, 1, 3, circular) over the
#    32 x 32 advection field, MSE, Adam + cosine) at batch 16, training steps/s and the
#    validation MSE after the same STEPS;
#  - the Fashion-MNIST CNN (conv32-relu-pool-conv64-relu-pool-linear128-relu-linear10) at
#    batch 128: samples/s of the median step, one device and ddp on 2 devices (Strata);
#  - what ddp's scaling is made of, through tools/sched_split.py: the CNN run's busiest
#    thread's CPU seconds (single's over ddp's: the scaling on cores of its own; the run's
#    data synthesis and evaluation included) and, for the CNN and, as a control in the same
#    pass, the MLP 784-256-128-10, the share of the threads' time spent ready but waiting for
#    a core that other processes held (runq);
#  - the CNN's conv2 GEMMs (strata-bench-conv 32-64-14x14:128, the module's GEMM calls) in
#    GFLOP/s, the median of 3 runs, against the one-core FMA peak it measures as it starts;
#  - with ACCURACY=1, the CNN's test accuracy after EPOCHS (default 10) on one device.
# Usage: tools/bench-conv.sh [REPS [STEPS]] ; env BUILD (default build), CNN_STEPS (default 60)
# Rows (tools/bench-lib.sh, written when quiet): the CNN on one device against PyTorch, ddp on
# 2 devices against one, conv2's GEMMs against the peak. BENCH_QUICK=1: 50 FCN steps, 14 CNN
# steps (PyTorch times past its 10th), 2048 MLP rows, conv2's GEMMs at batch 16 (its row
# still named 128).
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio, step_sps; bench_*
reps=${1:-5}
steps=${2:-$([ "$quick" = 1 ] && echo 50 || echo 2000)}
cnn_steps=${CNN_STEPS:-$([ "$quick" = 1 ] && echo 14 || echo 60)}
mlp_rows=$([ "$quick" = 1 ] && echo 2048 || echo 60000)
conv2=32-64-14x14:$([ "$quick" = 1 ] && echo 16 || echo 128)
epochs=${EPOCHS:-10}
cnn="conv2d(32,3,padding=1) relu maxpool2d(2) conv2d(64,3,padding=1) relu maxpool2d(2) flatten"
cnn="$cnn linear(128) relu linear(10)"

dir=$build/bench-conv
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

env -u MAKEFLAGS -u MFLAGS make -s -C "$here" BUILD="$build" PREFIX="$dir/prefix" install >/dev/null
lib=$dir/prefix/lib
mpicc -std=c11 -O3 -I"$here/include" -o "$dir/insitu-c" "$here/examples/c/insitu.c" \
        -L"$lib" -lstrata -Wl,-rpath,"$lib" -lm

field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
peer() { "$py" "$here/tools/bench_conv_torch.py" "$@"; }
sched() { # what sched_split.py printed last: busiest thread's CPU s, runq share of thread time
        "$py" -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["threads"]
print(t[0][0], j["runq_s"] / (j["cpu_s"] + j["runq_s"]))' "$dir/sched.json"
}
cnn_sps() { # strategy devices [model [samples]] -> samples/s of the median step at batch 128
        "$py" "$here/tools/sched_split.py" "$train" --synthetic "${4:-$((cnn_steps * 128))}" \
                --model "${3:-input(1,28,28) $cnn}" --epochs 1 --batch 128 --strategy "$1" \
                --devices "$2" --json 2> "$dir/sched.json" | step_sps 128
}

pct() { awk -v x="$1" 'BEGIN { print x * 100 }'; } # a share as %; bc reads no 1e-05
declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
med() { median_of ${v[$1]}; }
bench_begin bench-conv
for r in $(seq "$reps"); do
        j=$("$dir/insitu-c" "$steps" 16 1 --fcn --ckpt "$dir/fcn-$$.ckpt" | grep '^{')
        add sf "$(field steps_per_s <<< "$j")"; add sm "$(field val_mse <<< "$j")"
        j=$(peer fcn "$steps" 16)
        add tf "$(field steps_per_s <<< "$j")"; add tm "$(field val_mse <<< "$j")"
        add rf "$(ratio "$(echo "${v[sf]}" | awk '{print $NF}')" \
                        "$(echo "${v[tf]}" | awk '{print $NF}')")"
        add s1 "$(cnn_sps single 1)"
        read -r c1 q1 <<< "$(sched)"
        add t1 "$(peer cnn 1 128 "$cnn_steps" | field samples_per_s)"
        add s2 "$(cnn_sps ddp 2)"
        read -r c2 q2 <<< "$(sched)"
        add r1 "$(ratio "$(echo "${v[s1]}" | awk '{print $NF}')" \
                        "$(echo "${v[t1]}" | awk '{print $NF}')")"
        add r2 "$(ratio "$(echo "${v[s2]}" | awk '{print $NF}')" \
                        "$(echo "${v[s1]}" | awk '{print $NF}')")"
        add c2 "$(ratio "$c1" "$c2")"; add q1 "$q1"; add q2 "$q2"
        m1=$(cnn_sps single 1 784-256-128-10 $mlp_rows); read -r _ mq1 <<< "$(sched)"
        m2=$(cnn_sps ddp 2 784-256-128-10 $mlp_rows); read -r _ mq2 <<< "$(sched)"
        add m2 "$(ratio "$m2" "$m1")"; add mq1 "$mq1"; add mq2 "$mq2"
        g=$("$build/bin/strata-bench-conv" --reps 3 "$conv2") # conv2's GEMMs, the peak
        add gp "$(sed -n 's/.*(now \([0-9.]*\) GFLOP\/s).*/\1/p' <<< "$g")"
        add gg "$(sed -n 's/.*GEMM phase *[0-9.]* ms *\([0-9.]*\) GFLOP\/s.*/\1/p' <<< "$g")"
        echo "  pass $r/$reps done"
done
printf '| work | Strata | PyTorch | Strata / PyTorch (median of pairs) |\n'
printf '| --- | --- | --- | --- |\n'
printf '| FCN in-situ, batch 16, steps/s | %.0f | %.0f | %.2f |\n' "$(med sf)" "$(med tf)" \
        "$(med rf)"
printf '| FCN validation MSE after %d steps | %.4g | %.4g | |\n' "$steps" "$(med sm)" "$(med tm)"
printf '| CNN batch 128, 1 device, samples/s | %.0f | %.0f | %.2f |\n' "$(med s1)" "$(med t1)" \
        "$(med r1)"
printf '| CNN batch 128, ddp 2 devices, samples/s | %.0f | | %.2f x one device |\n' \
        "$(med s2)" "$(med r2)"
printf '| CNN ddp 2 on cores of its own: busiest thread CPU s, single / ddp | | | %.2f |\n' \
        "$(med c2)"
printf '| CNN threads ready but waiting for a core (runq), single / ddp | %.0f%% / %.0f%% | | |\n' \
        "$(pct "$(med q1)")" "$(pct "$(med q2)")"
printf '| control: MLP 784-256-128-10 ddp 2 / single, samples/s of the median step | | | %.2f |\n' \
        "$(med m2)"
printf '| MLP threads waiting for a core (runq), single / ddp | %.0f%% / %.0f%% | | |\n' \
        "$(pct "$(med mq1)")" "$(pct "$(med mq2)")"
echo "U-Net (examples/unet.sh): trained by Strata; no PyTorch peer in this bench yet"
bench_compare "CNN, batch 128, 1 device against PyTorch (one thread each)" samples/s \
        "${v[s1]}" "${v[t1]}"
bench_compare "CNN, batch 128, ddp on 2 devices against 1 device" samples/s "${v[s2]}" "${v[s1]}"
bench_compare "CNN's conv2 GEMMs (32-64-14x14, batch 128) against the one-core FMA peak" \
        GFLOP/s "${v[gg]}" "${v[gp]}"
if [ "${ACCURACY:-0}" = 1 ]; then
        a=$("$train" --model "$cnn" --epochs "$epochs" --batch 128 --strategy single --json |
                grep '"final"' | field test_acc)
        echo "CNN test accuracy after $epochs epochs (single, SGD lr 0.05 momentum 0.9): $a"
fi
bench_end
