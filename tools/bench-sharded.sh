#!/usr/bin/env bash
# make bench-sharded: the sharded strategies (issue 33, decision 0026), from one run:
#  - speed: Fashion-MNIST (pixel / 255), global batch 128, EPOCHS epochs, training samples/s
#    (the samples over the epochs' time, the test passes excluded, as the peer's), on the
#    default MLP 784-256-128-10 and the wide 784-2048-2048-10, SGD (lr 0.05, momentum 0.9)
#    and AdamW (lr 1e-3, weight decay 0.01): single (1 device) and each of STRATEGIES on 2
#    devices, beside single and ddp with ratios
#  - against PyTorch's ZeroRedundancyOptimizer over DDP with Gloo, 2 processes of one thread
#    (tools/peers/torch_mlp_fmnist.py, mode zero), same models, batch, optimizers and
#    data: steps/s of each sharded strategy beside it, with the ratio
#  - per-device memory under AdamW at 1, 2 and 4 devices: strata-train's plan (--verbose:
#    bytes per device) and the region's planned and used bytes (--json), beside the ZeRO
#    formulas of decision 0026 (a few steps on synthetic rows: the plan depends on the model,
#    the optimizer, the batch and the devices, not on the data)
# Every configuration of the speed part, the peer included, runs once per rep; the order is
# reversed on every other rep; figures are medians over the reps. A strategy strata-train
# refuses (fsdp, before it exists) is left out with a note.
# Usage: tools/bench-sharded.sh [REPS [EPOCHS]] ; env BUILD (default build), PEERS (tools/peers),
# STRATEGIES (default "ddp zero1 zero2 fsdp"), MODELS (default "784-256-128-10
# 784-2048-2048-10"), OPTIMS (default "sgd adamw"), MEM_DEVICES (default "1 2 4"),
# PEER (default 1; 0 leaves PyTorch out), PARTS (default "speed memory").
# Rows (tools/bench-lib.sh, written when quiet): each strategy on 2 devices against single.
# BENCH_QUICK=1: the default MLP, SGD, 2048 synthetic rows, the speed only, no peer.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, peers, train, py; median, ratio; bench_*
reps=${1:-5}
epochs=${2:-1}
strategies=${STRATEGIES:-ddp zero1 zero2 fsdp}
if [ "$quick" = 1 ]; then
        models=${MODELS:-784-256-128-10}; optims=${OPTIMS:-sgd}; peer=${PEER:-0}
        parts=" ${PARTS:-speed} "
else
        models=${MODELS:-784-256-128-10 784-2048-2048-10}; optims=${OPTIMS:-sgd adamw}
        peer=${PEER:-1}; parts=" ${PARTS:-speed memory} "
fi
mem_devices=${MEM_DEVICES:-1 2 4}
batch=128
default_mlp=784-256-128-10
wide=784-2048-2048-10
bench_begin bench-sharded
# One thread per process for the peer: torch.set_num_threads(1) in the anchor does not reach
# the OpenBLAS PyTorch calls through libblas.so.3 (bench-train.sh), these do. Strata's BLAS
# runs single-threaded inside each device's pinned worker either way.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

optim_args() { # sgd|adamw -> strata-train's options for the anchor's optimizer
        case $1 in
        sgd) echo "--optim sgd --lr 0.05 --momentum 0.9" ;;
        adamw) echo "--optim adamw --lr 0.001 --weight-decay 0.01" ;;
        *) echo "bench-sharded: OPTIMS: '$1' is not sgd or adamw" >&2; exit 2 ;;
        esac
}
optim_name() {
        case $1 in
        sgd) echo "SGD (lr 0.05, momentum 0.9)" ;; *) echo "AdamW (lr 1e-3, weight decay 0.01)" ;;
        esac
}

# The strategies strata-train accepts: a few steps on 2 devices; a refusal is noted, not fatal.
usable=()
for s in $strategies; do
        if err=$("$train" --synthetic 512 --epochs 1 --quiet --strategy "$s" --devices 2 2>&1)
        then
                usable+=("$s")
        else
                echo "bench-sharded: $s left out: $(grep -v warning <<< "$err" | head -1)"
        fi
done
sharded=()
for s in "${usable[@]}"; do [ "$s" = ddp ] || sharded+=("$s"); done

strata_sps() { # strategy devices model optim -> training samples / training time, all epochs
        "$train" --epochs "$epochs" --json --quiet --raw-pixels $quick_data --batch "$batch" --strategy "$1" \
                --devices "$2" --model "$3" $(optim_args "$4") | grep '"epoch":' |
                sed 's/.*"samples_per_s":\([0-9.]*\),"epoch_s":\([0-9.]*\).*/\1 \2/' |
                awk '{ n += $1 * $2; t += $2 } END { if (t > 0) printf "%.0f\n", n / t }'
}
torch_sps() { # model optim -> samples/s of PyTorch DDP + ZeroRedundancyOptimizer, 2 processes
        "$py" "$peers/torch_mlp_fmnist.py" 2 "$epochs" "$batch" "$2" zero "$1" |
                sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p'
}

declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
med() { median_of ${v[$1]}; }
jobs=()
for m in $models; do
        for o in $optims; do
                jobs+=("$m $o single 1")
                for s in "${usable[@]}"; do jobs+=("$m $o $s 2"); done
                [ "$peer" = 1 ] && jobs+=("$m $o torch 2")
        done
done
run_job() { # model optim strategy devices
        if [ "$3" = torch ]; then
                add "$1|$2|torch" "$(torch_sps "$1" "$2")"
        else
                add "$1|$2|$3" "$(strata_sps "$3" "$4" "$1" "$2")"
        fi
}

speed_rows() { # model optim: samples/s of each strategy beside single and ddp
        local m=$1 o=$2 x s1 dd note
        s1=$(med "$m|$o|single")
        dd=$( [ -n "${v[$m|$o|ddp]:-}" ] && med "$m|$o|ddp" || echo 0)
        printf '%-46s %12s %10s %10s\n' "$m, $(optim_name "$o")" samples/s "vs single" "vs ddp"
        printf '%-46s %12.0f %10.2f\n' "  single (1 device)" "$s1" 1
        for s in "${usable[@]}"; do
                x=$(med "$m|$o|$s")
                note=
                if [ "$s" = zero2 ] && [ "$m" = $default_mlp ]; then
                        note="  (target: zero2 >= 1.9x single)"
                elif [ "$s" = fsdp ] && [ "$m" = $wide ]; then
                        note="  (target: fsdp >= 0.9x ddp)"
                fi
                if [ "$dd" != 0 ]; then
                        printf '%-46s %12.0f %10.2f %10.2f%s\n' "  $s (2 devices)" "$x" \
                                "$(ratio "$x" "$s1")" "$(ratio "$x" "$dd")" "$note"
                else
                        printf '%-46s %12.0f %10.2f %10s%s\n' "  $s (2 devices)" "$x" \
                                "$(ratio "$x" "$s1")" - "$note"
                fi
                bench_compare "$s on 2 devices against single, $m, $o, batch $batch" samples/s \
                        "${v[$m|$o|$s]}" "${v[$m|$o|single]}"
        done
}

peer_rows() { # model optim: steps/s of each sharded strategy beside PyTorch's ZeRO
        local m=$1 o=$2 t x
        t=$(ratio "$(med "$m|$o|torch")" $batch)
        printf '%-46s %12s %16s\n' "$m, $(optim_name "$o")" steps/s "vs PyTorch ZeRO"
        for s in "${sharded[@]}"; do
                x=$(ratio "$(med "$m|$o|$s")" $batch)
                printf '%-46s %12.1f %16.2f  (target >= 4)\n' "  Strata $s (2 devices, 1 process)" \
                        "$x" "$(ratio "$x" "$t")"
        done
        printf '%-46s %12.1f\n' "  PyTorch ZeRO-1 (DDP, Gloo, 2 processes)" "$t"
}

