#!/usr/bin/env bash
# bf16:amx on a CPU with AMX-BF16 (decision 0049), in under 90 s after `make -j`:
#  1. the kernel-set tests (bf16:amx on the real tiles against a double reference, bitwise
#     repeatable, its name; AMX forced off runs bf16:avx512_bf16 near it);
#  2. the bf16 GEMMs' GFLOP/s on the wide model's shapes beside the AMX TDPBF16PS peak;
#  3. 3 alternated pairs, one core: strata-train bf16-mixed against PyTorch autocast(bfloat16).
# usage: CORE=3 tools/amx-check.sh ; env PEERS (default tools/peers)
set -u
cd "$(dirname "$0")/.."
PEERS=${PEERS:-tools/peers}
CORE=${CORE:-3}
MODEL=784-2048-2048-10
export OMP_NUM_THREADS=1
export STRATA_AMX=1 # bf16:amx is opt-in until measured (decision 0049)
for f in build/tests/strata-tests build/bin/strata-bench-kernels build/bin/strata-train \
         "$PEERS/torch_autocast_mlp.py"; do
        [ -e "$f" ] || { echo "missing $f (make -j; PEERS=...)"; exit 2; }
done
grep -m1 'model name' /proc/cpuinfo
echo "flags: $(grep -m1 -o -w -E 'avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"

echo "== 1. tests cpu_kernel_sets/*"
timeout 75 build/tests/strata-tests --filter 'cpu_kernel_sets/*' --verbose 2>&1 |
        grep -E '^\[(PASS|FAIL|SKIP)\] cpu_kernel_sets|^\[----\]|Synthesis' | cut -c1-160

echo "== 2. GEMMs, one core (taskset -c $CORE)"
timeout 60 taskset -c "$CORE" build/bin/strata-bench-kernels --reps 8 "$MODEL:512"

echo "== 3. training steps, one core, b512, 12 steps each, alternated"
out=()
for i in 1 2 3; do
        s=$(timeout 60 taskset -c "$CORE" build/bin/strata-train --strategy single --model "$MODEL" \
                --batch 512 --synthetic 6144 --epochs 1 --precision bf16-mixed --json 2>&1 |
                grep '"final"')
        t=$(timeout 60 taskset -c "$CORE" python3 "$PEERS/torch_autocast_mlp.py" "$MODEL" 512 12 \
                bf16 2>/dev/null | tail -1)
        out+=("$s" "$t")
done
python3 - "${out[@]}" <<'EOF'
import json, statistics, sys
a, ratios = sys.argv[1:], []
for i in range(0, len(a), 2):
    try:
        d = json.loads(a[i])
    except ValueError:
        print(f"pair {i // 2 + 1}: strata gave no result: {a[i][:200]!r}")
        continue
    sps = 512e6 / d["step_us_median"]
    line = (f"pair {i // 2 + 1}: strata step_us_median {d['step_us_median']:.0f} = {sps:.0f} "
            f"samples/s [{d['kernels']}] heap_allocs {d.get('heap_allocs')}; ")
    try:
        t = float(a[i + 1])
    except (ValueError, IndexError):
        print(line + "torch gave no result")
        continue
    ratios.append(sps / t)
    print(line + f"torch autocast {t:.0f} samples/s; ratio {sps / t:.2f}")
if ratios:
    print(f"SUMMARY median strata/torch ratio {statistics.median(ratios):.2f} over {len(ratios)} "
          f"pairs (target >= 1.5)")
EOF
