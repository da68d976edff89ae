#!/bin/sh
# Reinforcement learning in situ (decision 0077): examples/rl/cartpole.c, TorchFort's cart-pole
# with a continuous force, built against the library as a user links it, learns under TD3
# (15000 steps), SAC (10000) and PPO (20000): the mean return of the last 10 episodes is more
# than twice the first 10's. A second run of each prints the same returns' hash and exports
# bitwise the same policy; a run SIGKILLed after a save and resumed ends as the run that never
# stopped. The returns' CSV (--returns) has one row per episode and `strata-plot --returns` draws
# it as a PNG (when gnuplot is installed).
#   rl_cartpole.sh SRC BUILD
set -eu
src=$1 build=$2
dir=$build/rl-cartpole
rm -rf "$dir"
mkdir -p "$dir"
cc -std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$src/include" -o "$dir/cartpole" \
        "$src/examples/rl/cartpole.c" -L"$build" -lstrata -lm -Wl,-rpath,"$build"
for algo in td3 sac ppo; do
        steps=15000
        [ "$algo" = sac ] && steps=10000
        [ "$algo" = ppo ] && steps=20000
        for k in 1 2; do
                "$dir/cartpole" $algo --steps $steps --export "$dir/$algo-$k.safetensors" \
                        > "$dir/$algo-$k.out"
                grep '^{' "$dir/$algo-$k.out" > "$dir/$algo-$k.json"
        done
        cat "$dir/$algo-1.json"
        sed 's/.*"first10": \([0-9.]*\), "last10": \([0-9.]*\).*/\1 \2/' "$dir/$algo-1.json" |
                awk -v a=$algo '{ if (!($2 > 2 * $1)) { print a ": returns did not rise: " $0;
                                                         exit 1 } }'
        h1=$(sed 's/.*"returns_hash": "\([0-9a-f]*\)".*/\1/' "$dir/$algo-1.json")
        h2=$(sed 's/.*"returns_hash": "\([0-9a-f]*\)".*/\1/' "$dir/$algo-2.json")
        [ "$h1" = "$h2" ] || { echo "$algo: two runs returned different returns"; exit 1; }
        cmp -s "$dir/$algo-1.safetensors" "$dir/$algo-2.safetensors" ||
                { echo "$algo: two runs exported different policies"; exit 1; }
        echo "$algo: learned; two runs bitwise equal (returns and policy)"
done
# SIGKILL and resume: a run saving every 2000 steps, killed at step 4500, resumed from its
# last save, ends as the run that never stopped (returns and policy).
for algo in td3 sac ppo; do
        "$dir/cartpole" $algo --steps 6000 --export "$dir/$algo-full.safetensors" |
                grep '^{' > "$dir/$algo-full.json"
        if "$dir/cartpole" $algo --steps 6000 --save "$dir/$algo-ck" --save-every 2000 \
                --kill-at 4500 > /dev/null 2>&1; then
                echo "$algo: the run meant to be killed at step 4500 ended"; exit 1
        fi
        "$dir/cartpole" $algo --steps 6000 --resume "$dir/$algo-ck" \
                --export "$dir/$algo-resumed.safetensors" | grep '^{' > "$dir/$algo-resumed.json"
        h1=$(sed 's/.*"returns_hash": "\([0-9a-f]*\)".*/\1/' "$dir/$algo-full.json")
        h2=$(sed 's/.*"returns_hash": "\([0-9a-f]*\)".*/\1/' "$dir/$algo-resumed.json")
        [ -n "$h1" ] && [ "$h1" = "$h2" ] ||
                { echo "$algo: the resumed run's returns differ ($h1, $h2)"; exit 1; }
        cmp -s "$dir/$algo-full.safetensors" "$dir/$algo-resumed.safetensors" ||
                { echo "$algo: the resumed run's policy differs"; exit 1; }
        echo "$algo: killed at step 4500, resumed from step 4000: bitwise the run never stopped"
done
# The episode returns as CSV, and their curve.
"$dir/cartpole" ppo --steps 3000 --returns "$dir/returns.csv" | grep '^{' > "$dir/returns.json"
episodes=$(sed 's/.*"episodes": \([0-9]*\).*/\1/' "$dir/returns.json")
[ "$(head -n 1 "$dir/returns.csv")" = episode,return,mean100 ] &&
        [ "$(wc -l < "$dir/returns.csv")" -eq $((episodes + 1)) ] ||
        { echo "returns.csv: not a header and $episodes episodes' rows"; exit 1; }
if command -v gnuplot > /dev/null 2>&1; then
        "$src/tools/strata-plot" --returns "$dir/returns.csv" "$dir/returns.png"
        [ "$(head -c 4 "$dir/returns.png" | od -An -c | tr -d ' ')" = "211PNG" ] ||
                { echo "strata-plot --returns wrote no PNG"; exit 1; }
        echo "the returns' curve: $dir/returns.png"
else
        echo "gnuplot absent: strata-plot --returns not run"
fi
