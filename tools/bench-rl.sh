#!/usr/bin/env bash
# make bench-rl: reinforcement learning in situ (issue 56) against its PyTorch peer on
# TorchFort's cart-pole with a continuous force (examples/rl/cartpole.c against
# tools/peers/torch_rl_cartpole.py: the same environment, algorithm and hyper-parameters, one
# thread each), TD3, SAC and PPO, each run until solved (mean return of the last 100 episodes
# >= 475) or STEPS environment steps, runs alternated REPS times, medians:
#  - episodes and environment steps to solve (-1: not within STEPS)
#  - agent throughput: (environment steps + updates) per second, and Strata / PyTorch
#    (the issue's target: >= 5 on one thread)
#  - TD3 across processes (decision 0079): 2 environments, one process of one device against
#    `mpirun -np 2` (one device and one environment each) under mpi (ddp across the processes)
#    and under zero2 (each process steps AdamW over its shard of every network, decision
#    0116), the three alternated, at the replay batch 64 (32 rows a process) and 128 (64 rows a
#    process, TorchFort's distributed mode): the same rounds and updates; their (rounds +
#    updates) per second and the ratios (the issue's target: >= 1.6). Needs mpirun and
#    libstrata-mpi.so.
# The CPU, kernel set and load average before and after, and each ratio's medians and spread,
# as every bench prints them (tools/bench-lib.sh).
# Usage: tools/bench-rl.sh [REPS [STEPS]] ; env BUILD (default build), PEERS (tools/peers).
set -euo pipefail
reps=${1:-3}
steps=${2:-150000}

. "$(dirname "$0")/bench-lib.sh" # here, build, peers, py; median, ratio
dir=$build/bench-rl
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cc -std=c11 -O3 -D_GNU_SOURCE -I"$here/include" -o "$dir/cartpole" \
        "$here/examples/rl/cartpole.c" -L"$build" -lstrata -lm -Wl,-rpath,"$build"
bench_begin bench-rl

mpi= msteps=$((steps < 20000 ? steps : 20000))
command -v mpirun > /dev/null && [ -r "$build/libstrata-mpi.so" ] && mpi=1
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\).*/\1/p"; }
declare -A v
add() { v[$1]="${v[$1]:-} $2"; }
med() { median_of ${v[$1]}; }
for _ in $(seq "$reps"); do
        for algo in td3 sac ppo; do
                for who in s t; do
                        if [ $who = s ]; then
                                j=$("$dir/cartpole" $algo --steps "$steps" --solve | grep '^{')
                        else
                                j=$("$py" "$peers/torch_rl_cartpole.py" $algo --steps "$steps" \
                                        --solve | grep '^{')
                        fi
                        add $who$algo-ep "$(field solved_at <<< "$j")"
                        add $who$algo-st "$(field steps <<< "$j")"
                        add $who$algo-tp "$(field throughput <<< "$j")"
                done
        done
        [ -n "$mpi" ] || continue
        for b in 64 128; do
                j=$("$dir/cartpole" td3 --steps "$msteps" --envs 2 --batch $b | grep '^{')
                add one$b-tp "$(field throughput <<< "$j")"
                for s in mpi zero2; do
                        z=; [ $s = zero2 ] && z=--zero2
                        j=$(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
                                "$dir/cartpole" td3 --steps "$msteps" --envs 2 --batch $b \
                                --mpi $z | grep '^{')
                        add $s$b-tp "$(field throughput <<< "$j")"
                done
        done
done

echo "cart-pole (continuous force), one thread, $reps runs alternated, medians; STEPS $steps"
printf '%-44s %12s %12s %8s\n' "" strata pytorch ratio
for algo in td3 sac ppo; do
        printf '%-44s %12s %12s\n' "$algo: episodes to solve (-1: not solved)" \
                "$(med s$algo-ep)" "$(med t$algo-ep)"
        printf '%-44s %12s %12s\n' "$algo: environment steps run (to solve)" \
                "$(med s$algo-st)" "$(med t$algo-st)"
        awk -v a="$(med s$algo-tp)" -v b="$(med t$algo-tp)" -v w="$algo: steps + updates per second" \
                'BEGIN { printf "%-44s %12.0f %12.0f %8.2f\n", w, a, b, a / b }'
done
if [ -n "$mpi" ]; then
        printf '%-44s %12s %12s %8s\n' "td3, 2 envs, $msteps rounds: steps + updates/s" \
                "1 process" "mpirun -np 2" ratio
        for b in 64 128; do
                for s in mpi zero2; do
                        awk -v a="$(med one$b-tp)" -v b="$(med $s$b-tp)" \
                                -v w="  batch $b ($((b / 2)) a process): $s" \
                                'BEGIN { printf "%-44s %12.0f %12.0f %8.2f\n", w, a, b, b / a }'
                done
        done
else
        echo "td3 across processes: mpirun or libstrata-mpi.so missing: not run"
fi
for algo in td3 sac ppo; do
        bench_compare "cart-pole $algo, one thread, against PyTorch" "(steps + updates)/s" \
                "${v[s$algo-tp]}" "${v[t$algo-tp]}"
done
for b in 64 128; do
        [ -n "$mpi" ] || break
        for s in mpi zero2; do
                bench_compare "td3 on 2 processes ($s, batch $b), against one process" \
                        "(steps + updates)/s" "${v[$s$b-tp]}" "${v[one$b-tp]}"
        done
done
bench_end
