# What the tools/bench-*.sh scripts share (sourced): where things are (env BUILD, default
# build; PEERS, default tools/peers: the PyTorch and C peers), the median of numbers on stdin,
# and a / b (12 significant digits); the median of its arguments; samples/s of strata-train's
# median step.
#
# Quiet measurement (issue 59, decision 0073), the habit of every bench:
#   bench_begin NAME         prints the machine (CPU model and family, cores, the kernel set
#                            strata-train computes with, the commit) and the load average
#   bench_compare FIGURE UNIT "A values" "B values"
#                            (each arm's values from runs alternated with the other's, as every
#                            script's reps loop runs them) prints the medians, the spread
#                            (min..max) and the ratio of the medians, and holds the figure's
#                            table row
#   bench_end                prints the load average again and the cores other work used
#                            during the bench (the machine's busy CPU time, /proc/stat, less
#                            this bench's processes'), and writes the held rows to the results
#                            file (BENCH_RESULTS, default $build/bench/results.md) only when
#                            the load average before was at most BENCH_MAX_LOAD (1.5), other
#                            work used at most BENCH_MAX_OTHERS (0.5) cores, and the figure
#                            had BENCH_MIN_PAIRS (5) pairs; else says why and writes
#                            "figure<TAB>why" to the .refused file beside it. The load average
#                            after is printed, not used: on 2 cores a bench's own 2 devices
#                            make it 2. bench_begin waits up to BENCH_SETTLE_S (120; quick 0)
#                            for the load average left by a previous bench to fall to 1.5.
# env BENCH_LOADAVG, BENCH_OTHERS: the load average and the other work's cores to use instead
# of the readings (the tests' forced loads); BENCH_QUICK=1: the scripts' tiny sizes (a check
# of the machinery, not a measurement).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$here/build}
peers=${PEERS:-$here/tools/peers}
train=$build/bin/strata-train
py=/usr/bin/python3
quick=${BENCH_QUICK:-0}
quick_data="" # strata-train's data options in quick mode; PEER_ROWS, the peers' rows
if [ "$quick" = 1 ]; then quick_data="--synthetic 2048"; export PEER_ROWS=2048; fi
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.12g\n", a / b }'; }
median_of() { printf '%s\n' "$@" | median; }
step_sps() { # batch; strata-train --json on stdin -> batch / median training step, samples/s
        grep '"final"' | sed 's/.*"step_us_median":\([0-9.]*\).*/\1/' |
                awk -v b="$1" '{print b / $1 * 1e6}'
}

