#!/usr/bin/env bash
# Checkpoint save and load of the default MLP with its optimizer state: Strata
# (strata-bench-ckpt: atomic, fsynced) against torch.save/torch.load of the same state dicts
# (with and without an fsync) and against the floor, write() + fsync of the same number of
# bytes to a new file (measured by strata-bench-ckpt). ROUNDS alternated rounds, medians. Usage: tools/bench-ckpt.sh
# [ROUNDS] ; env BUILD (default build), DIR (default /tmp).
# Rows (tools/bench-lib.sh, written when quiet): save against torch.save + fsync, load against
# torch.load (ms: below 1 is faster). BENCH_QUICK=1: 3 saves and loads per round.
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh" # here, build, py; median, ratio; bench_*
rounds=${1:-5}
dir=${DIR:-/tmp}
n=$([ "$quick" = 1 ] && echo 3 || echo 21)
bench_begin bench-ckpt
val() { sed "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/"; }
s=() l=() ts=() tf=() tl=() dd_ms=() af=()
for _ in $(seq "$rounds"); do
        o=$("$build/bin/strata-bench-ckpt" --dir "$dir" --reps "$n" --json)
        s+=("$(echo "$o" | val save_ms)"); l+=("$(echo "$o" | val load_ms)")
        bytes=$(echo "$o" | val bytes)
        t=$("$py" "$here/tools/bench_ckpt_torch.py" "$dir" "$n")
        ts+=("$(echo "$t" | val save_ms)"); tf+=("$(echo "$t" | val save_fsync_ms)")
        tl+=("$(echo "$t" | val load_ms)"); tbytes=$(echo "$t" | val bytes)
        dd_ms+=("$(echo "$o" | val floor_ms)"); af+=("$(echo "$o" | val atomic_floor_ms)")
done
m() { printf '%s\n' "$@" | median; }
S=$(m "${s[@]}"); L=$(m "${l[@]}"); TS=$(m "${ts[@]}"); TF=$(m "${tf[@]}"); TL=$(m "${tl[@]}")
D=$(m "${dd_ms[@]}"); A=$(m "${af[@]}")
printf 'checkpoint of 784-256-128-10 + SGD momentum, %d rounds, medians (ms); %s bytes (torch %s)\n' \
        "$rounds" "$bytes" "$tbytes"
printf '%-34s %10s %10s\n' "" save load
printf '%-34s %10.3f %10.3f\n' "strata (atomic, fsynced)" "$S" "$L"
printf '%-34s %10.3f %10.3f\n' "torch.save / torch.load" "$TS" "$TL"
printf '%-34s %10.3f %10s\n' "torch.save + fsync" "$TF" ""
printf '%-34s %10.3f %10s\n' "floor: write + fsync, same bytes" "$D" ""
printf '%-34s %10.3f %10s\n' "  + rename + directory fsync" "$A" ""
printf 'strata save / floor %.2f (/ atomic floor %.2f), strata save / torch.save+fsync %.2f, load / torch.load %.2f\n' \
        "$(echo "$S / $D" | bc -l)" "$(echo "$S / $A" | bc -l)" "$(echo "$S / $TF" | bc -l)" "$(echo "$L / $TL" | bc -l)"
bench_compare "checkpoint save of 784-256-128-10 + SGD momentum (atomic, fsynced) against torch.save + fsync" \
        "ms (lower is faster)" "${s[*]}" "${tf[*]}"
bench_compare "checkpoint load of 784-256-128-10 + SGD momentum against torch.load" \
        "ms (lower is faster)" "${l[*]}" "${tl[*]}"
bench_end
