#!/usr/bin/env bash
# make bench-all (issue 59, decision 0073): every bench behind docs/benchmarks.md's summary,
# each once, the short ones first (the collectives, the kernel sets, then training: the MLPs,
# the CNN, invariant mode; a GPU's where nvidia-smi lists one), each with its progress line
# and its own load average before and after (tools/bench-lib.sh), then the summary section
# rewritten from the rows measured quietly (tools/bench_summary.py: a temporary file, then a
# rename); the others keep their previous text, marked not re-measured. A bench that fails is
# named and the others still run; the exit status is then 1.
# Usage: tools/bench-all.sh; env BUILD (default build), REPS (pairs per figure, default 5),
# BENCH_ONLY (the benches, default "coll kernels train conv invariant", plus gpu), BENCH_DOC
# (the file rewritten, default docs/benchmarks.md), BENCH_QUICK=1 (tiny sizes: a check of the
# machinery; BENCH_DOC then defaults to a copy, $BENCH_OUT/benchmarks-quick.md),
# BENCH_LOADAVG (a forced load average), BENCH_MAX_LOAD (1.5), BENCH_OUT (the logs and the rows,
# bench-all.md and bench-all.refused; default $BUILD/bench).
set -uo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, quick; bench_cpu, bench_kernels, bench_loadavg
reps=${REPS:-5}
benches=${BENCH_ONLY:-coll kernels train conv invariant}
if [ -z "${BENCH_ONLY:-}" ] && nvidia-smi -L >/dev/null 2>&1; then
        benches="$benches gpu"
fi
out=${BENCH_OUT:-$build/bench}
mkdir -p "$out"
doc=${BENCH_DOC:-}
if [ -z "$doc" ]; then
        doc=$here/docs/benchmarks.md
        if [ "$quick" = 1 ]; then
                doc=$out/benchmarks-quick.md
                cp "$here/docs/benchmarks.md" "$doc"
        fi
fi
export BENCH_RESULTS=$out/bench-all.md
: > "$BENCH_RESULTS"
: > "${BENCH_RESULTS%.md}.refused"

run() { # bench -> runs tools/bench-BENCH.sh with its pairs (and, quick, its tiny sizes)
        case $1 in
        coll)
                if [ "$quick" = 1 ]; then
                        ROUNDS=$reps MIN_BYTES=4096 MAX_BYTES=4096 "$here/tools/bench-coll.sh"
                else
                        ROUNDS=$reps "$here/tools/bench-coll.sh"
                fi ;;
        *) "$here/tools/bench-$1.sh" "$reps" ;;
        esac
}

n=$(wc -w <<< "$benches")
i=0 failed=""
echo "bench-all: $n benches ($benches), $reps pairs each; load average now $(bench_loadavg);" \
     "rows to $BENCH_RESULTS; summary of $doc"
for b in $benches; do
        i=$((i + 1))
        echo "bench-all: [$i/$n] bench-$b, started $(date -u +%T) UTC (log: $out/bench-$b.log)"
        t0=$(date +%s)
        run "$b" 2>&1 | tee "$out/bench-$b.log"
        rc=${PIPESTATUS[0]}
        echo "bench-all: [$i/$n] bench-$b: exit $rc after $(($(date +%s) - t0)) s"
        [ "$rc" = 0 ] || failed="$failed $b"
done
machine="$(bench_cpu), kernels $(bench_kernels), at $(git -C "$here" rev-parse --short HEAD)"
machine="$machine, $(date -u +%F)$([ "$quick" = 1 ] && echo ', QUICK sizes (not a measurement)')"
"$py" "$here/tools/bench_summary.py" "$doc" "$BENCH_RESULTS" "${BENCH_RESULTS%.md}.refused" \
        "$machine" || exit 1
echo "bench-all: $(grep -c '^|' "$BENCH_RESULTS") row(s) measured quietly," \
     "$(grep -c . "${BENCH_RESULTS%.md}.refused") refused; the summary of $doc rewritten"
if [ -n "$failed" ]; then
        echo "bench-all: failed:$failed" >&2
        exit 1
fi
