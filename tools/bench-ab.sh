#!/usr/bin/env bash
# A/B of two revisions of Strata on this machine, interleaved: builds revision OLD (default
# HEAD~1) in a temporary worktree and the current tree in BUILD, then REPS times, alternating
# which goes first, measures training samples/s of one Fashion-MNIST epoch (single; ddp and dp
# on 2 devices; spawn with 2 processes; mpi with 2 processes of 1 device where mpirun exists;
# batch 128) and the median time of a 2-device all_reduce at 4 KiB, 1 MiB and 64 MiB. Prints the median of each figure for both and the ratio new/old (time ratios: below
# 1 is faster). Usage: tools/bench-ab.sh [OLD [REPS]]; env BUILD (default build), FIGS (the
# figures to measure, default "single ddp2 dp2 spawn2 mpi2 ar"; also zero2_2 and fsdp2).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
old_rev=${1:-HEAD~1}
reps=${2:-5}
new=${BUILD:-$here/build}
tmp=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

old_hash=$(git -C "$here" rev-parse --short "$old_rev")
echo "bench-ab: building old = $old_hash in a worktree, new = working tree ($(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet || echo '+changes'))" >&2
git -C "$here" worktree add --detach "$tmp/old" "$old_rev" >/dev/null 2>&1
make -C "$tmp/old" -j2 tools CUDA=0 BUILD=build >/dev/null
make -C "$here" -j2 tools CUDA=0 BUILD="$new" >/dev/null
old=$tmp/old/build

. "$(dirname "$0")/bench-lib.sh" # median, ratio

mpirun=$(command -v mpirun || true)
sps() { # build strategy devices [launcher...] -> training samples/s of one epoch
        local b=$1 s=$2 d=$3
        shift 3
        "$@" "$b/bin/strata-train" --epochs 1 --json --batch 128 --strategy "$s" --devices "$d" |
                grep '"epoch":1,' | head -1 | sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/'
}
allreduce_us() { # build bytes -> median time of one all_reduce
        "$1/bin/strata-bench-coll" --json --min-bytes "$2" --max-bytes "$2" |
                grep '"op"' | sed 's/.*"time_us":\([0-9.e+-]*\).*/\1/'
}
figs=" ${FIGS:-single ddp2 dp2 spawn2 mpi2 ar} "
want() { [[ $figs == *" $1 "* ]]; }
measure() { # build name -> appends "name value" lines to $tmp/<which>
        want single && echo "single $(sps "$1" single 1)"
        want ddp2 && echo "ddp2 $(sps "$1" ddp 2)"
        want dp2 && echo "dp2 $(sps "$1" dp 2)"
        want zero2_2 && echo "zero2_2 $(sps "$1" zero2 2)"
        want fsdp2 && echo "fsdp2 $(sps "$1" fsdp 2)"
        want spawn2 && echo "spawn2 $(sps "$1" spawn 2)"
        want mpi2 && [ -n "$mpirun" ] && echo "mpi2 $(sps "$1" mpi 1 "$mpirun" \
                --allow-run-as-root --oversubscribe --bind-to none -np 2)"
        if want ar; then
                for b in 4096 1048576 67108864; do echo "ar$b $(allreduce_us "$1" "$b")"; done
        fi
        return 0
}
for r in $(seq "$reps"); do
        if [ $((r % 2)) = 1 ]; then
                measure "$old" >> "$tmp/old.txt"; measure "$new" >> "$tmp/new.txt"
        else
                measure "$new" >> "$tmp/new.txt"; measure "$old" >> "$tmp/old.txt"
        fi
        echo "bench-ab: rep $r of $reps done" >&2
done
printf 'A/B, %d interleaved reps, medians; old %s, new %s\n' "$reps" "$old_hash" \
        "$(git -C "$here" rev-parse --short HEAD)"
printf '%-28s %14s %14s %10s\n' figure old new new/old
for k in single ddp2 dp2 zero2_2 fsdp2 spawn2 mpi2 ar4096 ar1048576 ar67108864; do
        grep -q "^$k [0-9]" "$tmp/new.txt" || continue
        o=$(awk -v k=$k '$1 == k {print $2}' "$tmp/old.txt" | median)
        n=$(awk -v k=$k '$1 == k {print $2}' "$tmp/new.txt" | median)
        case $k in
        single) label="single samples/s" ;; ddp2) label="ddp 2 devices samples/s" ;;
        dp2) label="dp 2 devices samples/s" ;; zero2_2) label="zero2 2 devices samples/s" ;;
        fsdp2) label="fsdp 2 devices samples/s" ;; spawn2) label="spawn 2 processes samples/s" ;;
        mpi2) label="mpi 2 processes samples/s" ;;
        ar4096) label="all_reduce 4 KiB us" ;; ar1048576) label="all_reduce 1 MiB us" ;;
        *) label="all_reduce 64 MiB us" ;;
        esac
        printf '%-28s %14.2f %14.2f %10.3f\n' "$label" "$o" "$n" "$(echo "$n / $o" | bc -l)"
done
