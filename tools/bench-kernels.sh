#!/usr/bin/env bash
# The CPU kernel sets (decision 0034), one device, one thread:
#  1. strata-bench-kernels: each set's GFLOP/s over the step's GEMMs (MLP b128, wide b512,
#     in-situ 1024-1024 b16, the Fashion-MNIST CNN's conv layers per sample) beside the
#     one-core peaks it measures (f32 FMA per ISA, AVX512_BF16 dot; AMX: named when present,
#     not used), all timed in the thread's CPU time.
#  2. training samples/s, alternated REPS times, medians: Strata native and portable (32),
#     Strata bf16-mixed, PyTorch fp32 and autocast(bfloat16), on the default MLP and the wide
#     one.
# Usage: tools/bench-kernels.sh [REPS] ; env BUILD (default build), PEERS (tools/peers).
# Rows (tools/bench-lib.sh, written when quiet): Strata 32 native against PyTorch fp32 on
# each MLP. BENCH_QUICK=1: the default MLP only, 1280 rows and 10 PyTorch steps; no
# strata-bench-kernels.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}
bench_begin bench-kernels
[ "$quick" = 1 ] || "$build/bin/strata-bench-kernels"
echo
strata_sps() { # model batch samples precision kernels -> samples/s of the median step, or
        # nothing where the CPU refuses the precision (bf16-mixed without AVX512_BF16)
        "$train" --strategy single --model "$1" --batch "$2" --synthetic "$3" --epochs 1 \
                --precision "$4" --kernels "$5" --json 2>/dev/null | step_sps "$2" || true
}
torch_sps() { # model batch steps fp32|bf16
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" "$peers/torch_autocast_mlp.py" "$@"
}
# PyTorch's autocast(bfloat16) without AVX512_BF16 or AMX-BF16 emulates bf16 (minutes per
# run on the wide model): measured only where the CPU has one of them, or with TORCH_BF16=1.
torch_bf16=${TORCH_BF16:-$(grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && echo 1 || echo 0)}
row() { # name value native torch-fp32 torch-bf16 ("" where refused or not measured)
        if [ -z "$2" ]; then printf '%-36s %12s\n' "$1" "${6:-refused here}"; return; fi
        printf '%-36s %12.0f %10.2f %12.2f %12s\n' "$1" "$2" "$(ratio "$2" "$3")" \
                "$(ratio "$2" "$4")" "$([ -n "$5" ] && printf '%.2f' "$(ratio "$2" "$5")" ||
                                        echo -)"; }
median_or_none() { # the median of the non-empty arguments, or nothing
        local v=(); for x in "$@"; do [ -n "$x" ] && v+=("$x"); done
        [ ${#v[@]} -gt 0 ] && median_of "${v[@]}" || true; }
bench() { # model batch samples steps
        local sn=() sp=() sb=() tf=() tb=()
        for _ in $(seq "$reps"); do
                sn+=("$(strata_sps "$1" "$2" "$3" 32 native)")
                sp+=("$(strata_sps "$1" "$2" "$3" 32 portable)")
                sb+=("$(strata_sps "$1" "$2" "$3" bf16-mixed native)")
                tf+=("$(torch_sps "$1" "$2" "$4" fp32)")
                if [ "$torch_bf16" = 1 ]; then tb+=("$(torch_sps "$1" "$2" "$4" bf16)"); fi
        done
        local a b c d e
        a=$(median_of "${sn[@]}"); b=$(median_of "${sp[@]}"); c=$(median_or_none "${sb[@]}")
        d=$(median_of "${tf[@]}"); e=$(median_or_none "${tb[@]}")
        echo "MLP $1, batch $2, one device, one thread; median of $reps alternated runs"
        printf '%-36s %12s %10s %12s %12s\n' "" samples/s "vs native" "vs T fp32" "vs T bf16"
        row "Strata 32, native" "$a" "$a" "$d" "$e"
        row "Strata 32, portable" "$b" "$a" "$d" "$e"
        row "Strata bf16-mixed" "$c" "$a" "$d" "$e"
        row "PyTorch fp32" "$d" "$a" "$d" "$e"
        row "PyTorch autocast(bfloat16)" "$e" "$a" "$d" "$e" "not measured (no AVX512_BF16)"
        echo
        bench_compare "single device, MLP $1, batch $2, Strata 32 native against PyTorch fp32, one thread each" \
                samples/s "${sn[*]}" "${tf[*]}"
}
if [ "$quick" = 1 ]; then
        bench 784-256-128-10 128 1280 10
else
        bench 784-256-128-10 128 25600 200
        bench 784-2048-2048-10 512 8192 16
fi
bench_end
