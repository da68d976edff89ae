#!/usr/bin/env bash
# What tracing costs: strata-train one Fashion-MNIST epoch (batch 128) without and with
# --trace, single and ddp on 2 devices, against PyTorch's profiler on the same model (one
# thread, tools/bench_trace_torch.py), alternated REPS times; medians of samples/s (Strata:
# the run's end-to-end figure, evaluation and trace writing included) and the overhead.
# Usage: tools/bench-trace.sh [REPS] ; env BUILD (default build).
# Rows (tools/bench-lib.sh, written when quiet): each arm with tracing on against off.
# BENCH_QUICK=1: Strata on 2048 synthetic rows (PyTorch's epoch unchanged).
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, py; median, ratio; bench_*
reps=${1:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_begin bench-trace

strata() { # strategy devices [--trace FILE] -> end-to-end samples/s of one epoch
        local s=$1 d=$2
        shift 2
        "$build/bin/strata-train" --epochs 1 --json $quick_data --strategy "$s" --devices "$d" "$@" |
                grep '"final"' | sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/'
}
torch() { OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" "$here/tools/bench_trace_torch.py" "$@" |
                sed 's/.*samples_per_s=\([0-9.]*\).*/\1/'; }

for r in $(seq "$reps"); do
        echo "rep $r/$reps" >&2
        for order in off on; do
                [ $((r % 2)) = 0 ] && order=$([ $order = off ] && echo on || echo off)
                if [ $order = off ]; then
                        strata single 1 >> "$tmp/single.off"
                        strata ddp 2 >> "$tmp/ddp.off"
                        torch off >> "$tmp/torch.off"
                else
                        strata single 1 --trace "$tmp/s.json" >> "$tmp/single.on"
                        strata ddp 2 --trace "$tmp/d.json" >> "$tmp/ddp.on"
                        torch on "$tmp/t.json" >> "$tmp/torch.on"
                fi
        done
done
printf '%-28s %12s %12s %9s\n' "samples/s (median of $reps)" "off" "on" "overhead"
for k in single ddp torch; do
        off=$(median < "$tmp/$k.off")
        on=$(median < "$tmp/$k.on")
        label=$k
        [ $k = single ] && label="strata single --trace"
        [ $k = ddp ] && label="strata ddp x2 --trace"
        [ $k = torch ] && label="pytorch torch.profiler"
        printf '%-28s %12.0f %12.0f %8.1f%%\n' "$label" "$off" "$on" \
                "$(echo "(1 - $on / $off) * 100" | bc -l)"
        bench_compare "tracing, $label: on against off, one epoch end to end" samples/s \
                "$(echo $(cat "$tmp/$k.on"))" "$(echo $(cat "$tmp/$k.off"))"
done
printf 'trace sizes: strata single %s, ddp %s; pytorch %s (bytes)\n' \
        "$(stat -c %s "$tmp/s.json")" "$(stat -c %s "$tmp/d.json")" "$(stat -c %s "$tmp/t.json")"
bench_end
