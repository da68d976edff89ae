#!/usr/bin/env bash
# Strata vs PyTorch training the Fashion-MNIST MLP 784-256-128-10 (SGD lr 0.05 momentum 0.9),
# run back to back and alternated, REPS times per row; medians of training samples/s.
#  - single device (one thread each) at batch 128 and 32, against torch_mlp_fmnist.py 1, with
#    the ceiling a step made of nothing but its GEMMs would reach (strata-bench-gemm)
#  - ddp and dp on 2 devices at global batch 128, against PyTorch DDP over Gloo (2 processes)
#  - per-step runtime overhead of ddp on 2 devices with a model that does almost nothing
#  - at start and end, and before each 2-device rep, the one-way cache-line handoff between the
#    two cores: this VM moves between states (see handoff() below), and the scaling figures
#    move with them
# Usage: tools/bench-train.sh [REPS] ; env BUILD (default build), PEERS (tools/peers).
# Rows (tools/bench-lib.sh, written when quiet): single device against PyTorch at batch 128
# and 32; ddp and dp on 2 devices against single, ddp against PyTorch DDP. BENCH_QUICK=1: 2048
# synthetic rows (PyTorch: the first 2048 of Fashion-MNIST), no GEMM ceiling (0), no AVX-512
# second pass.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}

strata_sps() { # args... -> training samples/s of one epoch
        "$train" --epochs 1 --json $quick_data "$@" | grep '"epoch":1,' | sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/'
}
# The anchor's torch.set_num_threads(1) does not reach the OpenBLAS that PyTorch calls through
# libblas.so.3 (Debian's pthread build): left alone, its own pool runs each GEMM on every core.
# "One thread each" therefore pins that pool too; torch_sps_pool shows the figure without it.
torch_run() { # env-args... -- nprocs batch
        local e=()
        while [ "$1" != -- ]; do e+=("$1"); shift; done
        shift
        env "${e[@]}" "$py" "$peers/torch_mlp_fmnist.py" "$1" 1 "$2" |
                sed 's/.*samples_per_s=\([0-9.]*\).*/\1/'
}
torch_sps() { torch_run OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 -- "$@"; }
torch_sps_pool() { torch_run -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS -- "$@"; }

gemm_ceiling() { # batch -> samples/s if a step were nothing but its GEMMs at their best times
        # (quick mode: 0, not measured)
        [ "$quick" != 1 ] || { echo 0; return; }
        "$build/bin/strata-bench-gemm" --json --batch "$1" | tail -1 |
                sed 's/.*"samples_per_s_ceiling":\([0-9.]*\).*/\1/'
}

single_set() {
        printf '%-36s %6s %12s %12s %7s %14s %14s %12s %7s\n' "$1" batch strata torch ratio \
                gemm_ceiling ceiling/torch torch_pool ratio
        for b in 128 32; do
                s=() t=() q=()
                for _ in $(seq "$reps"); do
                        s+=("$(strata_sps --strategy single --batch "$b")")
                        t+=("$(torch_sps 1 "$b")")
                        q+=("$(torch_sps_pool 1 "$b")")
                done
                ms=$(printf '%s\n' "${s[@]}" | median); mt=$(printf '%s\n' "${t[@]}" | median)
                mq=$(printf '%s\n' "${q[@]}" | median)
                mc=$(gemm_ceiling "$b")
                printf '%-36s %6d %12.0f %12.0f %7.2f %14.0f %14.2f %12.0f %7.2f\n' "" "$b" "$ms" \
                        "$mt" "$(ratio "$ms" "$mt")" "$mc" "$(ratio "$mc" "$mt")" "$mq" \
                        "$(ratio "$ms" "$mq")"
                bench_compare "single device, MLP 784-256-128-10, batch $b, one thread each, against PyTorch$(coretype)" \
                        samples/s "${s[*]}" "${t[*]}"
        done
}

