#!/usr/bin/env bash
# make bench-conv: Strata's convolutional models against PyTorch (one thread, its oneDNN
# convolutions; tools/bench_conv_torch.py) on the same work, runs alternated REPS times,
# medians and the median of the per-pair ratios:
#  - TorchFort's FCN in-situ: examples/c/insitu.c --fcn (Conv2d(1, 1, 3, circular) over the
#    32 x 32 advection field, MSE, Adam + cosine) at batch 16, training steps/s and the
#    validation MSE after the same STEPS;
#  - the Fashion-MNIST CNN (conv32-relu-pool-conv64-relu-pool-linear128-relu-linear10) at
#    batch 128: samples/s of the median step, one device and ddp on 2 devices (Strata);
#  - with ACCURACY=1, the CNN's test accuracy after EPOCHS (default 10) on one device.
# Usage: tools/bench-conv.sh [REPS [STEPS]] ; env BUILD (default build), CNN_STEPS (default 60)
set -euo pipefail
reps=${1:-5}
steps=${2:-2000}
cnn_steps=${CNN_STEPS:-60}
epochs=${EPOCHS:-10}
cnn="conv2d(32,3,padding=1) relu maxpool2d(2) conv2d(64,3,padding=1) relu maxpool2d(2) flatten"
cnn="$cnn linear(128) relu linear(10)"

. "$(dirname "$0")/bench-lib.sh" # here, build, anchors, train, py; median, ratio, step_sps
dir=$build/bench-conv
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

env -u MAKEFLAGS -u MFLAGS make -s -C "$here" BUILD="$build" PREFIX="$dir/prefix" install >/dev/null
lib=$dir/prefix/lib
mpicc -std=c11 -O3 -I"$here/include" -o "$dir/insitu-c" "$here/examples/c/insitu.c" \
        -L"$lib" -lstrata -Wl,-rpath,"$lib" -lm

field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
peer() { "$py" "$here/tools/bench_conv_torch.py" "$@"; }
cnn_sps() { # strategy devices -> Strata's samples/s of the median step at batch 128
        "$train" --synthetic $((cnn_steps * 128)) --model "input(1,28,28) $cnn" --epochs 1 \
                --batch 128 --strategy "$1" --devices "$2" --json | step_sps 128
}

declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
med() { median_of ${v[$1]}; }
cpu=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)
kernels=$("$train" --synthetic 256 --model 784-10 --epochs 1 --json | grep '"final"' |
        field kernels)
echo "bench-conv: $cpu, $(getconf _NPROCESSORS_ONLN) cores, kernels $kernels"
for r in $(seq "$reps"); do
        j=$("$dir/insitu-c" "$steps" 16 1 --fcn --ckpt "$dir/fcn-$$.ckpt" | grep '^{')
        add sf "$(field steps_per_s <<< "$j")"; add sm "$(field val_mse <<< "$j")"
        j=$(peer fcn "$steps" 16)
        add tf "$(field steps_per_s <<< "$j")"; add tm "$(field val_mse <<< "$j")"
        add rf "$(ratio "$(echo "${v[sf]}" | awk '{print $NF}')" \
                        "$(echo "${v[tf]}" | awk '{print $NF}')")"
        add s1 "$(cnn_sps single 1)"
        add t1 "$(peer cnn 1 128 "$cnn_steps" | field samples_per_s)"
        add s2 "$(cnn_sps ddp 2)"
        add r1 "$(ratio "$(echo "${v[s1]}" | awk '{print $NF}')" \
                        "$(echo "${v[t1]}" | awk '{print $NF}')")"
        add r2 "$(ratio "$(echo "${v[s2]}" | awk '{print $NF}')" \
                        "$(echo "${v[s1]}" | awk '{print $NF}')")"
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
echo "U-Net (examples/unet.sh): trained by Strata; no PyTorch peer in this bench yet"
if [ "${ACCURACY:-0}" = 1 ]; then
        a=$("$train" --model "$cnn" --epochs "$epochs" --batch 128 --strategy single --json |
                grep '"final"' | field test_acc)
        echo "CNN test accuracy after $epochs epochs (single, SGD lr 0.05 momentum 0.9): $a"
fi
