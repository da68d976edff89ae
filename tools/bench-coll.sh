#!/usr/bin/env bash
# Strata's all_reduce (2 devices = 2 pinned threads) and Open MPI's MPI_Allreduce (2 ranks),
# run back to back, ROUNDS times alternated; prints per size the median busbw of each and the
# ratio Strata/Open MPI, plus Strata's fraction of the memory-bandwidth bound and its time in
# one-way cache-line handoffs between the two cores (the latency floor of small messages).
# MIN_BYTES / MAX_BYTES (default 4096 / 256 MiB) choose the sizes for both programs.
# The handoff names the VM's state, as seen here: ~0.33 us slow, ~0.06 us fast, ~0.025 us when
# the two vCPUs are one physical core's hyperthreads.
# Rows (tools/bench-lib.sh; written when quiet): busbw at 4 KiB, 1 MiB and 64 MiB, each size's
# ROUNDS (default 5) alternated pairs, against Open MPI's.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build; bench_*
rounds=${ROUNDS:-5}
sizes=(--min-bytes "${MIN_BYTES:-4096}" --max-bytes "${MAX_BYTES:-268435456}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -x "$build/bin/strata-bench-mpi" ] || { echo "bench-coll: mpicc missing (make deps)"; exit 1; }
bench_begin bench-coll
for r in $(seq "$rounds"); do
        "$build/bin/strata-bench-coll" --json "${sizes[@]}" > "$tmp/strata.$r"
        mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core \
                "$build/bin/strata-bench-mpi" --json "${sizes[@]}" > "$tmp/mpi.$r"
done
awk -v rounds="$rounds" '
function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
function val(line, key,   m) { match(line, "\"" key "\":[0-9.e+-]+"); return substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0 }
FILENAME ~ /strata/ && /dispatch/ { rt = val($0, "dispatch_round_trip_us_median"); n = ++nh; h[n] = val($0, "handoff_us_median") }
FILENAME ~ /strata/ && /"op"/ { b = val($0, "bytes"); n = ++ns[b]; s[b, n] = val($0, "busbw_GBs"); t[b, n] = val($0, "time_us"); f[b, n] = val($0, "of_bound"); bw = val($0, "membw_GBs"); sizes[b] = 1 }
FILENAME ~ /mpi/ { b = val($0, "bytes"); n = ++nm[b]; m[b, n] = val($0, "busbw_GBs"); mt[b, n] = val($0, "time_us") }
END {
        H = med(h, nh)
        printf "all_reduce f32, 2 devices; median of %d alternated rounds; memory bandwidth %.1f GB/s, dispatch round trip %.2f us (last round), cache-line handoff %.3f us (median; %s)\n", rounds, bw, rt, H, (H < 0.04 ? "shared physical core" : (H < 0.15 ? "fast state" : "slow state"))
        printf "%12s %12s %12s %12s %12s %8s %9s %9s\n", "bytes", "strata_us", "strata_bus", "mpi_us", "mpi_bus", "ratio", "of_bound", "handoffs"
        for (b in sizes) {
                for (i = 1; i <= ns[b]; i++) { x[i] = s[b, i]; y[i] = t[b, i]; z[i] = f[b, i] }
                for (i = 1; i <= nm[b]; i++) { u[i] = m[b, i]; v[i] = mt[b, i] }
                S = med(x, ns[b]); T = med(y, ns[b]); F = med(z, ns[b]); M = med(u, nm[b]); MT = med(v, nm[b])
                printf "%12d %12.2f %12.2f %12.2f %12.2f %8.1f %9.2f %9.1f\n", b, T, S, MT, M, S / M, F, (H > 0 ? T / H : 0)
        }
}' "$tmp"/strata.* "$tmp"/mpi.* | { IFS= read -r a; IFS= read -r b; echo "$a"; echo "$b"; sort -n; }
busbw() { # file-glob bytes -> each round's busbw at that size
        cat $1 | grep "\"op\".*\"bytes\":$2," | sed 's/.*"busbw_GBs":\([0-9.e+-]*\).*/\1/' || true
}
for b in "4096 4 KiB" "1048576 1 MiB" "67108864 64 MiB"; do
        set -- $b
        a=$(busbw "$tmp/strata.*" $1); m=$(busbw "$tmp/mpi.*" $1)
        [ -n "$a" ] || continue
        bench_compare "all_reduce $2 $3, 2 devices, busbw against Open MPI's (2 ranks)" \
                GB/s "$(echo $a)" "$(echo $m)"
done
bench_end
