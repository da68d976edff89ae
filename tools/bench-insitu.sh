#!/usr/bin/env bash
# make bench-insitu: the in-situ example (examples/c/insitu.c, examples/fortran/insitu.f90)
# against its PyTorch peer on the same loop (tools/peers/torch_insitu.py: 2-D advection,
# 1024-1024 Linear, MSE, Adam + cosine), one thread per process, runs alternated REPS times,
# medians:
#  - training steps/s at batch 16 and 128 against PyTorch tuned (foreach Adam, flushed
#    denormals) and with its defaults (TUNED=0); 2 processes (mpirun -np 2, strategy mpi)
#    against PyTorch DDP over Gloo; the Fortran example beside the C one
#  - validation MSE after the same steps (batch 16)
#  - batch-1 inference latency against PyTorch eager no_grad, and the GEMV's bandwidth floor
#  - the step's floor at batch 16: the GEMMs at this machine's measured rate
#    (strata-bench-gemm) plus Adam's memory traffic at its measured bandwidth (memband.c)
# Usage: tools/bench-insitu.sh [REPS [STEPS]] ; env BUILD (default build), PEERS (tools/peers).
# Rows (tools/bench-lib.sh, written when quiet): steps/s against PyTorch tuned at batch 16
# and 128 and with 2 processes. BENCH_QUICK=1: 60 steps.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, py; median, ratio; bench_*
reps=${1:-5}
steps=${2:-$([ "$quick" = 1 ] && echo 60 || echo 2000)}
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"
bench_begin bench-insitu
dir=$build/bench-insitu
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# The examples against an install of this build (tests/build/insitu.sh builds them so too).
env -u MAKEFLAGS -u MFLAGS make -s -C "$here" BUILD="$build" PREFIX="$dir/prefix" install >/dev/null
lib=$dir/prefix/lib
mpicc -std=c11 -O3 -I"$here/include" -o "$dir/insitu-c" "$here/examples/c/insitu.c" \
        -L"$lib" -lstrata -Wl,-rpath,"$lib" -lm
(cd "$dir" && gfortran -std=f2018 -O3 -c "$here/fortran/strata.f90" &&
        mpifort -std=f2018 -O3 -o insitu-f90 "$here/examples/fortran/insitu.f90" strata.o \
                -L"$lib" -lstrata -Wl,-rpath,"$lib")
gcc -O3 -march=native -pthread "$peers/memband.c" -o "$dir/memband"