speed() {
        if [ "$peer" = 1 ] && ! "$py" -c 'import torch' 2>/dev/null; then
                echo "bench-sharded: PyTorch missing (make bench-deps)"
                exit 1
        fi
        for r in $(seq "$reps"); do
                if [ $((r % 2)) = 1 ]; then
                        for j in "${jobs[@]}"; do run_job $j; done
                else
                        for ((i = ${#jobs[@]} - 1; i >= 0; i--)); do run_job ${jobs[i]}; done
                fi
                echo "bench-sharded: rep $r of $reps done" >&2
        done
        printf '%s\n' "speed: Fashion-MNIST (pixel / 255), global batch $batch, $epochs epoch(s);" \
                "  median of $reps alternated runs; training samples/s (the test passes" \
                "  excluded). One thread per device: Strata one pinned worker per device, its" \
                "  BLAS single-threaded; PyTorch torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1" \
                "  and OMP_NUM_THREADS=1 in each process"
        for m in $models; do
                for o in $optims; do speed_rows "$m" "$o"; done
        done
        if [ "$peer" != 1 ] || [ ${#sharded[@]} = 0 ]; then
                return 0
        fi
        echo
        printf '%s\n' "against PyTorch: torch.distributed.optim.ZeroRedundancyOptimizer over DDP" \
                "  (Gloo), 2 processes on CPU, one thread each (above); same model, batch," \
                "  optimizer and data; steps/s; the same reps as the speed figures"
        for m in $models; do
                for o in $optims; do peer_rows "$m" "$o"; done
        done
}

# --- memory: the plan per device beside the ZeRO formulas (AdamW: K = 8 bytes per parameter)
layer_max() { # widths -> parameters of the largest linear
        awk -F- '{ m = 0; for (i = 1; i < NF; i++) { p = $i * $(i + 1) + $(i + 1);
                if (p > m) m = p } print m }' <<< "$1"
}
formula() { # strategy params devices live-layer-params -> model-state bytes per device
        awk -v s="$1" -v p="$2" -v n="$3" -v l="$4" 'BEGIN {
                if (s == "ddp") b = 16 * p
                else if (s == "zero1") b = 8 * p + 8 * p / n
                else if (s == "zero2") b = 4 * p + 12 * p / n
                else if (s == "fsdp") b = 16 * p / n + 4 * l
                else b = -1
                printf "%.0f", b }'
}
mem_run() { # strategy devices model -> "params per_device region_planned region_used"
        local out
        out=$("$train" --synthetic 512 --epochs 1 --json --verbose --batch "$batch" \
                --strategy "$1" --devices "$2" --model "$3" $(optim_args adamw) 2>&1)
        printf '%s %s %s %s\n' \
                "$(sed -n 's/.* device(s), \([0-9]*\) parameters,.*/\1/p' <<< "$out")" \
                "$(sed -n 's/.*bytes planned (\([0-9]*\) per device).*/\1/p' <<< "$out")" \
                "$(sed -n 's/.*"arena_bytes_planned":\([0-9]*\).*/\1/p' <<< "$out")" \
                "$(sed -n 's/.*"arena_bytes_used":\([0-9]*\).*/\1/p' <<< "$out")"
}
memory_table() { # model
        local m=$1 lmax p pd rp ru f ddp_pd ddp_f z1=() z2=()
        local -A base_pd base_f
        lmax=$(layer_max "$m")
        echo "per-device memory, $m, AdamW (K = 8 bytes of state per parameter)," \
                "global batch $batch"
        printf '%-7s %2s %13s %13s %13s %13s %13s %14s %14s %5s\n' strategy N plan/device \
                formula plan-formula "saved (plan)" "saved (form.)" "region plan" \
                "region used" used
        for n in $mem_devices; do
                for s in "${usable[@]}"; do
                        read -r p pd rp ru <<< "$(mem_run "$s" "$n" "$m")"
                        if [ -z "$pd" ]; then
                                echo "bench-sharded: $s on $n devices: no plan line" >&2
                                continue
                        fi
                        f=$(formula "$s" "$p" "$n" "$lmax")
                        case $s in
                        ddp) base_pd[$n]=$pd; base_f[$n]=$f ;;
                        zero1) z1+=("$pd") ;; zero2) z2+=("$pd") ;;
                        esac
                        ddp_pd=${base_pd[$n]:-$pd}; ddp_f=${base_f[$n]:-$f}
                        printf '%-7s %2d %13d %13d %13d %13d %13d %14d %14d %5s\n' "$s" "$n" \
                                "$pd" "$f" $((pd - f)) $((ddp_pd - pd)) $((ddp_f - f)) "$rp" \
                                "$ru" "$([ "$rp" = "$ru" ] && echo "=" || echo "DIFF")"
                done
        done
        echo "  Ψ = $p parameters, 4Ψ = $((4 * p)) bytes; largest layer $lmax parameters"
        if [ -n "${z1[*]:-}" ] && [ "${z1[*]}" = "${z2[*]:-}" ]; then
                echo "  zero2 plans as zero1 at every N: its gradient buffer is still full" \
                        "(decision 0026)"
        fi
}
memory() {
        printf '%s\n' "formula: model states per device, bytes (decision 0026: f32 parameters," \
                "  gradients and optimizer state): ddp 4Ψ+4Ψ+8Ψ; zero1 4Ψ+4Ψ+8Ψ/N;" \
                "  zero2 4Ψ+(4Ψ+8Ψ)/N; fsdp (4Ψ+4Ψ+8Ψ)/N + the live layer (4 bytes x the" \
                "  largest layer's parameters)" \
                "plan/device: strata_plan's per_device (strata-train --verbose), which also holds" \
                "  the activations of batch/N rows and the staging: plan-formula is that part" \
                "  (and the shards' padding); saved: ddp's bytes at the same N less these" \
                "region plan, region used: the whole region (strata_memory: planned, high-water" \
                "  mark); that each device uses exactly its plan is checked by" \
                "  tests/strategy/zero_plan.c"
        for m in $models; do memory_table "$m"; done
}

echo "bench-sharded: strategies ${usable[*]}; build $(git -C "$here" rev-parse --short HEAD)"
if [[ $parts == *" speed "* ]]; then
        speed
fi
if [[ $parts == *" memory "* ]]; then
        echo
        memory
fi
bench_end
