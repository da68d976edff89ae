#!/usr/bin/env bash
# Training beside other processes' busy threads (issue 58, item 17): one epoch of ddp with
# synchronised BatchNorm (--batch 127 --bn --sync-bn, Fashion-MNIST) on 2 and 3 devices, quiet
# and with one busy loop per core of the machine beside it (as a simulation's own threads
# would be), alternated REPS times; prints the medians and the ratio loaded / quiet. With OLD
# (a build directory of another revision, e.g. one tools/bench-ab.sh made) the same for it.
# Usage: tools/bench-contention.sh [REPS]; env BUILD, OLD, EXTRA (more strata-train options,
# e.g. "--synthetic 16384" for a shorter epoch).
# Rows (tools/bench-lib.sh, written when quiet): loaded against quiet, each build and devices;
# the busy loops are the bench's own processes, not other work. BENCH_QUICK=1: 2048 synthetic
# rows.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh"
reps=${1:-5}
cores=$(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc)
args="--epochs 1 --batch 127 --bn --sync-bn --strategy ddp --quiet $quick_data ${EXTRA:-}"
bench_begin bench-contention
busy_pids=()
busy_start() { for _ in $(seq "$cores"); do (while :; do :; done) & busy_pids+=($!); done; }
busy_stop() { kill "${busy_pids[@]}" 2>/dev/null || true; wait "${busy_pids[@]}" 2>/dev/null || true; busy_pids=(); }
trap busy_stop EXIT
epoch_s() { # build devices -> wall seconds of the run
        local t0 t1
        t0=$(date +%s.%N)
        "$1/bin/strata-train" $args --devices "$2" >/dev/null
        t1=$(date +%s.%N)
        echo "$t1 - $t0" | bc -l
}
builds=("$build")
[ -n "${OLD:-}" ] && builds+=("$OLD")
for b in "${builds[@]}"; do
        for d in 2 3; do
                q=(); l=()
                for _ in $(seq "$reps"); do
                        q+=("$(epoch_s "$b" "$d")")
                        busy_start
                        l+=("$(epoch_s "$b" "$d")")
                        busy_stop
                done
                mq=$(median_of "${q[@]}"); ml=$(median_of "${l[@]}")
                printf '%s: %d devices: quiet %.3f s, beside %d busy loops %.3f s (median of %d; spread %.3f-%.3f s): %.2fx\n' \
                        "$b" "$d" "$mq" "$cores" "$ml" "$reps" \
                        "$(printf '%s\n' "${l[@]}" | sort -g | head -1)" \
                        "$(printf '%s\n' "${l[@]}" | sort -g | tail -1)" "$(ratio "$ml" "$mq")"
                bench_compare "sync-bn epoch, ddp $d devices$([ "$b" = "$build" ] || echo " (OLD build)"), beside $cores busy loops against quiet" \
                        "s (lower is faster)" "${l[*]}" "${q[*]}"
        done
done
bench_end