field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
strata() { # launcher program batch -> the example's JSON line
        $1 "$dir/$2" "$steps" "$3" 1 --ckpt "$dir/$2-$$.ckpt" | grep '^{'
}
torch() { # nprocs batch tuned -> the peer's JSON line
        TUNED=$3 "$py" "$peers/torch_insitu.py" "$1" "$steps" "$2" | grep '^{'
}
torch_infer_us() { # PyTorch eager, no_grad, batch 1: median us of a Linear(1024, 1024) call
        "$py" - <<'EOF'
import time, torch
torch.set_num_threads(1)
torch.manual_seed(0)
m = torch.nn.Linear(1024, 1024).eval()
x = torch.randn(1, 1024)
t = []
with torch.no_grad():
    for i in range(1100):
        t0 = time.perf_counter()
        m(x)
        t.append(time.perf_counter() - t0)
t = sorted(t[100:])
print(t[len(t) // 2] * 1e6)
EOF
}

declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
med() { median_of ${v[$1]}; }
for _ in $(seq "$reps"); do
        j=$(strata "" insitu-c 16)
        add s16 "$(field steps_per_s <<< "$j")"; add smse "$(field val_mse <<< "$j")"
        add sinf "$(field infer_us <<< "$j")"
        j=$(torch 1 16 1)
        add t16 "$(field steps_per_s <<< "$j")"; add tmse "$(field val_mse <<< "$j")"
        add d16 "$(torch 1 16 0 | field steps_per_s)"
        add f16 "$(strata "" insitu-f90 16 | field steps_per_s)"
        add s128 "$(strata "" insitu-c 128 | field steps_per_s)"
        add t128 "$(torch 1 128 1 | field steps_per_s)"
        add d128 "$(torch 1 128 0 | field steps_per_s)"
        add s2 "$(strata "$mpirun" insitu-c 16 | field steps_per_s)"
        add t2 "$(torch 2 16 1 | field steps_per_s)"
        add tinf "$(torch_infer_us)"
done

row() { # what strata peer (awk: the Fortran example's figures are in E notation, which bc lacks)
        awk -v w="$1" -v a="$2" -v b="$3" \
                'BEGIN { printf "%-46s %12.3f %12.3f %8.2f\n", w, a, b, a / b }'
}
echo "in-situ advection, 1024-1024 Linear, MSE, Adam + cosine, $steps steps;" \
        "median of $reps alternated runs, one thread per process"
printf '%-46s %12s %12s %8s\n' "" Strata PyTorch ratio
row "steps/s, batch 16 (PyTorch tuned)" "$(med s16)" "$(med t16)"
row "steps/s, batch 16 (PyTorch defaults, TUNED=0)" "$(med s16)" "$(med d16)"
row "steps/s, batch 128 (PyTorch tuned)" "$(med s128)" "$(med t128)"
row "steps/s, batch 128 (PyTorch defaults)" "$(med s128)" "$(med d128)"
row "steps/s, 2 processes, batch 16 (DDP, Gloo)" "$(med s2)" "$(med t2)"
row "steps/s, batch 16: Fortran example vs C" "$(med f16)" "$(med s16)"
row "validation MSE after $steps steps, batch 16" "$(med smse)" "$(med tmse)"
row "batch-1 inference, us (no_grad; lower is better)" "$(med sinf)" "$(med tinf)"
for a in "s16 t16 batch 16" "s128 t128 batch 128" "s2 t2 2 processes (DDP, Gloo), batch 16"; do
        read -r x y w <<< "$a"
        bench_compare "in-situ advection (1024-1024, Adam), $w, against PyTorch tuned" steps/s \
                "${v[$x]}" "${v[$y]}"
done

# The floor of a step at batch 16: forward and dW GEMMs (2 x 2 x 16 x 1024 x 1024 = 67 MFLOP)
# at the measured rate, plus Adam over 1049600 parameters: p, g, m, v read and p, m, v written,
# 7 x 4 bytes each (29.4 MB), at the measured single-thread bandwidth (2-input sum).
gemm_us=$("$build/bin/strata-bench-gemm" --model 1024-1024 --batch 16 --json |
        sed -n 's/.*"step_gemm_us_median":\([0-9.]*\).*/\1/p')
bw=$("$dir/memband" | sed -n 's/^threads=1 .*sum \([0-9.]*\) GB\/s.*/\1/p')
params=$((1024 * 1024 + 1024))
awk -v g="$gemm_us" -v bw="$bw" -v p="$params" -v s="$(med s16)" -v inf="$(med sinf)" 'BEGIN {
        flop = 2 * 2 * 16 * 1024 * 1024; bytes = 7 * 4 * p
        adam_us = bytes / (bw * 1e9) * 1e6; floor_us = g + adam_us; step_us = 1e6 / s
        printf "floor at batch 16: GEMMs %.1f MFLOP in %.0f us (%.1f GFLOP/s, strata-bench-gemm)" \
               " + Adam %.1f MB at %.1f GB/s = %.0f us: floor %.0f us/step;" \
               " Strata %.0f us/step: %.0f%% of the floor\n", flop / 1e6, g, flop / g / 1e3, \
               bytes / 1e6, bw, adam_us, floor_us, step_us, floor_us / step_us * 100
        gemv_us = 4 * p / (bw * 1e9) * 1e6
        printf "batch-1 inference floor: the GEMV reads %.1f MB of weights at %.1f GB/s" \
               " = %.0f us;" \
               " Strata %.0f us: %.0f%% of it\n", 4 * p / 1e6, bw, gemv_us, inf, gemv_us / inf * 100
}'
bench_end
rm -f "$dir"/*.ckpt
