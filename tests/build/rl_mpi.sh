#!/bin/sh
# RL agents across processes (decision 0079): examples/rl/cartpole.c with 2 environments under
# TD3, one process on 2 devices (ddp), then `mpirun -np 2` (mpi, one device and one environment
# a process, each process's replay rows drawing its own transitions): the mpi policy is bitwise
# ddp's, and two mpi runs are bitwise equal; the same for SAC (its temperature's term of every
# row gathered across the processes, decision 0082) and PPO (its finished rollout and each
# minibatch's outputs gathered, decision 0094); zero1 and zero2 across the processes give ddp's
# policy too (decision 0116). Under mpi (and zero2 across processes) fewer environments than
# processes are refused naming the value. Skipped without mpirun or libstrata-mpi.so.
#   rl_mpi.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/rl-mpi
rm -rf "$dir"
mkdir -p "$dir"
if ! command -v mpirun >/dev/null || [ ! -r "$build/libstrata-mpi.so" ]; then
        echo "rl_mpi: mpirun or libstrata-mpi.so missing: not run"
        exit 0
fi
cc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$src/include" -o "$dir/cartpole" \
        "$src/examples/rl/cartpole.c" -L"$build" -lstrata -lm -Wl,-rpath,"$build"
mpi() { timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$@"; }
"$dir/cartpole" td3 --steps 2000 --envs 2 --devices 2 --export "$dir/ddp.safetensors" |
        grep '^{'
for k in 1 2; do
        mpi "$dir/cartpole" td3 --steps 2000 --envs 2 --mpi --export "$dir/mpi-$k.safetensors" |
                grep '^{' > "$dir/mpi-$k.json"
done
cat "$dir/mpi-1.json"
h1=$(sed 's/.*"returns_hash": "\([0-9a-f]*\)".*/\1/' "$dir/mpi-1.json")
h2=$(sed 's/.*"returns_hash": "\([0-9a-f]*\)".*/\1/' "$dir/mpi-2.json")
[ -n "$h1" ] && [ "$h1" = "$h2" ] && cmp -s "$dir/mpi-1.safetensors" "$dir/mpi-2.safetensors" ||
        { echo "td3: two runs of 2 mpi processes differ"; exit 1; }
echo "td3: two runs of 2 mpi processes bitwise equal (returns and policy)"
cmp -s "$dir/ddp.safetensors" "$dir/mpi-1.safetensors" ||
        { echo "td3: the policy of 2 mpi processes differs from ddp's on 2 devices"; exit 1; }
echo "td3: the policy of 2 mpi processes is bitwise ddp's on 2 devices"
# zero1 and zero2 across the processes (decision 0116): each process steps AdamW over its shard
# of every network; the policy is still ddp's
for z in zero1 zero2; do
        mpi "$dir/cartpole" td3 --steps 2000 --envs 2 --mpi --$z \
                --export "$dir/$z.safetensors" | grep '^{'
        cmp -s "$dir/ddp.safetensors" "$dir/$z.safetensors" ||
                { echo "td3: the policy of 2 processes under $z differs from ddp's"; exit 1; }
        echo "td3: the policy of 2 processes under $z is bitwise ddp's on 2 devices"
done
"$dir/cartpole" sac --steps 1000 --envs 2 --devices 2 --export "$dir/sac-ddp.safetensors" |
        grep '^{'
for k in 1 2; do
        mpi "$dir/cartpole" sac --steps 1000 --envs 2 --mpi \
                --export "$dir/sac-mpi-$k.safetensors" | grep '^{'
done
cmp -s "$dir/sac-mpi-1.safetensors" "$dir/sac-mpi-2.safetensors" ||
        { echo "sac: two runs of 2 mpi processes differ"; exit 1; }
cmp -s "$dir/sac-ddp.safetensors" "$dir/sac-mpi-1.safetensors" ||
        { echo "sac: the policy of 2 mpi processes differs from ddp's on 2 devices"; exit 1; }
echo "sac: the policy of 2 mpi processes is bitwise ddp's on 2 devices, twice"
mpi "$dir/cartpole" sac --steps 1000 --envs 2 --mpi --zero2 \
        --export "$dir/sac-zero2.safetensors" | grep '^{'
cmp -s "$dir/sac-ddp.safetensors" "$dir/sac-zero2.safetensors" ||
        { echo "sac: the policy of 2 processes under zero2 differs from ddp's"; exit 1; }
echo "sac: the policy of 2 processes under zero2 is bitwise ddp's on 2 devices"
"$dir/cartpole" ppo --steps 1100 --envs 2 --devices 2 --export "$dir/ppo-ddp.safetensors" |
        grep '^{'
for k in 1 2; do
        mpi "$dir/cartpole" ppo --steps 1100 --envs 2 --mpi \
                --export "$dir/ppo-mpi-$k.safetensors" | grep '^{'
done
cmp -s "$dir/ppo-mpi-1.safetensors" "$dir/ppo-mpi-2.safetensors" ||
        { echo "ppo: two runs of 2 mpi processes differ"; exit 1; }
cmp -s "$dir/ppo-ddp.safetensors" "$dir/ppo-mpi-1.safetensors" ||
        { echo "ppo: the policy of 2 mpi processes differs from ddp's on 2 devices"; exit 1; }
echo "ppo: the policy of 2 mpi processes is bitwise ddp's on 2 devices, twice"
mpi "$dir/cartpole" ppo --steps 1100 --envs 2 --mpi --zero2 \
        --export "$dir/ppo-zero2.safetensors" | grep '^{'
cmp -s "$dir/ppo-ddp.safetensors" "$dir/ppo-zero2.safetensors" ||
        { echo "ppo: the policy of 2 processes under zero2 differs from ddp's"; exit 1; }
echo "ppo: the policy of 2 processes under zero2 is bitwise ddp's on 2 devices"
refused() { # $1: what the message must say; then the command
        want=$1
        shift
        if mpi "$@" > "$dir/refused.out" 2>&1; then
                echo "ran, not refused: $*"; exit 1
        fi
        grep -q "$want" "$dir/refused.out" || { cat "$dir/refused.out"; exit 1; }
        echo "refused: $want"
}
refused "n_envs 1 under mpi of 2 devices: each device needs an environment" "$dir/cartpole" ppo --steps 100 --mpi
refused "n_envs 1 and batch 64 under mpi of 2 devices" "$dir/cartpole" td3 --steps 100 \
        --envs 1 --mpi
refused "n_envs 1 under mpi of 2 devices: each device needs an environment" "$dir/cartpole" \
        ppo --steps 100 --mpi --zero2
