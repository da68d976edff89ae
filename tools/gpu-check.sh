#!/usr/bin/env bash
# The checks a lent GPU machine is for, in one run of a few minutes (decision 0051). Such a
# machine has the CUDA toolkit and PyTorch but not Strata's build dependencies, so the
# binaries are built here and travel with the shared libraries they need:
#   here:   make -j2 && make -j2 build/tests/strata-tests && tools/gpu-check.sh bundle
#           (then carry the paths it prints: the binaries below and .gpu)
#   there:  tools/gpu-check.sh run OUTDIR
# `run` writes, under OUTDIR: cuda.log (the CUDA tests with the default GEMM path and with
# STRATA_CUDA_GEMM=lt, the heap calls' callers, the per-call heap probe), gpu.log (strata-train
# on the GPU against PyTorch eager, both GEMM paths), amx.log (where the host has AMX:
# tools/amx-check.sh), cnn.log (the CNN single against ddp x 2 on two host cores).
set -u
cd "$(dirname "$0")/.."
mode=${1:-}
bins="build/tests/strata-tests build/bin/strata-train build/bin/strata-bench-kernels
      build/bin/strata-cuda-heap-probe build/libstrata-cuda.so"
bins=$(echo $bins)
if [ "$mode" = bundle ]; then
        mkdir -p .gpu/lib
        grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo /.gpu/ >> .git/info/exclude
        rm -rf .gpu/lib/*
        for f in $bins; do
                [ -f "$f" ] || { echo "gpu-check: $f is not built" >&2; exit 2; }
                ldd "$f" 2>/dev/null
        done | awk '$3 ~ /^\// {print $3}' | sort -u |
                grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libgcc_s|libstdc\+\+)\.so|/libcu|/libnv' |
                xargs -r -I{} cp -L {} .gpu/lib/
        echo "carry: $bins .gpu ($(du -shc $bins .gpu | tail -1 | cut -f1))"
        exit 0
fi
[ "$mode" = run ] || { echo "usage: tools/gpu-check.sh bundle | run OUTDIR" >&2; exit 2; }
out=${2:-/tmp/gpu-check}
mkdir -p "$out"
cub=$(find /usr/local /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/.gpu/lib${cub:+:$(dirname "$cub")}
# The tests name the build folder by the path it had where it was built.
built=$(grep -a -o -m1 '/[^"[:cntrl:][:space:]]*/build/bin/strata-train' build/tests/strata-tests | head -1)
built=${built%/bin/strata-train}
[ -n "$built" ] && [ ! -e "$built" ] && mkdir -p "$(dirname "$built")" && ln -s "$PWD/build" "$built"
T=build/bin/strata-train
{ date; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  grep -m1 'model name' /proc/cpuinfo
  echo "== heap calls per CUDA call"; timeout 60 build/bin/strata-cuda-heap-probe
  for g in sgemm lt; do
        echo "== cuda tests, STRATA_CUDA_GEMM=$g"
        STRATA_CUDA_GEMM=$g STRATA_HEAPCOUNT_WHO=1 timeout 120 build/tests/strata-tests \
                --filter '@(cuda_driver|runtime_bad_input)/*' -j1 2>&1 | grep -v '^\[----\] *$' | head -120
        STRATA_CUDA_GEMM=$g timeout 60 build/tests/strata-tests --filter 'strata_train_cli/cuda*' 2>&1 | tail -4
  done
} > "$out/cuda.log" 2>&1
{ for i in 1 2 3; do
        for g in sgemm lt; do
                echo "S128 $g $(STRATA_CUDA_GEMM=$g timeout 30 $T --accelerator cuda --model 784-256-128-10 \
                        --synthetic 38400 --batch 128 --epochs 1 --raw-pixels --json 2>&1 | grep final)"
                echo "S8192 $g $(STRATA_CUDA_GEMM=$g timeout 30 $T --accelerator cuda --model 784-4096-4096-10 \
                        --synthetic 327680 --batch 8192 --epochs 1 --raw-pixels --json 2>&1 | grep final)"
        done
        PEERS=torch_eager timeout 60 python3 tools/torch_gpu_peer.py 784-256-128-10 128 300 cuda 2>&1 | grep steps_per
        PEERS=torch_eager timeout 60 python3 tools/torch_gpu_peer.py 784-4096-4096-10 8192 40 cuda 2>&1 | grep steps_per
  done; date; } > "$out/gpu.log" 2>&1
if grep -q -w amx_bf16 /proc/cpuinfo; then
        CORE=3 timeout 120 bash tools/amx-check.sh > "$out/amx.log" 2>&1
fi
cpus=$([ "$(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)" -ge 6 ] && echo 4,5 || echo 0,1)
cnn="input(1,28,28) conv2d(32,3,padding=1) relu maxpool2d(2) conv2d(64,3,padding=1) relu maxpool2d(2)"
cnn="$cnn flatten linear(128) relu linear(10)"
{ for i in 1 2 3; do
        for s in single ddp; do
                echo "CNN $s $(timeout 40 taskset -c $cpus $T --model "$cnn" --synthetic 5120 --batch 128 \
                        --epochs 1 --strategy $s --devices $([ $s = ddp ] && echo 2 || echo 1) --json 2>&1 | grep final)"
        done
  done; } > "$out/cnn.log" 2>&1
echo "gpu-check: logs in $out"