multi_set() {
        local s=() p=() d=() t=() q=() h=() ms mp md mt mq
        for _ in $(seq "$reps"); do
                h+=("$(handoff_us)")
                s+=("$(strata_sps --strategy single)")
                d+=("$(strata_sps --strategy ddp --devices 2)")
                p+=("$(strata_sps --strategy dp --devices 2)")
                t+=("$(torch_sps 2 128)")
                q+=("$(torch_sps_pool 2 128)")
        done
        ms=$(printf '%s\n' "${s[@]}" | median); md=$(printf '%s\n' "${d[@]}" | median)
        mp=$(printf '%s\n' "${p[@]}" | median); mt=$(printf '%s\n' "${t[@]}" | median)
        mq=$(printf '%s\n' "${q[@]}" | median)
        printf '%-36s %12s %12s   (handoff before each rep: %s us)\n' \
                "2 devices, global batch 128" samples/s "vs single" "${h[*]}"
        printf '%-36s %12.0f %12s\n' "  Strata single (1 device)" "$ms" "1.00"
        printf '%-36s %12.0f %12.2f   vs PyTorch DDP: %.2f\n' "  Strata ddp" "$md" "$(ratio "$md" "$ms")" "$(ratio "$md" "$mt")"
        printf '%-36s %12.0f %12.2f\n' "  Strata dp" "$mp" "$(ratio "$mp" "$ms")"
        printf '%-36s %12.0f\n' "  PyTorch DDP (Gloo, 2 processes)" "$mt"
        printf '%-36s %12.0f   Strata ddp vs it: %.2f\n' "  PyTorch DDP, BLAS pool per process" "$mq" \
                "$(ratio "$md" "$mq")"
        bench_compare "ddp on 2 devices against single, MLP 784-256-128-10, global batch 128$(coretype)" \
                samples/s "${d[*]}" "${s[*]}"
        bench_compare "dp on 2 devices against single, MLP 784-256-128-10, global batch 128$(coretype)" \
                samples/s "${p[*]}" "${s[*]}"
        bench_compare "ddp on 2 devices against PyTorch DDP (Gloo, 2 processes), MLP 784-256-128-10$(coretype)" \
                samples/s "${d[*]}" "${t[*]}"
}
coretype() { # -> ", PyTorch's OpenBLAS SkylakeX" where OPENBLAS_CORETYPE names it, else nothing
        [ -z "${OPENBLAS_CORETYPE:-}" ] || echo ", PyTorch's OpenBLAS $OPENBLAS_CORETYPE"
}

overhead() { # median step time of a model that does (almost) nothing
        local o=()
        for _ in $(seq "$reps"); do
                o+=("$("$train" --synthetic $([ "$quick" = 1 ] && echo 2000 || echo 20000) --model 4-2 --batch 2 --epochs 1 --json --raw-pixels \
                        --strategy ddp --devices 2 | tail -1 | sed 's/.*"step_us_median":\([0-9.]*\).*/\1/')")
        done
        printf 'ddp runtime overhead per step, 2 devices, model 4-2 batch 2: %s us (median of %d)\n' \
                "$(printf '%s\n' "${o[@]}" | median)" "$reps"
}

# The VM's state: one-way cache-line handoff between the two devices' cores (strata-bench-coll).
# Seen here: ~0.33 us (slow), ~0.06 us (fast), ~0.025 us (the two vCPUs on one physical core's
# hyperthreads: two devices then train no faster than one).
handoff_us() {
        "$build/bin/strata-bench-coll" --json --min-bytes 4 --max-bytes 4 |
                sed -n 's/.*"handoff_us_median":\([0-9.]*\).*/\1/p'
}
handoff() {
        local h
        h=$(handoff_us)
        local state='(h < 0.04 ? "shared physical core" : (h < 0.15 ? "fast state" : "slow state"))'
        printf 'cache-line handoff between devices 0 and 1 (%s): %s us (%s)\n' "$1" "$h" \
                "$(awk -v h="$h" "BEGIN { print $state }")"
}

"$py" -c 'import torch' 2>/dev/null || { echo "bench-train: PyTorch missing (make bench-deps)"; exit 1; }
bench_begin bench-train
echo "median of $reps alternated runs; training time only; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto}"
handoff start
echo "PyTorch: OPENBLAS_NUM_THREADS=1 (one thread per process); torch_pool: OpenBLAS's default pool"
single_set "single device, one thread each"
multi_set
overhead
if grep -q avx512f /proc/cpuinfo && [ "${OPENBLAS_CORETYPE:-}" != SkylakeX ] && [ "$quick" != 1 ]; then
        echo "--- again with OPENBLAS_CORETYPE=SkylakeX (AVX-512 kernels) for both"
        export OPENBLAS_CORETYPE=SkylakeX
        single_set "single device, one thread each"
        multi_set
fi
handoff end
bench_end