bench_max_load=${BENCH_MAX_LOAD:-1.5}
bench_max_others=${BENCH_MAX_OTHERS:-0.5}
bench_min_pairs=${BENCH_MIN_PAIRS:-5}
bench_results=${BENCH_RESULTS:-$build/bench/results.md}
bench_loadavg() { # -> the 1-minute load average (BENCH_LOADAVG where set)
        if [ -n "${BENCH_LOADAVG:-}" ]; then
                echo "$BENCH_LOADAVG"
        else
                cut -d' ' -f1 /proc/loadavg
        fi
}
bench_cpuinfo() { # field -> its value in /proc/cpuinfo (the first CPU's)
        grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'
}
bench_cpu() { # -> "model (family F, model M), N cores"
        echo "$(bench_cpuinfo 'model name') (family $(bench_cpuinfo 'cpu family'), model" \
             "$(bench_cpuinfo model)), $(OMP_NUM_THREADS= OMP_THREAD_LIMIT= nproc) cores"
}
bench_kernels() { # -> the CPU kernel set strata-train computes with (a few steps' --json)
        "$train" --synthetic 256 --model 784-10 --epochs 1 --json --quiet 2>/dev/null |
                sed -n 's/.*"final".*"kernels":"\([^"]*\)".*/\1/p' | grep . || echo unknown
}
bench_ticks() { # -> "busy own": the machine's busy CPU ticks (/proc/stat: user, nice, system,
        # irq, softirq), this bench's own (its shell's and its waited-for processes')
        echo "$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat)" \
             "$(sed 's/.*) //' "/proc/$$/stat" | awk '{ print $12 + $13 + $14 + $15 }')"
}
bench_begin() { # name
        local waited=0 settle=${BENCH_SETTLE_S:-$([ "$quick" = 1 ] && echo 0 || echo 120)}
        bench_name=$1
        bench_held=() bench_pairs_of=()
        echo "== $bench_name: $(bench_cpu); kernels $(bench_kernels);" \
             "$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo 'no git')$(
                [ "$quick" = 1 ] && echo '; QUICK sizes')"
        # A bench run just before (make bench-all) leaves its own load in the average: wait
        # for it to fall, up to BENCH_SETTLE_S seconds.
        while [ -z "${BENCH_LOADAVG:-}" ] && [ "$waited" -lt "$settle" ] &&
                awk -v a="$(bench_loadavg)" -v m="$bench_max_load" 'BEGIN { exit !(a > m) }'; do
                [ "$waited" = 0 ] && echo "== $bench_name: load average $(bench_loadavg):" \
                        "waiting up to $settle s for it to fall to $bench_max_load"
                sleep 5
                waited=$((waited + 5))
        done
        bench_load0=$(bench_loadavg)
        echo "== $bench_name: load average before: $bench_load0 (1 min;" \
             "$([ -n "${BENCH_LOADAVG:-}" ] && echo "forced by BENCH_LOADAVG" ||
                echo "$(cut -d' ' -f1-3 /proc/loadavg)"))"
        bench_t0=$(date +%s.%N)
        bench_ticks0=$(bench_ticks)
}
bench_others() { # -> the cores other work used since bench_begin (BENCH_OTHERS where set)
        if [ -n "${BENCH_OTHERS:-}" ]; then echo "$BENCH_OTHERS"; return; fi
        awk -v a="$bench_ticks0" -v b="$(bench_ticks)" -v t0="$bench_t0" -v t1="$(date +%s.%N)" \
            -v hz="$(getconf CLK_TCK)" 'BEGIN { split(a, x, " "); split(b, y, " ")
                o = ((y[1] - x[1]) - (y[2] - x[2])) / hz / (t1 - t0)
                printf "%.2f", o < 0 ? 0 : o }'
}
bench_stat() { # values... -> "median min max"
        printf '%s\n' "$@" | grep . | sort -g |
                awk '{a[NR] = $1} END { if (NR == 0) exit
                        m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
                        print m, a[1], a[NR] }'
}
bench_num() { # value -> its figure: whole numbers from 100 up (thousands spaced, as the
        # docs write them: 92 554), else 3 significant digits
        awk -v v="$1" 'BEGIN { if (v < 100 && v > -100) { printf "%.3g", v; exit }
                s = sprintf("%.0f", v); o = ""
                while (length(s) > 3 && substr(s, length(s) - 3, 1) ~ /[0-9]/) {
                        o = " " substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) }
                printf "%s%s", s, o }'
}
bench_compare() { # figure unit "A values" "B values" (A: Strata; B: the peer or other arm)
        local m a0 a1 pm p0 p1 r n sa sb
        read -r m a0 a1 <<< "$(bench_stat $3)"
        read -r pm p0 p1 <<< "$(bench_stat $4)"
        n=$(( $(wc -w <<< "$3") < $(wc -w <<< "$4") ? $(wc -w <<< "$3") : $(wc -w <<< "$4") ))
        if [ -z "$m" ] || [ -z "$pm" ]; then
                echo "$1: no figure (an arm printed nothing)"
                return 0
        fi
        r=$(awk -v a="$m" -v b="$pm" 'BEGIN { if (b != 0) printf "%.3f", a / b; else print "n/a" }')
        sa="$(bench_num "$m") ($(bench_num "$a0")..$(bench_num "$a1"))"
        sb="$(bench_num "$pm") ($(bench_num "$p0")..$(bench_num "$p1"))"
        printf '%s, %s: %s against %s; ratio of the medians %s' "$1" "$2" "$sa" "$sb" "$r"
        printf ' (medians, spread min..max; %d alternated pairs)\n' "$n"
        bench_held+=("| $1, $2 | $sa | $sb | $r | $n |")
        bench_pairs_of+=("$n")
}
bench_end() {
        local load1 others why="" i row fig w
        load1=$(bench_loadavg)
        others=$(bench_others)
        echo "== $bench_name: load average after: $load1 (before: $bench_load0; after counts" \
             "this bench's own work); other work during the bench: $others cores"
        if awk -v a="$bench_load0" -v m="$bench_max_load" 'BEGIN { exit !(a > m) }'; then
                why="load average $bench_load0 before: above $bench_max_load"
        elif awk -v o="$others" -v m="$bench_max_others" 'BEGIN { exit !(o > m) }'; then
                why="other work used $others cores during the bench: above $bench_max_others"
        fi
        mkdir -p "$(dirname "$bench_results")"
        for i in "${!bench_held[@]}"; do
                row=${bench_held[i]}
                fig=$(cut -d'|' -f2 <<< "$row" | sed 's/^ //; s/ $//')
                w=$why
                if [ -z "$w" ] && [ "${bench_pairs_of[i]}" -lt "$bench_min_pairs" ]; then
                        w="${bench_pairs_of[i]} pairs: fewer than $bench_min_pairs"
                fi
                if [ -n "$w" ]; then
                        echo "== $bench_name: row not written ($fig): $w"
                        printf '%s\t%s\n' "$fig" "$w" >> "${bench_results%.md}.refused"
                else
                        echo "$row $bench_load0 → $load1; $others | $bench_name," \
                             "$(git -C "$here" rev-parse --short HEAD 2>/dev/null)," \
                             "$(date -u +%F)$([ "$quick" = 1 ] && echo ', QUICK') |" \
                             >> "$bench_results"
                        echo "== $bench_name: row written to $bench_results ($fig)"
                fi
        done
}
